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
BN eps, SE, stochastic depth in eval) move the logits by far more than that. Every model also runs in
training mode (BatchNorm on batch statistics), with dropout and stochastic depth off on both sides
(torchvision's dropout / stochastic_depth_prob = 0, cnn_forward --dropout 0 --drop-path 0).

With --train it also compares training: from the same weights and batch (8 images, 64x64, random
labels), SGD (momentum 0.9, Nesterov, weight decay 5e-4) and AdamW (weight decay 0.05), each with
warmup + cosine, label smoothing 0.1 and no weight decay for BatchNorm and biases, on resnet18 and
efficientnet_b0 without dropout or stochastic depth. cnn_forward --train-steps runs cnn_train's own
learner and step; PyTorch runs torch.optim with the same rate per step. Both sides compute the
activations, the loss and the gradients in double (cnn_forward --compute f64; in PyTorch float64
copies of the float32 parameters, cast differentiably) while the master weights and the optimizer
stay float32, as in training. Every float tensor of the state (running statistics included) must be
within --train-rtol (1e-5) of PyTorch's, relative to the tensor's largest value, after one step and
after --train-steps (3) steps; after the last AdamW step a few elements may be farther (at most
1e-4 of the model's elements and 1% of any tensor's). "beyond" counts them.

Why double, and why those few. Training through ReLUs and max-pools is not continuous: one ReLU
input within float32's rounding of zero takes its gradient in one program and not in the other. In
float32 that happens about once a step in resnet18 at batch 8 (a conv output of -0.33770523 in
double, -0.33770588 in float32, gave a ReLU input of +4.4e-7 against 0), and that one element moved
layer2.0.bn1's bias gradient by 4% and every layer below by 0.3-4%. PyTorch's own float32 run is as far
from its double run (the "torch f32" column), so float32 results are shown for information only. In
double the masks agree, and one step agrees to about 1e-7, float32's rounding of the weights. AdamW
turns a gradient of the size of eps (1e-8) into a step of up to lr, with a slope of lr / eps: weights
whose gradient is about that small after step 1 (those reading a channel that was dead, all ReLU
zeros, in step 1 and barely alive in step 2) take steps decided by the last bits of the weights after
step 1, where the two optimizers' float32 rounding differs. PyTorch itself, with its starting
weights moved by one float32 step each, ends 1.4e-2 away after 3 AdamW steps. A wrong rule moves
most elements: given to cnn alone, AdamW's weight decay 0.06 instead of 0.05, label smoothing 0.12
instead of 0.1 and beta2 0.998 instead of 0.999 leave 4.7M, 11.0M and 43k of resnet18's 11.7M
elements beyond the tolerance (beta2 shows only from step 2).
CNN_COMPARE_VERBOSE=1 prints every tensor's figures.

Exit status: 0 all passed, 1 a model failed, 77 torch, torchvision or numpy cannot be imported.
Needs only torch, torchvision and numpy (safetensors files are read and written here).

  compare_with_torchvision.py --cnn-forward build/apps/cnn_forward [--models resnet18,vgg11_bn]
                              [--size 128] [--json table.json] [--device cpu] [--train [--train-steps 3]]
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
BATCH = 2
# torchvision's options that turn dropout and stochastic depth off (cnn_forward: --dropout 0 --drop-path 0).
TORCH_NO_DROPOUT = {"vgg11_bn": {"dropout": 0.0}, "efficientnet_b0": {"dropout": 0.0, "stochastic_depth_prob": 0.0}}
TRAIN_BATCH = 8
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

def build_model(name, size, **options):
    """torchvision's model with random weights, random BatchNorm state and random biases, in eval mode."""
    torch.manual_seed(SEED)
    model = torchvision.models.get_model(name, weights=None, num_classes=CLASSES, **options)
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


def cnn_forward_command(program, name, weights, input_path, output, device):
    return [program, "--model", name, "--classes", str(CLASSES), "--weights", weights,
            "--input", input_path, "--output", output, "--device", device]


def run_cnn_forward(program, name, weights, input_path, output, train_mode, device):
    command = cnn_forward_command(program, name, weights, input_path, output, device)
    if train_mode:
        command += ["--train-mode", "--dropout", "0", "--drop-path", "0"]
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
    # Without dropout and stochastic depth (on both sides), so that training mode is deterministic.
    model = build_model(name, args.size, **TORCH_NO_DROPOUT.get(name, {}))
    x = torch.randn(BATCH, 3, args.size, args.size, generator=torch.Generator().manual_seed(SEED + 2))
    weights = os.path.join(workdir, f"{name}.safetensors")
    input_path = os.path.join(workdir, f"{name}_input.safetensors")
    write_safetensors(weights, state_as_numpy(model), {"format": "pt"})
    write_safetensors(input_path, {"input": x.numpy()})
    model64 = copy.deepcopy(model).double()
    rows = []
    modes = ["eval", "train"]
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


# ---- training: the weights after a few optimizer steps of a recipe ----

TRAIN_MODELS = ["resnet18", "efficientnet_b0"]
TRAIN_STEPS, STEPS_PER_EPOCH, EPOCHS, WARMUP_EPOCHS, WARMUP_START = 3, 2, 3, 1, 0.1
LABEL_SMOOTHING = 0.1
# After the last AdamW step: the share of the model's elements, and of any one tensor's, that may be
# farther than the tolerance (see the file comment).
OUTLIER_SHARE, TENSOR_OUTLIER_SHARE = 1e-4, 1e-2
RECIPES = {
    "sgd": {"name": "sgd", "lr": 0.05, "momentum": 0.9, "nesterov": "true", "weight_decay": 5e-4},
    "adamw": {"name": "adamw", "lr": 1e-3, "beta1": 0.9, "beta2": 0.999, "eps": 1e-8, "weight_decay": 0.05},
}


def recipe_lr(recipe, step):
    """cnn's warmup_cosine (train/schedule/lr_schedule.h): linear warmup over the first
    WARMUP_EPOCHS * STEPS_PER_EPOCH steps from WARMUP_START of the rate, cosine to 0 over the rest."""
    base, warmup, total = recipe["lr"], WARMUP_EPOCHS * STEPS_PER_EPOCH, EPOCHS * STEPS_PER_EPOCH
    t = min(max((step - warmup) / max(1, total - warmup), 0.0), 1.0)
    lr = base * 0.5 * (1.0 + np.cos(np.pi * t))
    if step < warmup:
        lr *= WARMUP_START + (1.0 - WARMUP_START) * (step + 1) / warmup
    return lr


def recipe_ini(recipe):
    optim = "\n".join(f"{k} = {v}" for k, v in recipe.items())
    return (f"[optim]\n{optim}\nno_decay_bn_bias = true\n"
            f"[schedule]\nname = warmup_cosine\nwarmup_epochs = {WARMUP_EPOCHS}\nwarmup_start_factor = {WARMUP_START}\n"
            f"min_lr = 0\n[train]\nepochs = {EPOCHS}\nlabel_smoothing = {LABEL_SMOOTHING}\n" )


def torch_train_steps(model, recipe, x, labels, steps, compute=None):
    """The recipe in PyTorch: the no-decay group for parameters of rank <= 1, the rate set per step.
    compute=torch.float64 runs forward and backward in double on float64 copies of the float32
    parameters (cast differentiably, so the gradients land on the float32 masters, which the optimizer
    updates in float32) and keeps the buffers in double: what cnn_forward --compute f64 does."""
    decay = [p for p in model.parameters() if p.dim() > 1]
    no_decay = [p for p in model.parameters() if p.dim() <= 1]
    groups = [{"params": decay, "weight_decay": recipe["weight_decay"]}, {"params": no_decay, "weight_decay": 0.0}]
    if recipe["name"] == "sgd":
        optimizer = torch.optim.SGD(groups, lr=recipe["lr"], momentum=recipe["momentum"], nesterov=True)
    else:
        optimizer = torch.optim.AdamW(groups, lr=recipe["lr"], betas=(recipe["beta1"], recipe["beta2"]), eps=recipe["eps"])
    model.train()
    buffers = {k: (b.to(compute) if compute is not None and b.is_floating_point() else b)
               for k, b in model.named_buffers()}
    with torch.enable_grad():
        for step in range(steps):
            for group in optimizer.param_groups:
                group["lr"] = recipe_lr(recipe, step)
            optimizer.zero_grad(set_to_none=True)
            if compute is None:
                logits = model(x)
            else:  # the buffers (running statistics) are updated in place in the dtype of the run
                params = {k: p.to(compute) for k, p in model.named_parameters()}
                logits = torch.func.functional_call(model, {**params, **buffers}, (x.to(compute),))
            loss = torch.nn.functional.cross_entropy(logits, labels, label_smoothing=LABEL_SMOOTHING)
            loss.backward()
            optimizer.step()
    state = {k: v.detach().double().numpy() for k, v in model.state_dict().items() if v.is_floating_point()}
    state.update({k: v.detach().double().numpy() for k, v in buffers.items() if v.is_floating_point()})
    return state


def weight_differences(ours, theirs, before, rtol):
    """Per tensor: the largest difference relative to the tensor's largest value (the criterion),
    relative to what the steps changed (how much of the update itself differs), and the count of
    elements farther than rtol of the tensor's largest value."""
    out = {}
    for key, t in theirs.items():
        scale = max(float(np.abs(t).max()), 1e-12)
        difference = np.abs(ours[key] - t)
        change = float(np.abs(t - before[key]).max())
        largest = float(difference.max())
        out[key] = (largest / scale, largest / change if change > 1e-9 else 0.0, int((difference > rtol * scale).sum()))
    return out


def run_cnn_train_steps(args, name, weights, input_path, recipe_path, workdir, steps, compute):
    after = os.path.join(workdir, f"{name}_{compute}_after.safetensors")
    output = os.path.join(workdir, f"{name}_{compute}_output.safetensors")
    command = cnn_forward_command(args.cnn_forward, name, weights, input_path, output, args.device) + [
        "--dropout", "0", "--drop-path", "0", "--compute", compute, "--train-steps", str(steps),
        "--steps-per-epoch", str(STEPS_PER_EPOCH), "--recipe", recipe_path, "--weights-out", after]
    result = subprocess.run(command, capture_output=True, text=True)
    if result.returncode != 0:
        raise RuntimeError(f"cnn_forward --compute {compute} exited with {result.returncode}:\n{result.stderr.strip()}")
    return {k: v.astype(np.float64) for k, v in read_safetensors(after).items()}


def check_training(name, optimizer_name, args, workdir):
    """One row: cnn's weights after 1 and after TRAIN_STEPS steps against PyTorch's, computed in double
    (the criterion), and after TRAIN_STEPS steps in float32 (for information; see the file comment)."""
    started = time.time()
    recipe = RECIPES[optimizer_name]
    model = build_model(name, args.train_size, **TORCH_NO_DROPOUT.get(name, {}))
    generator = torch.Generator().manual_seed(SEED + 3)
    x = torch.randn(TRAIN_BATCH, 3, args.train_size, args.train_size, generator=generator)
    labels = torch.randint(0, CLASSES, (TRAIN_BATCH,), generator=generator)
    weights = os.path.join(workdir, f"{name}.safetensors")
    input_path = os.path.join(workdir, f"{name}_batch.safetensors")
    recipe_path = os.path.join(workdir, f"{optimizer_name}.ini")
    write_safetensors(weights, state_as_numpy(model), {"format": "pt"})
    write_safetensors(input_path, {"input": x.numpy(), "labels": labels.numpy().astype(np.int64)})
    with open(recipe_path, "w") as f:
        f.write(recipe_ini(recipe))
    before = {k: v.detach().double().numpy() for k, v in model.state_dict().items() if v.is_floating_point()}
    row = {"model": name, "optimizer": optimizer_name, "steps": TRAIN_STEPS}
    try:
        first = weight_differences(
            run_cnn_train_steps(args, name, weights, input_path, recipe_path, workdir, 1, "f64"),
            torch_train_steps(copy.deepcopy(model), recipe, x, labels, 1, compute=torch.float64), before, args.train_rtol)
        torch64 = torch_train_steps(copy.deepcopy(model), recipe, x, labels, TRAIN_STEPS, compute=torch.float64)
        ours64 = run_cnn_train_steps(args, name, weights, input_path, recipe_path, workdir, TRAIN_STEPS, "f64")
        torch32 = torch_train_steps(copy.deepcopy(model), recipe, x, labels, TRAIN_STEPS)
        ours32 = run_cnn_train_steps(args, name, weights, input_path, recipe_path, workdir, TRAIN_STEPS, "f32")
    except RuntimeError as error:
        row.update(passed=False, error=str(error))
        return row
    missing = sorted(set(torch64) - set(ours64))
    if missing:
        row.update(passed=False, error=f"cnn's weights lack {missing[:3]}")
        return row
    last = weight_differences(ours64, torch64, before, args.train_rtol)
    f32 = weight_differences(ours32, torch32, before, args.train_rtol)
    noise = weight_differences(torch32, torch64, before, args.train_rtol)  # PyTorch's own float32 against its double
    # After one step every element within rtol; after the last, AdamW may leave a few elements farther
    # (see the file comment): at most OUTLIER_SHARE of the model's elements, and a few of any tensor's,
    # where a wrong rule would move most of them.
    adamw = recipe["name"] == "adamw"
    outliers, elements = sum(far for _, _, far in last.values()), sum(v.size for v in ours64.values())
    failed = [k for k, (_, _, far) in first.items() if far > 0]
    failed += [k for k, (_, _, far) in last.items()
               if far > (TENSOR_OUTLIER_SHARE * ours64[k].size if adamw else 0) and k not in failed]
    if adamw and outliers > OUTLIER_SHARE * elements:
        failed.append(f"{outliers} elements beyond the tolerance")
    worst = max(last, key=lambda k: last[k][0] if last[k][2] == 0 else 0.0)  # the worst tensor without outliers
    if os.environ.get("CNN_COMPARE_VERBOSE"):
        for key in last:
            print(f"  {name} {optimizer_name} {key:<40} 1 step {first[key][0]:.2e}  {TRAIN_STEPS} steps {last[key][0]:.2e} "
                  f"(of update {last[key][1]:.2e}, {last[key][2]} beyond)  f32 {f32[key][0]:.2e}  "
                  f"torch f32-f64 {noise[key][0]:.2e}")
    row.update(first_step=max(r for r, _, _ in first.values()), relative=last[worst][0], worst_tensor=worst,
               outliers=outliers, elements=elements,
               f32_relative=max(r for r, _, _ in f32.values()), torch_f32_vs_f64=max(r for r, _, _ in noise.values()),
               tolerance=args.train_rtol, failed_tensors=failed[:10], passed=not failed,
               seconds=round(time.time() - started, 1))
    return row


def print_training_table(rows, args):
    print(f"\nweights after 1 and {TRAIN_STEPS} steps (batch {TRAIN_BATCH}, {args.train_size}x{args.train_size}, warmup+cosine, "
          f"label smoothing {LABEL_SMOOTHING}, no decay for BN and biases): max |cnn - torch| / max |torch| per tensor,\n"
          f"activations and gradients in double on both sides (float32 masters); 'beyond': elements farther than the "
          f"tolerance after {TRAIN_STEPS} steps; f32: both sides in float32, for information, next to PyTorch's own "
          f"float32 distance from its double run")
    header = f"{'model':<16} {'optim':<6} {'1 step':>9} {f'{TRAIN_STEPS} steps':>9} {'beyond':>14} {'tolerance':>9} " \
             f"{'f32':>9} {'torch f32':>9}  result"
    print(header)
    print("-" * len(header))
    for r in rows:
        if "error" in r:
            print(f"{r['model']:<16} {r['optimizer']:<6} FAILED: {r['error']}")
            continue
        beyond = f"{r['outliers']}/{r['elements'] / 1e6:.1f}M"
        print(f"{r['model']:<16} {r['optimizer']:<6} {r['first_step']:>9.2e} {r['relative']:>9.2e} {beyond:>14} "
              f"{r['tolerance']:>9.1e} {r['f32_relative']:>9.2e} {r['torch_f32_vs_f64']:>9.2e}  "
              f"{'ok' if r['passed'] else 'FAILED (' + ', '.join(r['failed_tensors'][:3]) + ')'}")


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
    parser.add_argument("--train", action="store_true",
                        help="also compare the weights after 3 optimizer steps (SGD and AdamW) on resnet18 and efficientnet_b0")
    parser.add_argument("--train-models", default=",".join(TRAIN_MODELS), help="models of --train (default %(default)s)")
    parser.add_argument("--train-size", type=int, default=64, help="input size of --train (default %(default)s)")
    parser.add_argument("--train-steps", type=int, default=TRAIN_STEPS, help="optimizer steps of --train (default %(default)s)")
    parser.add_argument("--train-rtol", type=float, default=1e-5, help="--train tolerance (default %(default)g)")
    args = parser.parse_args()
    globals()["TRAIN_STEPS"] = args.train_steps
    args.train_models = [m for m in args.train_models.replace(" ", ",").split(",") if m]
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
    train_rows = []
    if args.train:
        with tempfile.TemporaryDirectory(prefix="cnn_vs_torchvision_train_") as workdir:
            for name in args.train_models:
                for optimizer_name in RECIPES:
                    try:
                        train_rows.append(check_training(name, optimizer_name, args, workdir))
                    except Exception as error:
                        train_rows.append({"model": name, "optimizer": optimizer_name, "passed": False,
                                           "error": f"{type(error).__name__}: {error}"})
        print_training_table(train_rows, args)
    passed = all(r["passed"] for r in rows + train_rows) and bool(rows or train_rows)
    print("all models match" if passed else "MISMATCH: see the rows marked FAILED")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"torch": torch.__version__, "torchvision": torchvision.__version__, "batch": BATCH,
                       "size": args.size, "classes": CLASSES, "device": args.device, "rtol": args.rtol,
                       "atol": args.atol, "rows": rows, "training_rows": train_rows, "passed": passed}, f, indent=2)
            f.write("\n")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
