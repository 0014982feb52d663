#pragma once
// One review of one canonical body under one profile: the profile's field rules (force,
// clamp, allow, deny), the default deny of the widening fields (widening_fields.hpp), the
// mount, network, image, workspace and owner rules. It collects the first refusal, the
// changes it made, and the objects the proxy must check on the host or ask the daemon
// about (bind sources, networks, volumes). See docs/design.md, "Container-create policy".
//
// Invariant: every check returns false after recording a refusal, and a review whose
// checks did not all pass is a deny (body_review.cpp); nothing here forwards anything.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/policy/body_rules.hpp"
#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/json_value.hpp"
#include "widening_fields.hpp"

namespace dockgate::policy {

// The member `path` ("HostConfig.Memory") of the canonical body; creates the parent
// objects when `create` is set.
json_value* locate(json_object& root, std::string_view path, bool create, json_object** parent_out,
                   std::string_view* key_out);
const json_value* locate(const json_object& root, std::string_view path);

struct body_reviewer {
  body_reviewer(const profile& prof, std::vector<body_change>& changed_fields)
      : p(prof), changes(changed_fields) {}
  const profile& p;
  std::vector<body_change>& changes;
  // Fields the daemon's defaults for an old API version filled in before the review:
  // not the client's values.
  std::vector<std::string> daemon_defaults;
  std::optional<deny> refusal;
  std::vector<std::string> bind_sources;
  std::vector<std::string> network_names;
  std::vector<std::string> volume_names;
  bool workspace_unchanged = false;  // the body already held exactly the bind we write

  // Records the first refusal ("<path>:<rule>"); returns false.
  bool refuse(std::string_view path, std::string_view rule, std::string what);
  // Records a change of the field at `path` for the audit line and the create warnings,
  // once per field; `before` is its value before this change (nullptr: none).
  void changed(std::string_view path, std::string_view how, const json_value* before);
  // Fills each change's `to` from the body as it goes up.
  void finish(const json_object& root);

  // One profile rule on the field at `path`.
  bool apply(json_object& root, std::string_view path, const field_rule& rule);
  bool clamp_tmpfs(json_value* current, const field_rule& rule);
  bool clamp_ulimits(json_value* current, const field_rule& rule);
  // Each of `fields` without a profile rule, and not in `handled_elsewhere`, at its safe value.
  bool default_deny(json_object& root, std::span<const widening_field> fields,
                    const field_rules& rules, std::span<const std::string_view> handled_elsewhere);

  bool check_mounts(json_object& root);
  bool check_endpoint(std::string_view where, const json_object& settings);
  bool check_networks(json_object& root);
  static void add_unique(std::vector<std::string>& list, std::string_view name);

  bool check_image(const json_object& root);
  bool check_image_reference(std::string_view text, bool default_tag);

  json_value workspace_mount(const std::string& source) const;
  bool take_workspace(json_object& root, std::string& source);
  void bind_workspace(json_object& root, const std::string& source);

  bool stamp_owner(json_object& root, bool container = true);
};

}  // namespace dockgate::policy
