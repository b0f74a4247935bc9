#!/usr/bin/env bash
# Installs what building, testing and the demo need, from Debian 12 packages,
# plus any packages named as arguments (scripts/bench.sh adds supervisor).
# Idempotent: installs only what is missing. Needs root (or sudo).
set -euo pipefail

PACKAGES=(
  build-essential cmake pkg-config
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler
  libboost-all-dev libspdlog-dev prometheus-cpp-dev libyaml-cpp-dev catch2
  libre2-dev libcli11-dev nlohmann-json3-dev libarchive-dev libcurl4-openssl-dev libsqlite3-dev libsystemd-dev
  python3 python3-torch python3-sklearn python3-grpcio
  prometheus curl procps
  etcd-server etcd-client
  zsh scdoc lintian elfutils
  clang libclang-rt-14-dev e2fsprogs util-linux mount ccache
  "$@"
)

missing=()
for pkg in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"
echo "install-deps: installing ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
