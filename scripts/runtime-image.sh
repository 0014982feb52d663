#!/usr/bin/env bash
# The offline session images: Debian 12 made by debootstrap from Debian's archive, with the
# sandbox user (uid 1000) and /workspace/{uploads,outputs}, cached as a tarball between runs
# (built once per machine), imported into an engine with `docker import`.
#
#   scripts/runtime-image.sh DOCKER_HOST [TAG]          the small image: python3 only (tests)
#                                                       default tag dockgate/sandbox-runtime:test
#   scripts/runtime-image.sh DOCKER_HOST TAG --full     the data stack (what run.sh serves):
#                                                       compose/runtime/packages.txt, finished
#                                                       by compose/runtime/finish.sh (byte-
#                                                       compiled, matplotlib on Agg with Noto
#                                                       Sans CJK first, font caches built)
#
# compose/runtime/Dockerfile builds the same full image where a registry is reachable, from
# the same files (docs/sidecar.md, "The session image").
set -euo pipefail
host=${1:?usage: runtime-image.sh DOCKER_HOST [TAG] [--full]}
tag=${2:-dockgate/sandbox-runtime:test}
full=0
[[ ${3:-} == --full ]] && full=1
cache=${DOCKGATE_CACHE:-/var/cache/dockgate}
mirror=${DOCKGATE_DEBIAN_MIRROR:-http://deb.debian.org/debian}

if ((full)); then
  # The full image's packages, matplotlib configuration and finishing step are shared with
  # compose/runtime/Dockerfile: one list for both images.
  runtime_dir=$(cd "$(dirname "$0")/../compose/runtime" && pwd)
  mapfile -t full_stack < <(grep -v '^#' "$runtime_dir/packages.txt" | grep .)
  # The cache is named by a short hash of what makes it (the list's package lines, the
  # finishing step and its inputs): a change to any of them builds a new rootfs, never a
  # stale one; a change to the list's comments alone builds nothing.
  stack_hash=$({ printf '%s\n' "${full_stack[@]}"; cat "$runtime_dir"/{finish.sh,matplotlibrc,dockgate_mplcache.py}; } \
    | sha256sum | cut -c1-12)
  tarball=$cache/sandbox-runtime-full-rootfs.$stack_hash.tar.gz
  log=$cache/debootstrap-full.log
else
  tarball=$cache/sandbox-runtime-rootfs.v2.tar.gz
  log=$cache/debootstrap.log
fi

build_full() {  # build_full ROOT: the data stack into a minbase ROOT, then finish.sh in it
  local root=$1 apt=(/usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get -o APT::Sandbox::User=root)
  chmod 755 "$root"  # mktemp's 0700 would keep the session user out of its own chroot
  mount -t proc proc "$root/proc" || return 1
  trap 'umount "$root/proc" 2>/dev/null || true; rm -rf "$root"' EXIT
  chroot "$root" "${apt[@]}" update >>"$log" 2>&1 || return 1
  chroot "$root" "${apt[@]}" install -y --no-install-recommends "${full_stack[@]}" >>"$log" 2>&1 || return 1
  mkdir -p "$root/tmp/runtime" && cp "$runtime_dir"/{finish.sh,matplotlibrc,dockgate_mplcache.py} "$root/tmp/runtime/"
  chroot "$root" /bin/sh /tmp/runtime/finish.sh /tmp/runtime >>"$log" 2>&1 || return 1
  rm -rf "$root/tmp/runtime"
  umount "$root/proc"
}

if [[ ! -s $tarball ]]; then
  mkdir -p "$cache"
  root=$(mktemp -d "$cache/rootfs.XXXXXX")
  trap 'rm -rf "$root"' EXIT
  start=$SECONDS
  debootstrap --variant=minbase --include=python3 bookworm "$root" "$mirror" >"$log" 2>&1 || {
    tail -n 20 "$log" >&2
    exit 1
  }
  echo 'sandbox:x:1000:1000:sandbox:/home/sandbox:/bin/sh' >>"$root/etc/passwd"
  echo 'sandbox:x:1000:' >>"$root/etc/group"
  mkdir -p "$root/workspace/uploads" "$root/workspace/outputs" "$root/home/sandbox"
  chown -R 1000:1000 "$root/workspace" "$root/home/sandbox"
  if ((full)); then
    build_full "$root" || {
      tail -n 20 "$log" >&2
      exit 1
    }
  fi
  # tmpfs copy-up (dockerd 20.10) gives a tmpfs the mode of the image directory it covers.
  chmod 1777 "$root/workspace" "$root/home/sandbox"
  chmod 1777 "$root/tmp"
  rm -rf "$root/var/cache/apt/archives"/*.deb "$root/var/lib/apt/lists"/*
  tar -C "$root" -czf "$tarball.tmp" . && mv "$tarball.tmp" "$tarball"
  echo "runtime-image.sh: built $tarball in $((SECONDS - start)) s ($(du -h "$tarball" | cut -f1))" >&2
fi

changes=(--change 'USER 1000:1000' --change 'WORKDIR /workspace' --change 'CMD ["sleep","infinity"]'
  --change 'ENV PYTHONUNBUFFERED=1' --change 'ENV HOME=/home/sandbox'
  --change 'ENV PATH=/usr/local/bin:/usr/bin:/bin')
((full)) && changes+=(--change 'ENV MPLBACKEND=Agg')
docker -H "$host" import "${changes[@]}" "$tarball" "$tag" >/dev/null
