#!/bin/sh
# The GPU check, as it runs from the kit (scripts/gpu_kit.sh copies this file to DIR/check.sh):
#
#   DIR/check.sh [OUTDIR]           (OUTDIR defaults to $OUT)
#
# It unpacks DIR/kit.tar.gz into a temporary folder, finds the machine's CUDA runtime, cuBLAS, cuDNN
# and NCCL (the toolkit's lib64, then the Python wheels' nvidia/*/lib folders, by globbing and by
# asking python3; CNN_CUDA_LIB_DIRS, colon-separated, is looked in first), probes the machine, then
# runs the stages in the order of what matters most, each under its own timeout, all within 420 s
# (CNN_CHECK_SECONDS). After every stage OUTDIR holds summary.txt, summary.json and logs.tar.gz (each
# written under a temporary name, then renamed), so a check cut short keeps what it did; nothing else
# is written to OUTDIR. The last lines printed are the summary table: one line per stage with its
# key figure.
#
# Exit status: 0 every stage passed; 1 a stage failed, crashed or ran out of time; 2 the kit cannot
# run here (a library missing: the line says which and where it was looked for); 77 no CUDA device or
# driver (every stage then says so and nothing crashed).
set -u
out=${1:-${OUT:-}}
if [ -z "$out" ]; then
  echo "check: usage: check.sh OUTDIR (or set OUT)" >&2
  exit 2
fi
kit_dir=$(cd "$(dirname "$0")" && pwd)
mkdir -p "$out" || exit 2
out=$(cd "$out" && pwd)
start=$(date +%s)
deadline=$((start + ${CNN_CHECK_SECONDS:-420}))
work=$(mktemp -d "${TMPDIR:-/tmp}/cnn-gpu-check.XXXXXX") || exit 2
trap 'rm -rf "$work"' EXIT
trap 'exit 130' INT TERM
logs=$work/logs
mkdir -p "$logs"
summary=$logs/summary.txt
stages=$work/stages.json  # one JSON object a line, joined into summary.json by publish
: >"$summary"
: >"$stages"

note() { echo "$*" | tee -a "$summary"; }
seconds_since() { echo $(( $(date +%s) - $1 )); }
# The timeout of a stage: its budget, cut to what is left of the whole check (at least 1 s, so a
# stage past the deadline ends at once and says so).
within() {
  left=$((deadline - $(date +%s)))
  if [ "$left" -lt "$1" ]; then echo $((left > 1 ? left : 1)); else echo "$1"; fi
}
json_string() { printf '"%s"' "$(printf '%s' "$1" | sed 's/\\/\\\\/g; s/"/\\"/g' | tr -d '\n\r\t')"; }
# Writes summary.txt, summary.json and logs.tar.gz into OUTDIR, each under a temporary name first.
publish() {
  {
    echo "{"
    echo "  \"kit\": $(json_string "$(head -1 "$work/kit/kit.txt" 2>/dev/null)"),"
    echo "  \"gpu\": $(json_string "${gpu_name:-none}"),"
    echo "  \"seconds\": $(seconds_since "$start"),"
    echo "  \"stages\": ["
    sed '$!s/$/,/' "$stages"
    echo "  ]"
    echo "}"
  } >"$out/.summary.json.tmp" && mv "$out/.summary.json.tmp" "$out/summary.json"
  cp "$summary" "$out/.summary.txt.tmp" && mv "$out/.summary.txt.tmp" "$out/summary.txt"
  tar -C "$work" -czf "$out/.logs.tar.gz.tmp" logs 2>/dev/null && mv "$out/.logs.tar.gz.tmp" "$out/logs.tar.gz"
}
give_up() {  # a reason the kit cannot run here, as one line, then the summary so far
  note "check: cannot run: $*"
  publish
  exit 2
}

# --- unpack --------------------------------------------------------------------------------------
[ -f "$kit_dir/kit.tar.gz" ] || give_up "$kit_dir/kit.tar.gz is missing: build the kit with scripts/gpu_kit.sh DIR and copy DIR whole"
mkdir -p "$work/kit"
if command -v gzip >/dev/null 2>&1; then
  gzip -dc "$kit_dir/kit.tar.gz" | tar -C "$work/kit" -xf - || give_up "unpacking kit.tar.gz failed"
