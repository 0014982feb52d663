#!/usr/bin/env bash
# The Debian package: built by cpack from the release programs, its files and control
# data checked, installed with dpkg (apt resolving its dependencies) into a Debian 12
# container on the private engine, and its systemd units verified by systemd-analyze
# (this machine has no systemd as PID 1: the units are checked, not started).
#
# Needs DOCKGATE_TEST_ENGINE (scripts/engine.sh) and the release programs
# (DOCKGATE_RELEASE_DIR, default build/release).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
engine=${DOCKGATE_TEST_ENGINE:?run under scripts/test.sh}
release=${DOCKGATE_RELEASE_DIR:-$root/build/release}
docker="/usr/bin/docker -H $engine"
failures=0
# shellcheck source=scripts/lib.sh
source "$root/scripts/lib.sh"  # check

version=$(sed -n 's/^project(dockgate VERSION \([0-9.]*\).*/\1/p' "$root/CMakeLists.txt")
deb=$release/dockgate_${version}_amd64.deb
rm -f "$deb"
(cd "$release" && cpack -G DEB >/dev/null)
check "cpack made dockgate_${version}_amd64.deb" test -s "$deb"

files=$(dpkg-deb -c "$deb" | awk '{print $6}')
for f in ./usr/bin/dockgate-proxy ./usr/bin/dockgate-sidecar ./usr/bin/dockgate-mount \
         ./etc/dockgate/sandbox.json ./etc/dockgate/docker-cli.json ./etc/dockgate/compose.json \
         ./etc/dockgate/read-only.json ./etc/dockgate/dashboard.json ./etc/dockgate/aivory.json \
         ./etc/default/dockgate-proxy ./etc/default/dockgate-sidecar \
         ./lib/systemd/system/dockgate-proxy.socket ./lib/systemd/system/dockgate-proxy.service \
         ./lib/systemd/system/dockgate-sidecar.service ./usr/share/doc/dockgate/README.md; do
  check "the package holds $f" grep -qx "$f" <<<"$files"
done
check "policies and settings are conffiles" \
  sh -c "dpkg-deb -I '$deb' conffiles | grep -qx /etc/dockgate/sandbox.json && dpkg-deb -I '$deb' conffiles | grep -qx /etc/default/dockgate-sidecar"
check "its dependencies name the shared libraries" sh -c "dpkg-deb -f '$deb' Depends | grep -q libarchive13"

# The units, checked against the package's own files and this machine's systemd units.
unitroot=$(mktemp -d)
trap 'rm -rf "$unitroot"' EXIT
dpkg-deb -x "$deb" "$unitroot"
cp -an /lib/systemd/system/. "$unitroot/lib/systemd/system/"
# What every Debian root has and the units name (ExecReload's kill).
mkdir -p "$unitroot/bin" && cp "$(readlink -f /bin/kill)" "$unitroot/bin/kill"
for unit in dockgate-proxy.socket dockgate-proxy.service dockgate-sidecar.service; do
  out=$(systemd-analyze verify --root="$unitroot" "/lib/systemd/system/$unit" 2>&1) && status=0 || status=$?
  [[ -n $out ]] && echo "$out"
  check "systemd-analyze verify $unit: clean" test "$status" -eq 0 -a -z "$out"
done
for key in NoNewPrivileges=yes ProtectSystem=strict ProtectHome=yes PrivateTmp=yes RestrictAddressFamilies=; do
  for unit in dockgate-proxy.service dockgate-sidecar.service; do
    check "$unit has $key" grep -q "^$key" "$unitroot/lib/systemd/system/$unit"
  done
done
check "only the proxy gets the docker group" bash -c \
  "grep -q '^SupplementaryGroups=docker$' $unitroot/lib/systemd/system/dockgate-proxy.service &&
   ! grep -q '^SupplementaryGroups=.*docker' $unitroot/lib/systemd/system/dockgate-sidecar.service"

# Installed with dpkg into a Debian 12 container (apt fetches the dependencies through
# the host's network), maintainer scripts and all.
"$root/scripts/base-image.sh" "$engine"
installed=$($docker run --rm --network host -v "$deb:/tmp/dockgate.deb:ro" debian:bookworm-slim sh -c '
  set -e
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends /tmp/dockgate.deb >/dev/null 2>&1 ||
    { echo "install failed"; exit 1; }
  dpkg -s dockgate | sed -n "s/^Status: /status: /p"
  dockgate-proxy check --policy /etc/dockgate/sandbox.json
  dockgate-sidecar healthcheck tcp://127.0.0.1:9 2>/dev/null || echo "sidecar runs"
  dockgate-mount --help >/dev/null 2>&1 && echo "mount runs" || echo "mount exit $?"
  id dockgate-proxy; id dockgate-sidecar
  stat -c "%a %G" /etc/default/dockgate-sidecar
  dpkg -r dockgate >/dev/null && echo removed && test ! -e /usr/bin/dockgate-proxy && echo "programs gone"
  test -e /etc/dockgate/sandbox.json && echo "conffiles kept until purge"
' 2>&1) || true
echo "$installed"
check "dpkg installed it" grep -q "status: install ok installed" <<<"$installed"
check "the installed gate reads its policies" grep -q "/etc/dockgate/sandbox.json: OK" <<<"$installed"
check "the installed sidecar runs" grep -q "sidecar runs" <<<"$installed"
check "the installed dockgate-mount runs" grep -q "mount runs" <<<"$installed"
check "the service users exist, the sidecar's in group dockgate" \
  bash -c "grep -q 'uid=.*(dockgate-proxy)' <<<'$installed' && grep -q 'dockgate-sidecar.*groups=.*(dockgate)' <<<'$installed'"
check "the sidecar's settings (its key) are not world-readable" grep -q "^640 dockgate-sidecar$" <<<"$installed"
check "dpkg -r removes the programs, keeps the conffiles" \
  bash -c "grep -q 'programs gone' <<<'$installed' && grep -q 'conffiles kept' <<<'$installed'"

if ((failures)); then echo "$failures check(s) failed"; exit 1; fi
echo "all package checks passed"
