"""The ImageNet training recipe through torchvision, for bench_data's comparison.

Reads an ImageFolder of JPEGs with a torch DataLoader of `--workers` worker processes, each image
decoded by PIL, then RandomResizedCrop(224) + RandomHorizontalFlip + ToTensor + Normalize (the
ImageNet mean and std), batches of `--batch`. After one warm-up batch (worker start-up excluded,
as bench_data excludes its own) it pulls batches for about `--seconds`, starting new epochs as
needed, and prints one JSON line: {"images_per_second": ..., "workers": ..., versions}. When torch
or torchvision cannot be imported it prints {"skipped": "<why>"} instead; bench_data shows either.

    python3 bench/torchvision_loader.py --root DIR [--workers 2] [--batch 64] [--seconds 1.5]
"""
import argparse
import json
import sys
import time


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--root", required=True, help="ImageFolder root (one folder per class)")
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--seconds", type=float, default=1.5)
    parser.add_argument("--size", type=int, default=224)
    args = parser.parse_args()

    try:
        import torch
        import torchvision
        from torchvision import datasets, transforms
    except Exception as e:  # ImportError, or a broken installation failing on load
        print(json.dumps({"skipped": f"import torch, torchvision failed: {type(e).__name__}: {e}"}))
        return 0

    torch.set_num_threads(1)  # the workers do the work, as bench_data's worker threads do
    recipe = transforms.Compose([
        transforms.RandomResizedCrop(args.size),
        transforms.RandomHorizontalFlip(),
        transforms.ToTensor(),
        transforms.Normalize([0.485, 0.456, 0.406], [0.229, 0.224, 0.225]),
    ])
    dataset = datasets.ImageFolder(args.root, transform=recipe)
    loader = torch.utils.data.DataLoader(dataset, batch_size=args.batch, shuffle=True, num_workers=args.workers,
                                         persistent_workers=args.workers > 0)
    batches = iter(loader)
    next(batches)  # warm-up: workers started, first batch assembled
    images = 0
    start = time.perf_counter()
    while time.perf_counter() - start < args.seconds:
        try:
            x, _ = next(batches)
        except StopIteration:
            batches = iter(loader)
            continue
        images += x.shape[0]
    elapsed = time.perf_counter() - start
    import PIL
    print(json.dumps({"images_per_second": images / elapsed, "workers": args.workers, "torch": torch.__version__,
                      "torchvision": torchvision.__version__, "pillow": PIL.__version__}))
    return 0


if __name__ == "__main__":
    sys.exit(main())
