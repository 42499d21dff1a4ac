#!/bin/sh
# The hostile-input case table: the cases of the hardening review, run against the built programs,
# one markdown row each (what was done, what is expected, the exit status, pass/FAIL, the first line
# the program said). Every case also has a regression test in the suite; this script is the
# end-to-end view for a person. Needs the Fashion-MNIST package (dataset-fashion-mnist) and python3.
# Usage: scripts/hostile_cases.sh [BUILD_DIR]   (default: build)
set -u
cd "$(dirname "$0")/.."
bin=${1:-build}/apps
fashion=/usr/share/datasets/fashion-mnist
[ -d "$fashion" ] || { echo "hostile_cases: $fashion is missing (apt-get install dataset-fashion-mnist)"; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
failures=0
train="$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --set log.level=quiet --set train.threads=2"

# case NAME EXPECT_RC PATTERN COMMAND...: runs the command (120 s at most) and checks its exit status
# and that its output matches PATTERN (an extended regular expression; "" for any).
case_row() {
  name=$1 want=$2 pattern=$3
  shift 3
  timeout 120 sh -c "$*" >"$work/out" 2>&1
  rc=$?
  said=$(grep -m1 -E "cnn_|error|refus|skipp|warn" "$work/out" | cut -c1-150 | tr '|' '/')
  verdict=pass
  [ "$rc" = "$want" ] || verdict=FAIL
  if [ -n "$pattern" ] && ! grep -qE "$pattern" "$work/out"; then verdict=FAIL; fi
  [ "$verdict" = pass ] || failures=$((failures + 1))
  echo "| $name | rc $want, /$pattern/ | $rc | $verdict | $said |"
}

python3 - "$work" <<'PY'
import os, struct, sys, zlib
work = sys.argv[1]
def png(path, w, h):
    raw = b"".join(b"\0" + bytes((x * 7 + y) % 256 for x in range(w)) for y in range(h))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    open(path, "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 0, 0, 0, 0)) +
                           chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))
for c in ("cat", "dog"):
    os.makedirs(f"{work}/folder/{c}", exist_ok=True)
    for i in range(8):
        png(f"{work}/folder/{c}/{i}.png", 40, 40)
png(f"{work}/folder/cat/large.png", 2000, 2000)
os.symlink("loop2.png", f"{work}/folder/cat/loop1.png"); os.symlink("loop1.png", f"{work}/folder/cat/loop2.png")
os.symlink("..", f"{work}/folder/dog/up")
# A JPEG header that claims 65000 x 65000 pixels: SOI, a baseline SOF0, then nothing.
open(f"{work}/bomb.jpg", "wb").write(b"\xff\xd8\xff\xc0\x00\x11\x08" + struct.pack(">HH", 65000, 65000) +
                                     b"\x03\x01\x22\x00\x02\x11\x01\x03\x11\x01" + b"\0" * 2400)
os.makedirs(f"{work}/bombs/a", exist_ok=True)
for i in range(3):
    open(f"{work}/bombs/a/{i}.jpg", "wb").write(open(f"{work}/bomb.jpg", "rb").read())
os.makedirs(f"{work}/corrupt/a", exist_ok=True); os.makedirs(f"{work}/corrupt/b", exist_ok=True)
for c in "ab":
    for i in range(6):
        open(f"{work}/corrupt/{c}/{i}.jpg", "wb").write(b"not an image")
