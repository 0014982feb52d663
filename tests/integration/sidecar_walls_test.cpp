// What a cell can do to its own container (issue 18, docs/security.md): the processes that
// outlive every cell (the container's init, its keep-alive `sleep`, the cell runner) cannot
// be traced, rewritten, opened through /proc or signalled into running other code; a
// runner a cell stops or kills costs that cell alone; no process a cell left meets the
// next runner. Judged by the daemon's process table (`docker top`), files in the container
// read from outside, and the answers' bytes.
#include <thread>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// A cell that tries every way in to the processes it did not start: ptrace (attach, then
// an execve written at the keep-alive's instruction pointer, x86-64), its memory and
// descriptors through /proc, and a signal. Prints one line per try.
const std::string take_over = R"(import ctypes, os, struct, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.restype = ctypes.c_long
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
class Regs(ctypes.Structure):
    _fields_ = [(n, ctypes.c_ulonglong) for n in ("r15 r14 r13 r12 rbp rbx r11 r10 r9 r8 rax rcx rdx rsi rdi "
                "orig_rax rip cs eflags rsp ss fs_base gs_base ds es fs gs").split()]
def comm(p):
    try:
        return open('/proc/%d/comm' % p).read().strip()
    except OSError:
        return ''
def stat_field(p, i):
    return open('/proc/%d/stat' % p).read().rsplit(') ', 1)[1].split()[i]
def hijack(pid, script):
    if libc.ptrace(16, pid, None, None) != 0:  # PTRACE_ATTACH
        return 'attach refused'
    os.waitpid(pid, 0)
    r = Regs()
    libc.ptrace(12, pid, None, ctypes.byref(r))  # PTRACE_GETREGS
    base = (r.rsp - 8192) & ~15
    strings = b'/bin/sh\0-c\0' + script.encode() + b'\0'
    pad = -len(strings) % 8
    argv = struct.pack('<QQQQ', base, base + 8, base + 11, 0)
    code = (b'\x48\xbf' + struct.pack('<Q', base) + b'\x48\xbe' + struct.pack('<Q', base + len(strings) + pad) +
            b'\x31\xd2\xb8\x3b\x00\x00\x00\x0f\x05')  # execve(base, argv, NULL)
    def poke(at, data):
        data += b'\0' * (-len(data) % 8)
        for i in range(0, len(data), 8):
            libc.ptrace(5, pid, ctypes.c_void_p(at + i), ctypes.c_void_p(struct.unpack('<Q', data[i:i + 8])[0]))
    poke(base, strings + b'\0' * pad + argv)
    poke(r.rip, code)
    r.orig_rax = 0xffffffffffffffff  # no syscall restart
    libc.ptrace(13, pid, None, ctypes.byref(r))  # PTRACE_SETREGS
    libc.ptrace(17, pid, None, None)  # PTRACE_DETACH
    return 'taken'
me = os.getpid()
mine = {me, os.getppid()}
targets = {}
for name in os.listdir('/proc'):
    if name.isdigit() and int(name) not in mine:
        p = int(name)
        targets[p] = 'init' if p == 1 else comm(p) or '?'
runner = int(stat_field(os.getppid(), 1))  # the cell's parent is timeout, the runner's child
if runner in targets:
    targets[runner] = 'runner'
for p, what in sorted(targets.items()):
    tries = []
    try:
        open('/proc/%d/mem' % p, 'r+b').close(); tries.append('mem opened')
    except OSError as e:
        tries.append('mem %d' % e.errno)
    try:
        os.listdir('/proc/%d/fd' % p); tries.append('fds listed')
    except OSError as e:
        tries.append('fd %d' % e.errno)
    if what in ('sleep', 'init'):
        try:
            os.kill(p, signal.SIGCONT); tries.append('signalled')
        except OSError as e:
            tries.append('kill %d' % e.errno)
    if what == 'sleep':
        tries.append(hijack(p, 'while :; do date +%s%N > /tmp/still-here; sleep 0.1; done'))
    print(what, ' '.join(tries))
)";

