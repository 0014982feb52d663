// The fork server (issue 21 item 2; docs/design.md, "Cell walls"; sidecar/runner/runner.py):
// a cell is a fork of the runner's warm interpreter, never given to the runner itself, and
// nothing a cell does reaches the next one or the warm process. Judged by what the cells
// see (/proc, sys.modules), the daemon's process table and exec record, and the answers.
#include <chrono>
#include <string>
#include <thread>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

namespace {

// Finds the runner (the warm interpreter): the one process whose command line is the
// runner's (the cell and its `timeout` stand-in carry their own).
const std::string find_runner =
    "import os\n"
    "runners = [int(p) for p in os.listdir('/proc') if p.isdigit() and\n"
    "           open(f'/proc/{p}/cmdline', 'rb').read().endswith(b'\\0dockgate-runner\\0')]\n";

// The processes a cell sees titled as the runner's pair waiting for the next cell.
const std::string find_waiting_pair =
    "import os\n"
    "waiting = [p for p in os.listdir('/proc') if p.isdigit() and\n"
    "           open(f'/proc/{p}/cmdline', 'rb').read().split(b'\\0')[1:2] == [b'(next cell)']]\n";

}  // namespace

TEST_CASE("fork server: a cell is a fork of the warm interpreter, in the plain path's shape",
          "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  CHECK(field(sidecar.exec(sid, "print(0)"), "stdout") == "0\n");
  const std::string t0 = now_stamp();
  // A fresh `python3 <cell>` has not imported ctypes or selectors; a fork of the runner
  // has. Its parent is the `timeout` stand-in, whose parent is the runner; the cell's
  // command line is its own.
  const std::string shape =
      find_runner +
      "import sys\n"
      "stat = lambda p: open(f'/proc/{p}/stat').read().rsplit(') ', 1)[1].split()\n"
      "parent = os.getppid()\n"
      "print('ctypes' in sys.modules, 'selectors' in sys.modules)\n"
      "print(open(f'/proc/{parent}/comm').read().strip(), "
      "int(stat(parent)[1]) == runners[0], len(runners))\n"
      "print(open('/proc/self/cmdline', 'rb').read().rstrip(b'\\0').split(b'\\0'))\n";
  auto a = sidecar.exec(sid, shape);
  INFO(a << sidecar.log());
  const std::string out = field(a, "stdout");
  CHECK(out.starts_with("True True\ntimeout True 1\n[b'python3', b'/tmp/dockgate-cell-"));
  CHECK(exec_creates(container, t0, now_stamp()) == 0);
}

TEST_CASE("fork server: no state passes between cells, whatever a cell changes in its copy",
          "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  // Module-level names, a monkeypatched module, builtins, sys.path, the environment, a
  // signal handler, the working directory and an imported module of the cell's own.
  const std::string leave =
      "import builtins, json, os, signal, sys\n"
      "left = 'x'\n"
      "json.dumps = lambda *a, **k: 'patched'\n"
      "builtins.planted = 1\n"
      "sys.path.insert(0, '/planted')\n"
      "os.environ['PLANTED'] = '1'\n"
      "signal.signal(signal.SIGTERM, signal.SIG_IGN)\n"
      "os.chdir('/tmp')\n"
      "open('/tmp/plantedmod.py', 'w').write('x = 1\\n')\n"
      "import plantedmod\n"
      "sys.modules['json'].loads = None\n"
      "print(json.dumps(1))\n";
  CHECK(field(sidecar.exec(sid, leave), "stdout") == "patched\n");
  const std::string look =
      "import builtins, json, os, signal, sys\n"
      "print('left' in globals(), json.dumps(1), json.loads('2'), hasattr(builtins, 'planted'),\n"
      "      '/planted' in sys.path, 'PLANTED' in os.environ,\n"
      "      signal.getsignal(signal.SIGTERM) == signal.SIG_DFL, os.getcwd(), 'plantedmod' in "
      "sys.modules)\n";
  const std::string clean = "False 1 2 False False False True /workspace False\n";
  for (int i = 0; i < 2; ++i) CHECK(field(sidecar.exec(sid, look), "stdout") == clean);
}

