#!/bin/sh
# The GPU check: on a machine with an NVIDIA GPU, builds for sm_90 (override with CUDA_ARCH) with all
# cores, runs every test labelled gpu (and the rest of the suite), runs the gpu tests again under
# compute-sanitizer memcheck where it is available, times ResNet-50's convolutions with bench_conv,
# measures NCCL all-reduce over every GPU of the machine with bench_allreduce (the NCCL tests run
# within the gpu tests), and prints a short summary. Logs go to $OUT
# when it is set (else build-gpu/logs). Meant to finish in well under 8 minutes on one H200.
#
# Packages: the build needs doctest-dev, libopenblas-dev and zlib1g-dev (libopenblas-openmp-dev is
# preferred for the CPU backend; without it CMake warns and uses the default OpenBLAS). On a machine
# without network access, put their .deb files in .debs/ and they are unpacked into / first.
set -u
cd "$(dirname "$0")/.."
start=$(date +%s)
logs=${OUT:-build-gpu/logs}
mkdir -p "$logs"
summary="$logs/summary.txt"
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }

if [ -d .debs ]; then
  for f in .debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$logs/gpu.txt" 2>&1
note "gpu: $(cat "$logs/gpu.txt")"

arch=${CUDA_ARCH:-90}
if ! cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCNN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    >"$logs/configure.log" 2>&1 || ! cmake --build build-gpu -j "$(nproc)" >"$logs/build.log" 2>&1; then
  note "build: FAILED (see build.log)"
  tail -30 "$logs/build.log"
  exit 1
fi
note "build: ok for sm_$arch in $(( $(date +%s) - start )) s"

ctest --test-dir build-gpu -L gpu --output-on-failure >"$logs/gpu_tests.log" 2>&1
gpu_rc=$?
./build-gpu/tests/test_gpu -s -d >"$logs/gpu_cases.log" 2>&1
note "gpu tests: $(grep -E 'tests passed|tests failed' "$logs/gpu_tests.log" | tail -1) (rc $gpu_rc)"
note "gpu cases: $(grep -E '^\[doctest\] (test cases|assertions)' "$logs/gpu_cases.log" | tr '\n' ' ')"

./build-gpu/tests/train/test_train -tc='*CUDA device*' -s >"$logs/optimizer_cuda.log" 2>&1
note "optimizer and gradient kernels on the device: $(grep -E '^\[doctest\] test cases' "$logs/optimizer_cuda.log")"

ctest --test-dir build-gpu -LE gpu -j "$(nproc)" >"$logs/other_tests.log" 2>&1
note "other tests: $(grep -E 'tests passed|tests failed' "$logs/other_tests.log" | tail -1)"

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$sanitizer" ]; then
  timeout 240 "$sanitizer" --tool memcheck --error-exitcode 9 ./build-gpu/tests/test_gpu >"$logs/memcheck.log" 2>&1
  note "compute-sanitizer memcheck: rc $? ($(grep -E 'ERROR SUMMARY' "$logs/memcheck.log" | tail -1))"
else
  note "compute-sanitizer: not available"
fi
timeout 150 ./build-gpu/bench/bench_conv --device cuda --batch 32 --set resnet50 --json "$logs/bench_conv_resnet50_b32.json" \
  >"$logs/bench_conv.log" 2>&1
note "bench_conv (resnet50, batch 32, f32): rc $? (table in bench_conv.log)"
timeout 90 ./build-gpu/bench/bench_checkpointing --device cuda --model resnet50 --batch 64 \
  --json "$logs/bench_checkpointing.json" >"$logs/bench_checkpointing.log" 2>&1
note "bench_checkpointing (resnet50, batch 64): $(tail -1 "$logs/bench_checkpointing.log")"
for dtype in f32 f16; do
  timeout 120 ./build-gpu/bench/bench_model --device cuda --model resnet50 --batch 128 --dtype $dtype --repeats 5 \
    --json "$logs/bench_model_resnet50_$dtype.json" >"$logs/bench_model_$dtype.log" 2>&1
  note "bench_model: $(tail -1 "$logs/bench_model_$dtype.log")"
done
# cnn_train's whole step with the profiler's CUDA-event tables (its device times are tested nowhere else).
timeout 120 ./build-gpu/bench/bench_train --device cuda --model resnet50 --batch 64 --precision bf16 --steps 10 --warmup 5 \
  --workers 8 --json "$logs/bench_train_resnet50_bf16.json" >"$logs/bench_train.log" 2>&1
note "bench_train: rc $? $(head -1 "$logs/bench_train.log") (tables in bench_train.log)"
# NCCL over all of the machine's GPUs, one process each, launched torchrun-style (no MPI needed).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || gpus=1
pids=""
for rank in $(seq 0 $((gpus - 1))); do
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=$gpus MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
    timeout 120 ./build-gpu/bench/bench_allreduce --device cuda --json "$logs/bench_allreduce.json" \
    >"$logs/bench_allreduce_rank$rank.log" 2>&1 &
  pids="$pids $!"
done
allreduce_rc=0
for pid in $pids; do wait "$pid" || allreduce_rc=1; done
note "bench_allreduce (NCCL, $gpus GPU(s)): rc $allreduce_rc (table in bench_allreduce_rank0.log)"
note "total: $(( $(date +%s) - start )) s"
cat "$summary"
[ $gpu_rc -eq 0 ]
