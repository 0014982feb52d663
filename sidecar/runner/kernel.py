# dockgate-sidecar's kernel driver: started once per kernel session inside the session
# container (`python3 -I -c <this> dockgate-kernel`, one hijacked exec through the gate, as
# the cell runner is), it holds a real IPython kernel (Debian's python3-ipykernel through
# python3-jupyter-client's KernelManager and BlockingKernelClient) and runs each cell the
# sidecar sends in it, answering on the runner's framing (protocol.py, shared with the
# runner: the same requests and frames, one more kind). It runs no user code itself: the
# kernel does, by design.
#
# Invariants it keeps (docs/sidecar.md, "Kernel sessions"; docs/security.md):
# - Not dumpable (prctl PR_SET_DUMPABLE 0) before anything else is imported or read, as the
#   runner: a cell (same uid) cannot read its fds, memory or trace it through /proc. The
#   sidecar starts it only where the host sees no process of the session user.
# - Its protocol fds are private: fds 0, 1 and 2 become /dev/null, the request and answer
#   pipes are non-inheritable dups, and the kernel is started with stdin, stdout and stderr
#   on /dev/null and close_fds: the kernel holds none of them.
# - The kernel is reached over ipc (Unix sockets) in a 0700 directory of the session user
#   under /tmp, never TCP: nothing outside this container's mount namespace can name the
#   sockets, and no other session's container shares it.
# - Output is taken only from messages whose parent_header.msg_id is the running cell's: what
#   an earlier cell's thread prints between cells is dropped, never given to the next cell.
# - After every cell the runner's kill sweep (step for step) ends every process of the
#   session user but PID 1, its `sleep`, this driver and the kernel: what a cell starts
#   does not outlive its answer; the kernel's memory, threads and open files do.
# - A cell can still signal or kill this driver (same uid): it then answers nothing more,
#   and the sidecar gives it up (500 "kernel died"), sweeps the container and starts another.
#
# Requests (stdin), as the runner's: u32 length, u8 op, u32 output cap, lists.
#   op K, lists [[code], [timeout ms, kill grace ms], [outputs dir]]: a cell.
# Answers (stdout): u8 kind, u32 length, payload. H (hello: "dockgate-kernel 1 <PID> ready",
# or "missing" when jupyter_client/ipykernel cannot be imported, or "failed" when the kernel
# did not come up), then per request S, O/E, X ("<exit> <stdout dropped> <stderr dropped>"),
# K ("<restarted 0|1> <died 0|1> <execution count>"), L (the listing, as the runner's), D.
#
# Keep mode (`... dockgate-kernel keep <cwd>`): an OpenSandbox /code context (docs/design.md,
# "The OpenSandbox front"; core/code_interpreter.cpp). The sandbox keeps its processes between
# commands, so this mode never sweeps: only op J is served, lists [[code]], no timeout of its
# own (execd's cells have none: an interrupt ends one). Its answer: S, O/E as the kernel
# streams, V ("<execution count> <JSON object: MIME type -> string>", a result; count 0 for
# display_data) and F (JSON {ename, evalue, traceback[]}, an error) in the order the kernel
# sent them, X, K, D (no listing). SIGUSR1 interrupts the running cell (the kernel gets
# jupyter's interrupt); SIGTERM, or the end of the request stream, shuts the kernel down
# before the driver exits, so a deleted context leaves no kernel behind.
import ctypes
import sys

if ctypes.CDLL(None, use_errno=True).prctl(4, 0, 0, 0, 0) != 0:  # PR_SET_DUMPABLE
    sys.exit(3)

import base64  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import re  # noqa: E402
import signal  # noqa: E402
import stat  # noqa: E402
import struct  # noqa: E402
import subprocess  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402


