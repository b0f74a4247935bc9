#!/usr/bin/env bash
# The test command: installs dependencies, builds, runs every test through ctest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
bash scripts/build.sh
cd build
ctest --output-on-failure --timeout 600 -j"$(nproc)" "$@"