TEST_CASE(
    "fork server: a cell cannot trace, open, write to or outlast the warm interpreter, and after a "
    "killed cell "
    "the next one still runs right",
    "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  CHECK(field(sidecar.exec(sid, "print(0)"), "stdout") == "0\n");
  // ptrace of the runner and of the cell's own `timeout` stand-in (both forks of the
  // same non-dumpable process), their memory and fds through /proc, and the runner's
  // answer pipe through every fd number this cell holds (only its own three).
  const std::string reach =
      find_runner +
      "import ctypes\n"
      "libc = ctypes.CDLL(None, use_errno=True)\n"
      "targets = runners + [os.getppid()]\n"
      "attached = sum(1 for p in targets if libc.ptrace(16, p, 0, 0) == 0)\n"
      "opened = 0\n"
      "for p in targets:\n"
      "  for path in [f'/proc/{p}/mem', f'/proc/{p}/environ'] + "
      "[f'/proc/{p}/fd/{n}' for n in range(64)]:\n"
      "    try:\n"
      "      os.close(os.open(path, os.O_RDONLY | os.O_NONBLOCK)); opened += 1\n"
      "    except OSError: pass\n"
      "print('attached', attached, 'opened', opened, sorted(os.listdir('/proc/self/fd')))\n"
      "for fd in range(3, 256):\n"
      "  try: os.write(fd, b'X\\x00\\x00\\x00\\x050 0 0'); print('wrote', fd)\n"
      "  except OSError: pass\n";
  auto r = sidecar.exec(sid, reach);
  INFO(r << sidecar.log());
  CHECK(field(r, "stdout") == "attached 0 opened 0 ['0', '1', '2', '3']\n");
  CHECK(field(r, "exit_code") == "0");

  // The warm interpreter killed by a cell: that cell's answer says its runner is gone; the
  // next cells answer right, and a new warm interpreter serves the ones after.
  auto killer = sidecar.exec(sid, find_runner +
                                      "import signal, time\n"
                                      "for p in runners: os.kill(p, signal.SIGKILL)\n"
                                      "time.sleep(0.5)\nprint('after')\n");
  INFO(killer);
  CHECK(field(killer, "stderr").find("runner stopped answering") != std::string::npos);
  for (int i = 0; i < 3; ++i) {
    auto next = sidecar.exec(sid, "import sys\nprint(6 * 7, 'ctypes' in sys.modules)");
    INFO(next << sidecar.log());
    CHECK(field(next, "exit_code") == "0");
    CHECK(field(next, "stdout").starts_with("42 "));
  }
  // The last one ran on a new runner, as a fork.
  CHECK(field(sidecar.exec(sid, "import sys\nprint('ctypes' in sys.modules)"), "stdout") ==
        "True\n");
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
}

TEST_CASE(
    "fork server: a module of the session's own that python3 would import first is the one a cell "
    "gets",
    "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  // The cell's directory is first on a script's sys.path: a plain `python3 <cell>` imports
  // /tmp/struct.py, not the struct the warm interpreter (ctypes) has loaded.
  CHECK(field(sidecar.exec(sid, "open('/tmp/struct.py', 'w').write('X = \"mine\"\\n')"),
              "exit_code") == "0");
  auto shadowed = sidecar.exec(
      sid, "import struct, sys\nprint(getattr(struct, 'X', 'stdlib'), 'ctypes' in sys.modules)");
  INFO(shadowed << sidecar.log());
  CHECK(field(shadowed, "stdout") == "mine False\n");
  // Gone again, the cells fork.
  CHECK(field(sidecar.exec(sid, "import os\nos.remove('/tmp/struct.py')"), "exit_code") == "0");
  CHECK(
      field(
          sidecar.exec(
              sid,
              "import struct, sys\nprint(getattr(struct, 'X', 'stdlib'), 'ctypes' in sys.modules)"),
          "stdout") == "stdlib True\n");
}

