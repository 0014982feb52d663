// dockgate-mount's configuration: the AIStor example's AIMEM_* variables, plus the driver.
#include <charconv>

#include "dockgate/common/workspace_id.hpp"
#include "dockgate/mount/mount.hpp"

namespace dockgate::mount {

bool valid_id(std::string_view id) {
  return common::valid_workspace_id(id);
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
