#!/usr/bin/env bash
# Installs every Debian 12 package dockgate needs to build and test.
# Nothing is downloaded from anywhere but Debian's package archive.
set -euo pipefail
export DEBIAN_FRONTEND=noninteractive
pkgs=(
  build-essential cmake ninja-build ccache pkg-config git
  libboost1.81-dev libsimdjson-dev libssl-dev libarchive-dev libspdlog-dev libfmt-dev
  catch2 libbenchmark-dev clang libclang-rt-14-dev
  docker.io docker-registry busybox-static iproute2 procps curl jq python3 python3-dev
  openssl fuse3 bindfs s3fs util-linux debootstrap python3-docker python3-yaml python3-jsonschema docker-compose
  file systemd crun runsc squid-openssl iptables clang-format universal-ctags
)
missing=()
for p in "${pkgs[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
done
if ((${#missing[@]})); then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# runsc is gVisor (Debian's package; there is none named gvisor): scripts/engine.sh registers
# it on the tests' private engine beside runc and crun, and a sidecar may offer it
# (SANDBOX_RUNTIMES). Installing it changes no daemon: a host's dockerd learns of it only
# from its own daemon.json.
# squid is SANDBOX_NETWORK=allowlist's egress proxy, run by scripts/egress-proxy.sh with a
# configuration of its own; squid-openssl, not the GnuTLS `squid` it replaces (apt removes
# that one: they conflict), because only it can peek at a tunnel's TLS SNI (SslBump). The
# Debian service its postinst starts (on every address, with Debian's configuration) is
# stopped and disabled where it was just installed.
if [[ " ${missing[*]:-} " == *" squid-openssl "* ]]; then
  if [ -d /run/systemd/system ]; then systemctl disable --now squid.service >/dev/null 2>&1 || true
  else service squid stop >/dev/null 2>&1 || true; fi
fi
# s3rver (tests) comes from the npm registry: Node.js and npm from Debian unless the
# machine already has them (a newer Node.js from another source is kept as it is).
if ! command -v npm >/dev/null 2>&1; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends nodejs npm
fi
