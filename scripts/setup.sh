#!/bin/sh
# Installs the Debian packages that cnn's build and tests need (only when some are missing), then
# configures the project into build/ (or $CNN_BUILD_DIR) and builds what the README's first command
# runs: cnn_train and the libraries it links. scripts/test.sh builds the rest in the same folder
# with the same configuration (`cmake --build build` does too). Safe to run again.
# The CUDA toolkit is used when nvcc is found (/usr/local/cuda); without it the CPU backend is built.
# clang (with libFuzzer's runtime) builds only the fuzz harnesses (scripts/test.sh, docs/fuzzing.md).
set -eu
cd "$(dirname "$0")/.."

packages="build-essential cmake ccache doctest-dev libopenblas-dev libopenblas-openmp-dev zlib1g-dev dataset-fashion-mnist python3
  libhdf5-dev libturbojpeg0-dev libstb-dev libinih-dev libcli11-dev nlohmann-json3-dev pkg-config
  libopenmpi-dev openmpi-bin libdnnl-dev clang libclang-rt-14-dev debootstrap patchelf"
missing=""
for p in $packages; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "setup: installing$missing"
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends $missing >/dev/null
fi

build_dir=${CNN_BUILD_DIR:-build}
jobs=$(nproc)
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release ${CNN_CMAKE_ARGS:-} >/dev/null
cmake --build "$build_dir" -j "$jobs" --target cnn_train
echo "setup: built cnn_train in $build_dir (the other programs, benchmarks and tests: cmake --build $build_dir)"