def fd_wall_holds():
    """Whether the kernel keeps this non-dumpable process's /proc/PID/fd from a process of its
    own uid, which the invariants above rest on. Linux does; gVisor's runsc 20221219 does not
    (a cell could open the protocol pipes and answer in this process's name): then this
    exits as when PR_SET_DUMPABLE fails, and no kernel is served. A child tries."""
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

ANSI = re.compile(rb"\x1b\[[0-9;?]*[ -/]*[@-~]")
ANSI_TEXT = re.compile(ANSI.pattern.decode())
IMAGES = (("image/png", ".png", True), ("image/jpeg", ".jpg", True), ("image/svg+xml", ".svg", False))


# Set by SIGUSR1 (keep mode): the running cell is to be interrupted.
INTERRUPT = [False]
# The largest V or F payload sent: the sidecar reads frames of at most 1 MiB (runner.hpp).
MAX_VALUE = 1000000


def main():
    channel = Channel()  # protocol.py
    send = channel.send
    hello = b"dockgate-kernel 1 %d " % os.getpid()
    keep = len(sys.argv) >= 4 and sys.argv[2] == "keep"
    try:
        kernel = Kernel(os.path.abspath(sys.argv[3]) if keep else "/workspace")
    except ImportError:
        send(b"H", hello + b"missing")
        return
    except Exception:  # noqa: BLE001 (the kernel did not come up, whatever the reason)
        send(b"H", hello + b"failed")
        return
    send(b"H", hello + b"ready")
    if keep:
        serve_kept(channel, kernel)
        return
    while True:
        op, cap, lists = channel.request()
        if op == b"K" and len(lists) == 3 and len(lists[0]) == 1 and len(lists[1]) == 2 and len(lists[2]) == 1:
            kernel.cell(lists[0][0], int(lists[1][0]), int(lists[1][1]), lists[2][0], cap, send)
        else:
            sys.exit(4)


