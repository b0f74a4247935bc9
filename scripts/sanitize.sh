#!/usr/bin/env bash
# The whole test suite once more, built with clang under AddressSanitizer and
# UndefinedBehaviorSanitizer (and libFuzzer's coverage, so scripts/fuzz.sh can
# use the same build): ./build-asan. Any sanitizer report, from a test or
# from a tpud, tpuctl or tpud-shim a test started, fails the run.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build-asan -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DTPUD_SANITIZE=ON -DTPUD_FUZZ=ON -DTPUD_BUILD_BENCHMARKS=OFF >/dev/null
cmake --build build-asan -j"$(nproc)"
reports="$(pwd)/build-asan/sanitizer-reports"
rm -rf "$reports" && mkdir -p "$reports"
# log_path: every process writes its reports to a file of its own, so a
# report from a daemon a test started is not lost in that daemon's stderr.
export ASAN_OPTIONS="log_path=$reports/asan:detect_leaks=1:abort_on_error=0:allocator_may_return_null=1"
export UBSAN_OPTIONS="log_path=$reports/ubsan:print_stacktrace=1:halt_on_error=1"
export LSAN_OPTIONS="suppressions=$(pwd)/tests/sanitizer/lsan.supp:print_suppressions=0"
status=0
(cd build-asan && ctest --output-on-failure --timeout 900 -j"$(nproc)" "$@") || status=$?
if compgen -G "$reports/*" >/dev/null; then
  echo "sanitize: sanitizer reports:" >&2
  for f in "$reports"/*; do echo "== $f" >&2; head -60 "$f" >&2; done
  status=1
fi
[ $status -eq 0 ] && echo "sanitize: the suite passed under ASan+UBSan with no report"
exit $status
