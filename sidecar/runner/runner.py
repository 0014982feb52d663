# dockgate-sidecar's cell runner: started once per session inside the session container
# (`python3 -I -c <this> dockgate-runner`, one hijacked exec through the gate), it runs
# each command the sidecar sends as a fresh process, as `docker exec` would, and answers
# over the same stream. It holds no policy: the commands (the cell's `timeout ... python3`,
# the kill sweep, the outputs listing) are the sidecar's, byte for byte those of its plain
# exec path.
#
# Invariants it keeps:
# - Its protocol fds are private: fds 0, 1 and 2 become /dev/null, the request and answer
#   pipes move to non-inheritable fds, and every child gets its own pipes with
#   close_fds, so user code never holds the answer stream.
# - It is not dumpable (prctl PR_SET_DUMPABLE 0): /proc/<pid>/fd, /proc/<pid>/mem and
#   ptrace of it need CAP_SYS_PTRACE, which the session's user lacks; a cell cannot
#   reach its pipes through /proc either. If that cannot be set, it exits and the
#   sidecar uses plain execs.
# - The sidecar trusts none of this: it bounds every frame and stops using the runner
#   at the first thing it does not expect.
#
# Requests (stdin): u32 length, then u32 argc, argc x (u32 length, bytes), u32 stdin
# length, stdin bytes, u32 output cap (per stream). Answers (stdout): u8 kind, u32 length, payload; kinds H (hello), S (started),
# O/E (stdout/stderr bytes), X ("<exit code> <stdout dropped> <stderr dropped>").
import ctypes
import os
import selectors
import struct
import subprocess
import sys

CHUNK = 65536


def main():
    if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
        sys.exit(3)
    requests = os.dup(0)
    answers = os.dup(1)
    null = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(null, fd)
    os.close(null)

    def send(kind, payload=b""):
        data = kind + struct.pack(">I", len(payload)) + payload
        while data:
            data = data[os.write(answers, data):]

    def read_exact(n):
        out = b""
        while len(out) < n:
            got = os.read(requests, n - len(out))
            if not got:
                sys.exit(0)  # the sidecar closed the stream
            out += got
        return out

    send(b"H", b"dockgate-runner 1")
    while True:
        (size,) = struct.unpack(">I", read_exact(4))
        body = memoryview(read_exact(size))
        pos = 0

        def take(n):
            nonlocal pos
            v = body[pos:pos + n]
            if len(v) != n:
                sys.exit(4)
            pos += n
            return bytes(v)

        (argc,) = struct.unpack(">I", take(4))
        argv = [take(struct.unpack(">I", take(4))[0]) for _ in range(argc)]
        stdin_data = take(struct.unpack(">I", take(4))[0])
        (cap,) = struct.unpack(">I", take(4))
        run(argv, stdin_data, cap, send)


def run(argv, stdin_data, cap, send):
    try:
        # A session of its own, as each docker exec's process has.
        proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                close_fds=True, start_new_session=True)
    except OSError:
        # docker exec answers 126/127 through the shell; without one, "cannot run" is 127.
        send(b"S")
        send(b"X", b"127 0 0")
        return
    send(b"S")
    out_fd, err_fd = proc.stdout.fileno(), proc.stderr.fileno()
    kept = {out_fd: 0, err_fd: 0}
    dropped = {out_fd: 0, err_fd: 0}
    kinds = {out_fd: b"O", err_fd: b"E"}
    sel = selectors.DefaultSelector()
    for fd in kinds:
        os.set_blocking(fd, False)
        sel.register(fd, selectors.EVENT_READ)
    stdin_fd = proc.stdin.fileno()
    os.set_blocking(stdin_fd, False)
    pending = memoryview(stdin_data)
    if pending:
        sel.register(stdin_fd, selectors.EVENT_WRITE)
    else:
        proc.stdin.close()
    # The process's exit ends the answer even while a child it left holds its pipes
    # (as docker exec ends when its process exits).
    exited = os.pidfd_open(proc.pid)
    sel.register(exited, selectors.EVENT_READ)

    def take_output(fd, data):
        room = max(0, cap - kept[fd])
        keep = data[:room]
        dropped[fd] += len(data) - len(keep)
        if not keep:
            return
        kept[fd] += len(keep)
        send(kinds[fd], keep)

    open_fds = set(kinds)
    done = False
    while open_fds and not done:
        for key, _ in sel.select():
            fd = key.fd
            if fd == exited:
                done = True
            elif fd == stdin_fd:
                try:
                    n = os.write(fd, pending[:CHUNK])
                    pending = pending[n:]
                except BlockingIOError:
                    continue
                except OSError:
                    pending = pending[:0]
                if not pending:
                    sel.unregister(fd)
                    proc.stdin.close()
            else:
                try:
                    data = os.read(fd, CHUNK)
                except BlockingIOError:
                    continue
                if data:
                    take_output(fd, data)
                else:
                    sel.unregister(fd)
                    open_fds.discard(fd)
    # What is already in the pipes still belongs to the answer; nothing after.
    for fd in list(open_fds):
        for _ in range(64):
            try:
                data = os.read(fd, CHUNK)
            except BlockingIOError:
                break
            if not data:
                break
            take_output(fd, data)
    sel.close()
    os.close(exited)
    if not proc.stdin.closed:
        try:
            proc.stdin.close()
        except OSError:
            pass
    code = proc.wait()
    proc.stdout.close()
    proc.stderr.close()
    if code < 0:
        code = 128 - code  # killed by a signal: 128 + n, as docker reports it
    send(b"X", b"%d %d %d" % (code, dropped[out_fd], dropped[err_fd]))


main()