# An IDX file with a wrong magic.
os.makedirs(f"{work}/badidx", exist_ok=True)
for name in ("train-images-idx3-ubyte", "train-labels-idx1-ubyte", "t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    open(f"{work}/badidx/{name}", "wb").write(b"\x12\x34\x56\x78" + b"\0" * 64)
# A FIFO named like an image in a class folder (it would block a reader in open()), and IDX files
# whose header has a zero size.
for c in ("cat", "dog"):
    os.makedirs(f"{work}/fifo/{c}", exist_ok=True)
    for i in range(12):
        png(f"{work}/fifo/{c}/{i}.png", 40, 40)
os.mkfifo(f"{work}/fifo/dog/pipe.jpg")
os.makedirs(f"{work}/zeroidx", exist_ok=True)
for name, dims in (("train-images-idx3-ubyte", (64, 0, 28)), ("train-labels-idx1-ubyte", (64,)),
                   ("t10k-images-idx3-ubyte", (64, 0, 28)), ("t10k-labels-idx1-ubyte", (64,))):
    open(f"{work}/zeroidx/{name}", "wb").write(bytes([0, 0, 8, len(dims)]) + b"".join(struct.pack(">I", d) for d in dims) +
                                              (b"\0" * 64 if len(dims) == 1 else b""))
# A class folder whose name is Latin-1, not UTF-8.
for c in (b"caf\xe9", b"b"):
    d = os.fsencode(work) + b"/latin1/" + c
    os.makedirs(d, exist_ok=True)
    for i in range(8):
        png(os.fsdecode(d + b"/%d.png" % i), 40, 40)
for c in ("ok", "two\nlines"):
    os.makedirs(f"{work}/nlfolder/{c}", exist_ok=True)
    png(f"{work}/nlfolder/{c}/0.png", 40, 40)
open(f"{work}/nul.ini", "wb").write(open("configs/fashion_mnist.ini", "rb").read().replace(b"name = compact_cnn", b"name = compact_cnn\0junk", 1))
open(f"{work}/bom.csv", "wb").write(b"\xef\xbb\xbf" + "".join(f"folder/{c}/{i}.png,{c}\n" for c in ("cat", "dog") for i in range(8)).encode())
os.makedirs(f"{work}/cutpng/a", exist_ok=True)
png(f"{work}/cutpng/a/whole.png", 40, 40)
whole = open(f"{work}/cutpng/a/whole.png", "rb").read()
open(f"{work}/cutpng/a/cut.png", "wb").write(whole[:-12])
open(f"{work}/long.ini", "w").write("[model]\n; " + "x" * 5000 + "\nname = compact_cnn\n")
open(f"{work}/spaces.ini", "w").write(open("configs/fashion_mnist.ini").read().replace("[model]", "[ model ]"))
# A folder of 8000x8000 PNGs (one file, hard-linked): a batch of 16 takes seconds to load, as on a
# slow network file system.
os.makedirs(f"{work}/slow/a", exist_ok=True); os.makedirs(f"{work}/slow/b", exist_ok=True)
row = b"\0" + bytes((x * 7) % 256 for x in range(8000))
chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
open(f"{work}/slow/a/0.png", "wb").write(b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 8000, 8000, 8, 0, 0, 0, 0)) +
                                         chunk(b"IDAT", zlib.compress(row * 8000, 1)) + chunk(b"IEND", b""))
for i in range(1, 16):
    os.link(f"{work}/slow/a/0.png", f"{work}/slow/a/{i}.png"); os.link(f"{work}/slow/a/0.png", f"{work}/slow/b/{i}.png")
open(f"{work}/bom.ini", "wb").write(b"\xef\xbb\xbf" + open("configs/fashion_mnist.ini", "rb").read())
PY