TEST_CASE(
    "fork server: the warm imports read no file of the session's, and a cell gets the session's "
    "matplotlib "
    "configuration and user-site packages as python3 would",
    "[integration][sidecar][runner][forkserver][notebook]") {
  const char* v = std::getenv("DOCKGATE_TEST_FULL_RUNTIME_IMAGE");
  if (!v || !*v) {
    WARN(
        "DOCKGATE_TEST_FULL_RUNTIME_IMAGE is unset: the warm matplotlib needs the full image "
        "(test.sh sets it)");
    return;
  }
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + std::string(v)});
  const std::string sid = new_session(sidecar);
  CHECK(field(sidecar.exec(sid, "import sys\nprint('matplotlib' in sys.modules)"), "stdout") ==
        "True\n");
  // FIFOs where matplotlib looks for its configuration at import; then the runner killed,
  // so the next one warms up with them there. Opening either would hang it.
  auto plant = sidecar.exec(
      sid, find_runner +
               "import signal, time\n"
               "os.makedirs(os.path.expanduser('~/.config/matplotlib'), exist_ok=True)\n"
               "os.mkfifo('/workspace/matplotlibrc')\n"
               "os.mkfifo(os.path.expanduser('~/.config/matplotlib/matplotlibrc'))\n"
               "for p in runners: os.kill(p, signal.SIGKILL)\n"
               "time.sleep(0.5)\n");
  INFO(plant);
  CHECK(field(plant, "stderr").find("runner stopped answering") != std::string::npos);
  // The new runner answers; with a configuration of the session's, cells run as execs.
  auto exec_path = sidecar.exec(sid, "import sys\nprint('ctypes' in sys.modules)");
  INFO(exec_path << sidecar.log());
  CHECK(field(exec_path, "stdout") == "False\n");
  CHECK(field(sidecar.exec(sid,
                           "import os\nos.remove('/workspace/matplotlibrc')\n"
                           "os.remove(os.path.expanduser('~/.config/matplotlib/matplotlibrc'))"),
              "exit_code") == "0");
  // Its warm-up (beside the requests: cells run as execs until it has ended) finishes with
  // the FIFOs there: then the cells fork, matplotlib imported.
  std::string forked;
  for (auto until = std::chrono::steady_clock::now() + std::chrono::seconds(60);
       std::chrono::steady_clock::now() < until;
       std::this_thread::sleep_for(std::chrono::milliseconds(200))) {
    forked =
        field(sidecar.exec(
                  sid, "import sys\nprint('matplotlib' in sys.modules, 'ctypes' in sys.modules)"),
              "stdout");
    if (forked != "False False\n") break;  // an exec while the warm-up runs
  }
  CHECK(forked == "True True\n");

  // The session's own matplotlibrc is read as python3 would read it.
  CHECK(field(sidecar.exec(sid, "open('/workspace/matplotlibrc', 'w').write('font.size: 31\\n')"),
              "exit_code") == "0");
  CHECK(field(sidecar.exec(sid, "import matplotlib\nprint(matplotlib.rcParams['font.size'])"),
              "stdout") == "31.0\n");
  CHECK(field(sidecar.exec(sid, "import os\nos.remove('/workspace/matplotlibrc')"), "exit_code") ==
        "0");
  // A package installed to the user site (pip install --user) comes before the system's.
  const std::string user_pandas =
      "import os, site\n"
      "d = os.path.join(site.getusersitepackages(), 'pandas')\n"
      "os.makedirs(d)\n"
      "open(os.path.join(d, '__init__.py'), 'w').write('X = \"mine\"\\n')\n";
  CHECK(field(sidecar.exec(sid, user_pandas), "exit_code") == "0");
  auto mine = sidecar.exec(sid, "import pandas\nprint(getattr(pandas, 'X', 'system'))");
  INFO(mine);
  CHECK(field(mine, "stdout") == "mine\n");
}

