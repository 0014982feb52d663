// The create half of the upload rule (body_rules.hpp, upload_rule): each target gets an
// anonymous volume, labelled with the profile's owner, unless the body already mounts
// something there. dockerd writes an archive into a read-only root only inside a mount
// (moby daemon/archive_unix.go, checkWritablePath; a tmpfs does not count), and an
// anonymous volume goes with its container when removed with v=1 (query.cpp sets it).
//
// Invariant: re-reviewing the gate's own output gives the same output and records no
// change: take_uploads takes the gate's volumes out before the mount rules judge the body
// (a client cannot label a volume itself: VolumeOptions are refused there), mount_uploads
// writes them again after.
#include <algorithm>

#include "body_reviewer.hpp"

namespace dockgate::policy {

namespace {

// Whether the body mounts anything at `target`: Binds "src:dst[:opts]", Mounts, the
// anonymous Volumes and Tmpfs (dockerd refuses two mounts at one path).
bool mounts_at(const json_object& root, std::string_view target) {
  if (const auto* binds = locate(root, "HostConfig.Binds"); binds && binds->as_array())
    for (const auto& b : *binds->as_array()) {
      if (!b.as_string()) continue;
      std::string_view spec = *b.as_string();
      const auto colon = spec.find(':');
      if (colon == std::string_view::npos) continue;
      spec.remove_prefix(colon + 1);
      if (spec.substr(0, spec.find(':')) == target) return true;
    }
  if (const auto* mounts = locate(root, "HostConfig.Mounts"); mounts && mounts->as_array())
    for (const auto& m : *mounts->as_array()) {
      const auto* o = m.as_object();
      const auto* t = o ? find(*o, "Target") : nullptr;
      if (t && t->as_string() && *t->as_string() == target) return true;
    }
  for (std::string_view path : {"Volumes", "HostConfig.Tmpfs"})
    if (const auto* o = locate(root, path); o && o->as_object() && find(*o->as_object(), target))
      return true;
  return false;
}

}  // namespace

// In the Mount struct's field order, as canonical_order leaves it (so == finds it again).
json_value body_reviewer::upload_mount(const std::string& target) const {
  return json_object{
      {"Type", "volume"},
      {"Target", target},
      {"VolumeOptions",
       json_object{{"Labels", json_object{{std::string(owner_label), p.rules.owner}}}}}};
}

void body_reviewer::take_uploads(json_object& root) {
  json_object* parent = nullptr;
  std::string_view key;
  json_value* mounts = locate(root, "HostConfig.Mounts", false, &parent, &key);
  if (!mounts || !mounts->as_array()) return;
  const auto& targets = p.rules.uploads->targets;
  std::erase_if(*mounts->as_array(), [&](const json_value& m) {
    const bool ours = std::any_of(targets.begin(), targets.end(),
                                  [&](const std::string& t) { return m == upload_mount(t); });
    uploads_unchanged += ours ? 1 : 0;
    return ours;
  });
}

void body_reviewer::mount_uploads(json_object& root) {
  std::vector<const std::string*> missing;
  for (const auto& t : p.rules.uploads->targets)
    if (!mounts_at(root, t)) missing.push_back(&t);
  if (missing.empty()) return;
  json_value* mounts = mounts_list(root);
  if (uploads_unchanged != missing.size())
    changes.record("HostConfig.Mounts", "upload volume", mounts);
  for (const auto* t : missing) mounts->as_array()->push_back(upload_mount(*t));
}

}  // namespace dockgate::policy
