# dockgate-sidecar's fork server: the part of the cell runner (runner.py, to which this file
# is appended in the one program the sidecar sends; its invariants hold here too) that makes
# a cell a fork of a warm interpreter instead of an exec of python3.
#
# (docs/design.md, "Cell walls".) After its hello the runner imports
# WARM_MODULES (those the image has; the rest skipped) and captures, once, the environment
# a plain cell gets (`sh -c 'exec timeout ... env -0'`: the shell's PWD, its order), on a
# thread of its own while it answers requests (WarmUp: a cell that comes before that has
# ended runs as the exec, and no fork is made while the thread lives). A cell
# sent with its timeout is then a fork, not an exec of python3, in the plain path's shape:
# the runner forks a stand-in for `timeout` (a session of its own, the cell's pipes on 0-2,
# every other fd closed, TERM to its group at T then CONT, KILL 2 s later, 124 / 137 /
# the cell's status as GNU timeout exits), which forks the cell: signals, mask and
# dumpability reset to a fresh interpreter's, the captured environment, argv, sys.path
# (script directory, user site) as `python3 <cell>` builds them, a fresh `__main__`, and
# the code run as it. What a fork inherits that a fresh `python3 <cell>` would not have is
# made as python3 makes it (issue 39 item 6): sys.stdin/stdout/stderr as create_stdio
# makes them (fresh_stdio), sys.flags and the C globals without what -I set (fresh_flags),
# no frame of the runner's under the cell (start_cell: recursion, tracebacks and stacks
# count from the cell's module), sys.path from the session's own files, or the exec where
# the fork cannot (fork_fits: a .pth or customize module in the user site). Random states
# are reseeded in every fork (random's at-fork hook, numpy's in prepare_process). What
# stays the runner's: the hash seed, the modules already imported and what their import
# left (numpy's warnings filters), gc.freeze()'s permanent generation, the atexit entries
# and the unraisable hook start_cell uses.
# The cell's process queues its exit status to the stand-in (REPORT) right before it exits,
# and the stand-in exits with it at once, so the two exits (each the teardown of a copy of
# the warm heap, ~2 ms apiece with the data stack) overlap instead of following each other;
# a cell that ends otherwise (a signal) is waited for as before. Only the cell's own process
# is heard (the sender's PID), and what it can say is only its own status, which its code
# chooses anyway (os._exit); the runner's sweep still ends every process before the answer.
# So:
# - The runner never runs user code: only the grandchild does, after every fd but its own
#   pipes is closed. What it inherits is a copy of the runner's memory (its own to read:
#   nothing in it is a secret) and its PID, which it may signal as any cell may (above).
# - No state passes from cell to cell: each starts from the warm, unchanged copy; what a
#   cell sets or patches lives and dies in its own process.
# - A runner whose environment holds PYTHON* variables other than HONOURED (which -I
#   ignores, and a fork could not honour as `python3` would) or that cannot fork runs argv
#   as before.


import gc  # noqa: E402

# The PYTHON* variables a fork can honour as `python3` would at its start (prepare_cell):
# any other in the environment turns the fork path off.
HONOURED = (b"PYTHONUNBUFFERED", b"PYTHONDONTWRITEBYTECODE")

# What the warm interpreter imports (what is absent from the image is skipped):
# matplotlib.pyplot only where the environment names the Agg backend.
WARM_MODULES = ("numpy", "pandas", "matplotlib", "matplotlib.pyplot")



