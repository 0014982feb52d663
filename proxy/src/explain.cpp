#include "dockgate/proxy/explain.hpp"

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/query.hpp"

namespace dockgate::proxy {

explanation explain_request(const policy::profile& profile, std::string_view method,
                            std::string_view target, const std::optional<std::string>& body) {
  explanation e;
  auto refused = [&](unsigned status, std::string_view rule, std::string_view reason) {
    e.text += "decision:  deny " + std::to_string(status) + " (rule " + std::string(rule) + ")\n";
    e.text += "message:   " + std::string(reason) + "\n";
    e.exit_status = 1;
    return e;
  };
  e.text = "profile:   " + profile.name +
           (profile.mode == policy::profile::mode_kind::audit ? " (audit mode)" : "") + "\n";
  auto m = http::parse_method(method);
  if (!m) return refused(400, "framing", "dockgate: method not supported");
  auto routed = policy::route_request(*m, target);
  if (auto* err = std::get_if<policy::route_error>(&routed))
    return refused(policy::route_error_status(*err), "route",
                   "dockgate: " + std::string(policy::route_error_text(*err)));
  const auto& r = std::get<policy::route>(routed);
  e.text += "operation: " + std::string(policy::operation_name(r.op)) + "\n";
  auto d = policy::decide(profile, r);
  if (auto* x = std::get_if<policy::deny>(&d)) return refused(x->status, x->rule, x->reason);
  auto q = policy::review_query(profile, r);
  if (auto* x = std::get_if<policy::deny>(&q)) return refused(x->status, x->rule, x->reason);
  const auto& kept = std::get<policy::query_review>(q);
  if (!kept.dropped.empty()) {
    e.text += "dropped:  ";
    for (const auto& name : kept.dropped) e.text += " query:" + name;
    e.text += " (the daemon ignores them)\n";
  }
  if (!kept.changes.empty()) {
    e.text += "query:    ";
    for (const auto& c : kept.changes) e.text += " " + c.field + ":" + c.action;
    e.text += " (forwarded as " + kept.query + ")\n";
  }
  if (r.op == policy::operation::PutContainerArchive && profile.rules.uploads)
    e.text +=
        "upload:    the archive is read whole, each entry a regular file or directory within an "
        "upload target, and the gate's own tar goes up (docs/policy.md, \"Uploads by "
        "archive\")\n";
  if (profile.rules.confine_to_owned) {
    // What the request path does for this operation (the table of policy/ownership.hpp).
    const auto own = policy::operation_ownership(r.op);
    const std::string label = std::string(policy::owner_label) + "=" + profile.rules.owner;
    if (own.object == policy::path_object::container)
      e.text += "ownership: the daemon must report container \"" + std::string(r.param) +
                "\" with label " + label + "; forwarded by its full ID\n";
    else if (own.object == policy::path_object::exec)
      e.text += "ownership: exec \"" + std::string(r.param) +
                "\" must belong to a container labelled " + label + "\n";
    else if (own.object == policy::path_object::network)
      e.text +=
          "ownership: the daemon must report network \"" + std::string(r.param) + "\" with label " +
          label + (own.predefined_networks_readable ? " (or be bridge, host or none)" : "") +
          (own.answer == policy::owned_answer::networks ? "; its containers are filtered" : "") +
          "\n";
    else if (own.object == policy::path_object::volume)
      e.text += "ownership: the daemon must report volume \"" + std::string(r.param) +
                "\" with label " + label + "\n";
    else if (own.filters != policy::owned_filters::none)
      e.text +=
          "ownership: filters gain label=" + label +
          (own.answer != policy::owned_answer::as_is ? "; the response is filtered too\n" : "\n");
    else if (own.answer != policy::owned_answer::as_is)
      e.text +=
          "ownership: the response keeps only what the profile owns (and the daemon's own "
          "networks)\n";
  }
  if (policy::operation_mounts_binds(r.op) && (profile.rules.workspace || profile.rules.binds))
    e.text +=
        "binds:     the daemon mounts the container's binds again for this call: each source is "
        "checked again first (rule binds)\n";
  if (r.op == policy::operation::ContainerCreate && !profile.rules.seccomp.empty())
    e.text +=
        "seccomp:   the container runs under the profile's own seccomp profile, whatever the "
        "body asks (HostConfig.SecurityOpt, rule seccomp)\n";
  if (r.op == policy::operation::SystemInfo && profile.system_info_keep) {
    e.text += "answer:    only the members";
    for (const auto& k : *profile.system_info_keep) e.text += " " + k;
    e.text += " (rule system_info)\n";
  }
  if (!body || policy::operation_body(r.op) != policy::body_kind::json) {
    if (body && policy::operation_body(r.op) == policy::body_kind::none && !body->empty())
      e.text += "dropped:   body (the operation takes none; it is not forwarded)\n";
    e.text += "decision:  allow\n";
    return e;
  }
  auto reviewed = policy::review_body(profile, r.op, *body);
  if (auto* x = std::get_if<policy::deny>(&reviewed)) return refused(x->status, x->rule, x->reason);
  if (auto* rw = std::get_if<policy::rewrite>(&reviewed)) {
    e.text += "decision:  allow, with the body rewritten\n";
    // Each change with the rule that made it: what an operator adapting the profile reads.
    e.text += "changes:";
    if (rw->changes.empty()) e.text += "   (none)";
    for (const auto& c : rw->changes)
      e.text += "\n  " + c.field + ": " + c.action + " (rule " + policy::change_rule(r.op, c) + ")";
    if (!rw->dropped.empty()) {
      e.text += "\ndropped:  ";
      for (const auto& key : rw->dropped) e.text += " body:" + key;
      e.text += " (the daemon ignores them)";
    }
    for (const auto& w : rw->warnings) e.text += "\nwarning:   " + w;
    e.text += "\nbody:\n" + rw->body + "\n";
    return e;
  }
  e.text += "decision:  allow (body forwarded as sent)\n";
  return e;
}

}  // namespace dockgate::proxy
