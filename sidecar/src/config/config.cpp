// The sidecar's configuration, read once at start through one table: a row per variable
// (its name, its kind, the field it sets; the default is the field's in `config`), each kind
// with its own parse and clamp, then the rules that join variables as named steps.
//
// Invariants kept here:
// - The sidecar starts only on a configuration it read whole: a value it cannot read
//   (a malformed number, size, endpoint, host name, member, key file) is an error, never
//   skipped nor guessed, and any error means no configuration (main exits 1).
// - Every error is reported at once, as Envoy validates its configuration when it is
//   loaded: each row and each step runs whatever the others found, so an operator fixes a
//   configuration in one pass instead of one restart per mistake.
// - It never runs open by mistake (no SANDBOX_API_KEY without SANDBOX_ALLOW_NO_AUTH), never
//   lets a request's storage block name an endpoint the operator did not list, and never
//   lets the egress allowlist hold an address (an address would let a cell reach whatever
//   answers there under no name at all).

#include "dockgate/sidecar/config.hpp"

#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>
#include <limits>
#include <variant>

#include "dockgate/common/endpoint.hpp"
#include "storage/s3.hpp"
#include "storage/storage_endpoint.hpp"

namespace dockgate::sidecar {

namespace {

std::string trim(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
  return s;
}

std::string trim_lower(std::string s) {
  s = trim(std::move(s));
  for (auto& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return s;
}

}  // namespace

bool valid_egress_name(std::string_view name) {
  if (name.starts_with('.')) name.remove_prefix(1);
  if (name.empty() || name.size() > 253 || name.back() == '.') return false;
  std::string_view label;
  for (std::size_t start = 0; start <= name.size();) {
    const auto dot = std::min(name.find('.', start), name.size());
    label = name.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-')
      return false;
    for (char ch : label)
      if (!((ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-')) return false;
    start = dot + 1;
  }
  // The last label of a host name has a letter and is no hex number: "10.0.0.1",
  // "2130706433" and "0x7f000001" are addresses to a resolver.
  const bool letter =
      std::any_of(label.begin(), label.end(), [](char ch) { return ch >= 'a' && ch <= 'z'; });
  const bool hex = label.size() > 2 && label.starts_with("0x") &&
                   std::all_of(label.begin() + 2, label.end(), [](char ch) {
                     return std::isxdigit(static_cast<unsigned char>(ch)) != 0;
                   });
  return letter && !hex;
}

std::optional<std::int64_t> parse_size(std::string_view text) {
  std::string t(text);
  t = trim_lower(t);
  if (t.empty()) return std::nullopt;
  double mult = 1;
  const char unit = t.back();
  if (unit == 'b') t.pop_back();
  if (!t.empty()) {
    switch (t.back()) {
      case 'k':
        mult = 1024.0;
        t.pop_back();
        break;
      case 'm':
        mult = 1024.0 * 1024;
        t.pop_back();
        break;
      case 'g':
        mult = 1024.0 * 1024 * 1024;
        t.pop_back();
        break;
      case 't':
        mult = 1024.0 * 1024 * 1024 * 1024;
        t.pop_back();
        break;
      default:
        break;
    }
  }
  char* end = nullptr;
  const double v = std::strtod(t.c_str(), &end);
  if (t.empty() || end != t.c_str() + t.size() || !(v > 0) || !std::isfinite(v))
    return std::nullopt;
  return static_cast<std::int64_t>(v * mult);
}

namespace {

using error_list = std::vector<std::string>;

// ---- The kinds of variable: each reads a set variable's value into its field(s) ----------

// Text. `blank_is_empty`: only spaces mean empty; `no_trailing_slash`: a URL whose
// trailing '/' are dropped. `problem`, when given, says what is wrong with the value (the
// text after the variable's name), or nothing; `accepts` says what it takes.
enum class text_form { as_written, blank_is_empty, no_trailing_slash };
using problem_check = std::optional<std::string> (*)(const std::string& value);
struct text_kind {
  std::string config::*field;
  text_form form;
  problem_check problem;
  const char* accepts;
};

// A whole number: blank keeps the default, below `min` is raised to it (the seed's
// max(value, min)), above `max` is an error (a bound the seed did not have is refused,
// not silently lowered).
struct integer_kind {
  std::int64_t config::*field;
  std::int64_t min, max;
};

// A switch, truthy the way the seed reads that variable.
enum class truthy { on_words, not_off };  // 1/true/yes/on; anything but "", 0, false
struct flag_kind {
  bool config::*field;
  truthy rule;
};

// Docker's size syntax (parse_size), kept as written; `bytes` (if any) gets its value.
struct size_kind {
  std::string config::*field;
  std::int64_t config::*bytes;
};

// A positive decimal number, kept as written; `scaled` gets it times `scale`.
struct number_kind {
  std::string config::*field;
  std::int64_t config::*scaled;
  double scale;
};

// One of two words. `folded`: trimmed and lower-cased first, and blank keeps the default.
struct choice_kind {
  std::string config::*field;
  std::array<const char*, 2> words;
  bool folded;
};

// Comma-separated entries, each trimmed and lower-cased (trailing '/' dropped when
// `no_trailing_slash`), empty ones skipped; an entry `valid` refuses is named in an error
// "not <what>: "<entry>" (<hint>)". `entries`: what an entry is, plural.
struct list_kind {
  std::vector<std::string> config::*field;
  bool (*valid)(std::string_view entry);
  const char* what;
  const char* hint;
  bool no_trailing_slash;
  const char* entries;
};

// A variable with a reader of its own (several fields, a file); `shown`: its default as the
// documentation shows it, `accepts`: what it takes.
struct custom_kind {
  void (*read)(const std::string& name, const std::string& value, config& c, error_list& errors);
  std::string (*shown)(const config& c);
  const char* accepts;
};

using variable_kind = std::variant<text_kind, integer_kind, flag_kind, size_kind, number_kind,
                                   choice_kind, list_kind, custom_kind>;
struct variable {
  const char* name;
  variable_kind kind;
};

constexpr std::int64_t unbounded = std::numeric_limits<std::int64_t>::max();

variable_kind text(std::string config::*field, const char* accepts = "text",
                   text_form form = text_form::as_written, problem_check problem = nullptr) {
  return text_kind{field, form, problem, accepts};
}
variable_kind integer(std::int64_t config::*field, std::int64_t min, std::int64_t max = unbounded) {
  return integer_kind{field, min, max};
}
variable_kind flag(bool config::*field, truthy rule) {
  return flag_kind{field, rule};
}

// ---- Reading one variable of each kind -------------------------------------------------------

void read_kind(const std::string& name, const text_kind& k, const std::string& value, config& c,
               error_list& errors) {
  std::string v = value;
  if (k.form == text_form::blank_is_empty && trim(v).empty()) v.clear();
  if (k.form == text_form::no_trailing_slash)
    while (v.ends_with('/')) v.pop_back();
  c.*k.field = v;  // kept even when refused: the steps after the table judge it too
  if (k.problem)
    if (auto problem = k.problem(v)) errors.push_back(name + *problem);
}

void read_kind(const std::string& name, const integer_kind& k, const std::string& value, config& c,
               error_list& errors) {
  const std::string t = trim_lower(value);
  if (t.empty()) return;
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (ec != std::errc{} || end != t.data() + t.size())
    errors.push_back(name + ": not an integer: \"" + value + "\"");
  else if (n > k.max)
    errors.push_back(name + ": at most " + std::to_string(k.max));
  else
    c.*k.field = std::max(n, k.min);
}

void read_kind(const std::string&, const flag_kind& k, const std::string& value, config& c,
               error_list&) {
  const auto t = trim_lower(value);
  c.*k.field = k.rule == truthy::on_words ? (t == "1" || t == "true" || t == "yes" || t == "on")
                                          : !(t.empty() || t == "0" || t == "false");
}

void read_kind(const std::string& name, const size_kind& k, const std::string& value, config& c,
               error_list& errors) {
  c.*k.field = value;
  if (auto bytes = parse_size(value)) {
    if (k.bytes) c.*k.bytes = *bytes;
  } else {
    errors.push_back(name + ": not a size: \"" + value + "\"");
  }
}

void read_kind(const std::string& name, const number_kind& k, const std::string& value, config& c,
               error_list& errors) {
  c.*k.field = value;
  char* end = nullptr;
  const double n = std::strtod(value.c_str(), &end);
  if (end == value.c_str() || *end || !(n > 0))
    errors.push_back(name + ": not a positive number");
  else
    c.*k.scaled = static_cast<std::int64_t>(n * k.scale);
}

void read_kind(const std::string& name, const choice_kind& k, const std::string& value, config& c,
               error_list& errors) {
  const std::string v = k.folded ? trim_lower(value) : value;
  if (k.folded && v.empty()) return;
  c.*k.field = v;
  if (v != k.words[0] && v != k.words[1])
    errors.push_back(name + " must be " + k.words[0] + " or " + k.words[1]);
}

void read_kind(const std::string& name, const list_kind& k, const std::string& value, config& c,
               error_list& errors) {
  std::string_view rest = value;
  while (!rest.empty()) {
    const auto comma = rest.find(',');
    std::string entry = trim_lower(std::string(rest.substr(0, comma)));
    if (k.no_trailing_slash)
      while (entry.ends_with('/')) entry.pop_back();
    if (!entry.empty() && !k.valid(entry))
      errors.push_back(name + ": not " + k.what + ": \"" + entry + "\" (" + k.hint + ")");
    else if (!entry.empty())
      (c.*k.field).push_back(entry);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
  }
}

void read_kind(const std::string& name, const custom_kind& k, const std::string& value, config& c,
               error_list& errors) {
  k.read(name, value, c, errors);
}

// ---- What each kind shows in docs/sidecar.md's table: the default and what it accepts ----------

std::string shown_or_none(const std::string& value) {
  return value.empty() ? "(none)" : value;
}

std::string join(const std::vector<std::string>& entries) {
  std::string out;
  for (const auto& e : entries) out += (out.empty() ? "" : ",") + e;
  return out;
}

std::string shown_default(const variable_kind& kind, const config& c) {
  return std::visit(
      [&](const auto& k) -> std::string {
        using kind_type = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<kind_type, integer_kind>)
          return std::to_string(c.*k.field);
        else if constexpr (std::is_same_v<kind_type, flag_kind>)
          return c.*k.field ? "1" : "0";
        else if constexpr (std::is_same_v<kind_type, list_kind>)
          return shown_or_none(join(c.*k.field));
        else if constexpr (std::is_same_v<kind_type, custom_kind>)
          return k.shown(c);
        else
          return shown_or_none(c.*k.field);
      },
      kind);
}

std::string shown_accepts(const variable_kind& kind) {
  return std::visit(
      [](const auto& k) -> std::string {
        using kind_type = std::decay_t<decltype(k)>;
        if constexpr (std::is_same_v<kind_type, text_kind>)
          return k.accepts;
        else if constexpr (std::is_same_v<kind_type, integer_kind>)
          return k.max == unbounded
                     ? "integer ≥ " + std::to_string(k.min)
                     : "integer " + std::to_string(k.min) + "–" + std::to_string(k.max);
        else if constexpr (std::is_same_v<kind_type, flag_kind>)
          return k.rule == truthy::on_words ? "on: 1, true, yes, on" : "off: 0, false, empty";
        else if constexpr (std::is_same_v<kind_type, size_kind>)
          return "size";
        else if constexpr (std::is_same_v<kind_type, number_kind>)
          return "number > 0";
        else if constexpr (std::is_same_v<kind_type, choice_kind>)
          return std::string(k.words[0]) + " or " + k.words[1];
        else if constexpr (std::is_same_v<kind_type, list_kind>)
          return std::string(k.entries) + ", comma-separated";
        else
          return k.accepts;
      },
      kind);
}

// ---- Variables with readers or checks of their own -----------------------------------------

// SANDBOX_NOFILE_ULIMIT: SOFT[:HARD], the hard limit at least the soft one.
void read_nofile(const std::string& name, const std::string& value, config& c, error_list& errors) {
  const auto colon = value.find(':');
  const auto soft = std::strtoll(value.substr(0, colon).c_str(), nullptr, 10);
  const auto hard = colon == std::string::npos
                        ? soft
                        : std::strtoll(value.substr(colon + 1).c_str(), nullptr, 10);
  if (soft <= 0 || hard < soft)
    errors.push_back(name + ": expected SOFT:HARD");
  else
    c.nofile_soft = soft, c.nofile_hard = hard;
}
std::string show_nofile(const config& c) {
  return std::to_string(c.nofile_soft) + ":" + std::to_string(c.nofile_hard);
}

// Whether `url` is http://host:port; the reason when it is not. Forwarding dials exactly
// this, so nothing but a plain host and port is taken.
std::optional<std::string> fleet_url_problem(const std::string& url) {
  std::string why;
  if (url.starts_with("http://") && common::parse_endpoint("tcp://" + url.substr(7), &why))
    return std::nullopt;
  return why;
}

// SANDBOX_FLEET_MEMBERS: instance=http://host:port,... (fleet_auth.hpp): forwarding goes
// only to a listed member; the store never names where to dial.
void read_fleet_members(const std::string& name, const std::string& value, config& c,
                        error_list& errors) {
  for (std::size_t start = 0; start < value.size();) {
    auto end = value.find(',', start);
    if (end == std::string::npos) end = value.size();
    const std::string entry = trim(value.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    const std::string member = eq == std::string::npos ? std::string() : entry.substr(0, eq);
    std::string url = eq == std::string::npos ? std::string() : entry.substr(eq + 1);
    while (url.ends_with('/')) url.pop_back();
    const auto problem = member.empty() ? std::optional<std::string>("") : fleet_url_problem(url);
    if (problem)
      errors.push_back(name + ": expected instance=http://host:port, got \"" + entry + "\"" +
                       (problem->empty() ? "" : " (" + *problem + ")"));
    else if (!c.fleet_members.emplace(member, url).second)
      errors.push_back(name + ": instance \"" + member + "\" is listed twice");
  }
}

// SANDBOX_FLEET_KEY_FILE: the fleet's shared secret, read once here (a trailing newline is
// not part of it); too short a secret is refused, as is a file that cannot be read.
void read_fleet_key_file(const std::string& name, const std::string& value, config& c,
                         error_list& errors) {
  c.fleet_key_file = value;
  if (value.empty()) return;
  std::ifstream in(value, std::ios::binary);
  std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
  if (!in.good() && !in.eof())
    errors.push_back(name + ": cannot read " + value);
  else if (key.size() < 32)
    errors.push_back(name + ": " + value +
                     " must hold at least 32 bytes (the fleet's shared secret; e.g. openssl rand "
                     "-hex 32)");
  else
    c.fleet_key = std::move(key);
}
std::string show_none(const config&) {
  return "(none)";
}

// SANDBOX_IMAGES: image references as written (a tag may hold capitals), comma-separated.
void read_images(const std::string& name, const std::string& value, config& c, error_list& errors) {
  for (std::size_t start = 0; start <= value.size();) {
    auto end = std::min(value.find(',', start), value.size());
    const std::string entry = trim(value.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    if (std::any_of(entry.begin(), entry.end(),
                    [](char ch) { return std::isspace(static_cast<unsigned char>(ch)) != 0; }))
      errors.push_back(name + ": not an image reference: \"" + entry + "\"");
    else
      c.images.push_back(entry);
  }
}
std::string show_images(const config& c) {
  return shown_or_none(join(c.images));
}

// SANDBOX_RUNTIMES: OCI runtime names as the engine registers them (dockerd's runtime names:
// letters, digits, '-', '_', '.'), comma-separated, each once.
void read_runtimes(const std::string& name, const std::string& value, config& c,
                   error_list& errors) {
  for (std::size_t start = 0; start <= value.size();) {
    auto end = std::min(value.find(',', start), value.size());
    const std::string entry = trim(value.substr(start, end - start));
    start = end + 1;
    if (entry.empty()) continue;
    const bool ok = entry.size() <= 64 && std::all_of(entry.begin(), entry.end(), [](char ch) {
                      return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ||
                             ch == '_' || ch == '.';
                    });
    if (!ok)
      errors.push_back(name + ": not a runtime name: \"" + entry + "\"");
    else if (std::find(c.runtimes.begin(), c.runtimes.end(), entry) != c.runtimes.end())
      errors.push_back(name + ": \"" + entry + "\" is listed twice");
    else
      c.runtimes.push_back(entry);
  }
}
std::string show_runtimes(const config& c) {
  return shown_or_none(join(c.runtimes));
}

// An absolute directory path, without a trailing '/' (the root itself aside).
std::optional<std::string> absolute_path_check(const std::string& path) {
  if (path.starts_with('/') && (path == "/" || !path.ends_with('/')) &&
      path.find("/..") == std::string::npos)
    return std::nullopt;
  return std::string(": must be an absolute path without '..' or a trailing '/'");
}

std::optional<std::string> fleet_url_check(const std::string& url) {
  if (url.empty()) return std::nullopt;
  auto why = fleet_url_problem(url);
  if (!why) return std::nullopt;
  return ": expected http://host:port, got \"" + url + "\"" +
         (why->empty() ? "" : " (" + *why + ")");
}

// A sidecar's label value on the engine: 1-63 of a-z, 0-9, '-', '_', '.'.
std::optional<std::string> instance_check(const std::string& instance) {
  const bool ok = !instance.empty() && instance.size() <= 63 &&
                  std::all_of(instance.begin(), instance.end(), [](char ch) {
                    return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' ||
                           ch == '_' || ch == '.';
                  });
  if (ok) return std::nullopt;
  return std::string(" must be 1-63 characters of a-z, 0-9, '-', '_', '.'");
}

// The sessions' networks' prefix: a name of its own, never one of Docker's networks.
std::optional<std::string> egress_network_check(const std::string& network) {
  const bool ok = !network.empty() && network.size() <= 63 &&
                  std::all_of(network.begin(), network.end(),
                              [](char ch) {
                                return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ||
                                       ch == '_' || ch == '.';
                              }) &&
                  network != "host" && network != "bridge" && network != "none" &&
                  network != "default";
  if (ok) return std::nullopt;
  return std::string(" must be a network name of its own (letters, digits, '-', '_', '.')");
}

// storage_endpoint.hpp: what an entry may be; anything else is refused at start.
bool valid_storage_endpoint(std::string_view entry) {
  return parse_allowed_endpoint(entry).has_value();
}

// ---- The table: every variable but the FUSE store's, in the order they are read -------------
// (a later row wins over an earlier one for the same field: SANDBOX_WORKSPACE_SIZE over its
// alias). The defaults are `config`'s own (config.hpp).

const variable variables[] = {
    {"SANDBOX_LISTEN", text(&config::listen, "host:port, tcp://host:port or unix:///path")},
    {"SANDBOX_IMAGE", text(&config::image, "an image reference")},
    {"SANDBOX_IMAGES", custom_kind{read_images, show_images, "image references, comma-separated"}},
    {"SANDBOX_RUNTIMES", custom_kind{read_runtimes, show_runtimes,
                                     "OCI runtime names, comma-separated; the first is "
                                     "the default"}},
    {"SANDBOX_MAX_SANDBOX_TIMEOUT_SECONDS", integer(&config::max_sandbox_timeout_seconds, 60)},
    {"SANDBOX_HOST_VOLUME_ROOT", text(&config::host_volume_root, "an absolute path",
                                      text_form::as_written, absolute_path_check)},
    {"SANDBOX_MEMORY", size_kind{&config::memory, &config::memory_bytes}},
    {"SANDBOX_CPUS", number_kind{&config::cpus, &config::nano_cpus, 1e9}},
    {"SANDBOX_PIDS_LIMIT", integer(&config::pids_limit, 1)},
    {"SANDBOX_NOFILE_ULIMIT", custom_kind{read_nofile, show_nofile, "SOFT[:HARD]"}},
    {"SANDBOX_API_KEY", text(&config::api_key, "text", text_form::blank_is_empty)},
    {"SANDBOX_ALLOW_NO_AUTH", flag(&config::allow_no_auth, truthy::on_words)},
    {"SANDBOX_EXEC_TIMEOUT_CAP_MS", integer(&config::exec_timeout_cap_ms, 1000)},
    {"SANDBOX_DEFAULT_EXEC_TIMEOUT_MS", integer(&config::default_exec_timeout_ms, 1)},
    {"SANDBOX_ARCHIVE_TIMEOUT_S", integer(&config::archive_timeout_s, 1)},
    {"SANDBOX_DOCKER_CALL_TIMEOUT_S", integer(&config::docker_call_timeout_s, 1)},
    {"SANDBOX_IDLE_TTL_SECONDS", integer(&config::idle_ttl_seconds, 1)},
    {"SANDBOX_IDLE_TTL_CAP_SECONDS", integer(&config::idle_ttl_cap_seconds, 1)},
    {"SANDBOX_IDLE_REAPER_SWEEP_INTERVAL", integer(&config::idle_reaper_sweep_interval, 1)},
    {"SANDBOX_DORMANT_AFTER_SECONDS", integer(&config::dormant_after_seconds, 0)},
    {"SANDBOX_DORMANT_IDLE", flag(&config::dormant_idle, truthy::on_words)},
    {"SANDBOX_MAX_SESSIONS", integer(&config::max_sessions, 0)},
    {"SANDBOX_WARM_POOL", integer(&config::warm_pool, 0, 64)},
    {"SANDBOX_MAX_CONCURRENT_EXECS", integer(&config::max_concurrent_execs, 0)},
    {"SANDBOX_MAX_CONCURRENT_CREATES", integer(&config::max_concurrent_creates, 0)},
    {"SANDBOX_QUEUE_TIMEOUT_SECONDS", integer(&config::queue_timeout_seconds, 0)},
    {"SANDBOX_PULL_ON_START", flag(&config::pull_on_start, truthy::not_off)},
    {"SANDBOX_KEEP_SESSIONS_ON_STOP", flag(&config::keep_sessions_on_stop, truthy::on_words)},
    {"SANDBOX_MAX_CONNECTIONS", integer(&config::max_connections, 1)},
    {"SANDBOX_MAX_CONNECTIONS_PER_PEER", integer(&config::max_connections_per_peer, 1)},
    {"SANDBOX_HEAD_TIMEOUT_S", integer(&config::head_timeout_s, 1)},
    {"SANDBOX_STORAGE_ENDPOINTS",
     list_kind{&config::storage_endpoints, valid_storage_endpoint, "an endpoint",
               "scheme://host[:port], host[:port] or *.suffix[:port]", true, "endpoints"}},
    {"SANDBOX_READ_ONLY_ROOTFS", flag(&config::read_only_rootfs, truthy::not_off)},
    {"SANDBOX_TMPFS_SIZE", size_kind{&config::tmpfs_size, nullptr}},
    // The workspace's size is a size in the tmpfs mode only (check_tmpfs_within_memory).
    {"SANDBOX_WORKSPACE_TMPFS_SIZE", text(&config::workspace_size, "size")},  // the seed's alias
    {"SANDBOX_WORKSPACE_SIZE", text(&config::workspace_size, "size")},
    {"SANDBOX_WORKSPACE_MODE", choice_kind{&config::workspace_mode, {"tmpfs", "fuse"}, false}},
    {"SANDBOX_MOUNT_COMMAND", text(&config::mount_command, "a program")},
    {"SANDBOX_FLEET_URL",
     text(&config::fleet_url, "http://host:port", text_form::no_trailing_slash, fleet_url_check)},
    {"SANDBOX_FLEET_MEMBERS",
     custom_kind{read_fleet_members, show_none, "instance=http://host:port,…"}},
    {"SANDBOX_FLEET_KEY_FILE", custom_kind{read_fleet_key_file, show_none, "a file's path"}},
    {"SANDBOX_DISK_SIZE", text(&config::disk_size)},
    {"SANDBOX_SECCOMP_PROFILE", text(&config::seccomp_profile, "a file's path")},
    {"SANDBOX_MAX_OUTPUT_BYTES", integer(&config::max_output_bytes, 1)},
    {"SANDBOX_CELL_RUNNER", flag(&config::cell_runner, truthy::not_off)},
    {"SANDBOX_MAX_ARTIFACT_BYTES", integer(&config::max_artifact_bytes, 0)},
    {"SANDBOX_MAX_FILES_PER_EXEC", integer(&config::max_files_per_exec, 0)},
    {"SANDBOX_MAX_TOTAL_ARTIFACT_BYTES", integer(&config::max_total_artifact_bytes, 0)},
    {"SANDBOX_MAX_COLLECT_SECONDS", integer(&config::max_collect_seconds, 1)},
    {"SANDBOX_COLLECT_FILE_TIMEOUT_S", integer(&config::collect_file_timeout_s, 1)},
    {"SANDBOX_MAX_UPLOAD_BYTES", integer(&config::max_upload_bytes, 1)},
    {"SANDBOX_MAX_BODY_BYTES", integer(&config::max_body_bytes, 1)},
    {"SANDBOX_MAX_STORAGE_BODY_BYTES", integer(&config::max_storage_body_bytes, 1)},
    {"SANDBOX_MAX_CODE_BYTES", integer(&config::max_code_bytes, 1)},
    {"SANDBOX_MAX_ARCHIVE_BYTES", integer(&config::max_archive_bytes, 1)},
    {"SANDBOX_STORAGE_DEFAULT_TTL", integer(&config::storage_default_ttl, 1)},
    {"SANDBOX_STORAGE_MAX_TTL", integer(&config::storage_max_ttl, 1)},
    {"SANDBOX_LOCAL_STORAGE_DIR", text(&config::local_storage_dir, "a directory's path")},
    {"SANDBOX_S3_MAX_ATTEMPTS", integer(&config::s3_max_attempts, 1)},
    {"SANDBOX_S3_CONNECT_TIMEOUT_S", integer(&config::s3_connect_timeout_s, 1)},
    {"SANDBOX_S3_READ_TIMEOUT_S", integer(&config::s3_read_timeout_s, 1)},
    {"SANDBOX_OSS_CONNECT_TIMEOUT_S", integer(&config::oss_connect_timeout_s, 1)},
    {"SANDBOX_INSTANCE",
     text(&config::instance, "1-63 of a-z 0-9 - _ .", text_form::as_written, instance_check)},
    {"SANDBOX_INSTANCE_LEASE_S", integer(&config::instance_lease_s, 5)},
    {"SANDBOX_NETWORK", choice_kind{&config::network, {"none", "allowlist"}, true}},
    {"SANDBOX_EGRESS_ALLOW",
     list_kind{&config::egress_allow, valid_egress_name, "a host name",
               "names only, never an address; \".example.org\" for its subdomains too", false,
               "host names"}},
    {"SANDBOX_EGRESS_NETWORK",
     text(&config::egress_network, "a network name", text_form::as_written, egress_network_check)},
    {"SANDBOX_EGRESS_PROXY_PORT", integer(&config::egress_proxy_port, 1, 65535)},
    {"SANDBOX_EGRESS_POLICY_DIR", text(&config::egress_policy_dir, "a directory's path")},
};

// The FUSE workspaces' store (the AIMEM_* variables dockgate-mount reads): read only in the
// fuse mode, where the sessions' records live in it.
struct store_variable {
  const char* name;
  std::string config::workspace_store::*field;
  text_form form;
};
const store_variable store_variables[] = {
    {"AIMEM_BUCKET", &config::workspace_store::bucket, text_form::as_written},
    {"AIMEM_ENDPOINT", &config::workspace_store::endpoint, text_form::no_trailing_slash},
    {"AIMEM_ACCESS_KEY", &config::workspace_store::access_key, text_form::as_written},
    {"AIMEM_SECRET_KEY", &config::workspace_store::secret_key, text_form::as_written},
    {"AIMEM_REGION", &config::workspace_store::region, text_form::as_written},
    {"AIMEM_PREFIX", &config::workspace_store::prefix, text_form::no_trailing_slash},
};

using environment = std::map<std::string, std::string>;

void read_table(const environment& env, config& c, error_list& errors) {
  for (const auto& v : variables) {
    const auto it = env.find(v.name);
    if (it == env.end()) continue;  // unset: the default
    std::visit([&](const auto& k) { read_kind(v.name, k, it->second, c, errors); }, v.kind);
  }
}

// ---- The rules that join variables, each a step after the table ------------------------------

// SANDBOX_WORKSPACE_MODE=fuse: the workspaces' store, which also keeps the sessions' records.
void read_workspace_store(const environment& env, config& c, error_list& errors) {
  if (c.workspace_mode != "fuse") return;
  for (const auto& v : store_variables) {
    const auto it = env.find(v.name);
    if (it == env.end()) continue;
    std::string value = it->second;
    if (v.form == text_form::no_trailing_slash)
      while (value.ends_with('/')) value.pop_back();
    c.store.*v.field = std::move(value);
  }
  if (c.store.bucket.empty() || c.store.endpoint.empty())
    errors.push_back(
        "SANDBOX_WORKSPACE_MODE=fuse needs AIMEM_BUCKET and AIMEM_ENDPOINT (the workspaces' "
        "store, which also keeps the sessions' records)");
  else if (auto problem = s3_endpoint_problem(c.store.endpoint))
    errors.push_back("AIMEM_ENDPOINT: " + *problem);
}

// A fleet's sessions live in the store, and its members trust each other through their own
// key (fleet_auth.hpp), never the client's.
void check_fleet(const config& c, error_list& errors) {
  if (!c.fleet_url.empty() && c.workspace_mode != "fuse")
    errors.push_back(
        "SANDBOX_FLEET_URL needs SANDBOX_WORKSPACE_MODE=fuse (a fleet's sessions "
        "live in the store)");
  if (!c.fleet_members.empty() && c.workspace_mode != "fuse")
    errors.push_back(
        "SANDBOX_FLEET_MEMBERS needs SANDBOX_WORKSPACE_MODE=fuse (a fleet's "
        "sessions live in the store)");
  if ((!c.fleet_url.empty() || !c.fleet_members.empty()) && c.fleet_key_file.empty())
    errors.push_back(
        "SANDBOX_FLEET_URL and SANDBOX_FLEET_MEMBERS need SANDBOX_FLEET_KEY_FILE "
        "(the members' own credential: a forwarded call is signed with it, and "
        "the client's key is never passed on)");
}

// tmpfs pages count against the container's memory: /tmp, /home/sandbox and a tmpfs
// workspace, filled, must leave the interpreter at least half of the limit.
void check_tmpfs_within_memory(const config& c, error_list& errors) {
  const auto tmp = parse_size(c.tmpfs_size);  // (an unreadable one is the table's error)
  const auto ws =
      c.workspace_mode == "tmpfs" ? parse_size(c.workspace_size) : std::optional<std::int64_t>(0);
  if (!ws)
    errors.push_back("SANDBOX_WORKSPACE_SIZE: not a size: \"" + c.workspace_size + "\"");
  else if (tmp && 2 * *tmp + *ws > c.memory_bytes / 2)
    errors.push_back("SANDBOX_TMPFS_SIZE (/tmp and /home/sandbox) and SANDBOX_WORKSPACE_SIZE (" +
                     std::to_string((2 * *tmp + *ws) >> 20) +
                     " MiB together) must stay within half of SANDBOX_MEMORY (" +
                     std::to_string(c.memory_bytes >> 20) +
                     " MiB): files filling them would take the interpreter's memory");
}

void check_allowlist_names_hosts(const config& c, error_list& errors) {
  if (c.network == "allowlist" && c.egress_allow.empty())
    errors.push_back(
        "SANDBOX_NETWORK=allowlist needs SANDBOX_EGRESS_ALLOW (the host names sessions may reach)");
  // Each session's list reaches the proxy as a file there: without it the proxy refuses
  // every name (egress_policy.hpp), so a missing directory is said at start.
  struct stat st {};
  if (c.network == "allowlist" &&
      (!c.egress_policy_dir.starts_with('/') || ::stat(c.egress_policy_dir.c_str(), &st) != 0 ||
       !S_ISDIR(st.st_mode) || ::access(c.egress_policy_dir.c_str(), W_OK) != 0))
    errors.push_back(
        "SANDBOX_NETWORK=allowlist needs SANDBOX_EGRESS_POLICY_DIR: an absolute path of a "
        "directory the sidecar writes and the egress proxy reads (its EGRESS_POLICY_DIR)");
}

// A gVisor default runtime has no network for the sessions' egress (registered with
// --network=none): every allowlist session would be refused, so the start is.
void check_runtimes(const config& c, error_list& errors) {
  if (c.network == "allowlist" && !c.runtimes.empty() && gvisor_runtime(c.runtimes.front()))
    errors.push_back("SANDBOX_RUNTIMES: the default runtime " + c.runtimes.front() +
                     " (gVisor) cannot serve SANDBOX_NETWORK=allowlist: its sandboxes have no "
                     "network of their own (runsc --network=none); list runc first");
}

// Never open by mistake: running without a key is a choice the operator writes down.
void check_auth(const config& c, error_list& errors) {
  if (c.api_key.empty() && !c.allow_no_auth)
    errors.push_back(
        "SANDBOX_API_KEY is empty: refusing to start without auth (set SANDBOX_ALLOW_NO_AUTH=1 to "
        "run open)");
}

}  // namespace

config_result load_config(const std::map<std::string, std::string>& env) {
  config_result r;
  config c;
  read_table(env, c, r.errors);
  read_workspace_store(env, c, r.errors);
  check_fleet(c, r.errors);
  check_tmpfs_within_memory(c, r.errors);
  check_allowlist_names_hosts(c, r.errors);
  check_runtimes(c, r.errors);
  check_auth(c, r.errors);
  if (r.errors.empty()) r.value = std::move(c);
  return r;
}

std::vector<config_variable> config_variables() {
  const config defaults;
  std::vector<config_variable> out;
  for (const auto& v : variables)
    out.push_back({v.name, shown_default(v.kind, defaults), shown_accepts(v.kind)});
  return out;
}

}  // namespace dockgate::sidecar
