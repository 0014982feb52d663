#include "dockgate/sidecar/config.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iterator>

#include "dockgate/common/endpoint.hpp"
#include "storage/s3.hpp"
#include "storage/storage_endpoint.hpp"

namespace dockgate::sidecar {

namespace {

std::string trim_lower(std::string s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.pop_back();
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.erase(0, 1);
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

config_result load_config(const std::map<std::string, std::string>& env) {
  config_result r;
  config c;
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end()) return std::nullopt;
    return it->second;
  };
  auto integer = [&](const char* name, std::int64_t& out, std::int64_t min) {
    auto v = get(name);
    if (!v || trim_lower(*v).empty()) return;
    const std::string t = trim_lower(*v);
    std::int64_t n = 0;
    auto [p, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
    if (ec != std::errc{} || p != t.data() + t.size()) {
      r.errors.push_back(std::string(name) + ": not an integer: \"" + *v + "\"");
      return;
    }
    out = std::max(n, min);
  };
  auto text = [&](const char* name, std::string& out) {
    if (auto v = get(name)) out = *v;
  };
  // Truthy the way each seed variable reads it.
  auto flag_on = [&](const char* name, bool& out) {  // 1/true/yes/on
    if (auto v = get(name)) {
      const auto t = trim_lower(*v);
      out = t == "1" || t == "true" || t == "yes" || t == "on";
    }
  };
  auto flag_not_off = [&](const char* name, bool& out) {  // anything but "", 0, false
    if (auto v = get(name)) {
      const auto t = trim_lower(*v);
      out = !(t.empty() || t == "0" || t == "false");
    }
  };
  text("SANDBOX_LISTEN", c.listen);
  text("SANDBOX_IMAGE", c.image);
  text("SANDBOX_MEMORY", c.memory);
  if (auto m = parse_size(c.memory))
    c.memory_bytes = *m;
  else
    r.errors.push_back("SANDBOX_MEMORY: not a size: \"" + c.memory + "\"");
  text("SANDBOX_CPUS", c.cpus);
  {
    char* end = nullptr;
    const double cpus = std::strtod(c.cpus.c_str(), &end);
    if (end == c.cpus.c_str() || *end || !(cpus > 0))
      r.errors.push_back("SANDBOX_CPUS: not a positive number");
    else
      c.nano_cpus = static_cast<std::int64_t>(cpus * 1e9);
  }
  integer("SANDBOX_PIDS_LIMIT", c.pids_limit, 1);
  if (auto v = get("SANDBOX_NOFILE_ULIMIT")) {
    const auto colon = v->find(':');
    auto soft = std::strtoll(v->substr(0, colon).c_str(), nullptr, 10);
    auto hard =
        colon == std::string::npos ? soft : std::strtoll(v->substr(colon + 1).c_str(), nullptr, 10);
    if (soft <= 0 || hard < soft)
      r.errors.push_back("SANDBOX_NOFILE_ULIMIT: expected SOFT:HARD");
    else
      c.nofile_soft = soft, c.nofile_hard = hard;
  }
  if (auto v = get("SANDBOX_API_KEY")) c.api_key = trim_lower(*v).empty() ? std::string() : *v;
  flag_on("SANDBOX_ALLOW_NO_AUTH", c.allow_no_auth);
  integer("SANDBOX_EXEC_TIMEOUT_CAP_MS", c.exec_timeout_cap_ms, 1000);
  integer("SANDBOX_DEFAULT_EXEC_TIMEOUT_MS", c.default_exec_timeout_ms, 1);
  integer("SANDBOX_ARCHIVE_TIMEOUT_S", c.archive_timeout_s, 1);
  integer("SANDBOX_DOCKER_CALL_TIMEOUT_S", c.docker_call_timeout_s, 1);
  integer("SANDBOX_IDLE_TTL_SECONDS", c.idle_ttl_seconds, 1);
  integer("SANDBOX_IDLE_TTL_CAP_SECONDS", c.idle_ttl_cap_seconds, 1);
  integer("SANDBOX_IDLE_REAPER_SWEEP_INTERVAL", c.idle_reaper_sweep_interval, 1);
  integer("SANDBOX_MAX_SESSIONS", c.max_sessions, 0);
  integer("SANDBOX_WARM_POOL", c.warm_pool, 0);
  if (c.warm_pool > 64) r.errors.push_back("SANDBOX_WARM_POOL: at most 64");
  integer("SANDBOX_MAX_CONCURRENT_EXECS", c.max_concurrent_execs, 0);
  integer("SANDBOX_MAX_CONCURRENT_CREATES", c.max_concurrent_creates, 0);
  integer("SANDBOX_QUEUE_TIMEOUT_SECONDS", c.queue_timeout_seconds, 0);
  flag_not_off("SANDBOX_PULL_ON_START", c.pull_on_start);
  flag_on("SANDBOX_KEEP_SESSIONS_ON_STOP", c.keep_sessions_on_stop);
  integer("SANDBOX_MAX_CONNECTIONS", c.max_connections, 1);
  integer("SANDBOX_MAX_CONNECTIONS_PER_PEER", c.max_connections_per_peer, 1);
  integer("SANDBOX_HEAD_TIMEOUT_S", c.head_timeout_s, 1);
  if (auto v = get("SANDBOX_STORAGE_ENDPOINTS")) {
    std::string_view rest = *v;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      std::string item = trim_lower(std::string(rest.substr(0, comma)));
      while (item.ends_with('/')) item.pop_back();
      // storage_endpoint.hpp: what an entry may be; anything else is refused at start.
      if (!item.empty() && !parse_allowed_endpoint(item))
        r.errors.push_back("SANDBOX_STORAGE_ENDPOINTS: not an endpoint: \"" + item +
                           "\" (scheme://host[:port], host[:port] or *.suffix[:port])");
      else if (!item.empty())
        c.storage_endpoints.push_back(item);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  flag_not_off("SANDBOX_READ_ONLY_ROOTFS", c.read_only_rootfs);
  text("SANDBOX_TMPFS_SIZE", c.tmpfs_size);
  text("SANDBOX_WORKSPACE_TMPFS_SIZE", c.workspace_size);
  text("SANDBOX_WORKSPACE_SIZE", c.workspace_size);  // wins over the alias
  text("SANDBOX_WORKSPACE_MODE", c.workspace_mode);
  if (c.workspace_mode != "tmpfs" && c.workspace_mode != "fuse")
    r.errors.push_back("SANDBOX_WORKSPACE_MODE must be tmpfs or fuse");
  text("SANDBOX_MOUNT_COMMAND", c.mount_command);
  if (c.workspace_mode == "fuse") {
    text("AIMEM_BUCKET", c.store.bucket);
    text("AIMEM_ENDPOINT", c.store.endpoint);
    text("AIMEM_ACCESS_KEY", c.store.access_key);
    text("AIMEM_SECRET_KEY", c.store.secret_key);
    text("AIMEM_REGION", c.store.region);
    text("AIMEM_PREFIX", c.store.prefix);
    while (c.store.prefix.ends_with('/')) c.store.prefix.pop_back();
    while (c.store.endpoint.ends_with('/')) c.store.endpoint.pop_back();
    if (c.store.bucket.empty() || c.store.endpoint.empty())
      r.errors.push_back(
          "SANDBOX_WORKSPACE_MODE=fuse needs AIMEM_BUCKET and AIMEM_ENDPOINT (the workspaces' "
          "store, which also keeps the sessions' records)");
    else if (auto problem = s3_endpoint_problem(c.store.endpoint))
      r.errors.push_back("AIMEM_ENDPOINT: " + *problem);
  }
  text("SANDBOX_FLEET_URL", c.fleet_url);
  while (c.fleet_url.ends_with('/')) c.fleet_url.pop_back();
  if (!c.fleet_url.empty()) {
    std::string why;
    if (c.workspace_mode != "fuse")
      r.errors.push_back("SANDBOX_FLEET_URL needs SANDBOX_WORKSPACE_MODE=fuse (a fleet's "
                         "sessions live in the store)");
    else if (!c.fleet_url.starts_with("http://") ||
             !common::parse_endpoint("tcp://" + c.fleet_url.substr(7), &why))
      r.errors.push_back("SANDBOX_FLEET_URL: expected http://host:port, got \"" + c.fleet_url +
                         "\"" + (why.empty() ? "" : " (" + why + ")"));
  }
  // The fleet's members and its own credential (fleet_auth.hpp): forwarding goes only to
  // a listed member, signed with the key; neither is read from the store.
  std::string members;
  text("SANDBOX_FLEET_MEMBERS", members);
  for (std::size_t start = 0; start < members.size();) {
    auto end = members.find(',', start);
    if (end == std::string::npos) end = members.size();
    std::string entry = members.substr(start, end - start);
    start = end + 1;
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.back()))) entry.pop_back();
    while (!entry.empty() && std::isspace(static_cast<unsigned char>(entry.front()))) entry.erase(0, 1);
    if (entry.empty()) continue;
    const auto eq = entry.find('=');
    std::string name = eq == std::string::npos ? std::string() : entry.substr(0, eq);
    std::string url = eq == std::string::npos ? std::string() : entry.substr(eq + 1);
    while (url.ends_with('/')) url.pop_back();
    std::string why;
    if (name.empty() || !url.starts_with("http://") ||
        !common::parse_endpoint("tcp://" + url.substr(7), &why))
      r.errors.push_back("SANDBOX_FLEET_MEMBERS: expected instance=http://host:port, got \"" +
                         entry + "\"" + (why.empty() ? "" : " (" + why + ")"));
    else if (!c.fleet_members.emplace(name, url).second)
      r.errors.push_back("SANDBOX_FLEET_MEMBERS: instance \"" + name + "\" is listed twice");
  }
  if (!c.fleet_members.empty() && c.workspace_mode != "fuse")
    r.errors.push_back("SANDBOX_FLEET_MEMBERS needs SANDBOX_WORKSPACE_MODE=fuse (a fleet's "
                       "sessions live in the store)");
  text("SANDBOX_FLEET_KEY_FILE", c.fleet_key_file);
  if (!c.fleet_key_file.empty()) {
    std::ifstream in(c.fleet_key_file, std::ios::binary);
    std::string key((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    while (!key.empty() && (key.back() == '\n' || key.back() == '\r')) key.pop_back();
    if (!in.good() && !in.eof())
      r.errors.push_back("SANDBOX_FLEET_KEY_FILE: cannot read " + c.fleet_key_file);
    else if (key.size() < 32)
      r.errors.push_back("SANDBOX_FLEET_KEY_FILE: " + c.fleet_key_file +
                         " must hold at least 32 bytes (the fleet's shared secret; e.g. "
                         "openssl rand -hex 32)");
    else
      c.fleet_key = std::move(key);
  }
  if ((!c.fleet_url.empty() || !c.fleet_members.empty()) && c.fleet_key_file.empty())
    r.errors.push_back("SANDBOX_FLEET_URL and SANDBOX_FLEET_MEMBERS need SANDBOX_FLEET_KEY_FILE "
                       "(the members' own credential: a forwarded call is signed with it, and "
                       "the client's key is never passed on)");
  text("SANDBOX_DISK_SIZE", c.disk_size);
  text("SANDBOX_SECCOMP_PROFILE", c.seccomp_profile);
  integer("SANDBOX_MAX_OUTPUT_BYTES", c.max_output_bytes, 1);
  flag_not_off("SANDBOX_CELL_RUNNER", c.cell_runner);
  integer("SANDBOX_MAX_ARTIFACT_BYTES", c.max_artifact_bytes, 0);
  integer("SANDBOX_MAX_FILES_PER_EXEC", c.max_files_per_exec, 0);
  integer("SANDBOX_MAX_TOTAL_ARTIFACT_BYTES", c.max_total_artifact_bytes, 0);
  integer("SANDBOX_MAX_COLLECT_SECONDS", c.max_collect_seconds, 1);
  integer("SANDBOX_COLLECT_FILE_TIMEOUT_S", c.collect_file_timeout_s, 1);
  integer("SANDBOX_MAX_UPLOAD_BYTES", c.max_upload_bytes, 1);
  integer("SANDBOX_MAX_BODY_BYTES", c.max_body_bytes, 1);
  integer("SANDBOX_MAX_STORAGE_BODY_BYTES", c.max_storage_body_bytes, 1);
  integer("SANDBOX_MAX_CODE_BYTES", c.max_code_bytes, 1);
  integer("SANDBOX_MAX_ARCHIVE_BYTES", c.max_archive_bytes, 1);
  integer("SANDBOX_STORAGE_DEFAULT_TTL", c.storage_default_ttl, 1);
  integer("SANDBOX_STORAGE_MAX_TTL", c.storage_max_ttl, 1);
  text("SANDBOX_LOCAL_STORAGE_DIR", c.local_storage_dir);
  integer("SANDBOX_S3_MAX_ATTEMPTS", c.s3_max_attempts, 1);
  integer("SANDBOX_S3_CONNECT_TIMEOUT_S", c.s3_connect_timeout_s, 1);
  integer("SANDBOX_S3_READ_TIMEOUT_S", c.s3_read_timeout_s, 1);
  integer("SANDBOX_OSS_CONNECT_TIMEOUT_S", c.oss_connect_timeout_s, 1);
  text("SANDBOX_INSTANCE", c.instance);
  integer("SANDBOX_INSTANCE_LEASE_S", c.instance_lease_s, 5);
  if (c.instance.empty() || c.instance.size() > 63 ||
      !std::all_of(c.instance.begin(), c.instance.end(), [](char ch) {
        return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' ||
               ch == '.';
      }))
    r.errors.push_back("SANDBOX_INSTANCE must be 1-63 characters of a-z, 0-9, '-', '_', '.'");
  // tmpfs pages count against the container's memory: /tmp, /home/sandbox and a tmpfs
  // workspace, filled, must leave the interpreter at least half of the limit.
  {
    const auto tmp = parse_size(c.tmpfs_size);
    const auto ws =
        c.workspace_mode == "tmpfs" ? parse_size(c.workspace_size) : std::optional<std::int64_t>(0);
    if (!tmp)
      r.errors.push_back("SANDBOX_TMPFS_SIZE: not a size: \"" + c.tmpfs_size + "\"");
    else if (!ws)
      r.errors.push_back("SANDBOX_WORKSPACE_SIZE: not a size: \"" + c.workspace_size + "\"");
    else if (2 * *tmp + *ws > c.memory_bytes / 2)
      r.errors.push_back(
          "SANDBOX_TMPFS_SIZE (/tmp and /home/sandbox) and SANDBOX_WORKSPACE_SIZE (" +
          std::to_string((2 * *tmp + *ws) >> 20) +
          " MiB together) must stay within half of SANDBOX_MEMORY (" +
          std::to_string(c.memory_bytes >> 20) +
          " MiB): files filling them would take the interpreter's memory");
  }
  if (auto v = get("SANDBOX_NETWORK")) c.network = trim_lower(*v).empty() ? "none" : trim_lower(*v);
  if (c.network != "none" && c.network != "allowlist")
    r.errors.push_back("SANDBOX_NETWORK must be none or allowlist");
  if (auto v = get("SANDBOX_EGRESS_ALLOW")) {
    std::string_view rest = *v;
    while (!rest.empty()) {
      const auto comma = rest.find(',');
      const std::string item = trim_lower(std::string(rest.substr(0, comma)));
      if (!item.empty() && !valid_egress_name(item))
        r.errors.push_back(
            "SANDBOX_EGRESS_ALLOW: not a host name: \"" + item +
            "\" (names only, never an address; \".example.org\" for its subdomains too)");
      else if (!item.empty())
        c.egress_allow.push_back(item);
      rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    }
  }
  if (c.network == "allowlist" && c.egress_allow.empty())
    r.errors.push_back(
        "SANDBOX_NETWORK=allowlist needs SANDBOX_EGRESS_ALLOW (the host names sessions may reach)");
  text("SANDBOX_EGRESS_NETWORK", c.egress_network);
  if (c.egress_network.empty() || c.egress_network.size() > 63 ||
      !std::all_of(c.egress_network.begin(), c.egress_network.end(),
                   [](char ch) {
                     return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' ||
                            ch == '_' || ch == '.';
                   }) ||
      c.egress_network == "host" || c.egress_network == "bridge" || c.egress_network == "none" ||
      c.egress_network == "default")
    r.errors.push_back(
        "SANDBOX_EGRESS_NETWORK must be a network name of its own (letters, digits, '-', '_', "
        "'.')");
  integer("SANDBOX_EGRESS_PROXY_PORT", c.egress_proxy_port, 1);
  if (c.egress_proxy_port > 65535) r.errors.push_back("SANDBOX_EGRESS_PROXY_PORT: at most 65535");
  if (c.api_key.empty() && !c.allow_no_auth)
    r.errors.push_back(
        "SANDBOX_API_KEY is empty: refusing to start without auth (set SANDBOX_ALLOW_NO_AUTH=1 to "
        "run open)");
  if (r.errors.empty()) r.value = c;
  return r;
}

}  // namespace dockgate::sidecar
