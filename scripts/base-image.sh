#!/usr/bin/env bash
# debian:bookworm-slim for the dockgate images, made offline: a minimal Debian 12 from
# Debian's archive (debootstrap --variant=minbase), cached as a tarball between runs and
# imported into an engine. Skipped when the engine already has the tag (a pulled one).
#
#   scripts/base-image.sh DOCKER_HOST [TAG]   (default tag debian:bookworm-slim)
set -euo pipefail
host=${1:?usage: base-image.sh DOCKER_HOST [TAG]}
tag=${2:-debian:bookworm-slim}
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}
tarball=$cache/bookworm-slim-rootfs.v1.tar.gz
mirror=${DOCKGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}
docker=/usr/bin/docker  # Debian's CLI, the one that speaks to Debian's engine

if "$docker" -H "$host" image inspect "$tag" >/dev/null 2>&1; then exit 0; fi
if [[ ! -s $tarball ]]; then
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase bookworm "$root" "$mirror" >"$cache/debootstrap-slim.log" 2>&1 || {
    tail -n 20 "$cache/debootstrap-slim.log" >&2
    exit 1
  }
  # As the official slim image: no documentation, no package lists, no apt cache.
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* "$root"/usr/share/man/*
  tar -C "$root" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
fi
"$docker" -H "$host" import --change 'CMD ["bash"]' "$tarball" "$tag" >/dev/null
echo "base-image.sh: $tag on $host"
