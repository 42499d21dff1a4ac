#!/bin/sh
# The GPU check, one call of under 9 minutes on one H200, each step under its own timeout and its
# result written to $OUT/summary.txt (and summary.json) as soon as it is known, so that a timeout
# keeps what was done; no step runs past 530 s from the start. Budget (seconds): build 240 with all
# cores; gpu tests 90, again with NVIDIA_TF32_OVERRIDE=0 for the f32 conv/GEMM agreement 30;
# compute-sanitizer memcheck on a subset 45; bench_conv ResNet-50 at batch 256 in f16 and bf16, 25
# each; bench_kernels 25; bench_train ResNet-50 batch 256 in bf16 and fp16, eager and as graph
# replays, 30 each; a 30-second cnn_train run on Fashion-MNIST 45; bench_allreduce 20. Logs go to
# $OUT when it is set (else build-gpu/logs).
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
# Each step's timeout, cut to what is left of the whole check's 530 seconds (at least 1, so that a
# step past the deadline fails at once and says so instead of overrunning the call).
deadline=$((start + 530))
within() {
  left=$((deadline - $(date +%s)))
  if [ "$left" -lt "$1" ]; then echo $((left > 1 ? left : 1)); else echo "$1"; fi
}

if [ -d .debs ]; then
  for f in .debs/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi

nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >"$logs/gpu.txt" 2>&1
note "gpu: $(cat "$logs/gpu.txt")"

arch=${CUDA_ARCH:-90}
if ! cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DCNN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" \
    >"$logs/configure.log" 2>&1 || ! timeout 240 cmake --build build-gpu -j "$(nproc)" >"$logs/build.log" 2>&1; then
  note "build: FAILED (see build.log)"
  tail -30 "$logs/build.log"
  exit 1
fi
note "build: ok for sm_$arch in $(( $(date +%s) - start )) s"

json="$logs/summary.json"
echo "{" >"$json"
record() {  # record NAME RC: one line of the JSON summary
  echo "  \"$1\": $2," >>"$json"
}
build=build-gpu

timeout "$(within 90)" ctest --test-dir $build -L gpu --output-on-failure >"$logs/gpu_tests.log" 2>&1
gpu_rc=$?
note "gpu tests: $(grep -E 'tests passed|tests failed' "$logs/gpu_tests.log" | tail -1) (rc $gpu_rc)"
record gpu_tests $gpu_rc
NVIDIA_TF32_OVERRIDE=0 timeout "$(within 30)" ./$build/tests/test_gpu -tc='*TF32*,*conv2d*,*matmul*,*linear*' >"$logs/gpu_tf32_off.log" 2>&1
rc=$?
note "gpu agreement with NVIDIA_TF32_OVERRIDE=0: rc $rc ($(grep -E '^\[doctest\] test cases' "$logs/gpu_tf32_off.log"))"
record gpu_tf32_override_off $rc
grep -h "max relative difference from the CPU" "$logs/gpu_tests.log" "$logs/gpu_cases.log" 2>/dev/null | head -2 >>"$summary"

sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ -n "$sanitizer" ]; then
  timeout "$(within 45)" "$sanitizer" --tool memcheck --error-exitcode 9 ./$build/tests/test_gpu -tc='*batch_norm*,*loss*,*optimizer*,*caching allocator*' \
    >"$logs/memcheck.log" 2>&1
  rc=$?
  note "compute-sanitizer memcheck (subset): rc $rc ($(grep -E 'ERROR SUMMARY' "$logs/memcheck.log" | tail -1))"
  record memcheck $rc
else
  note "compute-sanitizer: not available"
fi
for dtype in f16 bf16; do
  timeout "$(within 25)" ./$build/bench/bench_conv --device cuda --batch 256 --set resnet50 --dtype $dtype \
    --json "$logs/bench_conv_resnet50_b256_$dtype.json" >"$logs/bench_conv_$dtype.log" 2>&1
  rc=$?
  note "bench_conv (resnet50, batch 256, $dtype): rc $rc (table in bench_conv_$dtype.log)"
  record "bench_conv_$dtype" $rc
done
timeout "$(within 25)" ./$build/bench/bench_kernels --device cuda --json "$logs/bench_kernels.json" >"$logs/bench_kernels.log" 2>&1
rc=$?
note "bench_kernels (ResNet-50 shapes, batch 256): rc $rc (GB/s and % of peak in bench_kernels.log)"
record bench_kernels $rc
# Each precision eagerly and with the step replayed as a CUDA graph ([train] cuda_graphs).
for precision in bf16 fp16; do
  for graphs in "" --cuda-graphs; do
    name="bench_train_$precision${graphs:+_graphs}"
    timeout "$(within 30)" ./$build/bench/bench_train --device cuda --model resnet50 --batch 256 --precision $precision --steps 10 \
      --warmup 5 --workers 8 $graphs --json "$logs/${name}_resnet50.json" >"$logs/$name.log" 2>&1
    rc=$?
    note "bench_train (resnet50, batch 256, $precision${graphs:+, graph replays}): rc $rc $(head -1 "$logs/$name.log")"
    record "$name" $rc
  done
done
# A real run: cnn_train on Fashion-MNIST on the GPU for about 30 seconds.
timeout "$(within 45)" ./$build/apps/cnn_train configs/fashion_mnist.ini --set train.device=cuda --set train.max_steps=600 \
  --set run.dir="$logs/runs" >"$logs/cnn_train.log" 2>&1
rc=$?
note "cnn_train (fashion_mnist on cuda, 600 steps): rc $rc; $(grep -E '^done:' "$logs/cnn_train.log" | tail -1)"
record cnn_train $rc
# NCCL over all of the machine's GPUs, one process each, launched torchrun-style (no MPI needed).
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
[ "$gpus" -ge 1 ] || gpus=1
pids=""
for rank in $(seq 0 $((gpus - 1))); do
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=$gpus MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
    timeout "$(within 20)" ./$build/bench/bench_allreduce --device cuda --json "$logs/bench_allreduce.json" \
    >"$logs/bench_allreduce_rank$rank.log" 2>&1 &
  pids="$pids $!"
done
allreduce_rc=0
for pid in $pids; do wait "$pid" || allreduce_rc=1; done
note "bench_allreduce (NCCL, $gpus GPU(s)): rc $allreduce_rc (table in bench_allreduce_rank0.log)"
record bench_allreduce $allreduce_rc
total=$(( $(date +%s) - start ))
note "total: $total s"
echo "  \"total_seconds\": $total" >>"$json"
echo "}" >>"$json"
cat "$summary"
[ $gpu_rc -eq 0 ]
