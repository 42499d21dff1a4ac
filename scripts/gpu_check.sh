#!/bin/sh
# The GPU check on this machine: builds the kit when it is missing (scripts/gpu_kit.sh) and runs its
# check.sh, which writes summary.txt, summary.json and logs.tar.gz to OUTDIR (default $OUT, else
# build-kit/check). On a GPU machine lent for a short while, copy the kit there instead and run
# DIR/check.sh: nothing is built there (docs/gpu.md).
#
#   scripts/gpu_check.sh [OUTDIR]           (CNN_KIT_DIR: the kit's folder, gpu-kit)
set -eu
cd "$(dirname "$0")/.."
kit_dir=${CNN_KIT_DIR:-gpu-kit}
[ -f "$kit_dir/kit.tar.gz" ] && [ -f "$kit_dir/check.sh" ] || scripts/gpu_kit.sh "$kit_dir"
exec "$kit_dir/check.sh" "${1:-${OUT:-build-kit/check}}"
