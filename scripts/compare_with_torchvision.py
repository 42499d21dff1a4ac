#!/usr/bin/env python3
"""Checks that torchvision's weights run unchanged in cnn: the logits of cnn_forward equal PyTorch's.

For each model, the torchvision model is built with weights=None under a fixed seed, every BatchNorm
gets random affine terms and random (but well-scaled) running statistics, and every conv/linear bias
random values, so that eval mode is non-trivial. PyTorch computes the logits of a fixed random NCHW
batch in float32 and in float64; the state_dict and the input go to safetensors files, cnn_forward
computes its logits from them, and the table compares the two:

  ours-f32  max |cnn - torch float32|
  f64-f32   max |torch float64 - torch float32|: float32's own rounding noise, for scale
  ours-f64  max |cnn - torch float64|
  |logit|   max |torch float64 logit|
  top-1     samples whose arg-max agrees with torch float32's

A model passes when ours-f32 <= rtol * |logit| + atol (default 1e-4 * |logit| + 1e-4) and every
sample's top-1 agrees (an arg-max that differs only between logits closer than the tolerance in
float64 counts as a tie, not as a failure). Real differences (weight layout, flatten order, padding,
BN eps, SE, stochastic depth in eval) move the logits by far more than that. resnet18 is also run in
training mode (BatchNorm on batch statistics; it has no dropout).

Exit status: 0 all passed, 1 a model failed, 77 torch, torchvision or numpy cannot be imported.
Needs only torch, torchvision and numpy (safetensors files are read and written here).

  compare_with_torchvision.py --cnn-forward build/apps/cnn_forward [--models resnet18,vgg11_bn]
                              [--size 128] [--json table.json] [--device cpu]
"""
import argparse
import copy
import json
import os
import struct
import subprocess
import sys
import tempfile
import time

try:
    import numpy as np
    import torch
    import torchvision
except Exception as error:  # ImportError, or a broken installation (a missing shared library)
    _IMPORT_ERROR = error
else:
    _IMPORT_ERROR = None

SKIP = 77
DEFAULT_MODELS = ["resnet18", "resnet50", "vgg11_bn", "efficientnet_b0"]
TRAIN_MODE_MODELS = {"resnet18"}  # no dropout or stochastic depth, so training mode is deterministic
BATCH = 2
CLASSES = 1000
SEED = 20240601


# ---- safetensors: 8-byte little-endian header length, JSON header, raw little-endian data ----

_SAFETENSORS_DTYPES = {"F64": "<f8", "F32": "<f4", "F16": "<f2", "I64": "<i8", "I32": "<i4", "U8": "|u1"}


