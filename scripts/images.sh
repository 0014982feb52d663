#!/usr/bin/env bash
# Builds the dockgate/proxy, dockgate/sidecar, dockgate/egress and dockgate/fleet-balancer images
# (compose/*.Dockerfile) on an engine, offline: the debian:bookworm-slim base is made
# locally (scripts/base-image.sh).
#
#   scripts/images.sh DOCKER_HOST [BUILD_DIR]
#
# With BUILD_DIR (e.g. build/release), the images take the programs already compiled
# there (scripts/image-rootfs.sh), so nothing is compiled twice; without it, each
# Dockerfile's `source` stage compiles them (its apt-get reaches Debian's archive through
# the host's network). dockgate/egress (compose/egress.yml) takes squid-openssl, iptables
# and the rest from this host (scripts/egress-rootfs.sh), whichever way the others are built.
set -euo pipefail
cd "$(dirname "$0")/.."
host=${1:?usage: images.sh DOCKER_HOST [BUILD_DIR]}
build_dir=${2:-}
docker=/usr/bin/docker  # Debian's CLI: BuildKit without buildx
version=$(sed -n 's/^project(dockgate VERSION \([0-9.]*\).*/\1/p' CMakeLists.txt)
scripts/base-image.sh "$host"
export DOCKER_BUILDKIT=1
for role in proxy sidecar; do
  args=(--build-arg "VERSION=$version")
  if [[ -n $build_dir ]]; then
    staging=$(mktemp -d)
    trap 'rm -rf "$staging"' EXIT
    scripts/image-rootfs.sh "$staging/rootfs" "$build_dir/$role/dockgate-$role"
    if [[ $role == proxy ]]; then
      install -d -m 0755 "$staging/rootfs/etc/dockgate" && install -m 0644 compose/policies/*.json "$staging/rootfs/etc/dockgate/"
    fi
    tar -C "$staging" -c rootfs | "$docker" -H "$host" import - "dockgate/$role-binaries:local" >/dev/null
    rm -rf "$staging"
    args+=(--build-arg "BINARIES=dockgate/$role-binaries:local")
  else
    args+=(--network host)
  fi
  "$docker" -H "$host" build -q -f "compose/$role.Dockerfile" "${args[@]}" \
    -t "dockgate/$role:$version" -t "dockgate/$role:latest" . >/dev/null
  echo "images.sh: dockgate/$role:$version on $host"
done
# The egress proxy of compose/egress.yml: the host's Debian packages' files, nothing compiled.
if [[ $(dpkg-query -W -f='${Status}' squid-openssl 2>/dev/null) == "install ok installed" ]]; then
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' EXIT
  scripts/egress-rootfs.sh "$staging/rootfs"
  tar -C "$staging" -c rootfs | "$docker" -H "$host" import - dockgate/egress-files:local >/dev/null
  rm -rf "$staging"
  "$docker" -H "$host" build -q -f compose/egress.Dockerfile --build-arg "VERSION=$version" \
    -t "dockgate/egress:$version" -t dockgate/egress:latest . >/dev/null
  echo "images.sh: dockgate/egress:$version on $host"
else
  echo "images.sh: dockgate/egress skipped: squid-openssl is not installed here (scripts/install-deps.sh)"
fi
# The fleet's balancer of compose/fleet/docker-compose.yml: this host's haproxy (Debian's
# package, installed by scripts/fleet.sh or by hand), nothing compiled.
if command -v haproxy >/dev/null; then
  staging=$(mktemp -d)
  trap 'rm -rf "$staging"' EXIT
  scripts/image-rootfs.sh "$staging/rootfs" "$(command -v haproxy)"
  tar -C "$staging" -c rootfs | "$docker" -H "$host" import - dockgate/fleet-balancer-files:local >/dev/null
  rm -rf "$staging"
  "$docker" -H "$host" build -q -f compose/fleet/haproxy.Dockerfile --build-arg "VERSION=$version" \
    -t "dockgate/fleet-balancer:$version" -t dockgate/fleet-balancer:latest . >/dev/null
  echo "images.sh: dockgate/fleet-balancer:$version on $host"
else
  echo "images.sh: dockgate/fleet-balancer skipped: haproxy is not installed here (apt-get install haproxy)"
fi