elif command -v python3 >/dev/null 2>&1; then
  python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$kit_dir/kit.tar.gz" "$work/kit" ||
    give_up "unpacking kit.tar.gz with python3 failed"
else
  give_up "neither gzip nor python3 is here to unpack kit.tar.gz"
fi
kit=$work/kit
bin=$kit/bin
note "kit: $(head -1 "$kit/kit.txt") ($(sed -n 's/^cuda_arch //p' "$kit/kit.txt")), unpacked in $(seconds_since "$start") s"

# --- probe ---------------------------------------------------------------------------------------
probe_start=$(date +%s)
gpu_name=none
if command -v nvidia-smi >/dev/null 2>&1; then
  timeout 10 nvidia-smi >"$logs/nvidia-smi.txt" 2>&1
  gpu_name=$(timeout 5 nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>/dev/null | head -1)
  gpus=$(timeout 5 nvidia-smi -L 2>/dev/null | grep -c '^GPU')
  note "gpu: ${gpu_name:-nvidia-smi found no GPU} ($gpus GPU(s))"
else
  gpus=0
  note "gpu: nvidia-smi not found"
fi
[ "${gpus:-0}" -ge 1 ] 2>/dev/null || gpus=0
note "host: $(uname -srm), $(nproc) cores, glibc $(getconf GNU_LIBC_VERSION 2>/dev/null | cut -d' ' -f2); the kit needs $(sed -n 's/^glibc_needed //p' "$kit/kit.txt")"