class Kernel:
    def __init__(self, cwd):
        from jupyter_client.manager import KernelManager

        import ipykernel  # noqa: F401 (missing: the image lacks python3-ipykernel)

        # The cell's environment, as a plain cell's shell gives it, but figures shown inline
        # (display_data) rather than on Agg: matplotlib-inline, which ipykernel brings.
        self.cwd = cwd
        os.environ["PWD"] = cwd
        os.environ["MPLBACKEND"] = "module://matplotlib_inline.backend_inline"
        self.dir = tempfile.mkdtemp(prefix="dockgate-kernel-", dir="/tmp")  # 0700
        self.km = KernelManager(kernel_name="python3", transport="ipc", ip=os.path.join(self.dir, "kernel"),
                                connection_file=os.path.join(self.dir, "connection.json"))
        self.count = 0
        self.kc = None
        self.km.start_kernel(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                             cwd=self.cwd)
        self.connect()

    def pid(self):
        proc = getattr(self.km.provisioner, "process", None)
        return proc.pid if proc is not None else None

    def connect(self):
        if self.kc is not None:
            self.kc.stop_channels()
        self.kc = self.km.client()
        self.kc.start_channels(hb=False)
        self.kc.wait_for_ready(timeout=60)

    def restart(self):
        try:
            if self.km.has_kernel:
                self.km.restart_kernel(now=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                       stderr=subprocess.DEVNULL, cwd=self.cwd)
            else:
                self.km.start_kernel(stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                     stderr=subprocess.DEVNULL, cwd=self.cwd)
            self.connect()
            self.count = 0
            return True
        except Exception:  # noqa: BLE001
            return False

    def cell(self, code, timeout_ms, grace_ms, outputs, cap, send):
        oom_before = oom_count()
        before = listing(outputs)
        restarted = False
        if not self.km.is_alive():
            # The last cell's kernel died: this one starts a new one (its state is gone).
            restarted = self.restart()
        send(b"S")
        output = Output(send, cap)
        figures = [0]

        def image(data):
            for mime, ext, binary in IMAGES:
                if mime in data:
                    try:
                        raw = base64.b64decode(data[mime]) if binary else data[mime].encode()
                    except (ValueError, TypeError):
                        return False
                    figures[0] += 1
                    save(outputs, "figure-%d-%d" % (self.count, figures[0]), ext, raw)
                    return True
            return False

        exit_code, died = 0, False
        if not self.km.is_alive():
            died = True
        else:
            msg_id = self.kc.execute(code.decode("utf-8", "replace"), allow_stdin=False)
            deadline = time.monotonic() + timeout_ms / 1000.0
            interrupted_at = None

            def tick():
                nonlocal interrupted_at
                now = time.monotonic()
                if interrupted_at is None and now >= deadline:
                    interrupted_at = now
                    self.interrupt()
                # Past the grace after the interrupt: it did not stop, so no further wait.
                return interrupted_at is None or now < interrupted_at + grace_ms / 1000.0

            def result(kind, content):
                nonlocal exit_code
                if kind in ("execute_result", "display_data"):
                    data = content.get("data", {})
                    if not image(data) and "text/plain" in data:
                        output.add(b"O", data["text/plain"].encode() + b"\n")
                elif kind == "error":
                    exit_code = 1
                    text = "\n".join(content.get("traceback", [])).encode()
                    output.add(b"E", ANSI.sub(b"", text) + b"\n")

            end = self.follow(msg_id, output, tick, result)
            if end == "stopped":
                restarted = self.restart()  # a new kernel, the old state gone
            died = end == "died"
            if interrupted_at is not None:
                exit_code = 124  # as timeout(1) reports it: the sidecar's timeout message
            if end == "idle" and self.reply_failed(msg_id) and exit_code == 0:
                exit_code = 1
        output.exit(exit_code)
        send(b"K", b"%d %d %d" % (int(restarted), int(died), self.count))
        # A kernel found dead was reaped (is_alive polls it): its PID may be another's now,
        # and is spared no more.
        kill_sweep(self.pid() if not died and self.km.is_alive() else None)
        send_report(send, cell_report(oom_before, before, outputs))


    # The running cell's messages on the iopub channel until the kernel says it is idle
    # ("idle"), dies while waited for ("died"), or tick(), run before each wait, says to wait
    # no more ("stopped"). Only this cell's messages count: an earlier cell's thread may print
    # at any time. Its streams go to output; results and errors to result(kind, content).
    def follow(self, msg_id, output, tick, result):
        while tick():
            try:
                msg = self.kc.get_iopub_msg(timeout=0.05)
            except queue.Empty:
                if not self.km.is_alive():
                    return "died"
                continue
            if msg.get("parent_header", {}).get("msg_id") != msg_id:
                continue
            kind, content = msg.get("msg_type"), msg.get("content", {})
            if kind == "status" and content.get("execution_state") == "idle":
                return "idle"
            if kind == "execute_input":
                self.count = content.get("execution_count") or self.count
            elif kind == "stream":
                output.add(b"E" if content.get("name") == "stderr" else b"O", content.get("text", "").encode())
            else:
                result(kind, content)
        return "stopped"

    def interrupt(self):
        try:
            self.km.interrupt_kernel()
        except Exception:  # noqa: BLE001
            pass

    # Whether this cell's execute_reply says it failed (its execution count taken). This
    # cell's reply, not the first on the shell channel: wait_for_ready sends a
    # kernel_info_request each second the kernel has not answered (a slow start) and every
    # one is answered, and an earlier cell's reply may be late; a reply that is not this
    # cell's says nothing of it.
    def reply_failed(self, msg_id):
        reply_by = time.monotonic() + 5
        while True:
            try:
                reply = self.kc.get_shell_msg(timeout=max(0.0, reply_by - time.monotonic()))
            except queue.Empty:
                return False
            if (reply.get("msg_type") != "execute_reply"
                    or reply.get("parent_header", {}).get("msg_id") != msg_id):
                if time.monotonic() >= reply_by:
                    return False  # a cell that keeps the channel busy does not keep its answer
                continue
            self.count = reply.get("content", {}).get("execution_count") or self.count
            return reply.get("content", {}).get("status") == "error"

    # Keep mode's cell (op J): run to its end or its interrupt, its results and errors as
    # the kernel gave them; nothing swept after it.
    def kept_cell(self, code, cap, send):
        restarted = False
        if not self.km.is_alive():
            restarted = self.restart()  # the last cell's kernel died: its state is gone
        send(b"S")
        output = Output(send, cap)
        exit_code, died = 0, not self.km.is_alive()
        if not died:
            msg_id = self.kc.execute(code.decode("utf-8", "replace"), allow_stdin=False)

            def tick():
                if INTERRUPT[0]:
                    INTERRUPT[0] = False
                    self.interrupt()
                return True

            def result(kind, content):
                nonlocal exit_code
                if kind in ("execute_result", "display_data"):
                    count = (content.get("execution_count") or 0) if kind == "execute_result" else 0
                    send(b"V", b"%d " % count + value_json(content.get("data", {})))
                elif kind == "error":
                    exit_code = 1
                    send(b"F", error_json(content))

            end = self.follow(msg_id, output, tick, result)
            died = end == "died"
            if end == "idle" and self.reply_failed(msg_id) and exit_code == 0:
                exit_code = 1
        output.exit(exit_code)
        send(b"K", b"%d %d %d" % (int(restarted), int(died), self.count))
        send(b"D")

    def shutdown(self):
        try:
            self.km.shutdown_kernel(now=True)
        except Exception:  # noqa: BLE001
            pass


