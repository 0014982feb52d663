#!/bin/sh
# Run as root inside the full session image once its packages are installed (by
# scripts/runtime-image.sh --full in a chroot, by the Dockerfile in a RUN): byte-compiles the
# stack, configures matplotlib and builds the font caches, so that no session does.
#   finish.sh DIR   (DIR holds matplotlibrc and dockgate_mplcache.py)
set -eu
dir=$1
# Every module compiled now: on the read-only root a missing .pyc could not even be cached,
# every start would compile again. Debian's py3compile ran at install; compileall catches
# what it skipped (its status counts files that are not Python 3, so it is not checked).
python3 -m compileall -q -j0 /usr/lib/python3/dist-packages /usr/lib/python3.11 >/dev/null 2>&1 || true
# Debian's /etc/matplotlibrc sets some of these keys: ours replace them (a key given twice
# warns on stderr in every cell that imports matplotlib).
sed -i -E 's/^[[:space:]]*(backend|font\.family|font\.sans-serif|axes\.unicode_minus)[[:space:]]*:/#&/' /etc/matplotlibrc
cat "$dir/matplotlibrc" >>/etc/matplotlibrc
fc-cache -s
# matplotlib's font list, built as the session user (the cache must be its own to read),
# kept root's; dockgate_mplcache copies it into each session's fresh home.
mkdir -p /usr/share/dockgate/matplotlib
chown 1000:1000 /usr/share/dockgate/matplotlib
setpriv --reuid=1000 --regid=1000 --clear-groups env HOME=/nonexistent MPLBACKEND=Agg \
  MPLCONFIGDIR=/usr/share/dockgate/matplotlib \
  python3 -c 'import matplotlib.font_manager as f; f.fontManager.findfont("Noto Sans CJK JP", fallback_to_default=False)'
chown -R 0:0 /usr/share/dockgate/matplotlib
ls /usr/share/dockgate/matplotlib/fontlist-v*.json >/dev/null
site=/usr/lib/python3/dist-packages
install -m 0644 "$dir/dockgate_mplcache.py" "$site/dockgate_mplcache.py"
echo 'import dockgate_mplcache' >"$site/dockgate_mplcache.pth"
python3 -m py_compile "$site/dockgate_mplcache.py"
