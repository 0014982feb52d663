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
# The fork server (forkserver.py, appended to this file in the program the sidecar sends):
# after its hello the runner warms up on a thread of its own while it answers requests
# (cells run as execs until the warm-up has ended); a cell sent with its timeout is then a
# fork of it.
#
# Requests (stdin): u32 length, then u8 op, u32 output cap (per stream), u32 count of
# lists, each list u32 count of items, each item u32 length and bytes.
#   op R, lists [argv, [stdin]]: run argv (`cat -- <artifact>`); the isolation probe's
#     command is run in this process (probe_here).
#   op W, no lists: answered (S, then X "0 0 0", or "1 0 0" where the fork server is off)
#     once the warm-up has ended: the warm pool's wait for a warm runner.
#   op C, lists [argv, [code], [cell, before file, oom file, outputs dir], sweep argv,
#   optionally [timeout ms] or [timeout ms, pair after ms] (forkserver.py)]:
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
import sys

# The modules a fresh interpreter has before it runs a script (only builtins and its own
# start-up ones: nothing is read here), which a file of the session's cannot shadow.
STARTUP_MODULES = frozenset(sys.modules)

import ctypes  # noqa: E402

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
import time  # noqa: E402


def fd_wall_holds():
    """Whether the kernel keeps this non-dumpable process's /proc/PID/fd from a process of its
    own uid, which the invariants above rest on. Linux does; gVisor's runsc 20221219 does not
    (a cell could open the protocol pipes and answer in this process's name): then this
    exits as when PR_SET_DUMPABLE fails, and the sidecar runs plain execs. A child tries."""
    with open("/proc/self/status") as f:
        caps = [int(line.split()[1], 16) for line in f if line.startswith("CapEff:")]
    if caps and caps[0] & (1 << 19):  # CAP_SYS_PTRACE (never in a session): moot
        return True
    pid = os.fork()
    if pid == 0:
        try:
            os.listdir("/proc/%d/fd" % os.getppid())
            os._exit(1)
        except OSError:
            os._exit(0)
    return os.waitpid(pid, 0)[1] == 0


if not fd_wall_holds():
    sys.exit(3)

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


