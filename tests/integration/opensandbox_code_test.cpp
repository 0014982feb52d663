// OpenSandbox's code interpreter (execd's /code) on dockgate: contexts as kept IPython kernels
// in the sandbox (the kernel driver's keep mode), driven by the code-interpreter SDK's
// requests over the sandbox SDK (tests/integration/clients/opensandbox_code.js), sidecar ->
// dockgate-proxy (sandbox.json) -> the real daemon. Judged by what the client got and by the
// daemon's record of the container's processes (docker top) between the steps.
#include <chrono>
#include <thread>

#include "sidecar_harness.hpp"

using namespace dockgate::test;

namespace {

std::string node_path() {
  const char* v = std::getenv("DOCKGATE_NODE_PATH");
  if (!v || !*v)
    FAIL(
        "DOCKGATE_NODE_PATH is not set: scripts/test.sh installs the OpenSandbox SDK "
        "(scripts/node-clients.sh)");
  return v;
}

// How many of the container's processes, as the daemon lists them, have `needle` in their
// command line (`program`: as the program and its first arguments, not as some shell's text).
int processes_with(const std::string& container, const std::string& needle, bool program = false) {
  auto r = run(direct() + " top " + container + " -o pid,args 2>/dev/null | tail -n +2 | grep -c" +
               (program ? "E -- '^ *[0-9]+ +" : " -- '") + needle + "'");
  return std::atoi(r.output.c_str());
}

}  // namespace

TEST_CASE(
    "opensandbox code: a context's cells keep state, stream, fail and are interrupted, the "
    "sandbox's own processes survive, a deleted context's kernel is gone",
    "[integration][sidecar][opensandbox][code]") {
  const std::string modules = node_path();
  const char* full = std::getenv("DOCKGATE_TEST_FULL_RUNTIME_IMAGE");
  if (!full || !*full) {
    WARN(
        "skipped: DOCKGATE_TEST_FULL_RUNTIME_IMAGE is unset (/code needs ipykernel: "
        "scripts/runtime-image.sh DOCKER_HOST TAG --full)");
    return;
  }
  const std::string image = full;
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_IMAGE=" + image, "SANDBOX_IMAGES=" + runtime_image()});
  auto client = [&](const std::string& args) {
    return run("NODE_PATH=" + modules + " OPEN_SANDBOX_DOMAIN=127.0.0.1:" + sidecar.port() +
               " OPEN_SANDBOX_API_KEY=" + api_key + " timeout 180 node " + repo_root() +
               "/tests/integration/clients/opensandbox_code.js " + args);
  };

  // The small image has python3 but no IPython: the context is refused at once, saying so.
  auto missing = client("missing " + runtime_image());
  INFO(missing.output << sidecar.log());
  REQUIRE(missing.status == 0);
  CHECK(field(missing.output, "context") ==
        "POST /code/context: 500 {\"code\":\"RUNTIME_ERROR\",\"message\":\"the sandbox image has "
        "no IPython kernel: /code needs python3 with the ipykernel and jupyter_client packages "
        "(pip install ipykernel)\"}");
  CHECK(field(missing.output, "fast") == "true");

  auto ran = client("run " + image);
  INFO(ran.output << sidecar.log());
  REQUIRE(ran.status == 0);
  const std::string id = field(ran.output, "id");
  const std::string container = "dockgate-sbx-" + id;
  CHECK(field(ran.output, "context_language") == "python");
  CHECK(field(ran.output, "got") == "true");
  // State between cells; the value as execd gives it (text/plain as "text").
  CHECK(field(ran.output, "result") == "42");
  CHECK(field(ran.output, "execution_count") == "2");
  CHECK(field(ran.output, "complete") == "true");
  CHECK(field(ran.output, "streamed") == "line 0\nline 1\nline 2\n");
  CHECK(field(ran.output, "error") == "ZeroDivisionError: division by zero");
  CHECK(field(ran.output, "traceback") == "true");
  // An interrupt ends a long cell at once; the kernel and its state survive.
  CHECK(field(ran.output, "interrupted") == "KeyboardInterrupt");
  CHECK(field(ran.output, "interrupt_fast") == "true");
  CHECK(field(ran.output, "after_interrupt") == "41");
  CHECK(field(ran.output, "busy") == "409");
  CHECK(field(ran.output, "default") == "'default'");
  CHECK(field(ran.output, "plain") == "plain-2\n");
  CHECK(field(ran.output, "ruby") == "400 INVALID_REQUEST_BODY");
  CHECK(field(ran.output, "unknown") == "404 CONTEXT_NOT_FOUND");
  CHECK(field(ran.output, "listed") == "2");
  // The app a background command started outlived every /code run, as the daemon sees it.
  CHECK(field(ran.output, "app_after_code") == "200");
  CHECK(processes_with(container, "python3 -m http.server 8080", true) == 1);
  // Two kernels (the context's and the language's default), as the daemon lists them.
  CHECK(processes_with(container, "ipykernel_launcher") == 2);

  auto deleted = client("delete " + id + " " + field(ran.output, "context"));
  INFO(deleted.output << sidecar.log());
  REQUIRE(deleted.status == 0);
  CHECK(field(deleted.output, "after_delete") == "404 CONTEXT_NOT_FOUND");
  CHECK(field(deleted.output, "listed") == "0");
  // The drivers shut their kernels down: none is left (polled: a SIGTERM's shutdown).
  int kernels = -1;
  for (int i = 0; i < 100 && kernels != 0; ++i) {
    kernels = processes_with(container, "ipykernel_launcher") +
              processes_with(container, "dockgate-kernel");
    if (kernels) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  CHECK(kernels == 0);
  CHECK(processes_with(container, "python3 -m http.server 8080", true) == 1);

  // A cell runs in the default context; the pause freezes it without waiting for it, the
  // paused sandbox's /code answers 409 at once, the kill ends the cell's stream.
  auto paused = client("paused " + id);
  INFO(paused.output << sidecar.log());
  REQUIRE(paused.status == 0);
  CHECK(field(paused.output, "pause_fast") == "true");
  CHECK(field(paused.output, "code") == "409");
  CHECK(field(paused.output, "fast") == "true");
  CHECK(field(paused.output, "kill_fast") == "true");
  CHECK(field(paused.output, "long") == "KernelDied");
  CHECK(field(paused.output, "long_ended_fast") == "true");
  CHECK(run(direct() + " inspect " + container + " >/dev/null 2>&1").status != 0);
}
