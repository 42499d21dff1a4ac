#!/bin/sh
# The GPU check's rehearsal, here and without a GPU: proves that the kit (scripts/gpu_kit.sh) runs on
# a machine that has none of this project's packages.
#
#   scripts/gpu_rehearsal.sh [KIT_DIR]      (KIT_DIR defaults to gpu-kit; the kit is rebuilt first)
#
# The bare machine is a minimal Debian 12 root made by debootstrap (variant minbase: no compilers, no
# Python, none of the -dev packages; cached in CNN_REHEARSAL_ROOT, /var/cache/cnn/gpu-rehearsal,
# between runs). Into it go only what a GPU machine of the kind the check is written for has: the
# CUDA toolkit's runtime libraries (cudart, cuBLAS, cuBLASLt) in /usr/local/cuda/lib64, and cuDNN and
# NCCL under a Python venv's wheel layout and names (site-packages/nvidia/{cudnn,nccl}/lib/*.so.9|.2),
# and no driver. check.sh then runs there under chroot, and the rehearsal requires: exit status 77
# (no device); the probe naming each library's place and every program loading with nothing
# missing but the driver; every stage ending with a "no CUDA device / no driver" line or a named
# skip, none crashing; at most 8 files in OUTDIR, summary.json valid; all within 60 s. A second run
# with NCCL taken away must stop at the probe with a one-line reason naming the library.
#
# Exit status 77 (CTest: skipped) when not root or debootstrap, chroot or the network is missing.
set -eu
cd "$(dirname "$0")/.."
kit_dir=${1:-gpu-kit}
cache=${CNN_REHEARSAL_ROOT:-/var/cache/cnn/gpu-rehearsal}
root=$cache/bookworm
mirror=${CNN_DEBIAN_MIRROR:-http://deb.debian.org/debian}
say() { echo "rehearsal: $*"; }
skip() { echo "rehearsal: skipped: $*"; exit 77; }

[ "$(id -u)" -eq 0 ] || skip "it needs root (debootstrap and chroot)"
command -v debootstrap >/dev/null 2>&1 || skip "debootstrap is not installed (Debian: debootstrap; scripts/setup.sh installs it)"
command -v chroot >/dev/null 2>&1 || skip "chroot is not installed"
command -v nvcc >/dev/null 2>&1 || [ -x /usr/local/cuda/bin/nvcc ] || skip "the CUDA toolkit is not installed: the kit is built with it"

scripts/gpu_kit.sh "$kit_dir"

# The bare root, made once and kept. A root whose making was cut short is made again.
if [ ! -f "$root/.cnn-bare-root" ]; then
  say "making a minimal Debian 12 root in $root (debootstrap --variant=minbase, once)"
  rm -rf "$root.partial"
  mkdir -p "$cache"
  debootstrap --variant=minbase bookworm "$root.partial" "$mirror" >"$cache/debootstrap.log" 2>&1 ||
    skip "debootstrap could not make the bare root (no network?): see $cache/debootstrap.log"
  date -u +%Y-%m-%dT%H:%M:%SZ >"$root.partial/.cnn-bare-root"
  rm -rf "$root"
  mv "$root.partial" "$root"
fi

# What a GPU machine has beside the bare system, put in afresh each time.
site=opt/torch/.venv/lib/python3.12/site-packages
rm -rf "$root/usr/local/cuda" "$root/opt/torch" "$root/kit" "$root/out" "$root/tmp/"cnn-gpu-check.*
mkdir -p "$root/usr/local/cuda/lib64" "$root/$site/nvidia/cudnn/lib" "$root/$site/nvidia/nccl/lib" "$root/out"
place() {  # place FOLDER FILE...: hard links where the file system allows, copies otherwise
  dest=$1
  shift
  for f in "$@"; do cp -L -l "$f" "$dest/" 2>/dev/null || cp -L "$f" "$dest/"; done
}
find_library() {  # the first folder of the toolkit or the system holding $1
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib /usr/lib/x86_64-linux-gnu; do
    if [ -e "$d/$1" ]; then echo "$d"; return; fi
  done
  echo "rehearsal: $1 is not installed here: the rehearsal needs the CUDA 13 toolkit, cuDNN 9 and NCCL" >&2
  exit 1
}
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do place "$root/usr/local/cuda/lib64" "$(find_library $lib)/$lib"; done
cudnn=$(find_library libcudnn.so.9)
place "$root/$site/nvidia/cudnn/lib" "$cudnn"/libcudnn*.so.9
place "$root/$site/nvidia/nccl/lib" "$(find_library libnccl.so.2)/libnccl.so.2"
cp -r "$kit_dir" "$root/kit"

# /proc inside the root for the programs that read it, taken down again on the way out.
proc_mounted=0
if mount -t proc proc "$root/proc" 2>/dev/null; then proc_mounted=1; fi
trap '[ $proc_mounted -eq 0 ] || umount "$root/proc" 2>/dev/null || true' EXIT
in_root() {
  chroot "$root" /usr/bin/env -i PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"
}

say "running check.sh in the bare root"
t0=$(date +%s)
set +e
in_root OUT=/out timeout 120 /bin/sh /kit/check.sh >"$cache/check.log" 2>&1
rc=$?
set -e
seconds=$(( $(date +%s) - t0 ))
cat "$cache/check.log"

problems=""
problem() { problems="$problems
  - $*"; }
[ "$rc" -eq 77 ] || problem "check.sh exited with $rc, not 77 (no device)"
[ "$seconds" -lt 60 ] || problem "the no-GPU path took $seconds s (at most 60)"
summary=$root/out/summary.txt
[ -f "$summary" ] || problem "no summary.txt in OUTDIR"
touch "$summary"
for expect in "library: libcudart.so.13 in /usr/local/cuda/lib64" "library: libcublas.so.13 in /usr/local/cuda/lib64" \
    "library: libcublasLt.so.13 in /usr/local/cuda/lib64" "library: libcudnn.so.9 in /$site/nvidia/cudnn/lib" \
    "library: libnccl.so.2 in /$site/nvidia/nccl/lib" "driver: libcuda.so.1 not found" "probe: every program loads"; do
  grep -qF "$expect" "$summary" || problem "the probe did not say: $expect"
done
for s in gpu_tests gpu_tests_tf32_off memcheck racecheck bench_conv_f16 bench_conv_bf16 bench_kernels bench_train_bf16 \
    bench_train_bf16_graphs bench_train_fp16 bench_train_fp16_graphs cnn_train nccl_tests bench_allreduce; do
  line=$(grep -E "^$s +" "$summary" | tail -1)
  case $line in
    "") problem "stage $s is missing from the summary table" ;;
    *" no-device "*"no CUDA device / no driver"* | *" skipped "*) ;;
    *) problem "stage $s did not end with a no-device line: $line" ;;
  esac
