#!/bin/sh
# A run whose disk fills up (a 256 KiB tmpfs, too small for the first checkpoint): cnn_train must end
# with its clear error (exit 1), not crash (HDF5's exit handler used to segfault on the file whose
# close failed), and leave no half-written text file. Needs root to mount the tmpfs: otherwise it
# is skipped (exit 77) and says why.
# Usage: run_disk_full_test.sh CNN_TRAIN SOURCE_DIR
set -u
cnn_train=$1 source_dir=$2
disk=$(mktemp -d)
if ! mount -t tmpfs -o size=256k tmpfs "$disk" 2>/dev/null; then
  rmdir "$disk"
  echo "skipped: cannot mount a small tmpfs here (needs root)"
  exit 77
fi
trap 'umount "$disk"; rmdir "$disk"' EXIT
fashion=/usr/share/datasets/fashion-mnist
[ -d "$fashion" ] || { echo "skipped: $fashion is missing"; exit 77; }
out=$(mktemp)
"$cnn_train" "$source_dir/configs/fashion_mnist.ini" --set train.max_steps=2 --set data.val_path= \
  --set run.dir="$disk" --set log.level=quiet >"$out" 2>&1
rc=$?
cat "$out"
status=0
[ "$rc" -eq 1 ] || { echo "FAILED: exit $rc, expected 1 (an error, not a crash)"; status=1; }
grep -q "No space left on device\|is the disk full" "$out" || { echo "FAILED: the message does not say the disk is full"; status=1; }
for f in "$disk"/*/config.ini "$disk"/*/classes.txt; do
  [ -s "$f" ] || { echo "FAILED: $f is empty"; status=1; }
done
rm -f "$out"
[ $status -eq 0 ] && echo "ok: a full disk ends the run with its error (exit 1)"
exit $status
