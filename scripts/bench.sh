#!/usr/bin/env bash
# The benchmarks: tpud against Debian's supervisord 4.2.5, side by side, as
# `name: value unit` lines (README "Benchmarks"). Arguments go to
# bench/run_bench.py (e.g. --only restart,logs, --quick). About 8 minutes on
# 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
had_supervisor=$(dpkg-query -W -f='${Status}' supervisor 2>/dev/null | grep -c "install ok installed" || true)
bash scripts/install-deps.sh supervisor
# Debian's package starts a system-wide supervisord; the benchmark runs its own.
if [ "$had_supervisor" = 0 ] && command -v systemctl >/dev/null && systemctl is-active -q supervisor 2>/dev/null; then
  systemctl disable --now supervisor
fi
bash scripts/build.sh tpud tpuctl tpud-shim bench_child tpud_bench_control tpud_bench_classifier \
  tpud_bench_state_store
/usr/bin/python3 bench/run_bench.py --build-dir build "$@"
# Gang restarts on a slice of tpuds with a real etcd (README "Gang restarts on a slice").
exec /usr/bin/python3 bench/gang_bench.py --build-dir build