echo "| case | expected | rc | verdict | first line said |"
echo "| --- | --- | --- | --- | --- |"
folder="--set data.batch_size=4 --set data.format=folder --set data.path=$work/folder --set data.val_path= --set model.num_classes=2 --set data.image_size=28 --set train.max_steps=2"
case_row "image folder with symlink loops and a 2000x2000 PNG" 0 "" "$train $folder"
case_row "cnn_pack of that folder, --size 32" 0 "" "$bin/cnn_pack $work/folder $work/folder.h5 --size 32"
case_row "cnn_pack --check of 3 decompression-bomb JPEGs (65000x65000 headers)" 1 "3 unreadable" "$bin/cnn_pack --check $work/bombs"
case_row "every training image corrupt" 1 "corrupt|unreadable" "$train --set data.batch_size=4 --set data.format=folder --set data.path=$work/corrupt --set data.val_path= --set model.num_classes=2 --set data.image_size=28"
case_row "data.batch_size = 65536, drop_last = false" 1 "needs about" "$train --set data.batch_size=65536 --set data.drop_last=false"
case_row "train.accumulate = 1024 (234 batches an epoch)" 1 "accumulate" "$train --set train.accumulate=1024"
case_row "[ model ] with spaces inside the brackets" 0 "" "$bin/cnn_train $work/spaces.ini --set run.dir=$work/runs --set log.level=quiet --set train.max_steps=2"
case_row "a UTF-8 byte-order mark at the start of the config" 0 "" "$bin/cnn_train $work/bom.ini --set run.dir=$work/runs --set log.level=quiet --set train.max_steps=2"
case_row "a directory given as the config" 1 "directory|folder" "$bin/cnn_train $work"
case_row "a 5000-character comment line" 1 "unknown|missing|required|data" "$bin/cnn_train $work/long.ini --set run.dir=$work/runs"
case_row "IDX files with a wrong magic" 1 "magic" "$train --set data.path=$work/badidx --set data.val_path="
case_row "a FIFO named pipe.jpg in a class folder" 0 "" "$train ${folder%--set data.path=*}--set data.path=$work/fifo --set data.val_path= --set model.num_classes=2 --set data.image_size=28 --set train.max_steps=2"
case_row "cnn_pack --check of a folder holding a FIFO" 1 "pipe.jpg: not a regular file \\(a FIFO" "$bin/cnn_pack --check $work/fifo"
case_row "IDX images of size [64, 0, 28]" 1 "one of them zero" "$train --set data.path=$work/zeroidx --set data.val_path="
case_row "[distributed] timeout_s = 1e10" 1 "outside \\(0, 604800\\]" "$train --set distributed.timeout_s=1e10"
case_row "[distributed] bucket_mb = 1e300" 1 "outside \\(0, 4096\\]" "$train --set distributed.bucket_mb=1e300"
case_row "[train] mixup = 1e308" 1 "outside \\[0, 100\\]" "$train --set train.mixup=1e308"
case_row "[train] cutmix = 1e-5 (Beta draws near 0 and 1)" 0 "" "$train --set train.cutmix=1e-5 --set train.max_steps=20 --set log.every_steps=1"
case_row "[train] mixup = 1e-5" 0 "" "$train --set train.mixup=1e-5 --set train.max_steps=20 --set log.every_steps=1"
case_row "divergence in the first epoch (lr 100), no checkpoint yet" 1 "No checkpoint was written yet" "$train --set optim.lr=100 --set optim.weight_decay=1 --set log.every_steps=1 --set train.max_steps=40"
case_row "a class folder named caf\\xe9 (Latin-1, not UTF-8), validated" 0 "" "$train --set data.batch_size=4 --set data.format=folder --set data.path=$work/latin1 --set data.val_path=$work/latin1 --set model.num_classes=2 --set data.image_size=28 --set train.epochs=1 && grep -q 'caf.*xE9' $work/runs/*/confusion.json"
case_row "[optim] head = nosuch with head_lr_mult = 100" 1 "matches no parameter" "$train --set optim.head=nosuch --set optim.head_lr_mult=100 --set train.max_steps=2"
case_row "a config without [train] device (auto: cpu here)" 0 "device = auto" "sed '/^device/d' configs/fashion_mnist.ini > $work/nodevice.ini && $bin/cnn_train $work/nodevice.ini --set run.dir=$work/runs --set train.max_steps=2 --set log.level=normal"
case_row "no num_classes, a 2-class folder" 0 "num_classes = 2, the classes of the training data" "sed '/^num_classes/d' configs/fashion_mnist.ini > $work/noclasses.ini && $bin/cnn_train $work/noclasses.ini --set run.dir=$work/runs --set log.level=normal --set data.batch_size=4 --set data.format=folder --set data.path=$work/folder --set data.val_path= --set data.image_size=28 --set train.max_steps=2"
mkdir -p "$work/valbird/bird" && cp "$work"/folder/cat/0.png "$work/valbird/bird/"
case_row "validation folder with a class the training data lacks" 1 "lacks: bird" "$train $folder --set data.val_path=$work/valbird"
case_row "lr = 1e-4 with min_lr = 1e-3 (a rising cosine)" 1 "min_lr = 0.001 is above the learning rate" "$train --set optim.lr=1e-4 --set schedule.min_lr=1e-3"
case_row "schedule = plateau without a validation set" 1 "never decay" "$train --set schedule.name=plateau --set data.val_path="
case_row "reference_batch_size = 1 (lr scaled past its range)" 1 "past \\[optim\\] lr's range" "$train --set optim.lr=0.8 --set schedule.reference_batch_size=1"
# Ctrl-C in the last epoch's validation (a 5 s validation at image_size 112, signalled 1 s after the last step).
case_row "SIGINT during the last epoch's validation" 130 "interrupted during the validation of epoch 1" "$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --set train.max_steps=2 --set data.image_size=112 --set log.progress=lines --set log.every_steps=1 > $work/val_int.out 2>&1 & p=\$!; for i in \$(seq 150); do grep -q 'step 2/' $work/val_int.out && break; sleep 0.2; done; sleep 1; kill -INT \$p; wait \$p; rc=\$?; cat $work/val_int.out; exit \$rc"
# Ctrl-C while the loader waits for a slow batch (half a second into epoch 2's wait): the run stops
# within 1.5 s, not after the batch.
case_row "SIGINT while the data loader is slow (2 s a batch)" 130 "stopped while waiting for the data loader" "$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --set data.format=folder --set data.path=$work/slow --set data.val_path= --set model.num_classes=2 --set data.image_size=28 --set data.batch_size=16 --set data.workers=1 > $work/slow.out 2>&1 & p=\$!; for i in \$(seq 300); do grep -q 'epoch 1/16 done' $work/slow.out && break; sleep 0.1; done; sleep 0.5; s=\$(date +%s%N); kill -INT \$p; wait \$p; rc=\$?; ms=\$(( (\$(date +%s%N) - s) / 1000000 )); cat $work/slow.out; echo stopped after \$ms ms; test \$ms -lt 1500 && exit \$rc"
case_row "cnn_report on a folder that is not a run" 1 "not a run folder" "$bin/cnn_report $work/folder/cat; rc=\$?; test ! -e $work/folder/cat/report.html && exit \$rc"
case_row "cnn_pack interrupted by SIGINT leaves no OUT.h5.tmp" 1 "stopped by a signal" "$bin/cnn_pack fashion-mnist:$fashion:train $work/int.h5 --size 64 > $work/int.out 2>&1 & p=\$!; for i in \$(seq 150); do grep -q 'packed' $work/int.out && break; sleep 0.1; done; kill -INT \$p; wait \$p; rc=\$?; cat $work/int.out; test ! -e $work/int.h5.tmp && exit \$rc"
case_row "a class folder named with a line break" 1 "holds a line break" "$train $folder --set data.path=$work/nlfolder"
case_row "a NUL byte in a config value" 1 "a NUL byte" "$bin/cnn_train $work/nul.ini --set run.dir=$work/runs"
case_row "a list file with a UTF-8 byte-order mark" 0 "" "$train $folder --set data.path=$work/bom.csv"
case_row "a dataset path that does not exist" 1 "does not exist" "$train --set data.path=$work/no_such_folder --set data.format=folder --set data.val_path="
case_row "cnn_pack --check of a PNG cut before IEND" 1 "ends before its IEND" "$bin/cnn_pack --check $work/cutpng"
case_row "cnn_infer --checkpoint of a packed dataset" 1 "packed by cnn_pack, not a checkpoint" "$bin/cnn_pack $work/folder $work/asckpt.h5 --size 16 && $bin/cnn_infer --checkpoint $work/asckpt.h5 $work/folder/cat/0.png"
# Packed files whose arrays are not what cnn_pack writes (float32 pixels in [0, 1], int16 pixels,
# float labels): copies of the packed folder with one array rewritten through h5py.
# Debian's python3-h5py, for the system python3 when the python3 on the PATH lacks h5py.
h5python=python3
python3 -c 'import h5py' 2>/dev/null || { h5python=/usr/bin/python3; $h5python -c 'import h5py' 2>/dev/null || apt-get install -y -qq python3-h5py >/dev/null 2>&1; }
if $h5python -c 'import h5py' 2>/dev/null; then
  $h5python - "$work" <<'PY'
