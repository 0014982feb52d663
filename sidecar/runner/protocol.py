# What the cell runner (runner.py, with forkserver.py) and the kernel's driver (kernel.py)
# share besides the kill sweep: the runner protocol's framing, a cell's capped output and
# exit frame, and what both report after a cell (the memory cgroup's OOM-kill count, the
# files under its outputs directory). sidecar/CMakeLists.txt puts this file and sweep.py,
# as one part, into both programs after their own part; it only defines (nothing runs at
# import) and uses their imports (os, stat, struct, sys).
#
# Requests (stdin): u32 length, then u8 op, u32 output cap, u32 list count, and per list
# u32 item count and items (u32 length, bytes). Answers (stdout): u8 kind, u32 length,
# payload.

# The most bytes read from a pipe at once, and the most payload in one O, E or L frame.
CHUNK = 65536


def write_all(fd, data):
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
        write_all(self.answers, kind + struct.pack(">I", len(payload)) + payload)

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


# A cell's stdout (O) and stderr (E) as the sidecar takes them: at most `cap` bytes of each
# sent, in frames of at most CHUNK; the rest only counted, the counts in the exit frame X
# ("<exit code> <stdout dropped> <stderr dropped>").
class Output:
    def __init__(self, send, cap):
        self.send, self.cap = send, cap
        self.kept = {b"O": 0, b"E": 0}
        self.dropped = {b"O": 0, b"E": 0}

    def add(self, kind, data):
        keep = data[:max(0, self.cap - self.kept[kind])]
        self.dropped[kind] += len(data) - len(keep)
        self.kept[kind] += len(keep)
        for i in range(0, len(keep), CHUNK):
            self.send(kind, keep[i:i + CHUNK])

    def exit(self, code):
        self.send(b"X", b"%d %d %d" % (code, self.dropped[b"O"], self.dropped[b"E"]))


# What a cell's clean-up reports, as the plain path's clean-up prints it: the OOM-kill
# count after the cell, the count before it, the outputs listing before it, a NUL, the
# listing after it (the count read first, then the listing, in that path's order).
def cell_report(oom_before, before, outputs):
    oom_after = oom_count()
    return oom_after + b"\n" + oom_before + b"\n" + before + b"\0" + listing(outputs)


# The end of a cell's answer after its X (and the kernel's K): the report in L frames of
# at most CHUNK, then D.
def send_report(send, report):
    for i in range(0, len(report), CHUNK):
        send(b"L", report[i:i + CHUNK])
    send(b"D")


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