// What the two cells below share: the runner found (the cell's parent is `timeout`, its
// parent the runner), a process that leaves the cell's session with nothing open, and
// serve(): the runner's protocol answered from fds of a caught runner, every cell FORGED.
// `parent` is what the cell's own process does meanwhile.
std::string left_behind(std::string_view parent, std::string_view rest) {
  return std::string(R"(import os, sys, time, signal, struct, threading, ctypes
def ppid(p):
    s = open('/proc/%d/stat' % p).read(); return int(s[s.rfind(')') + 2:].split()[1])
runner = ppid(os.getppid())
if os.fork():
    )") + std::string(parent) +
         R"(
os.setsid()
if os.fork(): os._exit(0)
for s in (signal.SIGHUP, signal.SIGTERM, signal.SIGPIPE): signal.signal(s, signal.SIG_IGN)
null = os.open('/dev/null', os.O_RDWR)
for fd in (0, 1, 2): os.dup2(null, fd)
def uid(p):
    try:
        for l in open('/proc/%d/status' % p):
            if l.startswith('Uid:'): return int(l.split()[1])
    except OSError: return None
def cmd(p):
    try: return open('/proc/%d/cmdline' % p, 'rb').read()
    except OSError: return b''
def catch(p):
    try:
        return os.open('/proc/%d/fd/0' % p, os.O_RDONLY), os.open('/proc/%d/fd/1' % p, os.O_WRONLY)
    except OSError:
        return None
def serve(rfd, wfd):
    def send(k, pl=b''): os.write(wfd, k + struct.pack('>I', len(pl)) + pl)
    def rd(n):
        b = b''
        while len(b) < n:
            g = os.read(rfd, n - len(b))
            if not g: raise SystemExit
            b += g
        return b
    send(b'H', b'dockgate-runner 2 %d' % os.getpid())
    while True:
        (n,) = struct.unpack('>I', rd(4)); body = rd(n)
        send(b'S')
        if body[:1] == b'C':
            send(b'O', b'FORGED\n'); send(b'X', b'0 0 0'); send(b'L', b'0\n0\n\0'); send(b'D')
        else:
            send(b'X', b'0 0 0')
)" + std::string(rest);
}

// A cell that leaves a process which stops the runner, then every new process of the
// session user (the plain clean-up's shell among them), and catches the next runner in its
// first milliseconds, still dumpable: it opens its fds 0 and 1 and answers in its name.
const std::string resist_and_impersonate = left_behind(
    "time.sleep(0.5); print('left one'); sys.exit(0)", R"(os.kill(runner, signal.SIGSTOP)
seen = {int(p) for p in os.listdir('/proc') if p.isdigit()}
while True:
    for p in os.listdir('/proc'):
        if not p.isdigit() or int(p) in seen: continue
        p = int(p)
        u = uid(p)
        if u is None: seen.add(p); continue
        if u != 1000: continue
        c = cmd(p)
        if c == b'' or c.startswith(b'runc\0'): continue
        if c.startswith(b'cat\0'): seen.add(p); continue
        os.kill(p, signal.SIGSTOP); seen.add(p)
        if c.startswith(b'python3\0-I\0-c'):
            fds = catch(p)
            if fds and os.fork() == 0:
                serve(*fds); os._exit(0)
    time.sleep(0.0005)
)");