def write_safetensors(path, tensors, metadata=None):
    """tensors: {name: numpy array}, written in the given order."""
    names_of = {np.dtype(code): name for name, code in _SAFETENSORS_DTYPES.items()}
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    for name, array in tensors.items():
        array = np.asarray(array)
        little = np.ascontiguousarray(array, dtype=array.dtype.newbyteorder("<"))
        if little.dtype not in names_of:
            raise ValueError(f"{name}: dtype {array.dtype} has no safetensors name here")
        blob = little.tobytes()
        header[name] = {"dtype": names_of[little.dtype], "shape": list(array.shape),
                        "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode("utf-8")
    text += b" " * (-len(text) % 8)  # the data starts 8-byte aligned
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for blob in blobs:
            f.write(blob)


def read_safetensors(path):
    """{name: numpy array (native byte order, a copy)}; the metadata entry is skipped."""
    with open(path, "rb") as f:
        data = f.read()
    if len(data) < 8:
        raise ValueError(f"{path}: too short for a safetensors file")
    (length,) = struct.unpack_from("<Q", data, 0)
    if 8 + length > len(data):
        raise ValueError(f"{path}: header length {length} runs past the end of the file")
    header = json.loads(data[8:8 + length].decode("utf-8"))
    base = 8 + length
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        if info["dtype"] not in _SAFETENSORS_DTYPES:
            raise ValueError(f"{path}: tensor {name} has unsupported dtype {info['dtype']}")
        dtype = np.dtype(_SAFETENSORS_DTYPES[info["dtype"]])
        begin, end = info["data_offsets"]
        count = int(np.prod(info["shape"], dtype=np.int64))
        if end - begin != count * dtype.itemsize or base + end > len(data):
            raise ValueError(f"{path}: tensor {name}'s data_offsets do not fit its shape")
        array = np.frombuffer(data, dtype=dtype, count=count, offset=base + begin).reshape(info["shape"])
        tensors[name] = array.astype(dtype.newbyteorder("="))
    return tensors


# ---- the models ----

def build_model(name, size):
    """torchvision's model with random weights, random BatchNorm state and random biases, in eval mode."""
    torch.manual_seed(SEED)
    model = torchvision.models.get_model(name, weights=None, num_classes=CLASSES)
    generator = torch.Generator().manual_seed(SEED + 1)
    norms = [m for m in model.modules() if isinstance(m, torch.nn.BatchNorm2d)]
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (torch.nn.Conv2d, torch.nn.Linear)) and m.bias is not None:
                m.bias.add_(0.05 * torch.randn(m.bias.shape, generator=generator))
        for bn in norms:
            bn.weight.uniform_(0.5, 1.5, generator=generator)
            bn.bias.normal_(0.0, 0.2, generator=generator)
        # Running statistics: each BatchNorm's are set, in eval mode and in the order the layers run,
        # from the statistics of the input it actually gets from a random batch, then moved off them at
        # random. So activations keep a sane scale through 50 layers, yet eval mode differs from
        # training mode (batch statistics) everywhere.
        def calibrate(bn, inputs):
            x = inputs[0].double()
            mean, var = x.mean(dim=(0, 2, 3)), x.var(dim=(0, 2, 3), unbiased=False)
            std = var.sqrt()
            bn.running_mean.copy_(mean + 0.2 * std * torch.randn(mean.shape, generator=generator, dtype=mean.dtype))
            bn.running_var.copy_(var * torch.empty(var.shape, dtype=var.dtype).uniform_(-0.5, 0.5, generator=generator).exp())
            bn.num_batches_tracked.fill_(int(torch.randint(1, 100000, (), generator=generator)))
        hooks = [bn.register_forward_pre_hook(calibrate) for bn in norms]
        model.eval()
        model(torch.randn(4, 3, size, size, generator=generator))
        for hook in hooks:
            hook.remove()
    return model.eval()


def state_as_numpy(model):
    return {k: v.detach().cpu().contiguous().numpy() for k, v in model.state_dict().items()}


def run_cnn_forward(program, name, weights, input_path, output, train_mode, device):
    command = [program, "--model", name, "--classes", str(CLASSES), "--weights", weights,
               "--input", input_path, "--output", output, "--device", device]
    if train_mode:
        command.append("--train-mode")
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"cnn_forward exited with {result.returncode}:\n{result.stderr.strip()}")
    return read_safetensors(output)["output"].astype(np.float64)


def compare(name, mode, ours, torch32, torch64, rtol, atol):
    scale = float(np.abs(torch64).max())
    tolerance = rtol * scale + atol
    agree = ties = 0
    for s in range(ours.shape[0]):
        mine, theirs = int(ours[s].argmax()), int(torch32[s].argmax())
        if mine == theirs:
            agree += 1
        elif torch64[s].max() - torch64[s, mine] <= tolerance:
            ties += 1
    row = {
        "model": name, "mode": mode,
        "max_abs_logit": scale,
        "ours_vs_torch_f32": float(np.abs(ours - torch32).max()),
        "torch_f64_vs_f32": float(np.abs(torch64 - torch32).max()),
        "ours_vs_torch_f64": float(np.abs(ours - torch64).max()),
        "tolerance": tolerance,
        "top1_agree": agree, "top1_ties": ties, "samples": int(ours.shape[0]),
    }
    row["passed"] = bool(row["ours_vs_torch_f32"] <= tolerance and agree + ties == ours.shape[0]
                         and np.isfinite(ours).all())
    return row


