# What the cell runner (runner.py) and the kernel's driver (kernel.py) share besides the
# kill sweep: the runner protocol's framing and what both report after a cell (the files
# under its outputs directory, the memory cgroup's OOM-kill count). sidecar/CMakeLists.txt
# puts this file into both programs, after their own part; it only defines (nothing runs
# at import) and uses their imports (os, stat, struct, sys).
#
# Requests (stdin): u32 length, then u8 op, u32 output cap, u32 list count, and per list
# u32 item count and items (u32 length, bytes). Answers (stdout): u8 kind, u32 length,
# payload.


# The protocol's two pipes, made private: the process's fds 0 and 1 (the sidecar's request
# and answer pipes) move to non-inheritable dups and fds 0, 1 and 2 become /dev/null, so a
# child started later holds none of them.
class Channel:
    def __init__(self):
        self.requests = os.dup(0)
        self.answers = os.dup(1)
        null = os.open(os.devnull, os.O_RDWR)
        for fd in (0, 1, 2):
            os.dup2(null, fd)
        os.close(null)

    def send(self, kind, payload=b""):
        data = kind + struct.pack(">I", len(payload)) + payload
        while data:
            data = data[os.write(self.answers, data):]

    def read_exact(self, n):
        out = b""
        while len(out) < n:
            got = os.read(self.requests, n - len(out))
            if not got:
                sys.exit(0)  # the sidecar closed the stream
            out += got
        return out

    # The next request as (op, cap, lists). Exits 4 on one that does not parse.
    def request(self):
        (size,) = struct.unpack(">I", self.read_exact(4))
        body = memoryview(self.read_exact(size))
        pos = 0

        def take(n):
            nonlocal pos
            v = body[pos:pos + n]
            if len(v) != n:
                sys.exit(4)
            pos += n
            return bytes(v)

        def count():
            return struct.unpack(">I", take(4))[0]

        op = take(1)
        cap = count()
        lists = [[take(count()) for _ in range(count())] for _ in range(count())]
        return op, cap, lists


# The memory cgroup's OOM-kill count, as the sidecar's oom_count script reads it (cgroup v2
# memory.events, v1 memory.oom_control; the last "oom_kill" line wins; "0" if none).
def oom_count():
    count = b"0"
    for path in ("/sys/fs/cgroup/memory.events", "/sys/fs/cgroup/memory/memory.oom_control"):
        try:
            with open(path, "rb") as f:
                lines = f.read().split(b"\n")
        except OSError:
            continue
        for line in lines:
            parts = line.split(None, 1)
            if len(parts) == 2 and parts[0] == b"oom_kill":
                count = parts[1].strip()
    return count


# `find <top> -type f -printf '%p\0%T@\0%s\0'`, byte for byte: regular files, symlinks
# never followed (the top one neither), mtime as find prints it (seconds, nine digits of
# nanoseconds and a 0), errors skipped.
def listing(top):
    out = []

    def record(path, st):
        if stat.S_ISREG(st.st_mode):
            sec, ns = divmod(st.st_mtime_ns, 10**9)
            out.append(b"%s\0%d.%09d0\0%d\0" % (path, sec, ns, st.st_size))

    def walk(directory):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            return
        for e in entries:
            path = directory + b"/" + e.name
            try:
                st = os.lstat(path)
            except OSError:
                continue
            record(path, st)
            if stat.S_ISDIR(st.st_mode):
                walk(path)

    try:
        st = os.lstat(top)
    except OSError:
        return b""
    record(top, st)
    if stat.S_ISDIR(st.st_mode):
        walk(top)
    return b"".join(out)
