#!/bin/sh
# Sets everything up (scripts/setup.sh, which builds only cnn_train), builds every other target in
# the same build folder (the programs, benchmarks and test suites), runs the whole test suite, then
# the host-emulated CUDA kernel tests again under ThreadSanitizer, the whole CPU suite under
# AddressSanitizer and UndefinedBehaviorSanitizer (each sanitizer with a deliberately broken kernel
# that it must catch), and every fuzz harness for 20 s. Tests labelled gpu skip themselves without a
# GPU.
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
step() {  # prints how long the previous step took, then names the next
  now=$(date +%s)
  if [ -n "${step_name:-}" ]; then echo "test: $step_name took $(( now - step_start )) s"; fi
  step_name=$1
  step_start=$now
  if [ -n "$step_name" ]; then echo "test: $step_name"; fi
}

# setup.sh built cnn_train and its libraries; the suite needs every target: tests run the programs,
# the install test installs them all, and the benchmarks are built so that they keep compiling.
step "building the programs, benchmarks and tests"
cmake --build "$build_dir" -j "$jobs"

step "the test suite"
ctest --test-dir "$build_dir" --output-on-failure -j "$jobs"

step "the emulated CUDA kernels under ThreadSanitizer"
dir="$build_dir-thread"
cmake -S . -B "$dir" -DCNN_EMULATION_ONLY_SANITIZER=thread -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j "$jobs" >/dev/null
# ThreadSanitizer needs a narrower address-space randomisation than some kernels use: run without it.
setarch "$(uname -m)" -R ctest --test-dir "$dir" --output-on-failure -j "$jobs"

# The whole CPU suite (the emulated kernels and their deliberate overflow included) under ASan and
# UBSan (cmake/sanitizers.cmake; docs/fuzzing.md). No test is left out.
step "the whole CPU test suite under AddressSanitizer and UndefinedBehaviorSanitizer"
dir="$build_dir-asan"
cmake -S . -B "$dir" -DCNN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j "$jobs" >/dev/null
ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1} UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1} \
  ctest --test-dir "$dir" --output-on-failure -j "$jobs"

# Each libFuzzer harness of tests/fuzz for CNN_FUZZ_SECONDS (20) over a copy of its seeds; longer
# runs: scripts/fuzz.sh.
step "the fuzz harnesses, 20 s each"
dir="$build_dir-fuzz"
CC=clang CXX=clang++ cmake -S . -B "$dir" -DCNN_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$dir" -j "$jobs" --target fuzz_harnesses >/dev/null
ctest --test-dir "$dir" -L fuzz --output-on-failure -j "$jobs"
step ""
echo "test: all passed in $(( $(date +%s) - start )) s"