TEST_CASE(
    "fork server: the next cell's fork is made after the last one's sweep and waits undumpable, "
    "holding only its pipes",
    "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  CHECK(field(sidecar.exec(sid, "print(0)"), "stdout") == "0\n");
  // Between cells: the stand-in (the cell's pipes, its go, the pidfd of its child, the
  // cell's go) and the cell (its pipes and its go), neither dumpable (/proc/PID/fd is
  // root's), both children of the runner's line as `processes` leaves them out.
  // (Polled until the pair is waiting: next_cell_pair asks `top` once per title, and a
  // first cell that is an exec while the warm-up runs may end before the pair is made, or
  // catch the stand-in between its fork and its closing of the runner's fds.)
  const std::string waiting_pair =
      "timeout (next cell) root 0 1 2 3 4 5\npython3 (next cell) root 0 1 2 4\n";
  std::string pair;
  for (int i = 0; i < 100 && (pair = next_cell_pair(container)) != waiting_pair; ++i)
    std::this_thread::sleep_for(50ms);
  CHECK(pair == waiting_pair);
  CHECK(processes(container) == "/sbin/docker-init -- sleep infinity\nsleep infinity\n<runner>\n");
  // While a cell runs there is no other: the pair is the cell and its stand-in, retitled.
  auto during = sidecar.exec(sid, find_waiting_pair + "print(waiting)\n");
  INFO(during << sidecar.log());
  CHECK(field(during, "stdout") == "[]\n");
  // A cell the fork does not fit (its own module shadows a warm one) runs as an exec: the
  // pair made for it is ended, not left beside it.
  CHECK(field(sidecar.exec(sid, "open('/tmp/struct.py', 'w').write('X = 1\\n')"), "exit_code") ==
        "0");
  auto exec_cell = sidecar.exec(
      sid, find_waiting_pair + "import sys\nprint('ctypes' in sys.modules, waiting)\n");
  INFO(exec_cell << sidecar.log());
  CHECK(field(exec_cell, "stdout") == "False []\n");
}

namespace {

// The cell's file name made the same on both paths (a random 32-character stem).
std::string same_cell(std::string text) {
  for (std::size_t at = 0; (at = text.find("dockgate-cell-", at)) != std::string::npos;) {
    at += 14;
    if (text.size() >= at + 32) text.replace(at, 32, 32, '0');
  }
  return text;
}

// Interpreter state `python3 <cell>` starts with, printed one probe a line: what a fork of
// the warm interpreter could inherit instead (issue 39 item 6). Nothing in it depends on
// the process or the session (no PID, no address, the cell's own path left out).
const std::string interpreter_probes = R"(import os, sys
print('flags', sys.flags)
print('dont_write_bytecode', sys.dont_write_bytecode)
print('path', sys.path[0] == os.path.dirname(__file__), sys.path[1:])
for name in ('stdin', 'stdout', 'stderr'):
    f = getattr(sys, name)
    raw = getattr(f.buffer, 'raw', f.buffer)
    print(name, f.line_buffering, f.write_through, type(f.buffer).__name__, f.encoding, f.errors,
          getattr(f, 'mode', None), raw.name, f is getattr(sys, '__%s__' % name))
print('stdin newline', repr(sys.stdin.read()), sys.stdin.newlines)
def depth():
    f, n = sys._getframe(), 0
    while f: n, f = n + 1, f.f_back
    return n
print('frames', depth())
try:
    sys._getframe(1)
    print('a frame under the module')
except ValueError as e:
    print('frame 1:', e)
import traceback
print('stack', [(f.name, f.line) for f in traceback.extract_stack()])
def reach(n):
    try: return reach(n + 1)
    except RecursionError: return n
print('recursion', sys.getrecursionlimit(), reach(0))
import signal
print('signals', sorted((s.name, str(signal.getsignal(s))) for s in signal.valid_signals()
                        if s not in (signal.SIGKILL, signal.SIGSTOP) and signal.getsignal(s) != signal.SIG_DFL))
print('mask', signal.pthread_sigmask(signal.SIG_BLOCK, []))
import warnings
print('warnings', warnings.filters)
import threading
print('threads', threading.active_count(), threading.main_thread().is_alive(),
      threading.current_thread() is threading.main_thread())
import subprocess
print('child flags', subprocess._args_from_interpreter_flags())
import site
print('site', site.ENABLE_USER_SITE, site.USER_SITE is not None)
print('hooks', sys.excepthook is sys.__excepthook__, sys.displayhook is sys.__displayhook__,
      sys.breakpointhook is sys.__breakpointhook__, sys.gettrace(), sys.getprofile())
print('umask', os.umask(0o022), os.getcwd())
print('main', __name__, sorted(k for k in vars(sys.modules['__main__']) if k.startswith('__')))
os.environ['PYTHONBREAKPOINT'] = '0'
breakpoint()
print('breakpoint honours PYTHONBREAKPOINT')
import atexit
atexit.register(print, 'at exit')
def late():
    import time
    time.sleep(0.2)
    print('thread joined')
threading.Thread(target=late).start()
print('end of the module')
)";

}  // namespace

