#!/bin/sh
# Multi-process failures and launches, through mpirun and cnn_train (CTest: mpi_failures_and_launches):
#   1. a rank killed with SIGKILL mid-job ends the whole job with an error, well within the timeout
#      (in a collective of the test program, and cnn_train's rank 1 killed while it trains);
#   2. a rank that hangs is reported by the other (collective and timeout named), and the job ends;
#   3. ranks given different configs are refused at start, naming the ranks;
#   4. a torchrun-style launch (RANK, WORLD_SIZE, MASTER_*) on the CPU is refused with the way to launch;
#   5. Fashion-MNIST: 300 steps on 2 ranks x 64 images reach the accuracy band of 1 rank x 128.
# Usage: run_failure_tests.sh MPIEXEC TEST_MPI CNN_TRAIN SOURCE_DIR
set -u
mpiexec=$1 test_mpi=$2 cnn_train=$3 source_dir=$4
launch="$mpiexec --allow-run-as-root --oversubscribe -x OMP_NUM_THREADS=1"
scratch=$(mktemp -d)
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAILED: $*"; failures=$((failures + 1)); }
# expect_failure NAME MAX_SECONDS PATTERN COMMAND...: the command must fail, within MAX_SECONDS, printing PATTERN.
expect_failure() {
  name=$1 limit=$2 pattern=$3
  shift 3
  start=$(date +%s)
  timeout $((limit + 60)) "$@" >"$scratch/out" 2>&1
  rc=$? elapsed=$(( $(date +%s) - start ))
  if [ "$rc" -eq 0 ]; then fail "$name: exited 0"; elif [ "$elapsed" -gt "$limit" ]; then
    fail "$name: took $elapsed s (limit $limit)"; elif ! grep -q -- "$pattern" "$scratch/out"; then
    fail "$name: no '$pattern' in its output"; else echo "ok: $name (exit $rc after $elapsed s)"; fi
  grep -v "^$" "$scratch/out" | tail -4 | sed 's/^/    /'
}

expect_failure "killed rank" 60 "rank 1" $launch -np 2 "$test_mpi" --no-skip --test-case="mpi: a killed rank ends the job"
expect_failure "hung rank" 40 "did not finish within 3 s" $launch -np 2 "$test_mpi" --no-skip \
  --test-case="mpi: a hung rank is reported after the timeout"

fashion=/usr/share/datasets/fashion-mnist
short="--set data.path=$fashion --set data.val_path= --set train.max_steps=3 --set run.dir=$scratch/runs --set log.level=quiet"
config="$source_dir/configs/fashion_mnist.ini"
expect_failure "different configs" 60 "not given the same config" \
  $launch -np 1 "$cnn_train" "$config" $short --set train.seed=1 : -np 1 "$cnn_train" "$config" $short --set train.seed=2
# One of cnn_train's ranks killed with kill -9 while it trains: mpirun ends the job and names the rank.
if [ -d "$fashion" ]; then
  start=$(date +%s)
  $launch -np 2 "$cnn_train" "$config" --set data.val_path= --set run.dir="$scratch/runs" --set run.name=killed \
    --set train.threads=1 --set log.level=quiet >"$scratch/killed" 2>&1 &
  job=$!
  victim=""
  for _ in $(seq 1 100); do  # up to 20 s for both ranks to be training (rank 0 has written train.log)
    victim=$(pgrep -n -f "^$cnn_train .*run.name=killed")  # the newest rank (not mpirun itself)
    [ -n "$victim" ] && ls "$scratch"/runs/*killed*/train.log >/dev/null 2>&1 && break
    sleep 0.2
  done
  sleep 2
  kill -9 "$victim" 2>/dev/null
  ( sleep 90; kill -9 $job 2>/dev/null ) &
  watchdog=$!
  wait $job
  rc=$? elapsed=$(( $(date +%s) - start ))
  kill $watchdog 2>/dev/null
  if [ "$rc" -eq 0 ] || [ "$elapsed" -gt 80 ] || ! grep -q "exited on signal 9" "$scratch/killed"; then
    fail "cnn_train with a rank killed: exit $rc after $elapsed s"; tail -5 "$scratch/killed"
  else
    echo "ok: cnn_train with a rank killed (exit $rc after $elapsed s)"
  fi
fi
expect_failure "torchrun-style launch on the CPU" 30 "runs over MPI: launch it with mpirun" \
  env RANK=0 WORLD_SIZE=2 LOCAL_RANK=0 MASTER_ADDR=127.0.0.1 MASTER_PORT=29533 "$cnn_train" "$config" $short

# 5. The same global batch on 1 and on 2 ranks: the same accuracy band.
if [ -d "$fashion" ]; then
  common="--set train.max_steps=300 --set train.epochs=1 --set schedule.warmup_epochs=0.1 --set run.dir=$scratch/runs --set log.level=quiet"
  top1() { sed -n 's/.*best val top-1 \([0-9.]*\)%.*/\1/p' "$1" | tail -1; }
  start=$(date +%s)
  OMP_NUM_THREADS=2 "$cnn_train" "$config" $common --set data.batch_size=128 --set run.name=one >"$scratch/one" 2>&1 || fail "1-rank run"
  one_seconds=$(( $(date +%s) - start ))
  start=$(date +%s)
  $launch -np 2 "$cnn_train" "$config" $common --set data.batch_size=64 --set train.threads=1 --set run.name=two >"$scratch/two" 2>&1 ||
    fail "2-rank run"
  two_seconds=$(( $(date +%s) - start ))
  one=$(top1 "$scratch/one") two=$(top1 "$scratch/two")
  echo "Fashion-MNIST, 300 steps of a global batch of 128: 1 rank ${one:-?}% in $one_seconds s, 2 ranks ${two:-?}% in $two_seconds s"
  if [ -z "$one" ] || [ -z "$two" ]; then
    fail "Fashion-MNIST: no accuracy in the output"; tail -5 "$scratch/one" "$scratch/two"
  elif ! awk -v a="$one" -v b="$two" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(a > 80 && b > 80 && d < 2.5) }'; then
    fail "Fashion-MNIST: accuracies $one% and $two% are not both above 80% and within 2.5 points"
  fi
  # Rank 0 alone wrote the run folder.
  [ "$(ls "$scratch/runs" | grep -c two)" -eq 1 ] || fail "the 2-rank run made $(ls "$scratch/runs" | grep -c two) run folders"
else
  echo "skipped: Fashion-MNIST comparison ($fashion is missing)"
fi

[ "$failures" -eq 0 ] && echo "all passed" || { echo "$failures failed"; exit 1; }