import shutil, sys
import h5py, numpy as np
work = sys.argv[1]
for name, array, convert in (("f32", "images", lambda v: v.astype(np.float32) / 255), ("i16", "images", lambda v: v.astype(np.int16)),
                             ("flabels", "labels", lambda v: v.astype(np.float32))):
    shutil.copy(f"{work}/folder.h5", f"{work}/{name}.h5")
    with h5py.File(f"{work}/{name}.h5", "r+") as f:
        values = convert(f[array][()])
        del f[array]
        f.create_dataset(array, data=values)
PY
  packed="--set data.batch_size=4 --set data.format=packed --set data.val_path= --set model.num_classes=2 --set data.image_size=28 --set train.max_steps=2"
  case_row "a packed file of float32 pixels in [0, 1]" 1 "holds 32-bit floats, where a packed file holds 8-bit unsigned pixels" "$train $packed --set data.path=$work/f32.h5"
  case_row "a packed file of int16 pixels" 1 "holds 16-bit signed integers" "$train $packed --set data.path=$work/i16.h5"
  case_row "a packed file of float labels" 1 "labels holds 32-bit floats, where labels are integer class indices" "$train $packed --set data.path=$work/flabels.h5"
else
  echo "| packed files of float32/int16 pixels, float labels | - | - | skipped | h5py (python3-h5py) could not be installed |"
