// At start-up a sidecar adopts its instance's running sessions, and first ends whatever a
// cell of the last run may have left in them (docs/security.md, what a cell can do to its
// own container): a leftover process of the session user is swept and the session
// adopted; one the sweep cannot end (the engine's process table still shows a process of
// another uid than the keep-alive's) makes the session tainted: its container is removed,
// not adopted. Judged by the engine's record and process table, and the answers.
#include "sidecar_harness.hpp"

using namespace dockgate::test;
using namespace std::chrono_literals;

TEST_CASE(
    "sessions: at start-up a tainted session is removed, not adopted, and a clean one is swept and "
    "adopted",
    "[integration][sidecar][walls]") {
  proxy_process proxy("compose/policies/sandbox.json");
  const std::string instance = unique_name("adopt");
  const std::vector<std::string> env = {"SANDBOX_WARM_POOL=0", "SANDBOX_INSTANCE=" + instance};
  std::string clean, tainted;
  {
    auto keep = env;
    keep.push_back("SANDBOX_KEEP_SESSIONS_ON_STOP=1");
    sidecar_process first(proxy, keep);
    clean = new_session(first);
    tainted = new_session(first);
    REQUIRE(field(first.exec(clean, "print(1)"), "stdout") == "1\n");
    REQUIRE(field(first.exec(tainted, "print(1)"), "stdout") == "1\n");
    first.stop(SIGTERM);  // the sessions are kept for the next start
  }
  const std::string clean_c = "dockgate-sbx-" + clean;
  const std::string tainted_c = "dockgate-sbx-" + tainted;
  REQUIRE(container_exists(clean_c));
  REQUIRE(container_exists(tainted_c));
  // Straight on the engine, as a cell of the last run could have left them: a process of
  // the session user in one (the sweep ends it), and in the other one of a uid that the
  // session user's sweep cannot signal.
  REQUIRE(run(direct() + " exec -d -u 1000:1000 " + clean_c + " sleep 1000").status == 0);
  REQUIRE(run(direct() + " exec -d -u 1001:1001 " + tainted_c + " sleep 1001").status == 0);
  for (const auto& [c, left] :
       {std::pair{clean_c, "sleep 1000"}, std::pair{tainted_c, "sleep 1001"}}) {
    bool alive = false;
    for (int i = 0; i < 50 && !(alive = processes(c).find(left) != std::string::npos); ++i)
      std::this_thread::sleep_for(100ms);
    REQUIRE(alive);
  }

  sidecar_process second(proxy, env);  // adopts (or removes) before it listens
  // The tainted session's container is gone from the engine; its id is unknown.
  CHECK(run(direct() + " inspect " + tainted_c + " >/dev/null 2>&1").status != 0);
  CHECK(second.log().find(
            "session " + tainted +
            ": a process left by a cell outlived the kill sweep; its container is removed") !=
        std::string::npos);
  auto refused = second.call("POST", "/exec", exec_body(tainted, "print(2)", 10000));
  INFO(refused.body << "\n" << second.log());
  CHECK(refused.status == 404);
  // The clean one is adopted, its leftover ended, and it works.
  CHECK(container_exists(clean_c));
  CHECK(processes(clean_c).find("sleep 1000") == std::string::npos);
  CHECK(field(second.exec(clean, "print(3)"), "stdout") == "3\n");
  CHECK(second.call("DELETE", "/sessions/" + clean, "").status == 200);
  CHECK_FALSE(container_exists(clean_c));
}
