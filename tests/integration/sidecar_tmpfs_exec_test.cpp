// What a cell writes it can run (issue 21 item 5; docs/security.md, "What a cell writes it
// can run"): a session's /tmp and /home/sandbox are 256 MiB tmpfs mounted exec (nosuid and
// nodev kept), through the sidecar's create body and the sandbox profile that forces it.
// Judged by the cell's output and exit code, the daemon's record of the tmpfs options and
// the container's own mount table; each case fails with the former noexec options.
#include <fstream>

#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

// The daemon's record of the session container's tmpfs: path -> options.
std::string recorded_tmpfs(const std::string& container) {
  return run(direct() + " inspect -f '{{json .HostConfig.Tmpfs}}' " + container).output;
}

// Per mount point, the options the kernel applied (mountinfo's sixth field), as the cell's
// process sees them.
const std::string mount_options = R"(
for line in open('/proc/self/mountinfo'):
    f = line.split()
    if f[4] in ('/tmp', '/home/sandbox'):
        print(f[4], 'noexec' if 'noexec' in f[5].split(',') else 'exec',
              'nosuid' in f[5].split(','), 'nodev' in f[5].split(','))
)";

void check_mounts(const sidecar_process& sidecar, const std::string& sid) {
  const std::string container = "dockgate-sbx-" + sid;
  const std::string tmpfs = recorded_tmpfs(container);
  CAPTURE(tmpfs);
  CHECK(tmpfs.find(R"("/tmp":"rw,nosuid,nodev,exec,size=256m,mode=1777")") != std::string::npos);
  CHECK(tmpfs.find(R"("/home/sandbox":"rw,nosuid,nodev,exec,size=256m,mode=1777")") !=
        std::string::npos);
  auto mounts = sidecar.exec(sid, mount_options);
  CHECK(field(mounts, "stdout") == "/tmp exec True True\n/home/sandbox exec True True\n");
}

}  // namespace

TEST_CASE("tmpfs exec: a script a cell writes to /tmp runs when executed directly",
          "[integration][sidecar][tmpfs]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  auto ran = sidecar.call("POST", "/exec", exec_body(sid, R"(
import os, subprocess, sys
with open('/tmp/x.sh', 'w') as f:
    f.write('#!/bin/sh\necho ran from tmp\n')
os.chmod('/tmp/x.sh', 0o755)
r = subprocess.run(['/tmp/x.sh'], capture_output=True, text=True)
print(r.stdout, end='')
sys.exit(r.returncode)
)"));
  INFO(ran.body << "\n" << sidecar.log());
  REQUIRE(ran.status == 200);
  CHECK(field(ran.body, "stdout") == "ran from tmp\n");
  CHECK(field(ran.body, "exit_code") == "0");
  check_mounts(sidecar, sid);
}

TEST_CASE("tmpfs exec: a compiled extension installed under ~/.local imports",
          "[integration][sidecar][tmpfs]") {
  // Built on the host with Debian 12's python3-dev: the image's python3.11 ABI.
  const std::string dir = run("mktemp -d /tmp/dockgate-ext.XXXXXX | tr -d '\\n'").output;
  const std::string so = "dgext" + run("python3 -c 'import sysconfig; "
                                       "print(sysconfig.get_config_var(\"EXT_SUFFIX\"), end=\"\")'")
                                       .output;
  {
    std::ofstream c(dir + "/dgext.c");
    c << R"(#define PY_SSIZE_T_CLEAN
#include <Python.h>
static PyObject* answer(PyObject* self, PyObject* args) { return PyLong_FromLong(42); }
static PyMethodDef methods[] = {{"answer", answer, METH_NOARGS, NULL}, {NULL, NULL, 0, NULL}};
static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "dgext", NULL, -1, methods};
PyMODINIT_FUNC PyInit_dgext(void) { return PyModule_Create(&module); }
)";
  }
  auto built =
      run("cd " + dir + " && gcc -shared -fPIC -O1 $(python3-config --includes) dgext.c -o " + so +
          " 2>&1");
  INFO(built.output);
  REQUIRE(built.status == 0);
  const std::string data = run("base64 -w0 " + dir + "/" + so).output;
  run("rm -rf " + dir);

  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy);
  const std::string sid = new_session(sidecar);
  auto uploaded = sidecar.call("POST", "/files",
                               R"({"session_id":")" + sid + R"(","path":"uploads/)" + so +
                                   R"(","data_base64":")" + data + R"("})");
  INFO(uploaded.body);
  REQUIRE(uploaded.status == 200);
  auto moved = sidecar.call("POST", "/exec", exec_body(sid, R"(
import os, shutil, site
d = site.getusersitepackages()
os.makedirs(d, exist_ok=True)
shutil.move('/workspace/uploads/)" + so + R"(', d)
print(d)
)"));
  INFO(moved.body << "\n" << sidecar.log());
  REQUIRE(moved.status == 200);
  CHECK(field(moved.body, "stdout") == "/home/sandbox/.local/lib/python3.11/site-packages\n");
  auto imported = sidecar.call("POST", "/exec", exec_body(sid, R"(
import dgext
print(dgext.answer(), dgext.__file__)
)"));
  INFO(imported.body);
  REQUIRE(imported.status == 200);
  CHECK(field(imported.body, "stdout") ==
        "42 /home/sandbox/.local/lib/python3.11/site-packages/" + so + "\n");
  CHECK(field(imported.body, "exit_code") == "0");
  check_mounts(sidecar, sid);
}