done
# One table line per stage, none wrapped: the header, 14 stages, the verdict.
rows=$(sed -n '/^stage  *status/,/^check:/p' "$summary" | wc -l)
[ "$rows" -eq 16 ] || problem "the summary table has $rows lines from its header to the verdict, not 16"
files=$(find "$root/out" -type f | wc -l)
[ "$files" -le 8 ] || problem "$files files in OUTDIR (at most 8 come back)"
for f in summary.txt summary.json logs.tar.gz; do [ -f "$root/out/$f" ] || problem "OUTDIR lacks $f"; done
if command -v python3 >/dev/null 2>&1; then
  python3 -m json.tool "$root/out/summary.json" >/dev/null 2>&1 || problem "summary.json is not valid JSON"
fi
tar -tzf "$root/out/logs.tar.gz" 2>/dev/null | grep -q 'logs/gpu_tests.log' || problem "logs.tar.gz lacks logs/gpu_tests.log"

# A machine without NCCL: the probe stops with one line naming what is missing and where it looked.
rm -rf "$root/$site/nvidia/nccl" "$root/out"
mkdir -p "$root/out"
set +e
in_root OUT=/out timeout 60 /bin/sh /kit/check.sh >"$cache/check_without_nccl.log" 2>&1
rc_without=$?
set -e
[ "$rc_without" -eq 2 ] || problem "without NCCL check.sh exited with $rc_without, not 2"
grep -q '^check: cannot run: not found: libnccl.so.2 (looked in: ' "$cache/check_without_nccl.log" ||
  problem "without NCCL the probe did not say 'cannot run: not found: libnccl.so.2 (looked in: ...)': $(tail -1 "$cache/check_without_nccl.log")"

kit_size=$(du -sb "$kit_dir" | awk '{ printf "%.1f MiB", $1 / 1048576 }')
if [ -n "$problems" ]; then
  echo "rehearsal: FAILED (kit $kit_size, no-GPU path $seconds s):$problems"
  exit 1
fi
say "passed: kit $kit_size; no-GPU path $seconds s, exit 77, $files files in OUTDIR; without NCCL: $(grep '^check: cannot run' "$cache/check_without_nccl.log" | cut -c1-100)..."