def warm_up(captured=None, no_cells=None):
    """The fork server's state: the modules imported, the plain cell's environment. None
    (cells run as execs) if the environment has PYTHON* variables beyond HONOURED or cannot
    be captured. `captured` (an Event) is set once the capture's command has ended;
    `no_cells` (a lock) is held while no cell may run (warm_imports)."""
    try:
        got = subprocess.run(["sh", "-c", "exec timeout 10s env -0"], stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, close_fds=True,
                             start_new_session=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    finally:
        if captured is not None:
            captured.set()
    if got.returncode != 0:
        return None
    env = []
    for item in got.stdout.split(b"\0")[:-1]:
        key, eq, value = item.partition(b"=")
        if not eq or not key:
            return None
        env.append((key, value))
    if any(k.startswith(b"PYTHON") and k not in HONOURED for k, _ in env) or any(
            k.startswith(b"PYTHON") and k not in HONOURED for k in os.environb):
        return None
    warm_imports(dict(env).get(b"MPLBACKEND", b"").lower() == b"agg", no_cells)
    return env


# The warm-up beside the requests. A new session's first answer and its first cell wait
# for none of it (issue 43: the data stack's imports took ~1.2 s of a pool miss): the
# runner answers its requests on the main thread while this thread captures the
# environment and imports WARM_MODULES; cells that come meanwhile run as execs, exactly the
# plain path's processes (no fork is made while the thread lives: a fork would copy module
# locks and half-imported modules the thread holds). What the thread changes for its
# imports (the cwd, HOME, MPLCONFIGDIR: warm_imports) is the process's, so the commands
# started meanwhile get the runner's own cwd and environment as it had them at its start
# (child_place), and the kill sweep waits for the capture's command (capture_ended), which
# it would otherwise end. While it imports matplotlib (whose configuration directory is
# the session user's to write) no cell runs (cell_turn, warm_imports). The switch interval
# is short meanwhile, so the main thread gets the interpreter within a fraction of a
# millisecond of asking.
class WarmUp:
    def __init__(self):
        import threading
        global _warming
        self.cwd, self.env = os.getcwd(), dict(os.environb)
        self.captured = threading.Event()
        self.no_cells = threading.Lock()  # see warm_imports
        self._ended, self._ending = os.pipe()  # EOF once the thread is done
        self._switch = sys.getswitchinterval()
        self._result = None
        sys.setswitchinterval(0.0005)
        _warming = self
        self._thread = threading.Thread(target=self._run, name="dockgate-warm-up", daemon=True)
        self._thread.start()

    def _run(self):
        try:
            self._result = warm_up(self.captured, self.no_cells)
        finally:
            self.captured.set()
            os.close(self._ending)

    def ended_before(self, fd):
        """Waits until `fd` is readable or the warm-up has ended; whether it has ended."""
        import select
        return self._ended in select.select([fd, self._ended], [], [])[0]

    def result(self):
        """The warm-up's result (warm_up's), once it has ended (waited for)."""
        global _warming
        self._thread.join()
        os.close(self._ended)
        sys.setswitchinterval(self._switch)
        _warming = None
        return self._result


_warming = None


def child_place():
    """Popen's cwd and env for a command started while the warm-up runs (see WarmUp)."""
    return {} if _warming is None else {"cwd": _warming.cwd, "env": _warming.env}


def capture_ended():
    if _warming is not None:
        _warming.captured.wait()


def cell_turn():
    """Held by a cell from its start to its sweep while the warm-up runs (warm_imports)."""
    import contextlib
    return _warming.no_cells if _warming is not None else contextlib.nullcontext()


# Where an import reads files the session user can write, the runner would parse them, or
# block on a FIFO there, or import what they name: the session's files are the user's
# (restored /workspace, and after a restart whatever cells left in /tmp and the home).
# So the modules are imported from / with matplotlib's configuration and caches in a new
# private directory (seeded with the image's font list, as dockgate_mplcache seeds a
# home) and no home: what they read is the image's, and root's. A cell whose own files
# would change what those imports load runs as the exec (fork_fits).
# That private directory is the session user's (the runner's uid), so no cell may run
# from its making to the end of matplotlib's imports: the warm-up holds `no_cells` (the
# lock every cell holds from its start to its sweep: cell_turn) meanwhile, so no process
# of a cell exists to touch it, as when the warm-up came before every cell. numpy and
# pandas, imported before it while cells may run, read nothing outside the image's
# packages (from /, with no home and -I).
MPL_SEED = "/usr/share/dockgate/matplotlib"


def warm_imports(agg, no_cells=None):
    import contextlib
    saved, cwd = dict(os.environb), os.getcwd()
    configured = False
    try:
        for key in (b"MATPLOTLIBRC", b"XDG_CONFIG_HOME", b"XDG_CACHE_HOME"):
            os.environb.pop(key, None)
        os.environb[b"HOME"] = b"/nonexistent"
        os.chdir("/")
        for name in WARM_MODULES:
            if name == "matplotlib.pyplot" and not agg:
                continue
            if name.startswith("matplotlib") and not configured:
                # From here to the end no cell runs (held until the function returns).
                configured = True
                no_cells = no_cells if no_cells is not None else contextlib.nullcontext()
                no_cells.__enter__()
                os.environb[b"MPLCONFIGDIR"] = os.fsencode(private_config())
            try:
                __import__(name)
            except Exception:  # absent or broken: a cell imports it itself, as before
                pass
    finally:
        os.chdir(cwd)
        os.environb.clear()
        os.environb.update(saved)
        if configured:
            no_cells.__exit__(None, None, None)


def private_config():
    """A new directory for matplotlib's configuration and caches, seeded with the image's
    font list."""
    import tempfile
    private = tempfile.mkdtemp(prefix="dockgate-warm-", dir="/tmp")
    try:
        for name in os.listdir(MPL_SEED):
            with open(os.path.join(MPL_SEED, name), "rb") as i, open(os.path.join(private, name), "wb") as o:
                o.write(i.read())
    except OSError:
        pass
    return private


def fork_fits(env, cell_path):
    """Whether a fork of the warm interpreter starts the cell as `python3 <cell>` would:
    not where the cell's sys.path puts a module of the session's own before one the warm
    interpreter imported (a file by that name in the script's directory; in the user site,
    pip install --user's, one by the name of any module the runner has, start-up ones
    included: python3 has the user site on sys.path while site still imports), nor where
    the user site holds what python3 runs at its start before any import of the cell's (a
    .pth file: its lines put directories anywhere on sys.path and run imports;
    usercustomize, sitecustomize), nor where matplotlib would read a configuration of the
    session's. Names are listed, nothing is opened. Otherwise the cell runs as the exec."""
    tops, everything = imported_tops(), module_tops()
    env, user_site = cell_places(env)
    home = env.get("HOME") or os.path.expanduser("~")
    for directory, names in ((os.path.dirname(os.fsdecode(cell_path)), tops), (user_site, everything)):
        try:
            entries = os.listdir(directory)
        except OSError:
            continue
        if any(entry.split(".", 1)[0].split("-", 1)[0] in names for entry in entries):
            return False
        if directory == user_site and any(entry.endswith(".pth") for entry in entries):
            return False
    if "matplotlib" not in tops:
        return True
    config = env.get("MPLCONFIGDIR") or os.path.join(env.get("XDG_CONFIG_HOME") or os.path.join(home, ".config"),
                                                      "matplotlib")
    places = [os.path.join(os.getcwd(), "matplotlibrc"), os.path.join(config, "matplotlibrc")]
    return not (env.get("MATPLOTLIBRC") or env.get("MPLCONFIGDIR") or any(os.path.lexists(p) for p in places))


# What site imports from the user site at python3's start, by name.
USER_SITE_STARTUP = frozenset(("usercustomize", "sitecustomize"))

_tops = (0, frozenset(), frozenset())


def imported_tops():
    """The top-level names of what a fork has imported beyond a fresh interpreter's start-up
    (what python3 would import from sys.path when the cell asks)."""
    return _module_names()[0]


def module_tops():
    """The top-level names of every module the runner has, start-up ones included, and
    what site imports from the user site at python3's start."""
    return _module_names()[1]


def _module_names():
    # Recounted whenever sys.modules has changed size (the runner imports lazily, never
    # removes), so a cell costs no walk over the warm interpreter's ~1000 modules: after the
    # pair's fork every object that walk touched would be a page copied in the runner.
    global _tops
    if _tops[0] != len(sys.modules):
        names = frozenset(n.split(".", 1)[0] for n in list(sys.modules))
        _tops = (len(sys.modules), names - {n.split(".", 1)[0] for n in STARTUP_MODULES},
                 names | USER_SITE_STARTUP)
    return _tops[1:]


_places = {}


def cell_places(env):
    """The plain cell's environment as text, and its user site (pip install --user's):
    the same for every cell of a runner, worked out once."""
    key = tuple(env)
    if key not in _places:
        import sysconfig
        text = {k.decode("utf-8", "replace"): v.decode("utf-8", "replace") for k, v in env}
        home = text.get("HOME") or os.path.expanduser("~")
        _places[key] = (text, sysconfig.get_path("purelib", "posix_user", vars={"userbase": os.path.join(home, ".local")}))
    return _places[key]


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
    _libc.prctl(15, comm, 0, 0, 0)  # PR_SET_NAME


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


# What `ps` shows for the pair made ahead of the next cell, until that cell's go.
READY_TITLES = ((b"timeout", b"(next cell)"), (b"python3", b"(next cell)"))


class Pair:
    """A cell forked from the warm interpreter, shaped as `timeout ... python3 <cell>`:
    the child is the stand-in for timeout, its child the cell. Both are forked ahead of
    the cell (next_pair, after the last cell's sweep: the two forks of a ~100 MB heap,
    ~4 ms, are off the cell's path) and wait, the runner's copies still, not dumpable, for
    the go (go): the cell's timeout, path and code to the stand-in, which takes its title
    and hands the cell its path and code. Until then they hold nothing but their pipes,
    and run nothing of the session's. Popen's surface for run() once gone."""

    def __init__(self, env):
        # The warm heap out of the collector's reach: a collection in a cell would touch
        # (and so copy) every page of it.
        gc.freeze()
        fds = []
        try:
            # The cell's stdin, stdout and stderr, then the stand-in's go.
            for _ in range(4):
                fds.extend(os.pipe())  # (close-on-exec: nothing of them survives an exec)
            pid = os.fork()
        except OSError:
            for fd in fds:
                os.close(fd)
            raise
        if pid == 0:
            # Never back into the runner's loop: the stand-in ends with os._exit, the cell
            # unwinds to the program's top level (CellStart) and ends with os._exit.
            got = None
            try:
                set_title(READY_TITLES[0], READY_TITLES[0][0])
                got = stand_in(fds, env)
                if got is not None:
                    cell_path, code = got
                    set_title([b"python3", cell_path], b"python3")
                    prepare_cell(cell_path)
            except BaseException:
                os._exit(127)
            if got is None:
                os._exit(127)
            # Down to the program's top level, where start_cell() runs the cell with no
            # frame of the runner's under it.
            raise CellStart(cell_path, code)
        self.pid = pid
        for fd in (fds[0], fds[3], fds[5], fds[6]):
            os.close(fd)
        self._fds = [fds[1], fds[2], fds[4]]
        self._go = [fds[7]]
        self.stdin = self.stdout = self.stderr = None

    def go(self, ms, cell_path, code):
        """The cell started: its timeout, path and code to the stand-in. OSError (nothing
        started; discard() it) when the stand-in is gone."""
        if os.waitpid(self.pid, os.WNOHANG)[0]:
            self.pid = None
            raise OSError("the stand-in has ended")
        write_all(self._go[0], struct.pack(">II", ms, len(cell_path)) + cell_path + code)
        os.close(self._go.pop())
        self.stdin = os.fdopen(self._fds[0], "wb")
        self.stdout = os.fdopen(self._fds[1], "rb")
        self.stderr = os.fdopen(self._fds[2], "rb")
        self._fds = []
        return self

    def discard(self):
        """Both processes killed and the stand-in reaped; every pipe closed. The stand-in
        first, by its PID: it may not have made its own group yet (then it has no
        child); then its group, which holds the cell once it exists."""
        if self.pid is not None:
            for kill in (os.kill, os.killpg):
                try:
                    kill(self.pid, signal.SIGKILL)
                except OSError:
                    pass
            try:
                os.waitpid(self.pid, 0)
            except ChildProcessError:
                pass
            self.pid = None
        for fd in self._go + self._fds:
            os.close(fd)
        self._go, self._fds = [], []

    def wait(self):
        _, status = os.waitpid(self.pid, 0)
        return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def next_pair(env):
    """The pair for the next cell, made after the last one's sweep (None where the fork
    server is off or the fork fails: the cell then forks when it comes)."""
    if env is None:
        return None
    try:
        return Pair(env)
    except OSError:
        return None


def forked(env, ready, ms, cell_path, code):
    """The cell started as a fork: in the pair made ahead if it is still whole, else in
    one made now."""
    if ready is not None:
        try:
            return ready.go(ms, cell_path, code)
        except OSError:
            ready.discard()
    pair = Pair(env)
    try:
        return pair.go(ms, cell_path, code)
    except OSError:
        pair.discard()
        raise


def read_all(fd):
    parts = []
    while True:
        got = os.read(fd, CHUNK)
        if not got:
            return b"".join(parts)
        parts.append(got)


def stand_in(fds, env):
    """The forked `timeout`: fds 0-2 the cell's pipes and nothing else but its go and the
    cell's, a session of its own; the cell forked (None returned in the stand-in, which
    only exits; the cell's path and code in the cell, after its go). At the go it takes
    its title, hands the cell its own go, and waits for it and signals it as GNU timeout
    signals its group. A go closed with nothing in it (the runner discarded the pair, or
    ended) ends both."""
    import fcntl
    os.setsid()
    # Above every target first, so no dup2 overwrites a pipe not yet moved.
    high = [fcntl.fcntl(fds[i], fcntl.F_DUPFD, 16) for i in (0, 3, 5, 6)]
    for target, fd in enumerate(high):
        os.dup2(fd, target)  # 0-2 the cell's pipes, 3 the stand-in's go
    os.closerange(4, max(resource.getrlimit(resource.RLIMIT_NOFILE)[1], 4096))
    cell_go, handed = os.pipe()  # 4 and 5
    # Its own TERM (sent to the group) and CONT are for the cell. REPORT waits, blocked,
    # for status_reports() (the cell's own mask is reset before its go).
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.pthread_sigmask(signal.SIG_BLOCK, [REPORT])
    pid = os.fork()
    if pid == 0:
        _cell["stand_in"] = os.getppid()
        os.close(3)
        os.close(handed)
        set_title(READY_TITLES[1], READY_TITLES[1][0])
        prepare_process(env)
        message = read_all(cell_go)
        os.close(cell_go)
        if len(message) < 4:
            os._exit(0)
        (size,) = struct.unpack(">I", message[:4])
        return message[4:4 + size], message[4 + size:]
    os.close(cell_go)
    exited = ExitWatch(pid)  # runner.py
    message = read_all(3)
    os.close(3)
    if len(message) < 8:
        os.kill(pid, signal.SIGKILL)
        os.waitpid(pid, 0)
        os._exit(0)
    ms, size = struct.unpack(">II", message[:8])
    cell_path = message[8:8 + size]
    set_title([b"timeout", b"--kill-after=2s", b"%d.%03ds" % divmod(ms, 1000), b"python3", cell_path], b"timeout")
    try:
        write_all(handed, message[4:])  # the cell's path and code
    except OSError:
        pass  # the cell has ended already: its status is the answer
    os.close(handed)
    import select
    poll = select.poll()
    poll.register(exited.fd, select.POLLIN)
    reports = status_reports()
    if reports is not None:
        poll.register(reports, select.POLLIN)
    deadline = time.monotonic_ns() + ms * 1000000
    timed_out = False
    while True:
        events = poll.poll(max(0, (deadline - time.monotonic_ns() + 999999) // 1000000))
        if not events:
            timed_out = True
            break
        if any(fd == exited.fd for fd, _ in events) and exited.exited():
            break
        # The cell's status, sent as it exits: this process ends with it at once, so that
        # its own exit (the teardown of its copy of the warm heap) runs beside the cell's.
        reported = reported_status(reports, pid)
        if reported is not None:
            os._exit(reported)
    if timed_out:
        if reports is not None:
            poll.unregister(reports)  # past the timeout only the cell's end counts, as for timeout
        os.killpg(0, signal.SIGTERM)
        os.killpg(0, signal.SIGCONT)
        grace = time.monotonic_ns() + 2000 * 1000000
        while not exited.exited():
            left = (grace - time.monotonic_ns() + 999999) // 1000000
            if left <= 0 or not poll.poll(left):
                os.killpg(0, signal.SIGKILL)  # this process too, as timeout: 137
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        sig = os.WTERMSIG(status)
        if timed_out and sig != signal.SIGKILL:
            os._exit(124)
        if timed_out:
            os._exit(128 + sig)
        # The cell's signal, raised on itself (timeout's way).
        if sig not in (signal.SIGKILL, signal.SIGSTOP):  # (their disposition cannot be set)
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, [sig])
        resource.setrlimit(resource.RLIMIT_CORE, (0, resource.getrlimit(resource.RLIMIT_CORE)[1]))
        os.kill(os.getpid(), sig)
        os._exit(128 + sig)
    os._exit(124 if timed_out else os.WEXITSTATUS(status))


# The signal a cell sends its stand-in with its exit status (sigqueue's value) as it exits.
REPORT = signal.SIGRTMIN
SI_QUEUE = -1
_libc = ctypes.CDLL(None, use_errno=True)


def status_reports():
    """A signalfd of REPORT (blocked in the stand-in since before the cell's fork, so none
    is lost), made after the go: the pair waits holding only its pipes. None where the
    kernel has none: the stand-in then waits for the cell's exit alone."""
    mask = (ctypes.c_uint64 * 16)()  # a sigset_t
    mask[(REPORT - 1) // 64] = 1 << ((REPORT - 1) % 64)
    fd = _libc.signalfd(-1, mask, os.O_CLOEXEC | os.O_NONBLOCK)  # SFD_CLOEXEC, SFD_NONBLOCK
    return fd if fd >= 0 else None


def reported_status(reports, cell):
    """The exit status the cell's process itself queued (struct signalfd_siginfo: signo,
    errno, code, pid, ... the value's int at byte 44), or None for anything else. gVisor
    (runsc 20221219) writes a queued value in ssi_status (byte 40) and leaves ssi_int 0;
    Linux leaves ssi_status 0 for SI_QUEUE: the value is whichever is set."""
    try:
        info = os.read(reports, 128)
    except OSError:
        return None
    if len(info) < 48:
        return None
    signo, _, code, sender = struct.unpack_from("=IiiI", info)
    status, value = struct.unpack_from("=ii", info, 40)
    value = value or status
    if signo == REPORT and code == SI_QUEUE and sender == cell and 0 <= value <= 255:
        return value
    return None


def report_status(code):
    """The cell's exit status queued to its stand-in, its parent still, right before the
    exit: the cell's output is flushed, nothing of its code runs after."""
    stand_in = _cell.get("stand_in")
    if stand_in and os.getppid() == stand_in:
        _libc.sigqueue(stand_in, REPORT, ctypes.c_long(code))


def prepare_process(env):
    """The process state `python3 <cell>` starts with that does not depend on the cell,
    made in the cell's process before its go (this fresh copy of the warm interpreter was
    never given user code): signals, environment, stdio, numpy's global seed."""
    reset_signals()
    os.environ.clear()
    for key, value in env:
        os.environb[key] = value
    fresh_stdio(dict(env))
    fresh_flags(dict(env))
    random = sys.modules.get("numpy.random")
    if random is not None:
        random.seed()  # the global state reseeded, as a fresh import would


def prepare_cell(cell_path):
    """The rest, at the go: dumpable again (as after an exec), sys.path as the cell's
    files make it, argv and a fresh `__main__`."""
    _libc.prctl(4, 1, 0, 0, 0)  # PR_SET_DUMPABLE
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
    if os.path.isdir(user_site):
        sys.modules.pop("usercustomize", None)


# What -I sets in the runner and `python3 <cell>` does not have: sys.flags' fields and the
# C globals the interpreter reads at run time (Py_GETENV: PYTHONBREAKPOINT).
ISOLATION = {"isolated": 0, "ignore_environment": 0, "no_user_site": 0, "safe_path": False}
ISOLATION_GLOBALS = ("Py_IsolatedFlag", "Py_IgnoreEnvironmentFlag", "Py_NoUserSiteDirectory")


def fresh_flags(env):
    """sys.flags as `python3 <cell>` has them: the runner's (-I) without what -I set, and
    dont_write_bytecode as PYTHONDONTWRITEBYTECODE says; the C globals to match. Read by
    the standard library where it matters: the command lines of multiprocessing's spawned
    children and subprocess._args_from_interpreter_flags (no -I there: they see the user
    site and the environment, as python3's do), site, asyncio's debug switch,
    breakpoint(). sys.flags is a struct sequence the interpreter makes once: the cell's
    is a tuple of the same fields, names, repr and order."""
    import operator
    old = sys.flags
    names = type(old).__match_args__
    values = dict(zip(names, old), **ISOLATION)
    values["dont_write_bytecode"] = int(bool(env.get(b"PYTHONDONTWRITEBYTECODE")))

    class flags(tuple):
        __slots__ = ()
        n_fields = n_sequence_fields = len(names)
        n_unnamed_fields = 0
        __match_args__ = names

        def __repr__(self):
            return "sys.flags(%s)" % ", ".join("%s=%r" % pair for pair in zip(names, self))

    for i, name in enumerate(names):
        setattr(flags, name, property(operator.itemgetter(i)))
    flags.__module__ = "sys"
    sys.flags = flags(values[n] for n in names)
    sys.dont_write_bytecode = bool(values["dont_write_bytecode"])
    for name in ISOLATION_GLOBALS:
        try:
            ctypes.c_int.in_dll(ctypes.pythonapi, name).value = 0
        except ValueError:  # not exported: nothing reads it then
            pass


def fresh_stdio(env):
    """sys.stdin/stdout/stderr as a fresh interpreter makes them on fds 0-2 (CPython's
    create_stdio, step for step): the runner's own wrap the protocol's old fds, buffered as
    -I left them. io.open's buffer (the pipe's block size), the raw file's name
    ("<stdout>"), newline "\n" for all three, the text file's mode; under PYTHONUNBUFFERED
    the writers' binary layer unbuffered and all three write-through, else stderr (and a
    tty) line-buffered. Encoding and errors are the runner's: both come from the same
    locale, and PYTHONIOENCODING turns the fork path off."""
    import io
    buffered = not env.get(b"PYTHONUNBUFFERED")
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        old = getattr(sys, name)
        write = fd != 0
        buf = io.open(fd, "wb" if write else "rb", -1 if buffered or not write else 0, None, None, None, False)
        raw = buf.raw if isinstance(buf, io.BufferedIOBase) else buf
        raw.name = "<%s>" % name
        new = io.TextIOWrapper(buf, old.encoding, old.errors, "\n", buffered and (raw.isatty() or fd == 2),
                               not buffered)
        new.mode = "w" if write else "r"
        setattr(sys, name, new)
        setattr(sys, "__%s__" % name, new)


class CellStart(BaseException):
    """Raised in the cell's process once it is prepared: it unwinds every frame of the
    runner's (nothing on the way catches a BaseException) to the program's top level."""

    def __init__(self, cell_path, code):
        super().__init__()
        self.cell_path, self.code = cell_path, code


# The cell's entry and what it needs, held here for the cell's whole life (start_cell).
_cell = {}


def start_cell(cell_path, code):
    """At the program's top level, in the cell's process: the cell is run with no frame of
    the runner's under it, as `python3 <cell>` runs a script. Python calls back into no
    function of ours once the program's top level has returned, but it does run the atexit
    callbacks from C, with an empty stack, before anything is torn down: the cell is one
    of them, its module's code called from C (partial, chain, starmap: no frame of their
    own), so its `<module>` frame has no f_back, recursion counts as in a script, and
    tracebacks and stacks hold only its frames. `threading` is out of sys.modules until then, so the interpreter's own thread
    shutdown, which comes first, does nothing (it would mark the main thread stopped); the
    callback before the cell's puts it back. The cell's end is finish()'s: an exception
    (SystemExit included) leaves the callback into the unraisable hook (cell_raised), a
    return falls through to cell_returned."""
    import atexit
    import functools
    import itertools
    import types
    main = sys.modules["__main__"]
    try:
        if site_user_enabled():
            try:
                import usercustomize  # noqa: F401
            except Exception:  # as site does: the cell runs anyway
                pass
        compiled = compile(code, sys.argv[0], "exec", dont_inherit=True)
    except SyntaxError as e:
        e.__traceback__ = None  # as the interpreter reports a script's: no frame of its own
        sys.excepthook(type(e), e, None)
        finish(1)
    # The module's code as a function (code that is not a function's runs with its
    # globals as its locals, as PyEval_EvalCode runs it): called from C through starmap,
    # not exec(), whose call counts one level of recursion more. `returned` is set after
    # it, in the same C call, only if the cell's code returned.
    done = {}
    entry = functools.partial(list, itertools.chain(
        itertools.starmap(types.FunctionType(compiled, main.__dict__), [()]),
        itertools.starmap(done.__setitem__, [("returned", True)])))
    _cell.update(entry=entry, done=done, threading=sys.modules.pop("threading", None))
    # Run last to first: cell_begins, the cell, cell_returned.
    for callback in (cell_returned, entry, cell_begins):
        atexit.register(callback)


def cell_begins():
    threading = _cell.get("threading")
    if threading is not None:
        sys.modules["threading"] = threading
    sys.unraisablehook = cell_raised


def cell_raised(unraisable):
    """The unraisable hook while the cell runs: the cell's own exception, as the
    interpreter ends a script on one; any other unraisable to the default hook."""
    if unraisable.object is not _cell.get("entry"):
        sys.__unraisablehook__(unraisable)
        return
    sys.unraisablehook = sys.__unraisablehook__
    e = unraisable.exc_value
    if isinstance(e, SystemExit):
        if e.code is None or isinstance(e.code, int):
            finish(e.code or 0)
        print(e.code, file=sys.stderr)
        finish(1)
    sys.excepthook(type(e), e, e.__traceback__)
    finish(1, interrupted=isinstance(e, KeyboardInterrupt))


def cell_returned():
    # Not returned: its exception went to an unraisable hook of the cell's own.
    finish(0 if _cell["done"].get("returned") else 1)


def finish(code, interrupted=False):
    """The interpreter's exit as the cell sees it (non-daemon threads joined, atexit run,
    stdio flushed: what Py_FinalizeEx does first), without tearing down the warm modules'
    heap, which costs ~200 ms with the data stack loaded and is seen by no one."""
    import atexit
    for callback in (_cell.get("entry"), cell_begins, cell_returned):
        if callback is not None:
            atexit.unregister(callback)
    threading = sys.modules.get("threading")
    try:
        if threading is not None:
            threading._shutdown()
    except BaseException:
        pass
    atexit._run_exitfuncs()
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            if code == 0:
                code = 120  # as the interpreter, when flushing stdout fails at exit
    if interrupted:
        # As the interpreter ends on a KeyboardInterrupt: killed by SIGINT.
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        os.kill(os.getpid(), signal.SIGINT)
        code = 130
    report_status(code & 0xFF)
    os._exit(code & 0xFF)


def site_user_enabled():
    import site
    return site.USER_SITE is not None and os.path.isdir(site.USER_SITE)


try:
    main()
except CellStart as start:
    _cell["start"] = start.cell_path, start.code
# Outside the except clause: nothing of CellStart is left (no exception context). main()
# itself only ever ends by SystemExit.
if "start" in _cell:
    start_cell(*_cell.pop("start"))
