#pragma once
// One review of one canonical body under one profile: the profile's field rules (force,
// clamp, allow, deny), the default deny of the widening fields (widening_fields.hpp), the
// mount, network, image, workspace and owner rules. It collects the first refusal, the
// changes it made (body_changes.hpp), and the objects the proxy must check on the host or ask the
// daemon about (bind sources, networks, volumes). See docs/design.md, "Container-create policy".
//
// Invariant: every check returns false after recording a refusal, and a review whose
// checks did not all pass is a deny (body_review.cpp); nothing here forwards anything.

#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "body_changes.hpp"
#include "dockgate/policy/body_rules.hpp"
#include "dockgate/policy/decision.hpp"
#include "dockgate/policy/json_value.hpp"
#include "widening_fields.hpp"

namespace dockgate::policy {

struct body_reviewer {
  explicit body_reviewer(const profile& prof) : p(prof) {}
  const profile& p;
  body_changes changes;  // what the review changed, for the audit line and the warnings
  std::optional<deny> refusal;
  std::vector<std::string> bind_sources;
  std::vector<std::string> network_names;
  std::vector<std::string> volume_names;
  bool workspace_unchanged = false;  // the body already held exactly the bind we write
  // Where the workspace bind goes: the rule's target, or the client's own (host_binds).
  std::string workspace_target;
  bool workspace_read_only = false;

  // Records the first refusal ("<path>:<rule>"), with the rule's hint if it has one;
  // returns false.
  bool refuse(std::string_view path, std::string_view rule, std::string what,
              std::string_view hint = {});

  // One profile rule on the field at `path`.
  bool apply(json_object& root, std::string_view path, const field_rule& rule);
  bool clamp_tmpfs(json_value* current, const field_rule& rule);
  bool clamp_ulimits(json_value* current, const field_rule& rule);
  // Each of `fields` without a profile rule, and not in `handled_elsewhere`, at its safe value.
  bool default_deny(json_object& root, std::span<const widening_field> fields,
                    const field_rules& rules, std::span<const std::string_view> handled_elsewhere);

  // Leaves out the binds (Binds entries, bind Mounts) of the profile's binds.drop sources;
  // each entry left out is recorded in `dropped`.
  void drop_binds(json_object& root);
  std::vector<std::string> dropped;
  bool check_mounts(json_object& root);
  bool check_endpoint(std::string_view where, const json_object& settings);
  // `mode_checked`: NetworkMode was judged by check_container_network.
  bool check_networks(json_object& root, bool mode_checked = false);
  // NetworkMode "container:<ref>" under networks.join_owned_containers: the reference,
  // for the proxy to resolve to an owned container (network_container).
  bool shares_network(const json_object& root) const;
  bool check_container_network(const json_object& root);
  std::string network_container;
  static void add_unique(std::vector<std::string>& list, std::string_view name);

  bool check_image(const json_object& root);
  bool check_image_reference(std::string_view text, bool default_tag);

  json_value workspace_mount(const std::string& source) const;
  bool take_workspace(json_object& root, std::string& source);
  void bind_workspace(json_object& root, const std::string& source);
  // HostConfig.Mounts as a list, made (empty) if the body has none: where the gate's own
  // mounts (the workspace bind, the upload volumes) are written.
  static json_value* mounts_list(json_object& root);

  bool stamp_owner(json_object& root, bool container = true);

  // body_reviewer_seccomp.cpp: the profile's seccomp profile (body_rules::seccomp). The
  // gate's own entry is set aside before the rules judge SecurityOpt (so the proxy's output
  // reviews to itself) and written last, in place of any other seccomp entry.
  void set_aside_seccomp(json_object& root) const;
  void force_seccomp(json_object& root);

  // body_reviewer_host.cpp: what of the host a container reaches besides its own mounts.
  bool check_ports(json_object& root);
  bool take_host_bind(json_object& root);
  // Upload targets (upload_volumes.cpp): the gate's anonymous volumes, taken out of a body
  // before the mount rules judge it and written after them.
  std::size_t uploads_unchanged = 0;  // the gate's own volumes the body already held
  json_value upload_mount(const std::string& target) const;
  void take_uploads(json_object& root);
  void mount_uploads(json_object& root);
  // RestartPolicy of a container with a host bind the gate checks (`rule`: "workspace"
  // or "binds"): only "no", so that every start passes the gate's check at start.
  bool check_restart_policy(const json_object& root, std::string_view rule);
};

}  // namespace dockgate::policy
