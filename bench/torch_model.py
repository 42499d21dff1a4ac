"""The same model, batch and thread count in PyTorch, for bench_model --vs-torch.

Started once per memory layout (NCHW or channels_last), it builds the model (compact_cnn as
layers/models/compact_cnn.cpp defines it; the others from torchvision.models with the same names),
a batch of random images and labels, and torch.optim.SGD (momentum 0.9, weight decay 5e-5, as
bench_model's own step). With --dtype bf16 the forward and the loss run under
torch.autocast("cpu", torch.bfloat16), PyTorch's mixed precision on the CPU: f32 parameters,
convolutions and matrix products in bf16. It prints one JSON line, {"ready": true, versions} or {"skipped": "<why>"}
when torch cannot be imported or the model is unknown, then answers one request per line on
stdin with one JSON line, {"seconds": ...}, for a single timed call:

    forward           eval mode, no autograd (torch.inference_mode)
    forward_backward  train mode: cross-entropy of the logits, backward, gradients dropped
    step              forward_backward and the optimizer's update
    quit              exits

so that bench_model can alternate its own calls with these and both see the same machine noise.

    python3 bench/torch_model.py --model resnet50 --batch 8 --size 224 --channels 3 --classes 1000 \
        --threads 2 --layout channels_last [--dtype bf16]
"""
import argparse
import json
import sys
import time


def compact_cnn(nn, classes, channels):
    # conv 3x3 32 - BN - ReLU - maxpool 2, conv 3x3 64 - BN - ReLU - maxpool 2, adaptive avgpool 7,
    # Linear 3136 -> 128 - ReLU - Dropout 0.3 - Linear 128 -> classes (convolutions without bias).
    def stage(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU(inplace=True),
                nn.MaxPool2d(2)]

    return nn.Sequential(*stage(channels, 32), *stage(32, 64), nn.AdaptiveAvgPool2d(7), nn.Flatten(),
                         nn.Linear(64 * 7 * 7, 128), nn.ReLU(inplace=True), nn.Dropout(0.3), nn.Linear(128, classes))


def answer(payload):
    sys.stdout.write(json.dumps(payload) + "\n")
    sys.stdout.flush()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True)
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--size", type=int, required=True)
    parser.add_argument("--channels", type=int, default=3)
    parser.add_argument("--classes", type=int, default=1000)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--layout", choices=["nchw", "channels_last"], default="channels_last")
    parser.add_argument("--dtype", choices=["f32", "bf16"], default="f32")
    args = parser.parse_args()

    try:
        import torch
        import torch.nn as nn
        import torch.nn.functional as F
    except Exception as e:  # ImportError, or a broken installation failing on load
        answer({"skipped": f"import torch failed: {type(e).__name__}: {e}"})
        return 0
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    if args.model == "compact_cnn":
        model = compact_cnn(nn, args.classes, args.channels)
    else:
        try:
            import torchvision
            model = getattr(torchvision.models, args.model)(num_classes=args.classes)
        except Exception as e:
            answer({"skipped": f"torchvision has no model {args.model}: {type(e).__name__}: {e}"})
            return 0
        if args.channels != 3:
            answer({"skipped": f"{args.model} with {args.channels} input channels is not compared"})
            return 0
    memory_format = torch.channels_last if args.layout == "channels_last" else torch.contiguous_format
    model = model.to(memory_format=memory_format)
    x = torch.randn(args.batch, args.channels, args.size, args.size).to(memory_format=memory_format)
    y = torch.arange(args.batch) % args.classes
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-5)
    bf16 = args.dtype == "bf16"

    def autocast():
        return torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16)

    def loss():
        with autocast():
            return F.cross_entropy(model(x), y)

    def forward():
        model.eval()
        with torch.inference_mode(), autocast():
            model(x)

    def forward_backward():
        model.train()
        loss().backward()
        model.zero_grad(set_to_none=True)

    def step():
        model.train()
        loss().backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    calls = {"forward": forward, "forward_backward": forward_backward, "step": step}
    answer({"ready": True, "torch": torch.__version__, "layout": args.layout, "dtype": args.dtype,
            "threads": torch.get_num_threads(), "mkldnn": torch.backends.mkldnn.is_available()})
    for line in sys.stdin:
        request = line.strip()
        if request == "quit":
            break
        if request not in calls:
            answer({"error": f"unknown request {request!r}"})
            continue
        start = time.perf_counter()
        calls[request]()
        answer({"seconds": time.perf_counter() - start})
    return 0


if __name__ == "__main__":
    sys.exit(main())