// The same, killing instead of stopping (the runner first, then each new process but the
// next runner: nothing stopped is left to see), hidden as a zombie: its leader exits while
// a thread of it goes on, which ps shows as "Zl" (from the second red-team pass).
const std::string resist_as_zombie =
    left_behind("print('left one', flush=True); time.sleep(5); sys.exit(0)", R"(me = os.getpid()
held = set()
def loop():
    try:
        os.kill(runner, signal.SIGKILL)
    except OSError:
        pass
    while True:
        for p in os.listdir('/proc'):
            if not p.isdigit(): continue
            p = int(p)
            if p == me or p in held or uid(p) != 1000: continue
            c = cmd(p)
            if c == b'' or c.startswith(b'runc\0'): continue
            if c.startswith(b'python3\0-I\0-c'):
                os.kill(p, signal.SIGSTOP); held.add(p)
                fds = catch(p)
                if fds:
                    threading.Thread(target=serve, args=fds, daemon=True).start()
                else:
                    os.kill(p, signal.SIGKILL)
                continue
            try: os.kill(p, signal.SIGKILL)
            except OSError: pass
        time.sleep(0.0005)
threading.Thread(target=loop).start()
time.sleep(0.05)
ctypes.CDLL(None).syscall(60, 0)  # SYS_exit: the leader ends, its thread runs on ("Zl")
)");

}  // namespace

TEST_CASE(
    "walls: a process that resists the plain clean-up ends its session's container, nothing "
    "answers in the runner's name",
    "[integration][sidecar][runner][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  REQUIRE(field(sidecar.exec(sid, "print(0)"), "stdout") == "0\n");
  const std::string attack = GENERATE(resist_and_impersonate, resist_as_zombie);
  auto first = sidecar.call("POST", "/exec", exec_body(sid, attack, 2000));
  INFO(first.body << "\n" << sidecar.log());
  CHECK(first.body.find("FORGED") == std::string::npos);
  if (first.status == 500) {
    // The clean-up could not end what the cell left (the host's process table said so):
    // the container is gone, the session with it.
    CHECK(first.body ==
          R"({"detail":"session ended: a process left by a cell outlived the clean-up"})");
    CHECK(run(direct() + " inspect " + container + " >/dev/null 2>&1").status != 0);
    for (int i = 0; i < 2; ++i) {
      auto next = sidecar.call("POST", "/exec", exec_body(sid, "print(1)", 2000));
      CHECK(next.body.find("FORGED") == std::string::npos);
      CHECK(next.status == 404);
    }
  } else {
    // The clean-up was quicker than the process it had to end (a race the cell may lose):
    // nothing of the cell's is left, and the next cells are answered by a real runner.
    CHECK(first.status == 200);
    CHECK(field(first.body, "stderr").find("the cell's runner") !=
          std::string::npos);  // stopped, or ended
    CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n");
    for (int i = 0; i < 2; ++i) CHECK(field(sidecar.exec(sid, "print(1)"), "stdout") == "1\n");
  }
  // Another session of the same sidecar is untouched.
  const std::string other = new_session(sidecar);
  CHECK(field(sidecar.exec(other, "print(2)"), "stdout") == "2\n");
}

