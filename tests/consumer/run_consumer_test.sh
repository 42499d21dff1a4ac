#!/bin/sh
# Installs the engine from BUILD_DIR into a temporary prefix, then configures, builds and runs the
# consumer project against that install, as a user embedding cnn would. FLAGS (optional) are
# added to the consumer's compile and link lines.
set -eu
build_dir=$1
source_dir=$2
flags=${3:-}  # compiler and linker flags for the consumer: an instrumented build's sanitizers
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cmake --install "$build_dir" --prefix "$work/prefix" >/dev/null
cmake -S "$source_dir" -B "$work/build" -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_CXX_FLAGS="$flags" -DCMAKE_EXE_LINKER_FLAGS="$flags" >/dev/null
cmake --build "$work/build" >/dev/null
LD_LIBRARY_PATH="$work/prefix/lib:$work/prefix/lib64:${LD_LIBRARY_PATH:-}" "$work/build/consumer"
