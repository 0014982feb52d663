# dockgate's session image: the session's home is a fresh tmpfs in every session, so
# matplotlib would build its font list (seconds with the CJK fonts) in the first cell that
# imports it. dockgate_mplcache.pth runs this at every interpreter start: once the cache
# directory exists it costs one stat; before, it copies the list built with the image.
# (scripts/runtime-image.sh, compose/runtime/Dockerfile; docs/sidecar.md, "The session image")
import os


def _seed(src="/usr/share/dockgate/matplotlib"):
    try:
        if os.environ.get("MPLCONFIGDIR"):
            return
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        dst = os.path.join(base, "matplotlib")
        if os.path.exists(dst):
            return
        os.makedirs(dst + ".tmp", exist_ok=True)
        for name in os.listdir(src):
            with open(os.path.join(src, name), "rb") as i, open(os.path.join(dst + ".tmp", name), "wb") as o:
                o.write(i.read())
        os.rename(dst + ".tmp", dst)
    except OSError:
        pass


_seed()
