#include "hardening_checks.hpp"

namespace dockgate::test {

inspect_value member(inspect_value e, const char* key) {
  simdjson::dom::element out;
  if (!e || e->at_key(key).get(out) != simdjson::SUCCESS) return std::nullopt;
  return out;
}

std::string text(inspect_value e) {
  std::string_view s;
  return e && e->get_string().get(s) == simdjson::SUCCESS ? std::string(s) : std::string();
}

std::int64_t number(inspect_value e) {
  std::int64_t n = 0;
  return e && e->get_int64().get(n) == simdjson::SUCCESS ? n : INT64_MIN;
}

std::string compact(inspect_value e) {
  return e ? simdjson::minify(*e) : std::string("null");
}

bool is_false(inspect_value e) {
  return !e || e->is_null() || (e->is_bool() && !e->get_bool().value());
}

bool is_empty(inspect_value e) {
  if (!e || e->is_null()) return true;
  if (e->is_array()) return e->get_array().value().size() == 0;
  if (e->is_object()) return e->get_object().value().size() == 0;
  if (e->is_string()) return e->get_string().value().empty();
  return false;
}

inspect_record::inspect_record(const std::string& inspect_json) {
  simdjson::dom::element doc;
  if (parser_.parse(inspect_json).get(doc) != simdjson::SUCCESS) {
    violations_.push_back("inspect output is not JSON");
    return;
  }
  container_ = doc.at(0).value();
}

void expect_session_hardening(inspect_record& r, const std::string& owner) {
  const inspect_value hc = r.host_config();
  const inspect_value cfg = r.config();
  r.expect(compact(member(hc, "CapDrop")) == R"(["ALL"])",
           "CapDrop " + compact(member(hc, "CapDrop")));
  r.expect(is_empty(member(hc, "CapAdd")), "CapAdd " + compact(member(hc, "CapAdd")));
  // The sandbox profiles force their own seccomp profile (compose/policies/sandbox.json,
  // "seccomp"); the others leave docker's default, which an empty entry list means.
  const std::string opts = compact(member(hc, "SecurityOpt"));
  if (owner == "sandbox" || owner == "sandbox-egress")
    r.expect(opts.starts_with(R"(["no-new-privileges","seccomp={\"name\":\"dockgate-python\",)") &&
                 opts.find("unconfined") == std::string::npos,
             "SecurityOpt " + opts.substr(0, 120));
  else
    r.expect(opts == R"(["no-new-privileges"])", "SecurityOpt " + opts);
  r.expect(compact(member(hc, "ReadonlyRootfs")) == "true", "ReadonlyRootfs");
  const auto mem = number(member(hc, "Memory"));
  r.expect(mem > 0 && mem <= 2147483648, "Memory " + std::to_string(mem));
  const auto swap = number(member(hc, "MemorySwap"));
  r.expect(swap > 0 && swap <= 2147483648, "MemorySwap " + std::to_string(swap));
  const auto cpus = number(member(hc, "NanoCpus"));
  r.expect(cpus > 0 && cpus <= 1000000000, "NanoCpus " + std::to_string(cpus));
  const auto pids = number(member(hc, "PidsLimit"));
  r.expect(pids > 0 && pids <= 256, "PidsLimit " + std::to_string(pids));
  r.expect(compact(member(hc, "Ulimits")) ==
               R"([{"Name":"nofile","Hard":1024,"Soft":1024},{"Name":"core","Hard":0,"Soft":0}])",
           "Ulimits " + compact(member(hc, "Ulimits")));
  r.expect(text(member(hc, "NetworkMode")) == "none",
           "NetworkMode " + text(member(hc, "NetworkMode")));
  r.expect(text(member(hc, "IpcMode")) == "private", "IpcMode " + text(member(hc, "IpcMode")));
  r.expect(text(member(hc, "CgroupnsMode")) == "private",
           "CgroupnsMode " + text(member(hc, "CgroupnsMode")));
  for (const char* ns : {"PidMode", "UTSMode", "UsernsMode"})
    r.expect(text(member(hc, ns)).empty(), std::string(ns) + " " + text(member(hc, ns)));
  // The daemon-side log is bounded: an untrusted container cannot fill the host's disk.
  r.expect(compact(member(hc, "LogConfig")) ==
               R"({"Type":"json-file","Config":{"max-file":"3","max-size":"10m"}})",
           "LogConfig " + compact(member(hc, "LogConfig")));
  r.expect(is_empty(member(hc, "Binds")), "Binds " + compact(member(hc, "Binds")));
  // The container's own processes (init, keep-alive) as a uid no exec can take.
  r.expect(text(member(cfg, "User")) == "65534:65534", "User " + text(member(cfg, "User")));
  r.expect(text(member(member(cfg, "Labels"), "dockgate.owner")) == owner,
           "owner label " + compact(member(cfg, "Labels")));
}

}  // namespace dockgate::test
