#!/bin/sh
# Runs one libFuzzer harness for SECONDS over a fresh copy of its seed corpus, in WORK (the
# committed seeds stay as they are). Known reproducers (crash-* files among the seeds) are replayed
# first and must no longer crash. Prints one line: executions, time, executions per second, new
# corpus entries and any crash files; with JSON given, writes the same as a JSON object there.
# Exits non-zero on any finding: a crash, a sanitizer report, a run over 10 s (-timeout), an
# allocation over 1 GiB (-malloc_limit_mb; <harness>.options may say otherwise, with the reason) or
# 2 GiB resident (-rss_limit_mb).
# usage: run_harness.sh HARNESS SEEDS WORK SECONDS [JSON]
set -eu
harness=$1 seeds=$2 work=$3 seconds=$4 json=${5:-}
name=$(basename "$harness")
limits="-timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=1024"
# A harness's own flags (tests/fuzz/<harness>.options, '#' comments) come after, and win.
options_file=$(dirname "$0")/$name.options
[ -f "$options_file" ] && limits="$limits $(grep -v '^#' "$options_file" | tr '\n' ' ')"
rm -rf "$work"
mkdir -p "$work/corpus" "$work/findings"

status=0
reproducers=""
for seed in "$seeds"/*; do
  [ -f "$seed" ] || continue
  case $(basename "$seed") in
    crash-*) reproducers="$reproducers $seed" ;;
    *) cp "$seed" "$work/corpus/" ;;
  esac
done
for reproducer in $reproducers; do
  if ! "$harness" $limits "$reproducer" >"$work/reproducer.log" 2>&1; then
    echo "$name: known reproducer $(basename "$reproducer") still fails:"
    tail -n 30 "$work/reproducer.log"
    status=1
  fi
done

# UBSan: abort with a stack trace on the first report (the build also has -fno-sanitize-recover).
export UBSAN_OPTIONS="${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}"
start=$(date +%s)
"$harness" $limits -max_total_time="$seconds" -print_final_stats=1 -artifact_prefix="$work/findings/" \
  "$work/corpus" >"$work/fuzz.log" 2>&1 || status=1
elapsed=$(( $(date +%s) - start ))

stat() { sed -n "s/^stat::$1: *//p" "$work/fuzz.log" | tail -n 1; }
executions=$(stat number_of_executed_units)
new_units=$(stat new_units_added)
peak_rss=$(stat peak_rss_mb)
executions=${executions:-0}
rate=$(( executions / (elapsed > 0 ? elapsed : 1) ))
findings=$(find "$work/findings" -type f | sort)
echo "$name: $executions executions in $elapsed s ($rate/s), $new_units new inputs, peak RSS ${peak_rss:-?} MB"
if [ $status -ne 0 ] || [ -n "$findings" ]; then
  status=1
  tail -n 60 "$work/fuzz.log"
  for f in $findings; do echo "$name: finding $f"; done
fi
if [ -n "$json" ]; then
  list=""
  for f in $findings; do list="$list${list:+, }\"$f\""; done
  printf '{"harness": "%s", "executions": %s, "seconds": %s, "executions_per_second": %s, "new_inputs": %s, "peak_rss_mb": %s, "findings": [%s], "passed": %s}\n' \
    "$name" "$executions" "$elapsed" "$rate" "${new_units:-0}" "${peak_rss:-0}" "$list" \
    "$([ $status -eq 0 ] && echo true || echo false)" >"$json"
fi
exit $status