# Where the machine's CUDA libraries may be: the user's folders, the toolkit's, the system's, then
# the folders of the Python wheels (nvidia-cudnn-cu13, nvidia-nccl-cu13, ...).
candidates() {
  echo "${CNN_CUDA_LIB_DIRS:-}" | tr ':' '\n'
  for d in "${CUDA_HOME:-/usr/local/cuda}" /usr/local/cuda /usr/local/cuda-*; do
    echo "$d/lib64"; echo "$d/lib"; echo "$d/targets/x86_64-linux/lib"
  done
  echo /usr/local/nvidia/lib64; echo /usr/local/nvidia/lib; echo /usr/lib/x86_64-linux-gnu; echo /usr/lib64
  for py in python3 /opt/*/.venv/bin/python3 /opt/*/bin/python3; do
    command -v "$py" >/dev/null 2>&1 || continue
    timeout 10 "$py" -c 'import site; print("\n".join(site.getsitepackages() + [site.getusersitepackages()]))' 2>/dev/null |
      while read -r sp; do for d in "$sp"/nvidia/*/lib; do echo "$d"; done; done
  done
  for d in /opt/*/.venv/lib/python3*/site-packages /opt/*/lib/python3*/site-packages /opt/conda/lib/python3*/site-packages \
      /usr/local/lib/python3*/dist-packages /usr/local/lib/python3*/site-packages /usr/lib/python3/dist-packages \
      "${HOME:-/root}"/.local/lib/python3*/site-packages; do
    for w in "$d"/nvidia/*/lib; do echo "$w"; done
  done
}
candidates | awk 'NF && !seen[$0]++' | while read -r d; do [ -d "$d" ] && echo "$d"; done >"$work/candidates"
lib_path=""
missing=""
for lib in libcudart.so.13 libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  where=""
  while read -r d; do
    if [ -e "$d/$lib" ]; then where=$d; break; fi
  done <"$work/candidates"
  if [ -z "$where" ]; then
    missing="$missing $lib"
    continue
  fi
  note "library: $lib in $where"
  case ":$lib_path:" in *":$where:"*) ;; *) lib_path=${lib_path:+$lib_path:}$where ;; esac
done
if [ -n "$missing" ]; then
  give_up "not found:$missing (looked in: $(tr '\n' ' ' <"$work/candidates")); install the CUDA 13 toolkit or the nvidia-*-cu13 wheels, or name their folders in CNN_CUDA_LIB_DIRS"
fi
# The driver: found by the loader's cache or in the folders above; without it every stage says so.
driver=$(ldconfig -p 2>/dev/null | awk '/libcuda\.so\.1 / { print $NF; exit }')
if [ -z "$driver" ]; then
  while read -r d; do
    if [ -e "$d/libcuda.so.1" ]; then driver=$d/libcuda.so.1; lib_path=$lib_path:$d; break; fi
  done <"$work/candidates"
fi
note "driver: ${driver:-libcuda.so.1 not found (no NVIDIA driver)}"
# The kit's libstdc++ only when the machine's own is older than the build's.
needed_cxx=$(sed -n 's/^glibcxx_needed //p' "$kit/kit.txt")
system_cxx=$(ldconfig -p 2>/dev/null | awk '/libstdc\+\+\.so\.6 / { print $NF; exit }')
if [ -n "$system_cxx" ] && grep -qa "$needed_cxx" "$system_cxx" 2>/dev/null; then
  note "libstdc++: the machine's ($system_cxx has $needed_cxx)"
else
  lib_path=$lib_path:$kit/lib/compat
  note "libstdc++: the kit's (the machine's ${system_cxx:-is missing} lacks $needed_cxx)"
fi
export LD_LIBRARY_PATH="$lib_path${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# Every program must load with nothing missing but the driver.
unresolved=""
for b in "$bin"/*; do
  ldd "$b" >"$logs/ldd_$(basename "$b").txt" 2>&1
  lost=$(grep 'not found' "$logs/ldd_$(basename "$b").txt" | awk '{ print $1 }' | grep -v '^libcuda\.so\.1$' | sort -u | tr '\n' ' ')
  [ -z "$lost" ] || unresolved="$unresolved $(basename "$b"): $lost"
done
[ -z "$unresolved" ] || give_up "programs that cannot load:$unresolved(ldd in logs.tar.gz)"
note "probe: every program loads ($(ls "$bin" | wc -l) programs), in $(seconds_since "$probe_start") s"
publish

# --- stages --------------------------------------------------------------------------------------
no_device_pattern='CUDA is unavailable|no usable CUDA device|no CUDA-capable device|CUDA driver version is insufficient|no CUDA device'
failures=0
no_device=0
ran=0
# stage NAME BUDGET FIGURE COMMAND...: runs COMMAND under its timeout with its output in
# logs/NAME.log, and records a line "NAME  STATUS  SECONDS  FIGURE", FIGURE being what the shell
# function of that name prints from the log (the stage's key figure).
stage() {
  name=$1 budget=$2 figure=$3
  shift 3
  limit=$(within "$budget")
  t0=$(date +%s)
  echo "check: $name (at most $limit s)"
  if [ "$name" = gpu_tests ]; then  # its output streams, so a hang shows where it is
    { timeout -k 5 "$limit" "$@" 2>&1; echo $? >"$work/rc"; } | tee "$logs/$name.log"
    rc=$(cat "$work/rc")
  else
    timeout -k 5 "$limit" "$@" >"$logs/$name.log" 2>&1
    rc=$?
  fi
  record "$name" "$rc" "$t0" "$limit" "$figure"
}
# The CUDA runtime's own words for why there is no device, else the program's line.
no_device_reason() {
  reason=$(grep -Eo 'CUDA driver version is insufficient for CUDA runtime version|no CUDA-capable device is detected' "$1" | head -1)
  [ -n "$reason" ] || reason=$(grep -Em1 "$no_device_pattern" "$1" | cut -c1-100)
  echo "$reason"
}
# record NAME RC T0 LIMIT FIGURE: classifies the outcome and publishes it.
record() {
  ran=$((ran + 1))
  secs=$(seconds_since "$3")
  log=$logs/$1.log
  if [ "$2" -eq 124 ] || [ "$2" -eq 137 ]; then
    status="TIMEOUT" detail="stopped at its limit of $4 s; last line: $(tail -1 "$log" | cut -c1-120)"
  elif [ "$2" -gt 128 ]; then
    status="CRASH" detail="signal $(($2 - 128)); last line: $(tail -1 "$log" | cut -c1-120)"
  elif grep -Eq "$no_device_pattern" "$log"; then
    status="no-device" detail="no CUDA device / no driver ($(no_device_reason "$log"))"
  elif [ "$2" -eq 0 ]; then
    status="ok" detail=$($5 "$log" 2>/dev/null)
  else
    status="FAILED" detail="rc $2; $($5 "$log" 2>/dev/null)"
  fi
  case $status in
    ok) ;;
    no-device) no_device=$((no_device + 1)) ;;
    *) failures=$((failures + 1)) ;;
  esac
  printf '%-26s %-9s %4s s  %s\n' "$1" "$status" "$secs" "$detail" >>"$work/table"
  echo "check: $1: $status in $secs s: $detail"
  echo "    {\"stage\": $(json_string "$1"), \"status\": $(json_string "$status"), \"rc\": $2, \"seconds\": $secs, \"figure\": $(json_string "$detail")}" >>"$stages"
  publish
}
skip() {  # skip NAME REASON: a stage that cannot run on this machine
  printf '%-26s %-9s %4s s  %s\n' "$1" "skipped" 0 "$2" >>"$work/table"
  echo "check: $1: skipped: $2"
  echo "    {\"stage\": $(json_string "$1"), \"status\": \"skipped\", \"rc\": null, \"seconds\": 0, \"figure\": $(json_string "$2")}" >>"$stages"
  publish
}
: >"$work/table"

# Key figures, each read from its stage's log.
doctest_counts() { grep -E '^\[doctest\] test cases' "$1" | tail -1 | sed 's/^\[doctest\] //'; grep -m3 -E 'ERROR|FAILED|fatal' "$1" | cut -c1-100 | tr '\n' ';'; }
sanitizer_errors() { grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$1" | tail -1; doctest_counts "$1"; }
conv_totals() {  # sums of the table's fwd, bwd-data and bwd-filter columns, and the best forward TFLOP/s
  awk '$2 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/ { f += $3; d += $4; w += $5; if ($6 > best) best = $6 }
       END { printf "%d layers: fwd %.2f ms, bwd-data %.2f ms, bwd-filter %.2f ms; best fwd %.1f TFLOP/s", n, f, d, w, best }
       $2 ~ /^[0-9]+$/ && $3 ~ /^[0-9.]+$/ { n++ }' "$1"
}
kernel_peaks() {  # the median and lowest share of the peak bandwidth over the kernels (the "% peak" column)
  awk 'length($0) >= 87 && substr($0, 81, 7) ~ /^ *[0-9]+\.[0-9]$/ { v[++n] = substr($0, 81, 7) + 0 }
       END { if (n == 0) { print "no rows"; exit }
             for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (v[j] < v[i]) { t = v[i]; v[i] = v[j]; v[j] = t }
             printf "%d kernels: median %.1f%%, lowest %.1f%% of peak DRAM bandwidth", n, v[int((n + 1) / 2)], v[1] }' "$1"
}
train_rate() { grep -m1 '^bench_train:' "$1" | sed 's/^bench_train: //' | cut -c1-160; }
run_result() { grep -E '^done:' "$1" | tail -1 | cut -c1-160; }
allreduce_rate() { grep -E '^average bus bandwidth|^all_reduce' "$1" | tr '\n' ' ' | cut -c1-200; }

# 1. Correctness: every GPU test, directly (not through CTest) so that its output streams.
stage gpu_tests 95 doctest_counts "$bin/test_gpu"
# 2. The f32 convolution and GEMM agreement with TF32 forbidden by the driver.
stage gpu_tests_tf32_off 25 doctest_counts env NVIDIA_TF32_OVERRIDE=0 "$bin/test_gpu" -tc='*TF32*,*conv2d*,*matmul*,*linear*'
# 3. Out-of-bounds and misaligned accesses, with every block its own cudaMalloc (no caching).
sanitizer=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | head -1)
if [ -n "$sanitizer" ]; then
  stage memcheck 45 sanitizer_errors env CNN_NO_CUDA_MEMORY_CACHING=1 "$sanitizer" --tool memcheck --error-exitcode 9 \
    "$bin/test_gpu" -tc='*batch_norm*,*cross_entropy*,*softmax*,*optimizer*,*pool*,*sum over*' -tce='*caching allocator*'
  # 4. Shared-memory races in the reductions, BatchNorm and softmax at their real launch geometry
  # (ResNet-50's shapes at batch 1, each kernel once).
  stage racecheck 30 sanitizer_errors "$sanitizer" --tool racecheck --error-exitcode 9 \
    "$bin/bench_kernels" --device cuda --batch 1 --repeats 1 --warmup 0 --only bn_,column_sum,global_avg_pool,cross_entropy \
    --json "$logs/racecheck_kernels.json"
else
  skip memcheck "compute-sanitizer not found"
  skip racecheck "compute-sanitizer not found"
fi
# 5. Speed: convolutions, the custom kernels, whole training steps.
for dtype in f16 bf16; do
  stage "bench_conv_$dtype" 20 conv_totals "$bin/bench_conv" --device cuda --batch 256 --set resnet50 --dtype "$dtype" \
    --json "$logs/bench_conv_$dtype.json"
done
stage bench_kernels 20 kernel_peaks "$bin/bench_kernels" --device cuda --json "$logs/bench_kernels.json"
for precision in bf16 fp16; do
  for graphs in "" --cuda-graphs; do
    stage "bench_train_$precision${graphs:+_graphs}" 25 train_rate "$bin/bench_train" --device cuda --model resnet50 \
      --batch 256 --precision "$precision" --steps 10 --warmup 3 --workers 8 $graphs --json "$logs/bench_train_$precision${graphs:+_graphs}.json"
  done
done
# 6. A real run: cnn_train on the kit's Fashion-MNIST for 600 steps.
stage cnn_train 40 run_result "$bin/cnn_train" "$kit/configs/fashion_mnist.ini" --set train.device=cuda \
  --set data.path="$kit/data/fashion-mnist" --set data.val_path="$kit/data/fashion-mnist" --set data.workers=8 \
  --set train.max_steps=600 --set run.dir="$work/runs"
for f in "$work"/runs/*/train.log "$work"/runs/*/metrics.jsonl; do [ -f "$f" ] && cp "$f" "$logs/cnn_train_$(basename "$f")"; done
# 7. NCCL: the communicator's tests, then the all-reduce over every GPU, one process each,
# launched torchrun-style.
stage nccl_tests 15 doctest_counts "$bin/test_gpu" -tc='nccl*'
ranks=$((gpus > 0 ? gpus : 1))
t0=$(date +%s)
limit=$(within 20)
pids=""
for rank in $(seq 0 $((ranks - 1))); do
  RANK=$rank LOCAL_RANK=$rank WORLD_SIZE=$ranks MASTER_ADDR=127.0.0.1 MASTER_PORT=29517 \
    timeout -k 5 "$limit" "$bin/bench_allreduce" --device "cuda:$rank" --json "$logs/bench_allreduce.json" \
    >"$logs/bench_allreduce_rank$rank.log" 2>&1 &
  pids="$pids $!"
done
allreduce_rc=0
for pid in $pids; do wait "$pid" || { rc=$?; [ "$allreduce_rc" -ne 0 ] || allreduce_rc=$rc; }; done
cp "$logs/bench_allreduce_rank0.log" "$logs/bench_allreduce.log"
record bench_allreduce "$allreduce_rc" "$t0" "$limit" allreduce_rate

# --- the verdict ---------------------------------------------------------------------------------
total=$(seconds_since "$start")
if [ "$failures" -gt 0 ]; then verdict="$failures of $ran stages did not pass"; code=1
elif [ "$no_device" -gt 0 ]; then verdict="no CUDA device or driver: $no_device of $ran stages could not start (none crashed)"; code=77
else verdict="every stage passed"; code=0
fi
{
  echo
  printf '%-26s %-9s %6s  %s\n' stage status time "key figure"
  cat "$work/table"
  echo "check: $verdict; $total s in all; results in $out (summary.txt, summary.json, logs.tar.gz)"
} >>"$summary"
publish
echo
tail -n "$(( $(wc -l <"$work/table") + 3 ))" "$summary"
exit $code
