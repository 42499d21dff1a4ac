#!/bin/sh
# Builds the GPU kit: everything a bare GPU machine needs to run the GPU check (docs/gpu.md), built
# here and copied there, so that none of a short lease goes to building.
#
#   scripts/gpu_kit.sh [DIR]        (DIR defaults to gpu-kit, which git ignores)
#
# DIR receives three files:
#   kit.tar.gz  bin/ (test_gpu, the benchmarks, cnn_train, cnn_infer; RUNPATH $ORIGIN/../lib),
#               lib/ (every shared library they need that a bare machine lacks, found with ldd;
#               RUNPATH $ORIGIN), lib/compat/ (this compiler's libstdc++ and libgcc_s, used only
#               when the machine's own are older), data/ (the Fashion-MNIST subset the check trains
#               on) and configs/; gzip, which every system has (xz would make it a third smaller,
#               but a minimal Debian has no xz);
#   check.sh    unpacks kit.tar.gz into a temporary folder and runs the stages (scripts/gpu_kit_check.sh);
#   kit.txt     what was built: the revision, the compiler, the CUDA architecture, the newest glibc
#               symbol the binaries need, and the libraries left for the machine to provide.
# The CUDA runtime, cuBLAS, cuDNN and NCCL are not in the kit: the machine's own are found by check.sh
# (the toolkit's lib64, then the Python wheels' nvidia/*/lib folders). The CPU kernels are built for
# the x86-64 baseline (CNN_NATIVE_CPU=OFF), since the GPU machine's processor is not this one.
#
# Environment: CUDA_ARCH (90), CNN_KIT_BUILD_DIR (build-kit), CNN_KIT_TRAIN_IMAGES (20000: how many
# of Fashion-MNIST's 60000 training images the kit carries; the test set is carried whole).
set -eu
cd "$(dirname "$0")/.."
kit_dir=${1:-gpu-kit}
build_dir=${CNN_KIT_BUILD_DIR:-build-kit}
arch=${CUDA_ARCH:-90}
train_images=${CNN_KIT_TRAIN_IMAGES:-20000}
limit_mib=60
fashion=/usr/share/datasets/fashion-mnist
targets="test_gpu bench_conv bench_kernels bench_train bench_allreduce cnn_train cnn_infer"
start=$(date +%s)
say() { echo "gpu_kit: $*"; }
fail() { echo "gpu_kit: $*" >&2; exit 1; }

for tool in patchelf gzip ldd objdump python3; do
  command -v "$tool" >/dev/null 2>&1 ||
    fail "$tool is missing; scripts/setup.sh installs what the kit needs (patchelf, binutils, python3)"
done
[ -f "$fashion/train-images-idx3-ubyte.gz" ] ||
  fail "the Fashion-MNIST files are missing from $fashion (Debian: dataset-fashion-mnist)"

# Configure only when the build folder is new or was configured for the kit differently.
settings="-DCMAKE_BUILD_TYPE=Release -DCNN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES=$arch -DCNN_NATIVE_CPU=OFF -DCNN_MPI=OFF -DCNN_NCCL=ON"
if [ "$(cat "$build_dir/kit-settings" 2>/dev/null)" != "$settings" ]; then
  say "configuring $build_dir ($settings)"
  # shellcheck disable=SC2086
  mkdir -p "$build_dir"
  cmake -S . -B "$build_dir" $settings >"$build_dir/configure.log" 2>&1 ||
    { tail -20 "$build_dir/configure.log"; fail "configuring $build_dir failed (log: $build_dir/configure.log)"; }
  grep -q '^CNN_NCCL_LIBRARY:FILEPATH=.*nccl' "$build_dir/CMakeCache.txt" ||
    fail "NCCL was not found by CMake: the kit needs it for its NCCL stage (the CUDA toolkit's NCCL, or libnccl-dev)"
  echo "$settings" >"$build_dir/kit-settings"
fi
say "building $targets for sm_$arch (log: $build_dir/build.log)"
# shellcheck disable=SC2086
cmake --build "$build_dir" -j "$(nproc)" --target $targets >"$build_dir/build.log" 2>&1 ||
  { grep -E -m20 'error|Error' "$build_dir/build.log"; fail "the build failed (log: $build_dir/build.log)"; }

# Stage the kit's tree in a temporary folder, then pack it.
stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/bin" "$stage/lib/compat" "$stage/data/fashion-mnist" "$stage/configs"
for t in $targets; do
  found=$(find "$build_dir" -name "$t" -type f -perm -u+x | head -1)
  [ -n "$found" ] || fail "the build made no $t"
  cp "$found" "$stage/bin/"
