# dockgate-sidecar's cell runner: started once per session inside the session container
# (`python3 -I -c <this> dockgate-runner`, one hijacked exec through the gate), it runs
# each command the sidecar sends as a fresh process, as `docker exec` would, and answers
# over the same stream. It holds no policy: the commands (the cell's `timeout ... python3`,
# `cat` of an artifact) are the sidecar's, byte for byte those of its plain exec path; the
# kill sweep, the OOM count and the outputs listing are that path's scripts done here,
# step for step.
#
# Invariants it keeps:
# - Its protocol fds are private: fds 0, 1 and 2 become /dev/null, the request and answer
#   pipes move to non-inheritable fds, and every child gets its own pipes with
#   close_fds, so user code never holds the answer stream.
# - It is not dumpable (prctl PR_SET_DUMPABLE 0), first thing: /proc/<pid>/fd,
#   /proc/<pid>/mem and ptrace of it need CAP_SYS_PTRACE, which the session's user lacks;
#   a cell cannot reach its pipes through /proc either. If that cannot be set, it exits
#   and the sidecar uses plain execs. Before that line no process of the session user
#   is alive in the container: a runner starts in a new container, or after the sidecar's
#   plain kill sweep (session_containers.cpp).
# - A cell can still signal it (same uid): stopped or killed, it answers nothing more, and
#   the sidecar gives it up and starts another; it never answers for a cell it did not run.
#   A cell can also lower its limits or its scheduling (same uid, no trace needed), which
#   every later cell would inherit: after each cell the runner compares them with those it
#   started with and ends if they differ.
# - The sidecar trusts none of this: it bounds every frame and stops using the runner
#   at the first thing it does not expect.
#
# The fork server (docs/design.md, "Cell walls"): after its hello the runner imports
# WARM_MODULES (those the image has; the rest skipped) and captures, once, the environment
# a plain cell gets (`sh -c 'exec timeout ... env -0'`: the shell's PWD, its order). A cell
# sent with its timeout is then a fork, not an exec of python3, in the plain path's shape:
# the runner forks a stand-in for `timeout` (a session of its own, the cell's pipes on 0-2,
# every other fd closed, TERM to its group at T then CONT, KILL 2 s later, 124 / 137 /
# the cell's status as GNU timeout exits), which forks the cell: signals, mask and
# dumpability reset to a fresh interpreter's, the captured environment, argv, sys.path
# (script directory, user site) as `python3 <cell>` builds them, a fresh `__main__`, and
# the code run as it. So:
# - The runner never runs user code: only the grandchild does, after every fd but its own
#   pipes is closed. What it inherits is a copy of the runner's memory (its own to read:
#   nothing in it is a secret) and its PID, which it may signal as any cell may (above).
# - No state passes from cell to cell: each starts from the warm, unchanged copy; what a
#   cell sets or patches lives and dies in its own process.
# - A runner whose environment holds PYTHON* variables (which -I ignores, and a fork could
#   not honour as `python3` would) or that cannot fork runs argv as before.
#
# Requests (stdin): u32 length, then u8 op, u32 output cap (per stream), u32 count of
# lists, each list u32 count of items, each item u32 length and bytes.
#   op R, lists [argv, [stdin]]: run argv (`cat -- <artifact>`).
#   op C, lists [argv, [code], [cell, before file, oom file, outputs dir], sweep argv]:
#     a cell, as the sidecar's plain path runs it in two execs: the OOM-kill count and
#     the outputs listing recorded (also to the two files, for a plain clean-up should
#     this runner fail), the code written to `cell`, argv (`timeout ... python3 cell`)
#     run; then the kill sweep, the files removed, the count and listing taken again.
#     The sweep is the runner's own (kill_sweep(): the sidecar's kill_cell_processes,
#     step for step, without a shell to start) when the sweep list is empty, as the
#     sidecar sends it; otherwise that command is run (the unit tests' harmless stand-in).
# Answers (stdout): u8 kind, u32 length, payload; kinds H (hello: "dockgate-runner 2 <PID>",
# its PID in the container, which the sidecar looks at when it stops answering), S (started), O/E
# (stdout/stderr bytes), X ("<exit code> <stdout dropped> <stderr dropped>"), then for a
# cell L (the clean-up's listing, in pieces) and D (done).
import ctypes
import sys

# Not dumpable before anything else is imported or read (see the invariants above).
if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit(3)

import os  # noqa: E402
import resource  # noqa: E402
import selectors  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402

CHUNK = 65536

# What the warm interpreter imports (what is absent from the image is skipped):
# matplotlib.pyplot only where the environment names the Agg backend.
WARM_MODULES = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot")


