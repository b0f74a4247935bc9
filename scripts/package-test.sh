#!/usr/bin/env bash
# The Debian package end to end (ctest "package: ..."; README "Install"):
# builds the .deb from BUILD_DIR with CPack, checks its contents and checks it
# with lintian (no errors), installs it with dpkg -i, runs `tpud --check` on
# the installed config, `tpuctl --version`, `systemd-analyze verify` on the
# installed unit and the installed completion and rules, installs it over
# itself with a locally edited conffile (kept), then purges it (logs and the
# state kept) and undoes everything it did to the machine.
#
# Needs root and dpkg; skips (exit 77, with a WARN line) without them, or when
# a tpud is already installed here, which it would replace. Where systemd
# runs, a policy-rc.d keeps the package from starting tpud.
# Usage: scripts/package-test.sh BUILD_DIR
set -euo pipefail
build="$(cd "${1:?usage: package-test.sh BUILD_DIR}" && pwd)"
repo="$(cd "$(dirname "$0")/.." && pwd)"
start=$SECONDS

skip() { echo "WARN: package test skipped: $*"; exit 77; }
fail() { echo "package test: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

[ "$(id -u)" = 0 ] || skip "needs root (dpkg -i)"
command -v dpkg >/dev/null && command -v dpkg-deb >/dev/null || skip "no dpkg on this machine"
command -v lintian >/dev/null || fail "lintian is missing (scripts/install-deps.sh installs it)"
if dpkg-query -W -f='${Status}' tpud 2>/dev/null | grep -q "ok installed"; then
  skip "the tpud package is installed on this machine; not replacing it"
fi
for path in /usr/bin/tpud /usr/bin/tpuctl /etc/tpud; do
  [ ! -e "$path" ] || skip "$path exists (a tpud installed by hand?); not replacing it"
done

work="$(mktemp -d /tmp/tpud-package-test.XXXXXX)"
had_group=0; getent group tpud >/dev/null && had_group=1
made_policy=0
made_dirs=()
cleanup() {
  if dpkg-query -W -f='${Status}' tpud 2>/dev/null | grep -q "installed"; then
    dpkg --purge tpud >/dev/null 2>&1 || true
  fi
  [ "$had_group" = 1 ] || ! getent group tpud >/dev/null || groupdel tpud || true
  [ "$made_policy" = 0 ] || rm -f /usr/sbin/policy-rc.d
  rm -f /var/lib/tpud/package-test-marker /var/log/tpud/package-test-marker
  for dir in "${made_dirs[@]}"; do rmdir "$dir" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT

version="$(sed -n 's/^set(CPACK_PACKAGE_VERSION "\(.*\)")$/\1/p' "$build/CPackConfig.cmake")"
[ -n "$version" ] || fail "no CPACK_PACKAGE_VERSION in $build/CPackConfig.cmake"
deb="$work/tpud_${version}_amd64.deb"

step "cpack -G DEB ($build)"
(cd "$build" && cpack -G DEB -B "$work" >"$work/cpack.log" 2>&1) || { cat "$work/cpack.log"; fail "cpack"; }
[ -f "$deb" ] || fail "cpack made no $(basename "$deb"): $(ls "$work")"

step "contents, conffiles, Depends"
dpkg-deb -c "$deb" | awk '{print $6}' >"$work/contents"
for path in ./usr/bin/tpud ./usr/bin/tpuctl ./usr/bin/tpud-shim ./lib/systemd/system/tpud.service \
    ./etc/tpud/tpud.yaml ./etc/tpud/jobs.d/ ./usr/share/man/man8/tpud.8.gz ./usr/share/man/man1/tpuctl.1.gz \
    ./usr/share/man/man5/tpud.yaml.5.gz ./usr/share/bash-completion/completions/tpuctl \
    ./usr/share/zsh/vendor-completions/_tpuctl ./usr/share/tpud/ops/prometheus/tpud-alerts.yml \
    ./usr/share/tpud/ops/grafana/tpud-dashboard.json ./usr/share/doc/tpud/copyright; do
  grep -qxF "$path" "$work/contents" || fail "the package has no $path"
done
! grep -q '^\./usr/etc/\|^\./usr/lib/systemd/' "$work/contents" || fail "files left under usr/etc or usr/lib/systemd"
dpkg-deb --ctrl-tarfile "$deb" | tar -xO ./conffiles >"$work/conffiles"
diff -u "$repo/packaging/debian/conffiles" "$work/conffiles" || fail "conffiles"
depends="$(dpkg-deb -f "$deb" Depends)"
echo "Depends: $depends"
for dep in adduser 'libgrpc++' libc6; do
  [[ "$depends" == *"$dep"* ]] || fail "Depends has no $dep (shlibdeps)"
done

step "lintian"
lintian --fail-on error --tag-display-limit 0 "$deb" 2>&1 | grep -v "running with root privileges" || true
lintian --fail-on error "$deb" >/dev/null 2>&1 || fail "lintian reports errors"

if [ -d /run/systemd/system ] && [ ! -e /usr/sbin/policy-rc.d ]; then
  # invoke-rc.d(8): exit 101, "action forbidden": the package does not start tpud here.
  printf '#!/bin/sh\nexit 101\n' >/usr/sbin/policy-rc.d && chmod 755 /usr/sbin/policy-rc.d && made_policy=1
fi

step "dpkg -i"
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" </dev/null
getent group tpud >/dev/null || fail "the postinst did not create group tpud"
grep -q '^socket_group: tpud' /etc/tpud/tpud.yaml || fail "the installed tpud.yaml has no socket_group: tpud"
out="$(tpud --config /etc/tpud/tpud.yaml --check)" || fail "tpud --check: $out"
echo "$out"
[ "$(tpud --version)" = "tpud $version" ] || fail "tpud --version: $(tpud --version)"
[ "$(tpuctl --version)" = "tpuctl $version" ] || fail "tpuctl --version: $(tpuctl --version)"
systemd-analyze verify /lib/systemd/system/tpud.service || fail "systemd-analyze verify"
man -w tpud tpuctl >/dev/null && man -w 5 tpud.yaml >/dev/null || fail "man -w finds no installed page"
completed="$(bash -c 'source /usr/share/bash-completion/completions/tpuctl && COMP_WORDS=(tpuctl st) &&
  COMP_CWORD=1 && _tpuctl && echo "${COMPREPLY[*]}"')"
[ "$completed" = "start stop status" ] || fail "installed bash completion offers '$completed' for 'tpuctl st'"
if command -v zsh >/dev/null; then zsh -n /usr/share/zsh/vendor-completions/_tpuctl || fail "zsh -n _tpuctl"; fi
if command -v promtool >/dev/null; then
  (cd /usr/share/tpud/ops/prometheus/tests && promtool test rules tpud-alerts.test.yml >/dev/null) ||
    fail "promtool test rules on the installed ops kit"
fi
if [ -d /run/systemd/system ]; then
  ! systemctl is-active --quiet tpud || fail "the package started tpud despite policy-rc.d"
fi

step "dpkg -i again, over a locally edited conffile"
echo "# edited locally by scripts/package-test.sh" >>/etc/tpud/tpud.yaml
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb" </dev/null
grep -qx "# edited locally by scripts/package-test.sh" /etc/tpud/tpud.yaml || fail "the local edit was lost"
! ls /etc/tpud/*.dpkg-* 2>/dev/null || fail "dpkg left .dpkg-* files: it asked about the conffile"
tpud --config /etc/tpud/tpud.yaml --check >/dev/null || fail "tpud --check after the upgrade"

step "dpkg --purge: job logs and the state stay"
for dir in /var/lib/tpud /var/log/tpud; do
  [ -d "$dir" ] || { mkdir -p "$dir" && made_dirs+=("$dir"); }
  echo "kept" >"$dir/package-test-marker"
done
dpkg --purge tpud
! dpkg-query -W -f='${Status}' tpud 2>/dev/null | grep -q "ok installed" || fail "tpud still installed"
[ ! -e /usr/bin/tpud ] && [ ! -e /etc/tpud/tpud.yaml ] || fail "purge left /usr/bin/tpud or /etc/tpud/tpud.yaml"
for dir in /var/lib/tpud /var/log/tpud; do
  [ -f "$dir/package-test-marker" ] || fail "purge deleted $dir/package-test-marker"
done
getent group tpud >/dev/null || fail "purge removed group tpud (files may still belong to it)"

echo "package test: PASS: $(basename "$deb") in $((SECONDS - start)) s"
