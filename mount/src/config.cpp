// dockgate-mount's configuration: the AIStor example's AIMEM_* variables, plus the driver.
#include <charconv>
#include <fstream>
#include <sstream>

#include "dockgate/common/workspace_id.hpp"
#include "dockgate/mount/mount.hpp"

namespace dockgate::mount {

bool valid_id(std::string_view id) {
  return common::valid_workspace_id(id);
}

std::optional<unsigned> subordinate_id(std::string_view text, std::string_view user, unsigned id) {
  unsigned long long left = id;
  while (!text.empty()) {
    const auto nl = text.find('\n');
    std::string_view line = text.substr(0, nl);
    text = nl == std::string_view::npos ? std::string_view() : text.substr(nl + 1);
    const auto a = line.find(':');
    const auto b = a == std::string_view::npos ? a : line.find(':', a + 1);
    if (b == std::string_view::npos || line.substr(0, a) != user) continue;
    unsigned long long start = 0, count = 0;
    const auto s = line.substr(a + 1, b - a - 1), n = line.substr(b + 1);
    if (std::from_chars(s.data(), s.data() + s.size(), start).ec != std::errc() ||
        std::from_chars(n.data(), n.data() + n.size(), count).ec != std::errc())
      continue;
    if (left < count) {
      const unsigned long long host = start + left;
      if (host > 4294967294ULL) return std::nullopt;
      return static_cast<unsigned>(host);
    }
    left -= count;
  }
  return std::nullopt;
}

config_result load_config(const std::map<std::string, std::string>& env, bool need_storage) {
  config_result r;
  mount_config c;
  auto get = [&](const char* name) -> std::optional<std::string> {
    auto it = env.find(name);
    if (it == env.end() || it->second.empty()) return std::nullopt;
    return it->second;
  };
  auto number = [&](const char* name, auto& out, long long min, long long max) {
    auto v = get(name);
    if (!v) return;
    long long n = 0;
    auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), n);
    if (ec != std::errc() || p != v->data() + v->size() || n < min || n > max)
      r.errors.push_back(std::string(name) + " must be a number from " + std::to_string(min) +
                         " to " + std::to_string(max));
    else
      out = static_cast<std::remove_reference_t<decltype(out)>>(n);
  };
  if (auto v = get("AIMEM_BUCKET")) c.bucket = *v;
  if (auto v = get("AIMEM_ENDPOINT")) c.endpoint = *v;
  if (auto v = get("AIMEM_ACCESS_KEY")) c.access_key = *v;
  if (auto v = get("AIMEM_SECRET_KEY")) c.secret_key = *v;
  if (auto v = get("AIMEM_SESSION_TOKEN")) c.session_token = *v;
  if (auto v = get("AIMEM_MOUNT_ROOT")) c.root = *v;
  if (auto v = get("AIMEM_REGION")) c.region = *v;
  if (auto v = get("AIMEM_PREFIX")) c.prefix = *v;
  if (auto v = get("DOCKGATE_MOUNT_DRIVER")) c.driver = *v;
  number("DOCKGATE_MOUNT_UID", c.uid, 0, 2147483647);
  number("DOCKGATE_MOUNT_GID", c.gid, 0, 2147483647);
  if (auto v = get("DOCKGATE_MOUNT_USERNS")) {
    // The engine remaps the container's ids: the files belong to the host ids the sandbox
    // user's map to, or the session user meets a workspace it cannot write.
    c.userns = *v;
    auto shift = [&](const char* file, unsigned& id) {
      std::ifstream in(file);
      std::stringstream text;
      text << in.rdbuf();
      if (auto mapped = subordinate_id(text.str(), c.userns, id))
        id = *mapped;
      else
        r.errors.push_back("DOCKGATE_MOUNT_USERNS: " + c.userns + " has no range in " + file +
                           " that holds " + std::to_string(id));
    };
    shift("/etc/subuid", c.uid);
    shift("/etc/subgid", c.gid);
  }
  long long timeout = c.timeout.count();
  number("DOCKGATE_MOUNT_TIMEOUT", timeout, 1, 3600);
  c.timeout = std::chrono::seconds(timeout);

  while (c.root.size() > 1 && c.root.back() == '/') c.root.pop_back();
  if (c.root.empty() || c.root.front() != '/' || c.root == "/" ||
      c.root.find("/./") != std::string::npos || c.root.find("/../") != std::string::npos ||
      c.root.ends_with("/..") || c.root.ends_with("/.") || c.root.find("//") != std::string::npos)
    r.errors.push_back("AIMEM_MOUNT_ROOT must be an absolute, clean path other than /");
  while (!c.prefix.empty() && c.prefix.back() == '/') c.prefix.pop_back();
  while (!c.prefix.empty() && c.prefix.front() == '/') c.prefix.erase(0, 1);
  for (char ch : c.prefix)
    if (!(std::isalnum(static_cast<unsigned char>(ch)) || ch == '_' || ch == '-' || ch == '.' ||
          ch == '/'))
      r.errors.push_back("AIMEM_PREFIX may hold only A-Z a-z 0-9 _ - . /");
  if (c.prefix.find("..") != std::string::npos || c.prefix.find("//") != std::string::npos)
    r.errors.push_back("AIMEM_PREFIX must be a plain relative path");
  if (need_storage) {
    if (c.bucket.empty()) r.errors.push_back("AIMEM_BUCKET is required");
    if (!c.endpoint.starts_with("http://") && !c.endpoint.starts_with("https://"))
      r.errors.push_back("AIMEM_ENDPOINT must be an http:// or https:// URL");
    if (c.access_key.empty() || c.secret_key.empty())
      r.errors.push_back("AIMEM_ACCESS_KEY and AIMEM_SECRET_KEY are required");
  }
  if (r.errors.empty()) r.value = std::move(c);
  return r;
}

}  // namespace dockgate::mount