# ioprio_get(IOPRIO_WHO_PROCESS, 0): the syscall's number on the two architectures the
# images are built for (x86-64, arm64); None elsewhere (not compared).
_IOPRIO_GET = {"x86_64": 252, "aarch64": 31}.get(os.uname().machine)


def io_priority():
    if _IOPRIO_GET is None:
        return None
    return ctypes.CDLL(None, use_errno=True).syscall(_IOPRIO_GET, 1, 0)


# What a process of the same uid may change in this one without being able to trace it
# (prlimit(2), setpriority(2), ioprio_set(2), sched_setaffinity(2), sched_setscheduler(2)
# check only the uid) and what every later cell would inherit from it: its limits and its
# scheduling.
def inherited_state():
    state = []
    for name in sorted(n for n in dir(resource) if n.startswith("RLIMIT_")):
        try:
            state.append((name, resource.getrlimit(getattr(resource, name))))
        except (ValueError, OSError):
            pass
    state.append(("nice", os.getpriority(os.PRIO_PROCESS, 0)))
    state.append(("ioprio", io_priority()))
    state.append(("affinity", sorted(os.sched_getaffinity(0))))
    state.append(("policy", os.sched_getscheduler(0)))
    return state


def main():
    started_with = inherited_state()
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

    send(b"H", b"dockgate-runner 2 %d" % os.getpid())
    warm = warm_up()
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

        op = take(1)
        (cap,) = struct.unpack(">I", take(4))
        lists = []
        for _ in range(struct.unpack(">I", take(4))[0]):
            lists.append([take(struct.unpack(">I", take(4))[0]) for _ in range(struct.unpack(">I", take(4))[0])])
        if op == b"R" and len(lists) == 2 and len(lists[1]) == 1:
            run(lists[0], lists[1][0], cap, send)
        elif op == b"C" and len(lists) in (4, 5) and len(lists[1]) == 1 and len(lists[2]) == 4:
            # A fifth list, [timeout ms]: the cell may be a fork of this warm interpreter.
            fork_ms = None
            if len(lists) == 5 and len(lists[4]) == 1 and lists[4][0].isdigit() and warm is not None:
                fork_ms = int(lists[4][0])
            cell(lists[0], lists[1][0], *lists[2], lists[3], cap, send, (warm, fork_ms) if fork_ms else None)
            # A cell changed what the next one would inherit from this runner: its answer
            # is whole; the runner ends (after its sweep, no process of the cell is left
            # to meet the next one) and the sidecar starts another.
            if inherited_state() != started_with:
                sys.exit(5)
        else:
            sys.exit(4)


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


# The sidecar's kill sweep (session_containers.cpp kill_cell_processes), done in this process: every
# process of the container but its init (PID 1), its `sleep` and this runner is killed.
# The `sleep` is the child of PID 1 with the earliest start time, judged only from a whole
# stat line (its first line, as `read` takes it: a cell may put a newline, `) ` or `*` in
# its comm): fields after the last ") " split on space, tab and newline, at least 20 of
# them, the parent "1", a decimal start time; the first of equals in the order of
# /proc/[0-9]* (bytes). Then up to 8 passes: all stopped at once (kill(-1) spares the
# caller and PID 1), each other PID killed, all continued; a pass that killed nothing
# ends it. The shell's own PID, which it spares, does not exist here; the runner (its
# parent, which it spares) is the caller.
def kill_sweep():
    def pids():
        return sorted(n for n in os.listdir(b"/proc") if n[:1].isdigit())

    keep, kept_start = None, None
    for pid in pids():
        try:
            with open(b"/proc/" + pid + b"/stat", "rb") as f:
                line = f.readline()
        except OSError:
            continue
        if not line.endswith(b"\n"):
            continue  # `read` fails at EOF without a newline
        rest = line[:-1]
        cut = rest.rfind(b") ")
        if cut >= 0:
            rest = rest[cut + 2:]
        fields = [f for f in rest.replace(b"\t", b" ").replace(b"\n", b" ").split(b" ") if f]
        if len(fields) < 20 or fields[1] != b"1" or not fields[19].isdigit():
            continue
        start = int(fields[19])
        if kept_start is None or start < kept_start:
            keep, kept_start = pid, start
    me = str(os.getpid()).encode()
    for _ in range(8):
        try:
            os.kill(-1, signal.SIGSTOP)
        except OSError:
            pass
        found = False
        for pid in pids():
            if pid in (b"1", me, keep):
                continue
            try:
                os.kill(int(pid), signal.SIGKILL)
                found = True
            except OSError:
                pass
        try:
            os.kill(-1, signal.SIGCONT)
        except OSError:
            pass
        if not found:
            break


