#!/bin/sh
# kill -9 at random moments: a short run with a checkpoint every 3 steps is killed 10 times (at
# 0.5 to 3 s, so during training and during checkpoint writes) and resumed from its folder each time
# (--resume loads last.h5: a kill that left it unloadable fails the next start). The last resume
# must finish the run, with every step done exactly once in all.
# Usage: run_kill_test.sh CNN_TRAIN SOURCE_DIR
set -u
cnn_train=$1 source_dir=$2
fashion=/usr/share/datasets/fashion-mnist
[ -d "$fashion" ] || { echo "skipped: $fashion is missing"; exit 77; }
runs=$(mktemp -d)
trap 'rm -rf "$runs"' EXIT
# exec: the background job is cnn_train itself, so that kill -9 reaches it (not a subshell around it).
train() {
  exec "$cnn_train" "$source_dir/configs/fashion_mnist.ini" --set train.max_steps=120 --set data.batch_size=64 \
    --set data.val_path= --set checkpoint.every_steps=3 --set run.dir="$runs" --set run.name=killed \
    --set checkpoint.resume=auto --set log.level=quiet --set train.threads=1
}
kills=0
for i in 1 2 3 4 5 6 7 8 9 10; do
  (train >"$runs/out_$i" 2>&1) &
  pid=$!
  # 0.5 to 3 s: a different moment each time (the checkpoints come every few hundred milliseconds).
  sleep "$(awk -v i="$i" -v s="$$" 'BEGIN { srand(i * 7919 + s); printf "%.2f", 0.5 + 2.5 * rand() }')"
  if kill -9 "$pid" 2>/dev/null; then kills=$((kills + 1)); fi
  wait "$pid" 2>/dev/null
  if grep -q "cnn_train:" "$runs/out_$i"; then  # an error at start: the checkpoint did not load
    echo "FAILED: start $i: $(grep cnn_train: "$runs/out_$i")"
    exit 1
  fi
  grep -q "^done:" "$runs/out_$i" && break  # finished before the kill came
done
rc=0
grep -q "^done:" "$runs"/out_* || { (train >"$runs/final" 2>&1); rc=$?; }
# A kill before the first checkpoint leaves a folder without last.h5, which resume = auto passes
# over for a new one: exactly one folder must hold a checkpoint, the one every resume continued.
folders=$(ls -d "$runs"/*killed/last.h5 2>/dev/null | wc -l)
run=$(dirname "$(ls -d "$runs"/*killed/last.h5 | head -1)")
steps=$(grep -o '"step": *[0-9]*' "$run/metrics.jsonl" | tail -1 | grep -o '[0-9]*$')
echo "$kills kills; the last resume exited $rc; $folders run folder(s) with a checkpoint; last logged step ${steps:-?}"
[ "$rc" -eq 0 ] || { tail -5 "$runs/final"; exit 1; }
[ "$folders" -eq 1 ] || { echo "FAILED: $folders run folders hold a checkpoint"; exit 1; }
[ "${steps:-0}" -eq 120 ] || { echo "FAILED: the run ended at step ${steps:-?}, not 120"; exit 1; }
echo "ok"
