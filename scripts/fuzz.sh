#!/usr/bin/env bash
# One clang build (build-fuzz/, RECALL_FUZZ=ON) instrumented for libFuzzer and sanitized with
# AddressSanitizer and UndefinedBehaviorSanitizer; then each fuzzer runs for FUZZ_SECONDS (default
# 45, as many side by side as there are cores) from the seeds in fuzz/corpus/<target> (and models/,
# train/ for the config), and the fast tests run sanitized.
# Then a second clang build (build-tsan/, RECALL_TSAN=ON) runs the tests of the threaded code under
# ThreadSanitizer.
# Usage: scripts/fuzz.sh [--no-tests] [--no-fuzz] [--no-races]
set -euo pipefail
cd "$(dirname "$0")/.."
run_tests=1 run_fuzz=1 run_races=1
for a in "$@"; do
  case "$a" in
    --no-tests) run_tests=0 ;;
    --no-fuzz) run_fuzz=0 ;;
    --no-races) run_races=0 ;;
    *) echo "fuzz.sh: unknown argument $a" >&2; exit 2 ;;
  esac
done
scripts/setup_fuzz.sh
t0=$(date +%s)
# -O1: the usual level for sanitized code; it compiles much faster than -O3. No precompiled header
# in clang's builds: clang writes the checkout's absolute paths into it, so every file compiled with
# it missed the compiler cache in a fresh clone (79 of 127 compiles, 416 s of a CI run); without it
# a fresh clone hits for every file it did not change (a cold build takes longer: 552 s, not about
# 350).
no_pch=-DCMAKE_DISABLE_PRECOMPILE_HEADERS=ON
cmake -S . -B build-fuzz -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 "$no_pch" \
  -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DRECALL_FUZZ=ON >/dev/null
# The libraries, the test programs (and so the binary they run) and the fuzzers; no benchmarks.
cmake --build build-fuzz -j"$(nproc)" --target fuzz_config fuzz_checkpoint fuzz_safetensors fuzz_pickle fuzz_input \
  fuzz_foreign_config \
  recall_tests
echo "fuzz.sh: sanitized build took $(($(date +%s) - t0)) s"

# Torch's allocations that live until exit are not leaks worth failing on.
export ASAN_OPTIONS=detect_leaks=0:abort_on_error=0
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# One fuzzer: its corpus grows in build-fuzz/corpus/<target>, its log in build-fuzz/<target>.log.
fuzz_one() {
  local target=$1 secs=$2 corpus=build-fuzz/corpus/$1 t1
  local seeds=(fuzz/corpus/$target)
  [ "$target" = fuzz_config ] && seeds+=(models train)  # the shapes and recipes
  mkdir -p "$corpus"
  t1=$(date +%s)
  # libFuzzer prints its executions in its last lines ("Done N runs in S second(s)").
  if ! build-fuzz/$target -max_total_time="$secs" -max_len=4096 -timeout=10 -rss_limit_mb=4096 \
    -print_final_stats=1 "$corpus" "${seeds[@]}" 2>build-fuzz/$target.log; then
    tail -n 60 build-fuzz/$target.log
    echo "fuzz.sh: $target FAILED" >&2
    return 1
  fi
  echo "fuzz.sh: $target: $(grep -E '^Done [0-9]+ runs' build-fuzz/$target.log) ($(($(date +%s) - t1)) s," \
    "$(grep -E 'stat::number_of_executed_units' build-fuzz/$target.log | awk '{print $2}') inputs," \
    "corpus $(ls "$corpus" | wc -l) files)"
}
if ((run_fuzz)); then
  secs=${FUZZ_SECONDS:-45}
  t1=$(date +%s)
  # Each fuzzer is one thread: as many side by side as there are cores.
  running=()
  for target in fuzz_config fuzz_checkpoint fuzz_safetensors fuzz_pickle fuzz_input fuzz_foreign_config; do
    fuzz_one "$target" "$secs" &
    running+=($!)
    if ((${#running[@]} >= $(nproc))); then
      wait "${running[0]}" || exit 1
      running=("${running[@]:1}")
    fi
  done
  for pid in "${running[@]}"; do wait "$pid" || exit 1; done
  echo "fuzz.sh: the fuzzers took $(($(date +%s) - t1)) s"
fi
if ((run_tests)); then
  t2=$(date +%s)
  # The fast tests, sanitized, where their code is recall's own handling of memory or of input
  # (the readers, kernels, probe, trainer, checkpoints, every command's arguments). Not: the
  # reference-kernel repeats (the same code as the others), the kill-and-resume runs (hundreds of
  # restarts of the binary), the experiments' dozens of training runs (the trainer they drive is
  # sanitized in TrainRuns, the sweep engine and its resume in Sweep; 5 to 7x slower sanitized:
  # 200 s each), the analyses that are torch's operations over a restored model (Extrapolate,
  # IsrForecast, InspectModel, Fit, ExtrapolateRuns: 220 s of the pass, their readers and restore
  # sanitized in Checkpoint and Cli), the timings (BenchTrain), nor the tests whose time is a
  # Python's (labels python and transformers: the readers they drive are fuzzed above and tested
  # sanitized in Import.*). Two tests that train until a model learns skip themselves in this build
  # for the same reason (tests/sanitizer_test_util.h).
  ctest --test-dir build-fuzz --output-on-failure -j"$(nproc)" -LE 'slow|python|transformers' \
    -E 'reference_kernels|CrashSafety|FactsExperiment|^Experiments$|^(Extrapolate|IsrForecast|InspectModel|Fit|ExtrapolateRuns|SweepCli|BenchTrain)$'
  echo "fuzz.sh: sanitized tests took $(($(date +%s) - t2)) s"
fi
if ((run_races)); then
  t3=$(date +%s)
  cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_COMPILER=clang++-14 "$no_pch" \
    -DCMAKE_CXX_FLAGS_RELEASE="-O1 -DNDEBUG" -DRECALL_TSAN=ON >/dev/null
  cmake --build build-tsan -j"$(nproc)" --target recall_core_tests recall_analysis_tests recall_train_tests
  echo "fuzz.sh: ThreadSanitizer build took $(($(date +%s) - t3)) s"
  t4=$(date +%s)
  # The threaded code and the tests that drive it from several threads: the claim pool (Threads),
  # the probe's task queue and its ring of blocks, turned twice at 1, 2, 3 and more threads than
  # cores, and its fused kernel; the data-parallel workers and their gradient sums; two processes
  # whose gradient buckets are all-reduced on c10d's threads while autograd runs, stopped by a
  # signal (the signal thread) into a checkpoint and resumed. A race report fails the test program.
  # LibTorch and its OpenMP are not instrumented, so the detector cannot see their synchronisation:
  # what their code does through intercepted calls (memcpy, allocation) is left out, as on macOS by
  # default. A race planted in the claim pool's items is reported with this setting.
  # scripts/tsan.supp names the one race of LibTorch's own (inlined) code that the tests meet.
  export TSAN_OPTIONS=halt_on_error=1:exitcode=66:second_deadlock_stack=1:ignore_noninstrumented_modules=1:suppressions=$PWD/scripts/tsan.supp
  build-tsan/recall_core_tests --gtest_filter='Threads.*'
  build-tsan/recall_analysis_tests \
    --gtest_filter='Probe.SameJson*:ProbeKernels.FusedProbeMatchesTorchOps'
  build-tsan/recall_train_tests --gtest_filter='DataParallel.*:DistributedRun.*:Checkpoint.*'
  echo "fuzz.sh: tests under ThreadSanitizer took $(($(date +%s) - t4)) s"
fi