TEST_CASE("walls: a cell that lowers its runner's limits or scheduling costs only itself",
          "[integration][sidecar][runner][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  // (ioprio_get/ioprio_set: x86-64's syscall numbers, 252 and 251.)
  const std::string look =
      "import ctypes, os, resource\nprint(resource.getrlimit(resource.RLIMIT_FSIZE)[0] == "
      "resource.RLIM_INFINITY, os.getpriority(os.PRIO_PROCESS, 0), os.sched_getscheduler(0), "
      "len(os.sched_getaffinity(0)) == os.cpu_count(), ctypes.CDLL(None).syscall(252, 1, 0))";
  const std::string before = field(sidecar.exec(sid, look), "stdout");
  REQUIRE(before.starts_with("True 0 0 True "));
  // prlimit(2), setpriority(2), sched_setscheduler(2) and sched_setaffinity(2) on the
  // runner need only its uid; every later cell would inherit what they set.
  const std::string poison =
      "import os, resource\n"
      "r = int(open('/proc/%d/stat' % os.getppid()).read().rsplit(') ', 1)[1].split()[1])\n"
      "resource.prlimit(r, resource.RLIMIT_FSIZE, (0, 0))\n"
      "os.setpriority(os.PRIO_PROCESS, r, 19)\n"
      "os.sched_setscheduler(r, os.SCHED_IDLE, os.sched_param(0))\n"
      "os.sched_setaffinity(r, {min(os.sched_getaffinity(r))})\n"
      "import ctypes; ctypes.CDLL(None).syscall(251, 1, r, 3 << 13)\n"  // the idle I/O class
      "print('poisoned')\n";
  auto ran = sidecar.call("POST", "/exec", exec_body(sid, poison, 5000));
  INFO(ran.body << sidecar.log());
  CHECK(field(ran.body, "stdout") == "poisoned\n");
  // The next cells run as the first did: writing the cell file works, nothing inherited.
  for (int i = 0; i < 2; ++i) CHECK(field(sidecar.exec(sid, look), "stdout") == before);
  // The I/O class alone (ioprio_set(2) needs only the uid too).
  const std::string idle_io =
      "import ctypes, os\n"
      "r = int(open('/proc/%d/stat' % os.getppid()).read().rsplit(') ', 1)[1].split()[1])\n"
      "print(ctypes.CDLL(None).syscall(251, 1, r, 3 << 13))\n";
  CHECK(field(sidecar.exec(sid, idle_io), "stdout") == "0\n");
  // (The runner ended after that cell: the next runs as a plain exec, the one after it
  // starts a new runner.)
  for (int i = 0; i < 2; ++i) CHECK(field(sidecar.exec(sid, look), "stdout") == before);
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
}

TEST_CASE(
    "walls: a cell cannot trace, open, signal or take over the container's own processes (both "
    "paths)",
    "[integration][sidecar][cells][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  for (const auto* sidecar : {&fast, &plain}) {
    const std::string sid = new_session(*sidecar);
    const std::string container = "dockgate-sbx-" + sid;
    auto ran = sidecar->call("POST", "/exec", exec_body(sid, take_over, 20000));
    INFO(ran.body);
    REQUIRE(ran.status == 200);
    const std::string out = field(ran.body, "stdout");
    // EACCES (13) for memory and descriptors, EPERM (1) for signals and ptrace: the
    // kernel's answer to a uid that is not theirs (init, sleep) or to an undumpable
    // process (the runner).
    CHECK(out.find("init mem 13 fd 13 kill 1\n") != std::string::npos);
    CHECK(out.find("sleep mem 13 fd 13 kill 1 attach refused\n") != std::string::npos);
    if (sidecar == &fast) CHECK(out.find("runner mem 13 fd 13\n") != std::string::npos);
    CHECK(out.find("opened") == std::string::npos);
    CHECK(out.find("listed") == std::string::npos);
    CHECK(out.find("taken") == std::string::npos);
    // Nothing of the cell's runs on: the keep-alive is still `sleep infinity` and wrote
    // nothing (read from outside, a second later).
    std::this_thread::sleep_for(1s);
    const std::string left = processes(container);
    INFO(left);
    CHECK(left == std::string("/sbin/docker-init -- sleep infinity\nsleep infinity\n") +
                      (sidecar == &fast ? "<runner>\n" : ""));
    CHECK(run(direct() + " exec " + container + " test -e /tmp/still-here").status != 0);
    // The container's own processes run as the keep-alive's uid, every exec as the
    // session user (the daemon's record).
    CHECK(run(direct() + " inspect --format '{{.Config.User}}' " + container).output ==
          "65534:65534\n");
    CHECK(field(sidecar
                    ->call("POST", "/exec",
                           exec_body(sid, "import os; print(os.getuid(), os.getgid())", 10000))
                    .body,
                "stdout") == "1000 1000\n");
    sidecar->call("DELETE", "/sessions/" + sid, "");
  }
}

