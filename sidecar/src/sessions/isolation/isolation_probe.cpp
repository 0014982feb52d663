// The probe a new session container runs as the session user (isolation.hpp): the
// workspace's folders made (its arguments, as `mkdir -p` makes them: the runner's one
// request at a new container's start is this), the deny-path self-test, then what the
// container shows. Sent as `python3 -I -S -c <program> dockgate-probe <folders>`: both
// session images hold python3 (scripts/runtime-image.sh), and it needs nothing else (ctypes
// for socket(2), mount(2) and ptrace(2), which no shell tool of a minbase image offers).
// Its work is the function probe(folders, write): the cell runner, which is that same
// interpreter already started (python3 -I, as the session user, its imports done), runs
// it in its own process when asked this very command (runner.py probe_here), so that a
// pool miss pays no interpreter start for it; an exec runs the program.
//
// Each wall is tried for real and its outcome printed as the errno's name (or `allowed`):
// - root_write: mkdir(2) of a new name in `/`. On a read-only mount the kernel answers EROFS
//   before it looks at the directory's permission (filename_create: mnt_want_write first;
//   gVisor's VFS checks the mount before MayWrite too), so EROFS proves the file system, and
//   EACCES alone only proves the mode of `/`. `root.ro` besides: `ro` among the options of
//   the `/` mount (/proc/self/mounts) or statvfs's ST_RDONLY (gVisor's statvfs leaves
//   ST_RDONLY out of a read-only root, its mounts table says ro).
// - raw_inet, raw_packet: socket(2) of AF_INET/SOCK_RAW/ICMP and AF_PACKET/SOCK_RAW/ETH_P_ALL:
//   CAP_NET_RAW in the network namespace's user namespace, whatever the network.
// - mount: mount(2) of a tmpfs on `/` (it exists in every image; the target is looked up
//   before the permission is checked, so a missing one would answer ENOENT, not EPERM).
// - ptrace: PTRACE_ATTACH of PID 1 (docker-init, the keep-alive's uid): another uid, no
//   CAP_SYS_PTRACE, and the sandbox profile's seccomp refuses ptrace itself.
// Nothing it prints is trusted beyond parsing (it runs as the session user, before any cell).
#include "sessions/isolation/isolation.hpp"

namespace dockgate::sidecar {

namespace {

constexpr std::string_view probe_program = R"probe(import ctypes, errno, os, resource, sys
def probe(folders, W):
    for folder in folders:
        os.makedirs(folder, exist_ok=True)
    libc = ctypes.CDLL(None, use_errno=True)
    def fail():
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    def attempt(key, fn):
        try:
            fn()
        except OSError as e:
            W("deny.%s=%s\n" % (key, errno.errorcode.get(e.errno, "E%d" % e.errno)))
        except Exception:
            W("deny.%s=error\n" % key)
        else:
            W("deny.%s=allowed\n" % key)
    def root_write():
        p = "/.dockgate-probe-%d" % os.getpid()
        os.mkdir(p)
        os.rmdir(p)
    def raw(family, proto):
        def open_raw():
            fd = libc.socket(family, 3, proto)
            if fd < 0:
                fail()
            os.close(fd)
        return open_raw
    def mount():
        if libc.mount(b"tmpfs", b"/", b"tmpfs", ctypes.c_ulong(0), None) != 0:
            fail()
    def ptrace():
        libc.ptrace.restype = ctypes.c_long
        if libc.ptrace(ctypes.c_long(16), ctypes.c_long(1), None, None) != 0:
            fail()
        libc.ptrace(ctypes.c_long(17), ctypes.c_long(1), None, None)
    attempt("root_write", root_write)
    attempt("raw_inet", raw(2, 1))
    attempt("raw_packet", raw(17, int.from_bytes((3).to_bytes(2, "big"), sys.byteorder)))
    attempt("mount", mount)
    attempt("ptrace", ptrace)
    def first(*paths):
        for p in paths:
            try:
                with open(p) as f:
                    return " ".join(f.read().split())
            except OSError:
                pass
        return None
    def put(key, value):
        if value is not None:
            W("%s=%s\n" % (key, value))
    try:
        with open("/proc/self/status") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Uid", "Gid", "Groups", "CapPrm", "CapEff", "CapBnd", "CapAmb", "NoNewPrivs", "Seccomp", "Seccomp_filters"):
                    put("status." + k, " ".join(v.split()))
    except OSError:
        pass
    root = None
    try:
        with open("/proc/self/mounts") as f:
            for line in f:
                part = line.split()
                if len(part) >= 4 and part[1] == "/":
                    root = "ro" in part[3].split(",")
                if len(part) >= 4 and part[1] in ("/tmp", "/home/sandbox", "/workspace"):
                    st = os.statvfs(part[1])
                    put("mount." + part[1], "%s %d %s" % (part[2], st.f_blocks * st.f_frsize, part[3]))
    except OSError:
        pass
    try:
        put("root.ro", int(bool(root or os.statvfs("/").f_flag & 1)))
    except OSError:
        pass
    try:
        put("nofile", "%d %d" % resource.getrlimit(resource.RLIMIT_NOFILE))
    except OSError:
        pass
    put("memory", first("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"))
    put("pids", first("/sys/fs/cgroup/pids.max", "/sys/fs/cgroup/pids/pids.max"))
    cpu = first("/sys/fs/cgroup/cpu.max")
    if cpu is None:
        q, p = first("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"), first("/sys/fs/cgroup/cpu/cpu.cfs_period_us")
        cpu = None if q is None or p is None else q + " " + p
    put("cpu", cpu)
    try:
        put("net", ",".join(sorted(os.listdir("/sys/class/net"))))
    except OSError:
        pass
    try:
        put("kernel", os.uname().release)
    except OSError:
        pass
    W("end=1\n")
if __name__ == "__main__":
    probe(sys.argv[2:], sys.stdout.write)
)probe";

}  // namespace

std::vector<std::string> isolation_probe_command() {
  return {"python3", "-I", "-S", "-c", std::string(probe_program), "dockgate-probe"};
}

}  // namespace dockgate::sidecar
