#pragma once
// The daemon's record of a session container, judged as the profile tests judge it: a
// walker over `docker inspect` output and the hardening that compose/policies/sandbox.json
// and aivory.json both force. Each test adds the checks of its own profile.

#include <simdjson.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace dockgate::test {

// A value of the record, or nullopt when the daemon's version does not report it.
using inspect_value = std::optional<simdjson::dom::element>;

inspect_value member(inspect_value e, const char* key);
std::string text(inspect_value e);     // a string, else ""
std::int64_t number(inspect_value e);  // an integer, else INT64_MIN
std::string compact(inspect_value e);  // minified JSON, "null" when absent
bool is_false(inspect_value e);        // absent, null or false
bool is_empty(inspect_value e);        // absent, null, [], {} or ""

// One container's `docker inspect` output and the violations found in it.
class inspect_record {
 public:
  explicit inspect_record(const std::string& inspect_json);
  inspect_record(const inspect_record&) = delete;
  inspect_record& operator=(const inspect_record&) = delete;

  bool parsed() const { return container_.has_value(); }  // else the one violation says so
  inspect_value container() const { return container_; }
  inspect_value host_config() const { return member(container_, "HostConfig"); }
  inspect_value config() const { return member(container_, "Config"); }

  void expect(bool ok, const std::string& what) {
    if (!ok) violations_.push_back(what);
  }
  const std::vector<std::string>& violations() const { return violations_; }

 private:
  simdjson::dom::parser parser_;
  inspect_value container_;
  std::vector<std::string> violations_;
};

// What both shipped session profiles force, whatever the client sent: every capability
// dropped, no-new-privileges, a read-only root, memory, swap, CPU and pids limits, the
// ulimits, no network, private IPC and cgroup namespaces, no host PID, UTS or user
// namespace, the bounded daemon-side log, no client bind, the container's own processes
// as 65534:65534, and the owner label `owner`.
void expect_session_hardening(inspect_record& r, const std::string& owner);

}  // namespace dockgate::test
