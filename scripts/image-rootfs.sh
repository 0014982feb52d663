#!/usr/bin/env bash
# The files of a dockgate image: the given programs under /usr/local/bin and every
# shared library they load, in the directory the build machine has it (resolved: Debian
# 12 merges /lib into /usr/lib), so that the runtime stage needs nothing but a Debian 12
# base.
#
#   scripts/image-rootfs.sh DEST PROGRAM...
set -euo pipefail
dest=${1:?usage: image-rootfs.sh DEST PROGRAM...}
shift
mkdir -p "$dest/usr/local/bin"
for program in "$@"; do
  install -m 0755 "$program" "$dest/usr/local/bin/"
  strip --strip-unneeded "$dest/usr/local/bin/$(basename "$program")" 2>/dev/null || true
  ldd "$program" | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | while read -r lib; do
    dir=$(readlink -f "$(dirname "$lib")")
    mkdir -p "$dest$dir"
    cp -L "$lib" "$dest$dir/$(basename "$lib")"
  done
done