done
# The CUDA libraries and the driver come from the machine; glibc's own libraries are everywhere.
machine_provides='^(linux-vdso|ld-linux-x86-64|libc|libm|libmvec|libdl|libpthread|librt|libresolv|libutil|libanl|libcuda|libcudart|libcublas|libcublasLt|libcudnn[a-z_]*|libnccl|libnvidia-[a-z-]*)\.so'
compat='^(libstdc\+\+|libgcc_s)\.so'
# ldd lists the whole closure of each binary's needs; libcnn.so itself is one of them.
for b in "$stage"/bin/*; do
  ldd "$b" | awk '/=>/ { print $1, $3 }'
done | sort -u | while read -r name path; do
  if echo "$name" | grep -Eq "$machine_provides"; then continue; fi
  [ "$path" != "not" ] || fail "$name, which the kit's programs need, is not found here"
  if echo "$name" | grep -Eq "$compat"; then cp -L "$path" "$stage/lib/compat/$name"; else cp -L "$path" "$stage/lib/$name"; fi
done
# OpenBLAS's OpenMP build lives in a folder of its own (kernels/CMakeLists.txt): its soname is
# libopenblas.so.0 like the default build's, so the copy above already took the one the loader chose.
strip --strip-unneeded "$stage"/bin/* "$stage"/lib/*.so* 2>/dev/null || true
for b in "$stage"/bin/*; do patchelf --set-rpath '$ORIGIN/../lib' "$b"; done
for l in "$stage"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$l"; done
# Nothing may still point into this machine's folders.
for f in "$stage"/bin/* "$stage"/lib/*.so*; do
  case "$(patchelf --print-rpath "$f")" in '$ORIGIN'*) ;; *) fail "$f keeps a RUNPATH of this machine" ;; esac
done

# The data: the first $train_images training images of Fashion-MNIST (an IDX file whose count is
# rewritten) and the whole test set.
python3 - "$fashion" "$stage/data/fashion-mnist" "$train_images" <<'EOF'
import gzip, shutil, struct, sys
src, dst, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for name, item_bytes in (("train-images-idx3-ubyte", 28 * 28), ("train-labels-idx1-ubyte", 1)):
    with gzip.open(f"{src}/{name}.gz", "rb") as f:
        data = f.read()
    dims = data[3]
    header = bytearray(data[:4 + 4 * dims])
    total = struct.unpack(">I", header[4:8])[0]
    n = min(n, total)
    header[4:8] = struct.pack(">I", n)
    body = data[4 + 4 * dims: 4 + 4 * dims + n * item_bytes]
    with gzip.open(f"{dst}/{name}.gz", "wb", compresslevel=9) as f:
        f.write(bytes(header) + body)
for name in ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte"):
    shutil.copy(f"{src}/{name}.gz", f"{dst}/{name}.gz")
EOF
cp configs/fashion_mnist.ini "$stage/configs/"

# What the kit is, for the probe and for whoever reads the results.
glibc_needed=$(for f in "$stage"/bin/* "$stage"/lib/*.so*; do objdump -T "$f" 2>/dev/null; done |
  grep -o 'GLIBC_[0-9.]*' | sort -t. -k2,2n -k3,3n -u | tail -1)
glibcxx_needed=$(for f in "$stage"/bin/* "$stage"/lib/*.so*; do objdump -T "$f" 2>/dev/null; done |
  grep -o 'GLIBCXX_[0-9.]*' | sort -t. -k3,3n -u | tail -1)
revision=$(git describe --always --dirty 2>/dev/null || echo unknown)
{
  echo "revision $revision"
  echo "built $(date -u +%Y-%m-%dT%H:%M:%SZ) with $(${CXX:-c++} --version | head -1) and $(/usr/local/cuda/bin/nvcc --version 2>/dev/null | tail -2 | head -1)"
  echo "cuda_arch sm_$arch"
  echo "glibc_needed $glibc_needed"
  echo "glibcxx_needed $glibcxx_needed"
  echo "programs $targets"
  echo "machine_provides libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2 libcuda.so.1"
} >"$stage/kit.txt"

mkdir -p "$kit_dir"
rm -f "$kit_dir/kit.tar.gz.tmp"
tar -C "$stage" -cf - . | gzip -9 >"$kit_dir/kit.tar.gz.tmp"
mv "$kit_dir/kit.tar.gz.tmp" "$kit_dir/kit.tar.gz"
cp scripts/gpu_kit_check.sh "$kit_dir/check.sh"
chmod +x "$kit_dir/check.sh"
cp "$stage/kit.txt" "$kit_dir/kit.txt"
size=$(du -sb "$kit_dir" | cut -f1)
unpacked=$(du -sb "$stage" | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
say "$kit_dir: $(mib "$size") ($(mib "$unpacked") unpacked) in $(( $(date +%s) - start )) s; $revision"
[ "$size" -le $((limit_mib * 1048576)) ] || fail "the kit is $(mib "$size"), over its $limit_mib MiB"