TEST_CASE(
    "walls: a cell that stops its runner answers at its timeout plus the kill grace, said as such, "
    "the next cell gets a new runner",
    "[integration][sidecar][runner][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  REQUIRE(field(sidecar.exec(sid, "print(0)"), "stdout") == "0\n");
  // The cell's parent is `timeout`; its parent is the runner.
  const std::string stop_runner =
      "import os, signal\n"
      "runner = int(open('/proc/%d/stat' % os.getppid()).read().rsplit(') ', 1)[1].split()[1])\n"
      "os.kill(runner, signal.SIGSTOP)\n";
  for (int round = 0; round < 2; ++round) {
    const auto t0 = std::chrono::steady_clock::now();
    auto ran = sidecar.call("POST", "/exec", exec_body(sid, stop_runner, 2000));
    const auto took = std::chrono::steady_clock::now() - t0;
    // The client's own reading of a failed call (no answer, a reset) comes first: the
    // sidecar's log can be long.
    INFO(ran.error << "\n" << ran.body << "\n" << sidecar.log());
    REQUIRE(ran.status == 200);
    // Said as what happened, not as a timeout (124, "execution exceeded").
    CHECK(field(ran.body, "stderr").find("the cell's runner was stopped (SIGSTOP)") !=
          std::string::npos);
    CHECK(field(ran.body, "exit_code") == "-1");
    // The timeout (2 s), the kill grace (2 s) and a margin (1 s), not the host's wall
    // clock behind them (the timeout + 15 s): a bound with room for a loaded machine.
    CHECK(took < 14s);
    // The stopped runner is gone with the cell's sweep; the next cell gets a new one and
    // answers as any cell does.
    CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n");
    const std::string t1 = now_stamp();
    const auto t2 = std::chrono::steady_clock::now();
    auto next = sidecar.call("POST", "/exec", exec_body(sid, "print(1)", 2000));
    const auto next_took = std::chrono::steady_clock::now() - t2;
    CHECK(field(next.body, "stdout") == "1\n");
    CHECK(field(next.body, "stderr").empty());
    CHECK(next_took < 10s);  // normal speed, with room for a loaded machine
    CHECK(exec_creates(container, t1, now_stamp()) == 1);  // the new runner, nothing else
    CHECK(processes(container) ==
          "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
  }
  // Killed outright by its cell: the same, said as an end.
  auto killed = sidecar.call("POST", "/exec",
                             exec_body(sid,
                                       "import os, signal\n"
                                       "os.kill(int(open('/proc/%d/stat' % "
                                       "os.getppid()).read().rsplit(') ', 1)[1].split()[1]), 9)\n",
                                       2000));
  INFO(killed.body);
  CHECK(field(killed.body, "stderr").find("the cell's runner stopped answering") !=
        std::string::npos);
  CHECK(field(sidecar.exec(sid, "print(2)"), "stdout") == "2\n");
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
}

TEST_CASE(
    "walls: a sidecar killed mid-cell: nothing the cell left alive meets the next run's runner",
    "[integration][sidecar][runner][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  auto first = std::make_unique<sidecar_process>(proxy);
  const std::string sid = new_session(*first);
  const std::string container = "dockgate-sbx-" + sid;
  // A process that leaves the cell's session and records, every few milliseconds, each
  // runner it sees alive; the cell then waits to be cut short.
  const std::string watcher = R"(import os, subprocess, time
subprocess.Popen(['python3', '-c', '''
import os, time
seen = set()  # (the name is cut in two so that this process's own command line is not one)
while True:
    for p in os.listdir("/proc"):
        try:
            if p.isdigit() and b"dockgate-" b"runner" in open("/proc/%s/cmdline" % p, "rb").read() and p not in seen:
                seen.add(p)
                open("/workspace/runners-seen", "a").write(p + "\\n")
        except OSError:
            pass
    time.sleep(0.003)
'''], start_new_session=True)
time.sleep(1)
print('watching', flush=True)
time.sleep(60)
)";
  std::thread cell([&] { first->call("POST", "/exec", exec_body(sid, watcher, 90000)); });
  for (int i = 0;
       i < 200 &&
       run(direct() + " exec " + container + " test -s /workspace/runners-seen").status != 0;
       ++i)
    std::this_thread::sleep_for(50ms);
  std::this_thread::sleep_for(500ms);
  first->stop(SIGKILL);
  cell.join();
  first.reset();
  REQUIRE(run(direct() + " exec " + container + " cat /workspace/runners-seen").output.size() > 1);

  sidecar_process second(proxy);
  // Adopted, the session's container was swept before the sidecar answered anything:
  // the cut-short cell's processes, its watcher and the first run's runner are gone.
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n");
  auto ran = second.call("POST", "/exec", exec_body(sid, "print('after')", 10000));
  INFO(ran.body << second.log());
  REQUIRE(field(ran.body, "stdout") == "after\n");
  // The watcher saw the first run's runner only: it was gone before the second started.
  const std::string seen =
      run(direct() + " exec " + container + " cat /workspace/runners-seen").output;
  INFO(seen);
  CHECK(std::count(seen.begin(), seen.end(), '\n') == 1);
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
}