def write_file(path, data):
    try:
        with open(path, "wb") as f:
            f.write(data)
        return None
    except OSError as e:
        return e


def remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def cell(argv, code, cell_path, before_file, oom_file, outputs, sweep, cap, send, fork=None):
    oom_before = oom_count()
    write_file(oom_file, oom_before + b"\n")
    before = listing(outputs)
    write_file(before_file, before)
    failed = write_file(cell_path, code)
    if failed is None:
        run(argv, b"", cap, send, None if fork is None else (fork[0], fork[1], cell_path, code))
    else:
        # The plain path's `cat > cell || exit 125`.
        send(b"S")
        send(b"E", ("cannot create %s: %s\n" % (os.fsdecode(cell_path), failed.strerror)).encode()[:cap])
        send(b"X", b"125 0 0")
    if sweep:
        subprocess.run(sweep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       close_fds=True, start_new_session=True)
    else:
        kill_sweep()
    remove(cell_path)
    oom_after = oom_count()
    after = listing(outputs)
    remove(before_file)
    remove(oom_file)
    text = oom_after + b"\n" + oom_before + b"\n" + before + b"\0" + after
    for i in range(0, len(text), CHUNK):
        send(b"L", text[i:i + CHUNK])
    send(b"D")


def run(argv, stdin_data, cap, send, fork=None):
    try:
        if fork is not None:
            proc = Forked(*fork)
        else:
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




