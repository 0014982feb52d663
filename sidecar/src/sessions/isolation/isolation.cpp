// The isolation report's reading and judging (isolation.hpp: the invariants). No I/O here but
// read_isolation's one inspect: the record and the probe's lines are parsed as given.
#include "sessions/isolation/isolation.hpp"

#include <simdjson.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// A field that may be absent (simdjson's result: converting one that is an error throws).
using field = simdjson::simdjson_result<simdjson::dom::element>;

std::optional<std::int64_t> int_at(field e) {
  std::int64_t v = 0;
  if (e.get_int64().get(v) == simdjson::SUCCESS) return v;
  return std::nullopt;
}

std::vector<std::string> strings_at(field e) {
  std::vector<std::string> out;
  simdjson::dom::array a;
  if (e.get_array().get(a) != simdjson::SUCCESS) return out;
  for (auto v : a) {
    std::string_view text;
    if (v.get_string().get(text) == simdjson::SUCCESS) out.emplace_back(text);
  }
  return out;
}

std::string string_at(field e) {
  std::string_view text;
  return e.get_string().get(text) == simdjson::SUCCESS ? std::string(text) : std::string();
}

// A SecurityOpt's seccomp entry ("seccomp=<value>", or the older "seccomp:<value>"): the
// daemon's own profile unless one is named; a custom profile's name is its top-level "name"
// (the gate's sandbox profile names the one it forces), else "custom".
void read_seccomp(const std::vector<std::string>& security_opt, isolation_record& r) {
  for (const auto& opt : security_opt) {
    if (!opt.starts_with("seccomp=") && !opt.starts_with("seccomp:")) continue;
    const std::string value = opt.substr(8);
    if (value == "unconfined") {
      r.seccomp = "unconfined";
      r.seccomp_profile.clear();
      continue;
    }
    if (value == "builtin") continue;  // the daemon's own, by name
    r.seccomp = "custom";
    r.seccomp_profile = "custom";
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view name;
    if (p.parse(value).get(doc) == simdjson::SUCCESS &&
        doc["name"].get_string().get(name) == simdjson::SUCCESS && !name.empty())
      r.seccomp_profile = std::string(name);
  }
  if (r.seccomp == "default") r.seccomp_profile = "docker-default";
}

void read_host_config(simdjson::dom::element hc, isolation_record& r) {
  r.runtime = string_at(hc["Runtime"]);
  r.network = string_at(hc["NetworkMode"]);
  bool flag = false;
  r.privileged = !(hc["Privileged"].get_bool().get(flag) == simdjson::SUCCESS && !flag);
  r.read_only_root = hc["ReadonlyRootfs"].get_bool().get(flag) == simdjson::SUCCESS && flag;
  r.cap_add = strings_at(hc["CapAdd"]);
  r.cap_drop = strings_at(hc["CapDrop"]);
  const auto security_opt = strings_at(hc["SecurityOpt"]);
  r.no_new_privileges =
      std::any_of(security_opt.begin(), security_opt.end(), [](const std::string& o) {
        return o == "no-new-privileges" || o == "no-new-privileges:true" ||
               o == "no-new-privileges=true";
      });
  read_seccomp(security_opt, r);
  simdjson::dom::object tmpfs;
  if (hc["Tmpfs"].get_object().get(tmpfs) == simdjson::SUCCESS)
    for (auto [path, options] : tmpfs) {
      std::string_view text;
      if (options.get_string().get(text) != simdjson::SUCCESS) text = {};
      r.tmpfs.emplace_back(std::string(path), std::string(text));
    }
  r.memory = int_at(hc["Memory"]).value_or(0);
  r.memory_swap = int_at(hc["MemorySwap"]).value_or(0);
  r.nano_cpus = int_at(hc["NanoCpus"]).value_or(0);
  r.pids = int_at(hc["PidsLimit"]).value_or(0);
  simdjson::dom::array ulimits;
  if (hc["Ulimits"].get_array().get(ulimits) == simdjson::SUCCESS)
    for (auto u : ulimits)
      if (string_at(u["Name"]) == "nofile")
        r.nofile = std::pair(int_at(u["Soft"]).value_or(-1), int_at(u["Hard"]).value_or(-1));
}

bool all_zero_hex(std::string_view v) {
  return !v.empty() && v.find_first_not_of('0') == std::string_view::npos;
}