namespace {

// A cell that replaces, in its own process, everything that could answer for a later
// cell (issue 39 item 5, the trick that forges a kernel session's later answers): every
// function and class of the runner's program it can reach (through its hooks, its frames
// and the collector), exec, compile and the hooks, each made to print FORGED and exit 0.
const std::string replace_answerer = R"(import builtins, gc, os, sys
write, leave = os.write, os._exit
def forged(*args, **kwargs):
    write(1, b'FORGED\n')
    leave(0)
places = [getattr(o, '__globals__', None) for o in gc.get_objects() + [sys.unraisablehook, sys.excepthook]]
frame = sys._getframe()
while frame is not None:
    places.append(frame.f_globals)
    frame = frame.f_back
runner = [g for g in places if isinstance(g, dict) and 'kill_sweep' in g]
for g in runner:
    for name, value in list(g.items()):
        if callable(value) and getattr(value, '__module__', None) == g.get('__name__'):
            g[name] = forged
builtins.exec = builtins.compile = forged
sys.excepthook = sys.displayhook = forged
print('replaced the runner:', bool(runner), flush=True)
)";

}  // namespace

TEST_CASE(
    "walls: a cell that replaces what answers for it forges its own answer only and the next "
    "cell's is its code's (both paths)",
    "[integration][sidecar][cells][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  for (const auto* sidecar : {&fast, &plain}) {
    const std::string sid = new_session(*sidecar);
    const std::string container = "dockgate-sbx-" + sid;
    auto forger = sidecar->call("POST", "/exec", exec_body(sid, replace_answerer, 20000));
    INFO(forger.body << sidecar->log());
    REQUIRE(forger.status == 200);
    // On the fork path the cell is a copy of the runner: it found and replaced its code
    // (this test would prove nothing otherwise); a plain python3 holds none of it.
    CHECK(field(forger.body, "stdout")
              .starts_with(sidecar == &fast ? "replaced the runner: True\n"
                                            : "replaced the runner: False\n"));
    // The next cells run their own code, judged by what they wrote in the container
    // (read through the engine) and by their answers.
    for (int i = 0; i < 2; ++i) {
      const std::string mark = "/workspace/ran-" + std::to_string(i);
      auto next = sidecar->call("POST", "/exec",
                                exec_body(sid,
                                          "open('" + mark + "', 'w').write('yes')\nprint('real', " +
                                              std::to_string(i) + ")\nraise SystemExit(7)",
                                          20000));
      INFO(next.body);
      REQUIRE(next.status == 200);
      CHECK(field(next.body, "stdout") == "real " + std::to_string(i) + "\n");
      CHECK(field(next.body, "exit_code") == "7");
      CHECK(run(direct() + " exec -u 1000:1000 " + container + " cat " + mark).output == "yes");
    }
  }
}
