// Cells of one session are serialised by the session's lock (docs/sidecar.md): a cell sent
// while another cell of the same session runs waits at most SANDBOX_QUEUE_TIMEOUT_SECONDS,
// then is answered 429 "session is busy" and never runs; the running cell's answer is
// whole. Judged by the answers' bytes and the session's files read from outside.
#include <future>

#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE(
    "sessions: a cell while another of the same session runs gets 429 after the queue timeout",
    "[integration][sidecar][cells]") {
  proxy_process proxy("compose/policies/sandbox.json");
  sidecar_process sidecar(proxy, {"SANDBOX_QUEUE_TIMEOUT_SECONDS=1", "SANDBOX_WARM_POOL=0"});
  const std::string sid = new_session(sidecar);
  const std::string container = "dockgate-sbx-" + sid;
  // The engine's view of the session's files (the daemon's own exec, the keep-alive user).
  auto exists = [&](const std::string& path) {
    return run(direct() + " exec " + container + " test -e " + path).status == 0;
  };

  // The first cell says it has started (a file), then runs well past the queue timeout.
  auto first = std::async(std::launch::async, [&] {
    return sidecar.call("POST", "/exec",
                        exec_body(sid,
                                  "import time\nopen('/workspace/started', 'w').close()\n"
                                  "time.sleep(6)\nprint('first done')",
                                  30000));
  });
  bool started = false;
  for (int i = 0; i < 150 && !(started = exists("/workspace/started")); ++i)
    std::this_thread::sleep_for(100ms);
  REQUIRE(started);

  // The second cell of the same session: busy, and its code never ran.
  auto second = sidecar.call(
      "POST", "/exec",
      exec_body(sid, "open('/workspace/second-ran', 'w').close()\nprint('second')", 30000));
  INFO(second.body);
  CHECK(second.status == 429);
  CHECK(second.body == R"({"detail":"session is busy"})");

  // The first cell's answer is whole.
  auto answered = first.get();
  INFO(answered.body);
  CHECK(answered.status == 200);
  CHECK(field(answered.body, "stdout") == "first done\n");
  CHECK(field(answered.body, "exit_code") == "0");
  CHECK_FALSE(exists("/workspace/second-ran"));

  // The session is free again: the next cell runs.
  CHECK(field(sidecar.exec(sid, "print(3)"), "stdout") == "3\n");
}
