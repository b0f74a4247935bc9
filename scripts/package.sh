#!/usr/bin/env bash
# Builds the Debian package, build-deb/tpud_<version>_amd64.deb (README
# "Install"): installs what building needs, configures ./build-deb without the
# tests and benchmarks, builds tpud, tpuctl, tpud-shim, the manuals and the
# completion scripts, and runs CPack's DEB generator (packaging/CMakeLists.txt).
# `cpack -G DEB` in any build directory makes the same package.
# Usage: scripts/package.sh   (BUILD_DIR=DIR to build elsewhere)
set -euo pipefail
cd "$(dirname "$0")/.."
build="${BUILD_DIR:-build-deb}"
bash scripts/install-deps.sh
launcher=()
if command -v ccache >/dev/null; then launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache); fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPUD_BUILD_TESTS=OFF -DTPUD_BUILD_BENCHMARKS=OFF \
  "${launcher[@]}" >/dev/null
cmake --build "$build" -j"$(nproc)"
(cd "$build" && cpack -G DEB -B "$PWD")
ls "$build"/tpud_*_amd64.deb
