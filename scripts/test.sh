#!/bin/sh
# Sets everything up (scripts/setup.sh), runs the whole test suite, then the host-emulated CUDA
# kernel tests again under ThreadSanitizer and AddressSanitizer (each with a deliberately broken
# kernel that the sanitizer must catch). Tests labelled gpu skip themselves without a GPU.
set -eu
cd "$(dirname "$0")/.."
start=$(date +%s)
scripts/setup.sh
# TensorBoard's event reader checks our event files when the package can be installed from PyPI;
# without it that one check is skipped (and says so).
if ! python3 -c 'import tensorboard' >/dev/null 2>&1; then
  timeout 300 python3 -m pip install -q tensorboard >/dev/null 2>&1 ||
    echo "test: the tensorboard Python package could not be installed; its event-reader check will be skipped"
fi
# Chromium renders report.html in one test; without it that test is skipped (and says why).
if ! command -v chromium >/dev/null 2>&1; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  timeout 600 sh -c "DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends chromium >/dev/null 2>&1" ||
    echo "test: Chromium could not be installed; the report's browser test will be skipped"
fi
jobs=$(nproc)
build_dir=${CNN_BUILD_DIR:-build}
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"

for sanitizer in thread address; do
  dir="$build_dir-$sanitizer"
  echo "test: emulated CUDA kernels under the $sanitizer sanitizer"
  cmake -S . -B "$dir" -DCNN_EMULATION_ONLY_SANITIZER=$sanitizer -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
  cmake --build "$dir" -j "$jobs" >/dev/null
  # ThreadSanitizer needs a narrower address-space randomisation than some kernels use: run without it.
  setarch "$(uname -m)" -R ctest --test-dir "$dir" --output-on-failure -j "$jobs"
done
echo "test: all passed in $(( $(date +%s) - start )) s"
