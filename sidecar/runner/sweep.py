# The kill sweep after each cell, shared by the cell runner (runner.py) and the kernel's
# driver (kernel.py): sidecar/CMakeLists.txt puts this file into both programs, after
# their own part. Uses their imports (os, signal, time).
#
# The sidecar's kill sweep (session_containers.cpp kill_cell_processes), done in this process: every
# process of the container but its init (PID 1), its `sleep`, the caller and `also_spared`
# (the driver's kernel) is killed.
# The `sleep` is the child of PID 1 with the earliest start time, judged only from a whole
# stat line (its first line, as `read` takes it: a cell may put a newline, `) ` or `*` in
# its comm): fields after the last ") " split on space, tab and newline, at least 20 of
# them, the parent "1", a decimal start time; the first of equals in the order of
# /proc/[0-9]* (bytes). Then passes: all stopped at once (kill(-1) spares the caller and
# PID 1), each other PID killed unless it is past killing (past_killing()), all continued;
# a pass that killed nothing ends it, so the sweep returns only once every process it
# killed is a zombie or gone: one still tearing itself down is killed again next pass
# (a cell's answer never comes while what it started still exists). At most 2 s of passes,
# 1 ms apart after the first (the shell's are 1000 passes, without a pause: dash has no
# sleep builtin). The shell's own PID, which it spares, does not exist here; the runner
# or the driver (the shell's parent, which it spares) is the caller.
def kill_sweep(also_spared=None):
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
    spared = {b"1", str(os.getpid()).encode(), keep}
    if also_spared is not None:
        spared.add(str(also_spared).encode())
    deadline = time.monotonic() + 2
    while True:
        try:
            os.kill(-1, signal.SIGSTOP)
        except OSError:
            pass
        found = False
        for pid in pids():
            if pid in spared or past_killing(pid):
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
        if not found or time.monotonic() > deadline:
            break
        time.sleep(0.001)


# Whether a process is past killing: gone, or a zombie of one thread (state Z or X, one
# thread: a group leader that exited while its other threads run shows Z too, with more
# threads, and is killed). Read whole (a newline in the comm cannot cut the line short);
# a stat that does not parse is a live process.
def past_killing(pid):
    try:
        with open(b"/proc/" + pid + b"/stat", "rb") as f:
            text = f.read()
    except (FileNotFoundError, ProcessLookupError):
        return True
    except OSError:
        return False
    if not text:
        return True
    fields = text[text.rfind(b") ") + 2:].split()
    return len(fields) >= 20 and fields[0] in (b"Z", b"X") and fields[17] == b"1"