TEST_CASE(
    "fork server: a cell starts with the interpreter state of a fresh python3 (probes compared "
    "with plain execs)",
    "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process fast(proxy);
  sidecar_process plain(proxy, {"SANDBOX_CELL_RUNNER=0", "SANDBOX_INSTANCE=plain" + fast.port()});
  const std::string fast_sid = new_session(fast);
  const std::string plain_sid = new_session(plain);
  // The fork path serves the fast session: a fresh python3 has not imported ctypes.
  CHECK(field(fast.exec(fast_sid, "import sys\nprint('ctypes' in sys.modules)"), "stdout") ==
        "True\n");
  CHECK(field(plain.exec(plain_sid, "import sys\nprint('ctypes' in sys.modules)"), "stdout") ==
        "False\n");
  auto both = [&](const std::string& code) {
    auto a = fast.call("POST", "/exec", exec_body(fast_sid, code, 20000));
    auto b = plain.call("POST", "/exec", exec_body(plain_sid, code, 20000));
    INFO(code << "\nfork:  " << a.body << "\nplain: " << b.body << fast.log());
    CHECK(a.status == 200);
    CHECK(same_cell(a.body) == same_cell(b.body));
    return same_cell(a.body);
  };
  // Every probe; and the module's end as python3's: the thread joined, then atexit.
  const std::string probed = both(interpreter_probes);
  CHECK(field(probed, "stdout").find("frame 1: call stack is not deep enough\n") !=
        std::string::npos);
  CHECK(field(probed, "stdout").ends_with("end of the module\nthread joined\nat exit\n"));
  // A runaway recursion's traceback: the same count of repeated lines (no frame of the
  // runner's under the cell's).
  const std::string runaway = both("def down(n):\n    return down(n + 1)\ndown(0)\n");
  CHECK(field(runaway, "stderr").find("more times]\nRecursionError: maximum recursion depth") !=
        std::string::npos);
  CHECK(field(runaway, "exit_code") == "1");
  // Exits: a SyntaxError, SystemExit with text, a KeyboardInterrupt (python3 ends by
  // SIGINT: 130).
  const std::string syntax = both("x = (\n");
  INFO(syntax);
  CHECK(field(syntax, "stderr").starts_with("File \"/tmp/dockgate-cell-"));
  CHECK(field(both("import sys\nsys.exit('bye')"), "exit_code") == "1");
  CHECK(field(both("import os, signal\nos.kill(os.getpid(), signal.SIGINT)"), "exit_code") ==
        "130");
  // Output order across the two streams, flushed at exit.
  both("import sys\nprint('a', end='')\nsys.stderr.write('b')\nprint('c' * 10000)\n");

  // A user-site .pth that puts a directory first on sys.path: python3 imports the
  // session's struct from it, not the one the warm interpreter holds (ctypes imports it).
  const std::string plant =
      "import os, site\n"
      "os.makedirs('/tmp/first', exist_ok=True)\n"
      "open('/tmp/first/struct.py', 'w').write('X = \"mine\"\\n')\n"
      "os.makedirs(site.getusersitepackages(), exist_ok=True)\n"
      "open(os.path.join(site.getusersitepackages(), 'first.pth'), 'w')"
      ".write('import sys; sys.path.insert(0, \"/tmp/first\")\\n')\n";
  both(plant);
  const std::string shadowed =
      both("import struct, sys\nprint(getattr(struct, 'X', 'stdlib'), sys.path[0])\n");
  CHECK(field(shadowed, "stdout") == "mine /tmp\n");
}

TEST_CASE("fork server: every cell's random state is its own",
          "[integration][sidecar][runner][forkserver]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  // The warm interpreter has imported random (tempfile does): each fork reseeds it, as a
  // fresh import would, and tempfile's names are drawn anew.
  const std::string draw =
      "import random, sys, tempfile\n"
      "print('random' in sys.modules, random.random(), next(tempfile._get_candidate_names()))\n";
  std::set<std::string> seen;
  for (int i = 0; i < 3; ++i) {
    auto a = sidecar.exec(sid, draw);
    INFO(a);
    CHECK(field(a, "exit_code") == "0");
    seen.insert(field(a, "stdout"));
  }
  CHECK(seen.size() == 3);
}
