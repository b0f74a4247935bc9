#!/usr/bin/env bash
# Runs each libFuzzer target (tests/fuzz) for a bounded time, two at a time,
# starting from its seed corpus in tests/fuzz/corpus/ (copied: the repo's
# corpus is not changed). A crash, leak, timeout or sanitizer report fails
# the run; the input that caused it is left in build-asan/fuzz/<target>/.
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 45)
set -euo pipefail
cd "$(dirname "$0")/.."
seconds="${1:-45}"
if [ ! -x build-asan/tests/fuzz/fuzz_config ]; then bash scripts/sanitize.sh; fi
cmake --build build-asan -j"$(nproc)" --target fuzz_config fuzz_request fuzz_shim_protocol fuzz_classifier
export ASAN_OPTIONS="detect_leaks=1:allocator_may_return_null=1"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitizer/lsan.supp:print_suppressions=0"
run() {
  local target="$1" work="build-asan/fuzz/$1"
  rm -rf "$work" && mkdir -p "$work/corpus"
  cp tests/fuzz/corpus/"$target"/* "$work/corpus/"
  if "build-asan/tests/fuzz/$target" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
      -max_len=65536 -artifact_prefix="$work/" -print_final_stats=1 "$work/corpus" >"$work/log" 2>&1; then
    echo "fuzz: $target: $(grep -m1 -o 'stat::number_of_executed_units: [0-9]*' "$work/log" | awk '{print $2}') runs, no crash"
  else
    echo "fuzz: $target FAILED (see $work/log):" >&2
    tail -40 "$work/log" >&2
    return 1
  fi
}
status=0
for pair in "fuzz_config fuzz_request" "fuzz_shim_protocol fuzz_classifier"; do
  pids=()
  for target in $pair; do run "$target" & pids+=($!); done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
done
exit $status
