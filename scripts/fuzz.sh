#!/bin/sh
# Builds the fuzzing configuration (build-fuzz/: clang, CNN_FUZZ=ON, CPU only) and runs the libFuzzer
# harnesses of tests/fuzz for HOURS in all (fractions allowed: 0.5), split evenly among the
# harnesses named (default: all), each over a fresh copy of its seed corpus. Prints, per harness,
# executions, time, executions per second and any crash files, and writes them to
# build-fuzz/fuzz_summary.json; then every config key at its extremes (tests/train/extremes) under
# the sanitizers. Exits non-zero when any harness or key case found something.
#   scripts/fuzz.sh 1                       one hour over every harness
#   scripts/fuzz.sh -j 2 0.5 fuzz_hdf5 fuzz_packed
# -j N runs N harnesses at a time (each harness is one process); the hours are then wall-clock
# time with N cores busy, so each harness gets N times the share.
set -eu
cd "$(dirname "$0")/.."
parallel=1
if [ "${1:-}" = "-j" ]; then
  parallel=$2
  shift 2
fi
if [ $# -lt 1 ]; then
  echo "usage: scripts/fuzz.sh [-j N] HOURS [HARNESS...]" >&2
  exit 2
fi
hours=$1
shift
build=build-fuzz
CC=clang CXX=clang++ cmake -S . -B "$build" -DCNN_FUZZ=ON -DCNN_CUDA=OFF -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$build" -j "$(nproc)" --target fuzz_harnesses >/dev/null

harnesses=${*:-$(cd tests/fuzz && ls fuzz_*.cpp | sed 's/\.cpp$//' | grep -v '^fuzz_support$')}
count=$(echo "$harnesses" | wc -w)
seconds=$(awk -v h="$hours" -v n="$count" -v j="$parallel" 'BEGIN { s = int(h * 3600 * j / n); print (s < 1 ? 1 : s) }')
echo "fuzz: $count harness(es), $seconds s each, $parallel at a time"

runs=$build/tests/fuzz/runs
mkdir -p "$runs"
status=0
echo "$harnesses" | tr ' ' '\n' | grep . |
  xargs -P "$parallel" -I{} tests/fuzz/run_harness.sh "$build/tests/fuzz/{}" tests/fuzz/corpus/{} "$runs/{}" \
    "$seconds" "$runs/{}.json" || status=1

summary=$build/fuzz_summary.json
{
  echo "{\"hours\": $hours, \"seconds_per_harness\": $seconds, \"parallel\": $parallel, \"harnesses\": ["
  first=1
  for h in $harnesses; do
    [ -f "$runs/$h.json" ] || continue
    [ $first -eq 1 ] || echo ","
    first=0
    cat "$runs/$h.json"
  done
  echo "]}"
} >"$summary"
echo "fuzz: summary in $summary"

# Every config key at its extremes on a tiny run of cnn_train built with AddressSanitizer and
# UndefinedBehaviorSanitizer (the suite runs a sample of 40 cases): a clean refusal or a clean run.
asan=build-asan
cmake -S . -B "$asan" -DCNN_SANITIZE=address,undefined -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build "$asan" -j "$(nproc)" --target cnn_train schema_extremes >/dev/null
"$asan/tests/train/schema_extremes" "$asan/apps/cnn_train" --jobs "$parallel" --timeout 300 || status=1
exit $status