// The errnos that say a wall refused: the kernel's (EPERM, EACCES), a seccomp profile's
// (EPERM, or ENOSYS for what it does not name), and for a socket a family or type the
// kernel (gVisor's netstack with no network) does not offer. Anything else (ENOENT, EINVAL,
// "error") says the test went wrong, not that the wall held.
bool refused(std::string_view wall, std::string_view errno_name) {
  static const std::set<std::string_view> refusals = {"EPERM", "EACCES", "ENOSYS"};
  static const std::set<std::string_view> no_family = {"EAFNOSUPPORT", "EPROTONOSUPPORT",
                                                       "ESOCKTNOSUPPORT"};
  if (refusals.contains(errno_name)) return true;
  return wall.starts_with("raw_") && no_family.contains(errno_name);
}

void judge_probe(const std::map<std::string, std::string>& seen, std::vector<std::string>& out) {
  auto at = [&](const std::string& k) {
    auto it = seen.find(k);
    return it == seen.end() ? std::string() : it->second;
  };
  if (at("end") != "1" || seen.contains("exit")) {
    out.push_back("the self-test did not run to its end" +
                  (at("exit").empty() ? std::string() : " (exit " + at("exit") + ")"));
    return;
  }
  static const std::vector<std::pair<std::string, std::string>> walls = {
      {"root_write", "a write to the root file system"},
      {"raw_inet", "a raw socket (AF_INET, SOCK_RAW)"},
      {"raw_packet", "a raw socket (AF_PACKET)"},
      {"mount", "a mount (tmpfs)"},
      {"ptrace", "a ptrace attach of PID 1"}};
  for (const auto& [wall, what] : walls) {
    const std::string v = at("deny." + wall);
    if (v == "allowed")
      out.push_back(what + " succeeded");
    else if (wall == "root_write" && v != "EROFS" && !(refused(wall, v) && at("root.ro") == "1"))
      // Only the file system's refusal counts: EACCES alone is the permission of `/`, and a
      // writable root file system has writable places below it.
      out.push_back(what + " failed with " + (v.empty() ? "nothing" : v) +
                    ", not EROFS: the root file system is not read-only");
    else if (wall != "root_write" && !refused(wall, v))
      out.push_back(what + ": " + (v.empty() ? "not tried" : v) + " does not show the wall");
  }
  for (const char* cap : {"CapEff", "CapPrm", "CapBnd", "CapAmb"})
    if (const std::string v = at(std::string("status.") + cap); !v.empty() && !all_zero_hex(v))
      out.push_back(std::string("the session user's ") + cap + " is " + v + ", not empty");
  if (const std::string v = at("status.NoNewPrivs"); !v.empty() && v != "1")
    out.push_back("the session user's NoNewPrivs is " + v);
  const std::string uid = at("status.Uid");
  if (uid.empty() || uid == "0" || uid.starts_with("0 ") || uid.find(" 0") != std::string::npos)
    out.push_back("the session user is root, or its uid was not shown (" + uid + ")");
}

void judge_record(const isolation_record& r, std::vector<std::string>& out) {
  if (!r.read) {
    out.push_back("the daemon's record of the container could not be read");
    return;
  }
  if (!r.running) out.push_back("the container is not running");
  if (r.privileged) out.push_back("the container is privileged");
  if (!r.cap_add.empty()) out.push_back("capabilities added: " + r.cap_add.front());
  if (std::find(r.cap_drop.begin(), r.cap_drop.end(), "ALL") == r.cap_drop.end())
    out.push_back("not every capability is dropped");
  if (!r.no_new_privileges) out.push_back("no-new-privileges is not set");
  if (r.seccomp == "unconfined") out.push_back("seccomp is unconfined");
}

std::string text_of(const std::string& s) {
  return s.empty() ? "(none)" : s;
}
std::string text_of(std::int64_t v) {
  return std::to_string(v);
}

void judge_asked(const isolation_asked& a, const isolation_record& r,
                 std::vector<std::string>& out) {
  auto differs = [&](const char* what, const auto& asked, const auto& got) {
    if (asked && *asked != got)
      out.push_back(std::string(what) + " asked " + text_of(*asked) + ", the record has " +
                    text_of(got));
  };
  differs("runtime", a.runtime, r.runtime);
  differs("network", a.network, r.network);
  differs("memory", a.memory, r.memory);
  differs("memory+swap", a.memory_swap, r.memory_swap);
  differs("NanoCpus", a.nano_cpus, r.nano_cpus);
  differs("PidsLimit", a.pids, r.pids);
  if (a.read_only_root && *a.read_only_root && !r.read_only_root)
    out.push_back("a read-only root asked, the record has a writable one");
}

}  // namespace

