// The proof of a session container's isolation before the session is handed out
// (isolation.hpp; docs/sidecar.md, "The isolation report"): a new container (create, a
// fleet's takeover, a dormant session's wake) is judged against what its create asked and
// the probe it ran with its workspace; an adopted one against the walls alone, with a probe
// of its own. One that fails is removed: a session is never served from a container whose
// walls fell, and the refusal says which.
#include <iostream>

#include "sessions/isolation/isolation.hpp"
#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "sessions/session_lifecycle.hpp"

namespace dockgate::sidecar {

namespace {

std::string failures_text(const isolation_report& r) {
  std::string out;
  for (const auto& f : r.failures) out += (out.empty() ? "" : "; ") + f;
  return out;
}

void keep(session& s, std::shared_ptr<const isolation_report> report) {
  std::lock_guard g(s.facts_mutex);
  s.isolation = std::move(report);
}

}  // namespace

std::optional<refusal> session_lifecycle::prove_isolation(session& s,
                                                          const std::string& probe_output,
                                                          const char* read_at) {
  if (executors_.isolation_probe.empty()) return std::nullopt;  // (unit tests of other rooms)
  std::optional<isolation_asked> asked;
  if (s.asked_of_engine) asked = *s.asked_of_engine;
  auto report = read_isolation(config_, engine_, s.container, asked, probe_output, read_at);
  if (report->failures.empty()) {
    keep(s, std::move(report));
    return std::nullopt;
  }
  const std::string why = failures_text(*report);
  std::cerr << "dockgate-sidecar: session " << s.id << ": isolation self-test failed (" << why
            << "); its container is removed" << std::endl;
  containers_.remove(s.container);
  return refuse(refusal_kind::failed,
                "the session's isolation is not what was asked, its container is removed: " + why);
}

bool session_lifecycle::prove_adopted(session& s) {
  if (executors_.isolation_probe.empty()) return true;
  auto report = read_isolation(config_, engine_, s.container, std::nullopt,
                               containers_.run_isolation_probe(s.container), "adopt");
  if (report->failures.empty()) {
    keep(s, std::move(report));
    return true;
  }
  std::cerr << "dockgate-sidecar: session " << s.id << ": isolation self-test failed at adoption ("
            << failures_text(*report) << "); its container is removed" << std::endl;
  return false;
}

}  // namespace dockgate::sidecar
