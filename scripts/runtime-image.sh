#!/usr/bin/env bash
# The offline session image for tests: a minimal Debian with python3 made by debootstrap
# from Debian's archive, with the sandbox user (uid 1000) and /workspace/{uploads,outputs},
# cached as a tarball between runs, imported into an engine with `docker import`.
#
#   scripts/runtime-image.sh DOCKER_HOST [TAG]   (default tag dockgate/sandbox-runtime:test)
#
# The production image is compose/runtime/Dockerfile (Python 3 slim with the data stack).
set -euo pipefail
host=${1:?usage: runtime-image.sh DOCKER_HOST [TAG]}
tag=${2:-dockgate/sandbox-runtime:test}
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}
tarball=$cache/sandbox-runtime-rootfs.v2.tar.gz
mirror=${DOCKGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if [[ ! -s $tarball ]]; then
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  debootstrap --variant=minbase --include=python3 bookworm "$root" "$mirror" >"$cache/debootstrap.log" 2>&1 || {
    tail -n 20 "$cache/debootstrap.log" >&2
    exit 1
  }
  echo 'sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh' >>"$root/etc/passwd"
  echo 'sandbox:x:1000:' >>"$root/etc/group"
  mkdir -p "$root/workspace/uploads" "$root/workspace/outputs" "$root/home/sandbox"
  chown -R 1000:1000 "$root/workspace" "$root/home/sandbox"
  # tmpfs copy-up (dockerd 20.10) gives a tmpfs the mode of the image directory it covers.
  chmod 1777 "$root/workspace" "$root/home/sandbox"
  chmod 1777 "$root/tmp"
  rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
  tar -C "$root" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
fi

docker -H "$host" import \
  --change 'USER 1000:1000' --change 'WORKDIR /workspace' --change 'CMD ["sleep","infinity"]' \
  --change 'ENV PYTHONUNBUFFERED=1' --change 'ENV HOME=/home/sandbox' \
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' \
  "$tarball" "$tag" >/dev/null