# A result's MIME bundle as one JSON object of strings (a non-string value, as JSON text),
# cut to text/plain alone when it would not fit a frame.
def value_json(data):
    bundle = {str(k): v if isinstance(v, str) else json.dumps(v) for k, v in dict(data).items()}
    out = json.dumps(bundle).encode()
    if len(out) > MAX_VALUE:
        out = json.dumps({"text/plain": bundle.get("text/plain", "")[:MAX_VALUE // 8]}).encode()
    return out


def error_json(content):
    tb = [ANSI_TEXT.sub("", str(line)) for line in content.get("traceback", [])]
    err = {"ename": str(content.get("ename", "")), "evalue": str(content.get("evalue", "")), "traceback": tb}
    out = json.dumps(err).encode()
    while len(out) > MAX_VALUE and err["traceback"]:
        err["traceback"].pop(0)
        out = json.dumps(err).encode()
    return out if len(out) <= MAX_VALUE else json.dumps({"ename": err["ename"][:1000], "evalue": "",
                                                          "traceback": []}).encode()


# Keep mode's loop: cells until the sidecar ends the stream (protocol.py exits at EOF) or
# SIGTERM; the kernel is shut down either way.
def serve_kept(channel, kernel):
    signal.signal(signal.SIGUSR1, lambda *_: INTERRUPT.__setitem__(0, True))
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    try:
        while True:
            op, cap, lists = channel.request()
            INTERRUPT[0] = False  # an interrupt between cells ends nothing
            if op == b"J" and len(lists) == 1 and len(lists[0]) == 1:
                kernel.kept_cell(lists[0][0], cap, channel.send)
            else:
                sys.exit(4)
    finally:
        kernel.shutdown()


def save(outputs, stem, ext, raw):
    # A new file of the session user's own (never one a cell put there: O_EXCL, no link followed).
    outputs = os.fsdecode(outputs)
    for n in range(100):
        path = os.path.join(outputs, stem + ("-%d" % n if n else "") + ext)
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
        except FileExistsError:
            continue
        except OSError:
            return
        with os.fdopen(fd, "wb") as f:
            f.write(raw)
        return


# Channel, Output, cell_report(), send_report() and CHUNK are protocol.py's, kill_sweep()
# sweep.py's: sidecar/CMakeLists.txt appends both files to this one, then the call of main().