fi
case_row "cnn_summary --input 3x160x160 (channels first)" 1 "so 3 channels of 160x160 are 160x160x3" "$bin/cnn_summary resnet18 --input 3x160x160"
case_row "crop ratios 50/100 (a box rounded to nothing)" 0 "" "$train --set augment.random_resized_crop=true --set augment.ratio_min=50 --set augment.ratio_max=100 --set train.max_steps=3"
case_row "crop ratios 2/0.5 (crossed)" 1 "ratio_min = 2 is above ratio_max = 0.5" "$train --set augment.ratio_min=2 --set augment.ratio_max=0.5"
case_row "image_size = 1024 with crop_pct = 0.1" 1 "beyond the limit" "$train --set data.image_size=1024 --set data.crop_pct=0.1"
case_row "format = packed pointed at a folder" 1 "folder|directory" "$train --set data.format=packed --set data.path=$work/folder --set data.val_path="
case_row "cnn_infer --topk 0" 105 "at least 1|>= 1|whole number" "$bin/cnn_infer --checkpoint x.h5 --topk 0 y.png"

# Pretrained weights of another model (the compact CNN's into the MLP).
$train --set train.max_steps=2 --set run.name=weights >/dev/null 2>&1
weights=$(ls -d "$work"/runs/*_weights)/model.safetensors
case_row "pretrained weights of another model" 1 "does not fit mlp outside its head" "$train --set model.name=mlp --set model.pretrained=$weights --set train.max_steps=2"
case_row "the same with pretrained_strict = false" 0 "" "$train --set model.name=mlp --set model.pretrained=$weights --set model.pretrained_strict=false --set train.max_steps=2"

# Checkpoints: a short run, then damaged copies.
$train --set train.max_steps=5 --set run.name=ckpt >/dev/null 2>&1
ckpt=$(ls -d "$work"/runs/*_ckpt)/last.h5
refused=0 identical=0 other=0
for seed in $(seq 1 80); do
  cp "$ckpt" "$work/damaged.h5"
  python3 - "$work/damaged.h5" "$seed" <<'PY'
import os, random, sys
path, seed = sys.argv[1], int(sys.argv[2])
r = random.Random(seed); size = os.path.getsize(path)
with open(path, "r+b") as f:
    for _ in range(4):
        at = r.randrange(size); f.seek(at); b = f.read(1); f.seek(at); f.write(bytes([b[0] ^ r.randrange(1, 256)]))
PY
  timeout 60 "$bin/cnn_infer" --checkpoint "$work/damaged.h5" "$work/folder/cat/0.png" >"$work/infer_out" 2>&1
  rc=$?
  if [ $rc = 1 ] && grep -q "damaged\|corrupt\|checksum" "$work/infer_out"; then refused=$((refused + 1))
  elif [ $rc = 0 ]; then identical=$((identical + 1))
  else other=$((other + 1)); fi
done
verdict=pass; [ $other = 0 ] || { verdict=FAIL; failures=$((failures + 1)); }
echo "| 80 checkpoints with 4 random bytes changed, loaded by cnn_infer | refused (checksums) or unchanged | - | $verdict | $refused refused, $identical loaded (bytes in padding), $other other (crash or unclear) |"
case_row "resume of a finished run" 0 "nothing" "$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --set train.max_steps=5 --resume $(dirname "$ckpt")"
case_row "resume with another batch size" 1 "batch_size" "$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --set train.max_steps=10 --set data.batch_size=128 --resume $(dirname "$ckpt")"
case_row "run.name = ../../../escaped" 1 "is not one folder name" "$train --set run.name=../../../escaped --set train.max_steps=2"
case_row "--resume of a dataset folder leaves no .lock there" 1 "does not exist" "$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --resume $work/folder/cat; rc=\$?; test ! -e $work/folder/cat/.lock && exit \$rc"
# Resumed with the original INI and only train.epochs raised: the run's --set values stay, the change is named.
$train --set train.epochs=1 --set train.max_steps=3 --set ema.decay=0.99 --set run.name=own >/dev/null 2>&1
own=$(ls -d "$work"/runs/*_own)
case_row "resume with the original INI and a new train.epochs keeps the run's --set values" 0 "" "$train --set train.epochs=2 --set train.max_steps=6 --resume $own && grep -q '^decay = 0.99' $own/config.ini && grep -q 'epochs = 2 (--set); the run had 1' $own/train.log"
mkdir -p "$work/clone" && cp "$ckpt" "$work/clone/last.h5" && ln -sf "$(dirname "$ckpt")/train.log" "$work/clone/train.log"
case_row "resume of a copy whose train.log is a link (cp -s)" 1 "symbolic link" "$bin/cnn_train configs/fashion_mnist.ini --set run.dir=$work/runs --set train.max_steps=10 --resume $work/clone"
mkdir -p "$work/autoruns/20990101_000000_wide_ckpt" && cp "$ckpt" "$work/autoruns/20990101_000000_wide_ckpt/last.h5"
case_row "resume = auto for run 'ckpt' beside a newer 'wide_ckpt'" 0 "" "$train --set run.dir=$work/autoruns --set run.name=ckpt --set checkpoint.resume=auto --set train.max_steps=2 && test ! -e $work/autoruns/20990101_000000_wide_ckpt/train.log"
echo
echo "hostile_cases: $failures case(s) failed"
[ "$failures" = 0 ]