def check_model(name, args, workdir):
    started = time.time()
    model = build_model(name, args.size)
    x = torch.randn(BATCH, 3, args.size, args.size, generator=torch.Generator().manual_seed(SEED + 2))
    weights = os.path.join(workdir, f"{name}.safetensors")
    input_path = os.path.join(workdir, f"{name}_input.safetensors")
    write_safetensors(weights, state_as_numpy(model), {"format": "pt"})
    write_safetensors(input_path, {"input": x.numpy()})
    model64 = copy.deepcopy(model).double()
    rows = []
    modes = ["eval"] + (["train"] if name in TRAIN_MODE_MODELS else [])
    for mode in modes:
        m32, m64 = (copy.deepcopy(model).train(), copy.deepcopy(model64).train()) if mode == "train" else (model, model64)
        with torch.no_grad():
            torch32 = m32(x).double().numpy()
            torch64 = m64(x.double()).numpy()
        output = os.path.join(workdir, f"{name}_{mode}_output.safetensors")
        try:
            ours = run_cnn_forward(args.cnn_forward, name, weights, input_path, output, mode == "train", args.device)
        except RuntimeError as error:
            rows.append({"model": name, "mode": mode, "passed": False, "error": str(error)})
            continue
        if ours.shape != torch32.shape:
            rows.append({"model": name, "mode": mode, "passed": False,
                         "error": f"output shape {list(ours.shape)}, torch's {list(torch32.shape)}"})
            continue
        rows.append(compare(name, mode, ours, torch32, torch64, args.rtol, args.atol))
    for path in (weights, input_path):
        os.remove(path)
    for row in rows:
        row["seconds"] = round(time.time() - started, 1)
    return rows


def print_table(rows, args):
    print(f"cnn vs torchvision {torchvision.__version__} (torch {torch.__version__}): batch {BATCH}, "
          f"{args.size}x{args.size}, {CLASSES} classes, device {args.device}; "
          f"tolerance {args.rtol:g} * |logit| + {args.atol:g}")
    header = f"{'model':<16} {'mode':<5} {'|logit|':>9} {'ours-f32':>10} {'f64-f32':>10} {'ours-f64':>10} " \
             f"{'tolerance':>10} {'top-1':>6}  result"
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<16} {r['mode']:<5} FAILED: {r['error']}")
            continue
        top1 = f"{r['top1_agree']}/{r['samples']}" + (f"+{r['top1_ties']} tie" if r["top1_ties"] else "")
        print(f"{r['model']:<16} {r['mode']:<5} {r['max_abs_logit']:>9.3f} {r['ours_vs_torch_f32']:>10.2e} "
              f"{r['torch_f64_vs_f32']:>10.2e} {r['ours_vs_torch_f64']:>10.2e} {r['tolerance']:>10.2e} "
              f"{top1:>6}  {'ok' if r['passed'] else 'FAILED'}")


def parse_args():
    parser = argparse.ArgumentParser(description="Compares cnn_forward's logits with torchvision's on the same weights.")
    parser.add_argument("--cnn-forward", required=True, help="the cnn_forward program")
    parser.add_argument("--models", default=",".join(DEFAULT_MODELS),
                        help="comma-separated model names (torchvision's, which are cnn's); default: %(default)s")
    parser.add_argument("--size", type=int, default=128, help="input height and width (default %(default)s)")
    parser.add_argument("--json", help="also write the table to this JSON file")
    parser.add_argument("--device", default="cpu", help="cnn_forward's device: cpu, cuda or cuda:N (default cpu)")
    parser.add_argument("--rtol", type=float, default=1e-4, help="tolerance relative to max |logit| (default %(default)g)")
    parser.add_argument("--atol", type=float, default=1e-4, help="absolute tolerance (default %(default)g)")
    args = parser.parse_args()
    args.models = [m for m in args.models.replace(" ", ",").split(",") if m]
    if args.size < 32:
        parser.error("--size must be at least 32 (five stride-2 stages)")
    return args


def main():
    args = parse_args()
    if _IMPORT_ERROR is not None:
        print(f"skipped: torch, torchvision and numpy are needed ({type(_IMPORT_ERROR).__name__}: {_IMPORT_ERROR})")
        return SKIP
    if not os.access(args.cnn_forward, os.X_OK):
        print(f"error: {args.cnn_forward} is not an executable program", file=sys.stderr)
        return 1
    torch.set_grad_enabled(False)
    rows = []
    with tempfile.TemporaryDirectory(prefix="cnn_vs_torchvision_") as workdir:
        for name in args.models:
            try:
                rows.extend(check_model(name, args, workdir))
            except Exception as error:  # an unknown name on either side, a file that cannot be written, ...
                rows.append({"model": name, "mode": "eval", "passed": False, "error": f"{type(error).__name__}: {error}"})
            sys.stdout.flush()
    print_table(rows, args)
    passed = all(r["passed"] for r in rows) and bool(rows)
    print("all models match" if passed else "MISMATCH: see the rows marked FAILED")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__, "batch": BATCH,
                       "size": args.size, "classes": CLASSES, "device": args.device, "rtol": args.rtol,
                       "atol": args.atol, "rows": rows, "passed": passed}, f, indent=2)
            f.write("\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