def warm_up():
    """The fork server's state: the modules imported, the plain cell's environment. None
    (cells run as execs) if the environment has PYTHON* variables or cannot be captured."""
    try:
        got = subprocess.run(["sh", "-c", "exec timeout 10s env -0"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
                             start_new_session=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if got.returncode != 0:
        return None
    env = []
    for item in got.stdout.split(b"\0")[:-1]:
        key, eq, value = item.partition(b"=")
        if not eq or not key:
            return None
        env.append((key, value))
    if any(k.startswith(b"PYTHON") for k, _ in env) or any(k.startswith(b"PYTHON") for k in os.environb):
        return None
    agg = dict(env).get(b"MPLBACKEND", b"").lower() == b"agg"
    for name in WARM_MODULES:
        if name == "matplotlib.pyplot" and not agg:
            continue
        try:
            __import__(name)
        except Exception:  # absent or broken: a cell imports it itself, as before
            pass
    return env


# The process's command line (/proc/<pid>/cmdline, what ps and docker top show) made
# `words`: its argv area rewritten in place (a fork keeps the runner's, which would name
# the cell and its stand-in "dockgate-runner"), and its comm. The rest of the area NULs.
def set_title(words, comm):
    with open("/proc/self/stat", "rb") as f:
        fields = f.read().rsplit(b") ", 1)[1].split()
    start, end = int(fields[45]), int(fields[46])
    text = b"\0".join(words) + b"\0"
    if start and end > start:
        text = text[:end - start - 1]
        ctypes.memmove(start, text + b"\0" * (end - start - len(text)), end - start)
    ctypes.CDLL(None).prctl(15, comm, 0, 0, 0)  # PR_SET_NAME


# Python's own signal dispositions at startup; every other signal as exec leaves it.
def reset_signals():
    for sig in signal.valid_signals():
        if sig in (signal.SIGKILL, signal.SIGSTOP):
            continue
        try:
            if sig == signal.SIGINT:
                signal.signal(sig, signal.default_int_handler)
            elif sig in (signal.SIGPIPE, signal.SIGXFSZ):
                signal.signal(sig, signal.SIG_IGN)
            else:
                signal.signal(sig, signal.SIG_DFL)
        except (OSError, ValueError):
            pass
    signal.pthread_sigmask(signal.SIG_SETMASK, [])


class Forked:
    """A cell forked from the warm interpreter, shaped as `timeout ... python3 <cell>`:
    the child is the stand-in for timeout, its child the cell. Popen's surface for run()."""

    def __init__(self, env, ms, cell_path, code):
        fds = []
        try:
            for _ in range(3):
                fds.extend(os.pipe())  # (close-on-exec: nothing of them survives an exec)
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        if pid == 0:
            # Never back into the runner's loop: the stand-in ends with os._exit, the cell
            # only by the interpreter's exit (run_cell raises SystemExit to the top).
            try:
                set_title([b"timeout", b"--kill-after=2s", b"%d.%03ds" % divmod(ms, 1000), b"python3", cell_path],
                          b"timeout")
                is_cell = timeout_process(fds, ms)
                if is_cell:
                    set_title([b"python3", cell_path], b"python3")
                    prepare_cell(env, cell_path)
            except BaseException:
                os._exit(127)
            if not is_cell:
                os._exit(127)
            run_cell(cell_path, code)
        self.pid = pid
        os.close(fds[0])
        os.close(fds[3])
        os.close(fds[5])
        self.stdin = os.fdopen(fds[1], "wb")
        self.stdout = os.fdopen(fds[2], "rb")
        self.stderr = os.fdopen(fds[4], "rb")

    def wait(self):
        _, status = os.waitpid(self.pid, 0)
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def timeout_process(fds, ms):
    """The forked `timeout`: fds 0-2 the cell's pipes and nothing else, a session of its
    own; the cell forked, waited for, signalled as GNU timeout signals its group."""
    os.setsid()
    os.dup2(fds[0], 0)
    os.dup2(fds[3], 1)
    os.dup2(fds[5], 2)
    os.closerange(3, max(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096))
    for fd in (0, 1, 2):
        os.set_inheritable(fd, True)
    # Its own TERM (sent to the group) and CONT are for the cell.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    pid = os.fork()
    if pid == 0:
        return True  # the cell's process
    exited = os.pidfd_open(pid)
    import select
    poll = select.poll()
    poll.register(exited, select.POLLIN)
    timed_out = False
    if not poll.poll(ms):
        timed_out = True
        os.killpg(0, signal.SIGTERM)
        os.killpg(0, signal.SIGCONT)
        if not poll.poll(2000):
            os.killpg(0, signal.SIGKILL)  # this process too, as timeout: 137
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if timed_out and sig != signal.SIGKILL:
            os._exit(124)
        if timed_out:
            os._exit(128 + sig)
        # The cell's signal, raised on itself (timeout's way).
        signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(124 if timed_out else os.WEXITSTATUS(status))


def prepare_cell(env, cell_path):
    """The process state `python3 <cell>` starts with, in this fresh copy of the warm
    interpreter (which was never given user code)."""
    reset_signals()
    ctypes.CDLL(None).prctl(4, 1, 0, 0, 0)  # dumpable again, as after an exec
    os.environ.clear()
    for key, value in env:
        os.environb[key] = value
    import importlib.machinery
    import site
    import types
    # sys.path as python3 builds it: the script's directory first, then the user site
    # before the system's packages (its .pth files and usercustomize as site runs them).
    script_dir = os.path.dirname(os.fsdecode(cell_path))
    system = [p for p in sys.path if p in site.getsitepackages()]
    tail = sys.path[sys.path.index(system[0]):] if system else []
    del sys.path[len(sys.path) - len(tail):]
    sys.path.insert(0, script_dir)
    site.ENABLE_USER_SITE = True
    site.USER_BASE = None
    site.USER_SITE = None
    user_site = site.getusersitepackages()
    if os.path.isdir(user_site):
        site.addsitedir(user_site)
    sys.path.extend(p for p in tail if p not in sys.path)
    sys.argv = [os.fsdecode(cell_path)]
    sys.orig_argv = ["python3", sys.argv[0]]
    main = types.ModuleType("__main__")
    main.__loader__ = importlib.machinery.SourceFileLoader("__main__", sys.argv[0])
    main.__file__ = sys.argv[0]
    main.__cached__ = None
    main.__builtins__ = __builtins__
    main.__annotations__ = {}
    sys.modules["__main__"] = main
    random = sys.modules.get("numpy.random")
    if random is not None:
        random.seed()  # the global state reseeded, as a fresh import would
    if os.path.isdir(user_site):
        sys.modules.pop("usercustomize", None)


def run_cell(cell_path, code):
    """The cell run as `__main__`; its end (SystemExit) is the interpreter's own exit.
    Exceptions as the interpreter prints them: from the cell's frame on."""
    main = sys.modules["__main__"]
    try:
        if site_user_enabled():
            try:
                import usercustomize  # noqa: F401
            except Exception:  # as site does: the cell runs anyway
                pass
        compiled = compile(code, sys.argv[0], "exec", dont_inherit=True)
    except SyntaxError as e:
        sys.excepthook(type(e), e, None)
        raise SystemExit(1)
    try:
        exec(compiled, main.__dict__)
    except SystemExit:
        raise
    except BaseException as e:
        sys.excepthook(type(e), e, e.__traceback__.tb_next)
        raise SystemExit(130 if isinstance(e, KeyboardInterrupt) else 1)
    raise SystemExit(0)


def site_user_enabled():
    import site
    return site.USER_SITE is not None and os.path.isdir(site.USER_SITE)


main()