class ExitWatch:
    """A descriptor that becomes readable when the child `pid` exits, for a poll beside its
    pipes: its pidfd (Linux 5.3); where pidfd_open is not there (gVisor's runsc 20221219
    answers ENOSYS), the read end of a pipe that SIGCHLD writes to (signal.set_wakeup_fd,
    main thread only). Readable says only "look": exited() asks waitid with WNOWAIT, so the
    child stays for its owner to reap, and a SIGCHLD of another child is no exit."""

    def __init__(self, pid):
        self.pid = pid
        self.pipe = None
        try:
            self.fd = os.pidfd_open(pid)
            return
        except OSError:
            pass
        self.pipe = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self.fd = self.pipe[0]
        self.handler = signal.signal(signal.SIGCHLD, lambda *_: None)
        self.wakeup = signal.set_wakeup_fd(self.pipe[1], warn_on_full_buffer=False)
        if self.exited():  # it exited before the handler: its SIGCHLD is gone
            os.write(self.pipe[1], b"x")

    def exited(self):
        if self.pipe is not None:
            try:
                while os.read(self.fd, 512):
                    pass
            except BlockingIOError:
                pass
        try:
            return os.waitid(os.P_PID, self.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
        except ChildProcessError:
            return True

    def close(self):
        if self.pipe is None:
            os.close(self.fd)
            return
        signal.set_wakeup_fd(self.wakeup)
        signal.signal(signal.SIGCHLD, self.handler)
        os.close(self.pipe[0])
        os.close(self.pipe[1])


def main():
    started_with = inherited_state()
    channel = Channel()  # protocol.py
    send = channel.send
    send(b"H", b"dockgate-runner 2 %d" % os.getpid())
    # The warm-up goes on beside the requests (forkserver.py WarmUp): until it has ended
    # `warm` is None and cells run as execs; the request W waits for it.
    warming = WarmUp()
    warm = ready = None
    pause = None  # the last cell's `pair after`: no pair until that long without requests
    while True:
        if warming is not None and warming.ended_before(channel.requests):
            warm, warming = warming.result(), None
            ready = next_pair(warm)  # the next cell's fork, made while no cell runs
        op, cap, lists = channel.request()
        if op == b"R" and len(lists) == 2 and len(lists[1]) == 1:
            run(lists[0], lists[1][0], cap, send)
            # A command that came in the pause (an artifact read after its cell): it goes on.
            if ready is None and pause:
                ready = None if request_within(channel, pause) else next_pair(warm)
        elif op == b"W" and not lists:
            if warming is not None:
                warm, warming = warming.result(), None
                ready = next_pair(warm)
            send(b"S")
            send(b"X", b"0 0 0" if warm is not None else b"1 0 0")
        elif op == b"C" and len(lists) in (4, 5) and len(lists[1]) == 1 and len(lists[2]) == 4:
            # A fifth list, [timeout ms] or [timeout ms, pair after ms]: the cell may be a fork
            # of this warm interpreter.
            fork_ms = pair_after = None
            fork = lists[4] if len(lists) == 5 else []
            if len(fork) in (1, 2) and all(x.isdigit() for x in fork) and warm is not None:
                fork_ms = int(fork[0])
                pair_after = int(fork[1]) if len(fork) == 2 else None
            if fork_ms is None and ready is not None:
                ready.discard()
            with cell_turn():  # (forkserver.py: not while the warm-up reads matplotlib's files)
                cell(lists[0], lists[1][0], *lists[2], lists[3], cap, send, (warm, ready, fork_ms) if fork_ms else None)
            # A cell changed what the next one would inherit from this runner: its answer
            # is whole; the runner ends (after its sweep, no process of the cell is left
            # to meet the next one) and the sidecar starts another.
            if inherited_state() != started_with:
                sys.exit(5)
            # The cell used or discarded the pair; the next one's is made after the sweep: at
            # once, or where the sidecar said other cells run (the two forks and their copies
            # of the heap are half a cell's CPU), once no request has come for `pair_after` ms
            # (a request that comes first forks its own).
            pause = pair_after
            ready = None if pause and request_within(channel, pause) else next_pair(warm)
        else:
            sys.exit(4)


def request_within(channel, ms):
    """Whether the sidecar's next request starts within `ms` (nothing is read)."""
    with selectors.DefaultSelector() as sel:
        sel.register(channel.requests, selectors.EVENT_READ)
        return bool(sel.select(ms / 1000))


# Channel, Output, cell_report(), send_report(), write_all() and CHUNK are protocol.py's,
# kill_sweep() sweep.py's: sidecar/CMakeLists.txt puts both files after this one.


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
        if fork is not None and not fork_fits(fork[0], cell_path):
            if fork[1] is not None:
                fork[1].discard()
            fork = None
        run(argv, b"", cap, send, None if fork is None else (*fork, cell_path, code))
    else:
        if fork is not None and fork[1] is not None:
            fork[1].discard()
        # The plain path's `cat > cell || exit 125`.
        send(b"S")
        send(b"E", ("cannot create %s: %s\n" % (os.fsdecode(cell_path), failed.strerror)).encode()[:cap])
        send(b"X", b"125 0 0")
    # The sweep ends every process of the session user but this one: not before the
    # warm-up's own command has ended (WarmUp.captured).
    capture_ended()
    if sweep:
        subprocess.run(sweep, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                       close_fds=True, start_new_session=True)
    else:
        kill_sweep()
    remove(cell_path)
    report = cell_report(oom_before, before, outputs)
    remove(before_file)
    remove(oom_file)
    send_report(send, report)


# The isolation probe (the sidecar's sessions/isolation/isolation_probe.cpp: the deny-path
# self-test a new container runs before its session is handed out, which also makes the
# workspace's folders) is the command `python3 -I -S -c <program> dockgate-probe <folders>`.
# This process is that interpreter already started (python3 -I, as the session user, in the
# same container, with no more rights than a command it would start: the walls the probe
# tries are the container's), so it runs the program's probe(folders, write) here, and a
# session's first answer waits for no interpreter start. Its answer is the command's.
def is_probe(argv):
    return len(argv) >= 6 and argv[:4] == [b"python3", b"-I", b"-S", b"-c"] and argv[5] == b"dockgate-probe"


def probe_here(argv, cap, send):
    out, err, code = [], b"", 0
    try:
        ns = {"__name__": "dockgate_probe"}
        exec(compile(argv[4], "<probe>", "exec"), ns)
        ns["probe"]([os.fsdecode(a) for a in argv[6:]], out.append)
    except Exception as e:  # as the command would: a traceback's last line, exit 1
        err, code = ("%s: %s\n" % (type(e).__name__, e)).encode(), 1
    send(b"S")
    output = Output(send, cap)
    output.add(b"O", "".join(out).encode())
    output.add(b"E", err)
    output.exit(code)


def run(argv, stdin_data, cap, send, fork=None):
    if fork is None and is_probe(argv):
        probe_here(argv, cap, send)
        return
    try:
        if fork is not None:
            proc = forked(*fork)
        else:
            # A session of its own, as each docker exec's process has.
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    close_fds=True, start_new_session=True, **child_place())
    except OSError:
        # docker exec answers 126/127 through the shell; without one, "cannot run" is 127.
        send(b"S")
        send(b"X", b"127 0 0")
        return
    send(b"S")
    output = Output(send, cap)
    kinds = {proc.stdout.fileno(): b"O", proc.stderr.fileno(): b"E"}
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
    exited = ExitWatch(proc.pid)
    sel.register(exited.fd, selectors.EVENT_READ)

    open_fds = set(kinds)
    done = False
    while open_fds and not done:
        for key, _ in sel.select():
            fd = key.fd
            if fd == exited.fd:
                done = exited.exited()
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
                    output.add(kinds[fd], data)
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
            output.add(kinds[fd], data)
    sel.close()
    exited.close()
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
    output.exit(code)

# main() is called at the end of forkserver.py, the program's last part.