isolation_asked isolation_asked_of(std::string_view create_body) {
  isolation_asked a;
  simdjson::dom::parser p;
  simdjson::dom::element doc, hc;
  if (p.parse(create_body).get(doc) != simdjson::SUCCESS ||
      doc["HostConfig"].get(hc) != simdjson::SUCCESS)
    return a;
  std::string_view text;
  bool flag = false;
  if (hc["Runtime"].get_string().get(text) == simdjson::SUCCESS) a.runtime = std::string(text);
  if (hc["NetworkMode"].get_string().get(text) == simdjson::SUCCESS) a.network = std::string(text);
  a.memory = int_at(hc["Memory"]);
  a.memory_swap = int_at(hc["MemorySwap"]);
  a.nano_cpus = int_at(hc["NanoCpus"]);
  a.pids = int_at(hc["PidsLimit"]);
  if (hc["ReadonlyRootfs"].get_bool().get(flag) == simdjson::SUCCESS) a.read_only_root = flag;
  return a;
}

isolation_record read_isolation_record(std::string_view inspect_body) {
  isolation_record r;
  simdjson::dom::parser p;
  simdjson::dom::element doc, hc;
  if (p.parse(inspect_body).get(doc) != simdjson::SUCCESS ||
      doc["HostConfig"].get(hc) != simdjson::SUCCESS)
    return r;
  r.read = true;
  bool running = false;
  r.running = doc["State"]["Running"].get_bool().get(running) == simdjson::SUCCESS && running;
  r.user = string_at(doc["Config"]["User"]);
  r.workspace_label = string_at(doc["Config"]["Labels"]["dockgate.workspace"]);
  read_host_config(hc, r);
  r.gateway = string_at(doc["NetworkSettings"]["Networks"][r.network]["Gateway"]);
  simdjson::dom::array mounts;
  if (doc["Mounts"].get_array().get(mounts) == simdjson::SUCCESS)
    for (auto m : mounts) r.mounts.emplace_back(string_at(m["Type"]), string_at(m["Destination"]));
  return r;
}

std::map<std::string, std::string> read_probe_output(std::string_view out) {
  std::map<std::string, std::string> seen;
  std::size_t lines = 0;
  while (!out.empty() && lines++ < 200) {
    const auto nl = out.find('\n');
    const std::string_view line = out.substr(0, nl);
    out = nl == std::string_view::npos ? std::string_view() : out.substr(nl + 1);
    const auto eq = line.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq > 64 || line.size() > 4096) continue;
    seen.emplace(std::string(line.substr(0, eq)), std::string(line.substr(eq + 1)));
  }
  return seen;
}

std::string isolation_probe_answer(const client::exec_result& r) {
  if (!r.started) return "exit=not started: " + r.error.substr(0, 200) + "\n";
  if (r.exit_code == 0 && !r.timed_out) return r.stdout_data;
  std::string out = "exit=" + std::to_string(r.exit_code) + (r.timed_out ? " (timed out)" : "");
  const std::string_view err =
      std::string_view(r.stderr_data)
          .substr(r.stderr_data.size() > 200 ? r.stderr_data.size() - 200 : 0);
  out += " " + std::string(err.substr(0, err.find_last_not_of('\n') + 1));
  for (char& ch : out)
    if (ch == '\n') ch = ' ';
  return out + "\n" + r.stdout_data;
}

std::vector<std::string> isolation_failures(const std::optional<isolation_asked>& asked,
                                            const isolation_record& record,
                                            const std::map<std::string, std::string>& seen) {
  std::vector<std::string> out;
  judge_probe(seen, out);
  judge_record(record, out);
  if (asked && record.read) judge_asked(*asked, record, out);
  return out;
}

std::shared_ptr<isolation_report> read_isolation(const config& c, const container_engine& engine,
                                                 const std::string& container,
                                                 std::optional<isolation_asked> asked,
                                                 std::string_view probe_output,
                                                 std::string read_at) {
  const auto t0 = std::chrono::steady_clock::now();
  auto report = std::make_shared<isolation_report>();
  report->asked = std::move(asked);
  report->read_at = std::move(read_at);
  report->read_time = std::chrono::system_clock::now();
  const auto inspected = engine.inspect(container, 20s);
  if (inspected.status == 200) report->record = read_isolation_record(inspected.body);
  report->seen = read_probe_output(probe_output);
  // The egress proxy's list for this network (egress_policy.hpp write_egress_policy: a file
  // named by its gateway), read back as the proxy will read it.
  const auto& gw = report->record.gateway;
  if (c.network == "allowlist" && !gw.empty() &&
      gw.find_first_not_of("0123456789.") == std::string::npos) {
    std::ifstream in(c.egress_policy_dir + "/" + gw, std::ios::binary);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (in.good() || in.eof()) report->egress_list = text.substr(0, 64 * 1024);
  }
  report->failures = isolation_failures(report->asked, report->record, report->seen);
  report->cost =
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now() - t0);
  return report;
}

}  // namespace dockgate::sidecar
