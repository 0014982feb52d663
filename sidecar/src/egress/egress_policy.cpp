// A session's own egress allowlist (egress_policy.hpp). Invariants it keeps:
// - A session's list is never wider than the operator's: an allow rule is accepted only
//   when an entry of SANDBOX_EGRESS_ALLOW covers every name it matches (the front refuses
//   the rest, naming them); squid checks the operator's list too, whatever a file says.
// - The proxy never reads another session's rules for a session: the file is named by the
//   session network's gateway, the address a session's connection to the proxy arrives
//   on (the host firewall lets a session reach its own gateway only, so it cannot pick
//   another). A file is written, whole, after its network is made and before any container
//   joins it, and removed before its network is (session_containers, egress_network.cpp):
//   the daemon gives a gateway to a new network only once the old one is gone, and a file
//   a crash left behind is written over before the next container on that address starts.
// - Fail closed: no file, or one that cannot be written, and the proxy refuses every name.
#include "egress/egress_policy.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "util/ids.hpp"

namespace dockgate::sidecar {

namespace {

bool ipv4_text(std::string_view a) {
  if (a.empty() || a.size() > 15) return false;
  int dots = 0;
  for (char ch : a) {
    if (ch == '.')
      ++dots;
    else if (ch < '0' || ch > '9')
      return false;
  }
  return dots == 3;
}

// Whether the operator's entry `entry` covers every name `target` matches.
bool covers(std::string_view entry, std::string_view target) {
  if (!entry.starts_with('.')) return entry == target;  // that name only
  // ".d": d and every name under it; so "d", "x.d", "*.d" and "*.x.d".
  return target == entry.substr(1) || target.ends_with(entry);
}

}  // namespace

bool valid_egress_target(std::string_view target) {
  if (target.starts_with("*.")) target.remove_prefix(2);
  return !target.starts_with('.') && valid_egress_name(target);
}

egress_rules operator_rules(const config& c) {
  egress_rules out;
  for (const auto& name : c.egress_allow) out.push_back({true, name});
  return out;
}

std::vector<std::string> beyond_operator(const config& c, const egress_rules& rules) {
  std::vector<std::string> out;
  for (const auto& r : rules) {
    if (!r.allow) continue;
    bool covered = false;
    for (const auto& entry : c.egress_allow) covered = covered || covers(entry, r.target);
    if (!covered) out.push_back(r.target);
  }
  return out;
}

std::string egress_policy_text(const egress_rules& rules) {
  std::string out;
  for (const auto& r : rules) out += (r.allow ? "allow " : "deny ") + r.target + "\n";
  return out;
}

std::optional<egress_rules> parse_egress_policy_text(std::string_view text) {
  egress_rules out;
  while (!text.empty()) {
    const auto end = text.find('\n');
    if (end == std::string_view::npos) return std::nullopt;
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end + 1);
    egress_rule r;
    if (line.starts_with("allow "))
      r.allow = true, line.remove_prefix(6);
    else if (line.starts_with("deny "))
      line.remove_prefix(5);
    else
      return std::nullopt;
    // The operator's own entries (".d") come back as they went.
    if (!valid_egress_target(line) && !valid_egress_name(line)) return std::nullopt;
    r.target = std::string(line);
    out.push_back(std::move(r));
  }
  return out;
}

std::optional<std::string> write_egress_policy(const config& c, const std::string& gateway,
                                               const egress_rules& rules) {
  if (!ipv4_text(gateway)) return "egress policy: not an IPv4 gateway: " + gateway;
  const std::string path = c.egress_policy_dir + "/" + gateway;
  const std::string tmp = path + ".tmp." + random_hex(8);
  const std::string text = egress_policy_text(rules);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  bool ok = fd >= 0;
  if (ok) {
    ok = ::write(fd, text.data(), text.size()) == static_cast<ssize_t>(text.size());
    ok = ::fchmod(fd, 0644) == 0 && ok;  // the proxy's user reads it, whatever the umask
    ok = ::close(fd) == 0 && ok;
  }
  const int err = errno;
  if (ok && ::rename(tmp.c_str(), path.c_str()) == 0) return std::nullopt;
  const std::string why = "egress policy " + path + ": " + std::strerror(ok ? errno : err);
  ::unlink(tmp.c_str());
  ::unlink(path.c_str());  // no older list is left for this address
  return why;
}

void remove_egress_policy(const config& c, const std::string& gateway) {
  if (ipv4_text(gateway)) ::unlink((c.egress_policy_dir + "/" + gateway).c_str());
}

}  // namespace dockgate::sidecar
