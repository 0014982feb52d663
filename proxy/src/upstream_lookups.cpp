// Step 4 of the request path (connection.hpp), ownership and version pinning: a container
// or exec reference is resolved by the daemon and forwarded by full ID only when it
// carries the profile's owner label; lists and events are confined by an injected label
// filter and filtered again on the way back; every request is pinned to one API version.
// Here too are the other lookups the stages make on the daemon (the binds a start would
// mount, the networks and volumes a reviewed body names), all through upstream_get and
// upstream_request on the connection's own upstream socket.
//
// Invariant: the daemon's word decides, at the time of the request. A name is resolved on
// every request (a rename between check and use changes nothing: the forwarded target
// names the ID that was checked); only positive answers are cached, by full ID.
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "bind_check.hpp"
#include "connection.hpp"
#include "dockgate/common/error_body.hpp"
#include "dockgate/policy/owned_objects.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/request_shape.hpp"
#include "readiness.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

namespace beast_http = beast::http;
using namespace std::chrono_literals;

net::awaitable<std::pair<unsigned, std::string>> connection::upstream_get(std::string_view target) {
  co_return co_await upstream_request("GET", target, {});
}

net::awaitable<std::pair<unsigned, std::string>> connection::upstream_request(
    std::string_view method, std::string_view target, std::string_view json) {
  std::string request(method);
  request += ' ';
  request += target;
  request += " HTTP/1.1\r\nHost: docker\r\n";
  if (!json.empty()) {
    request += "Content-Type: application/json\r\nContent-Length: ";
    request += std::to_string(json.size());
    request += "\r\n";
  }
  request += "\r\n";
  request += json;
  // A GET on a reused daemon connection that gets no byte back (the daemon closed it while
  // it was idle) is asked again, once, on a new one; a POST never (resend_on_fresh_upstream).
  for (bool fresh = false;; fresh = true) {
    if (!co_await connect_upstream(fresh)) co_return std::pair<unsigned, std::string>{0, {}};
    const bool may_retry = !fresh && upstream_reused_ && method == "GET";
    not_readable_yet(*upstream_);  // the answer follows the request (readiness.hpp)
    auto [wec, wn] = co_await write_all(*upstream_, net::buffer(request));
    if (wec) {
      upstream_.reset();
      if (may_retry) continue;
      co_return std::pair<unsigned, std::string>{0, {}};
    }
    beast_http::response_parser<beast_http::string_body> parser;
    parser.body_limit(8 * 1024 * 1024);
    parser.header_limit(http::max_head_bytes);
    beast::flat_buffer buffer;  // this answer's bytes only: nothing is kept between lookups
    auto [rec, rn] = co_await beast_http::async_read(*upstream_, buffer, parser, use_tuple);
    if (rec) {
      upstream_.reset();
      if (may_retry && !parser.got_some() && buffer.size() == 0) continue;
      co_return std::pair<unsigned, std::string>{0, {}};
    }
    upstream_reused_ = true;
    // Nothing may stay behind the answer: the next response is read from the socket.
    if (!parser.keep_alive() || buffer.size() != 0) upstream_.reset();
    co_return std::pair<unsigned, std::string>{parser.get().result_int(),
                                               std::move(parser.get().body())};
  }
}

net::awaitable<bool> connection::learn_api_version() {
  const std::uint64_t forgets_before = ctx_.process.daemon.forgets();
  auto [status, body] = co_await upstream_get("/version");
  auto version = status == 200 ? policy::parse_version_api(body) : std::nullopt;
  auto parsed = version ? policy::parse_api_version(*version) : std::nullopt;
  if (!parsed) co_return false;
  // The daemon's version, capped at the newest the route table knows.
  daemon_facts learned;
  learned.version = std::min(*parsed, policy::max_api_version);
  learned.api_version = policy::to_string(learned.version);
  // What the daemon does for older clients' empty fields depends on its host's cgroups.
  auto [info_status, info] = co_await upstream_get("/v" + *learned.api_version + "/info");
  learned.cgroup_v1 = info_status != 200 || policy::info_says_cgroup_v1(info);
  // This request goes on with what the daemon just said; the process learns it unless the
  // daemon was found away meanwhile (then this thread asks again on its next request).
  ctx_.daemon = learned;
  if (ctx_.process.daemon.learned(learned, forgets_before))
    ctx_.log->info(
        "daemon API version {} (cgroup v{}): requests without a version are forwarded as /v{}",
        *version, learned.cgroup_v1 ? 1 : 2, *learned.api_version);
  co_return true;
}

// Whether the daemon says the container `reference` names carries this profile's owner
// label; if it does, its full ID into `id`. A full ID the gate has seen owned is answered
// from the cache, with no allocation (the key is built in a buffer the connection keeps).
bool connection::owned_from_cache(std::string_view reference, std::string& id) {
  if (reference.size() != 64) return false;
  std::string& key = ctx_.owned_key;
  key.assign(profile_->rules.owner);
  key += '/';
  key += reference;
  if (!ctx_.owned_containers.count(key)) return false;
  id.assign(reference);
  return true;
}

net::awaitable<bool> connection::owned_container_id(std::string_view reference, std::string& id) {
  if (owned_from_cache(reference, id)) co_return true;
  const std::string& owner = profile_->rules.owner;
  auto [status, body] = co_await upstream_get("/v" + *req_.daemon.api_version + "/containers/" +
                                              std::string(reference) + "/json");
  if (status != 200) co_return false;
  auto c = policy::parse_container_inspect(body);
  if (!c || c->owner != owner) co_return false;
  if (ctx_.owned_containers.size() >= proxy_context::owned_cache_limit)
    ctx_.owned_containers.clear();
  ctx_.owned_containers.insert(owner + "/" + c->id);
  id = std::move(c->id);
  co_return true;
}

bool connection::prepare_target_now(const policy::route& r) {
  ctx_.sync_daemon();
  if (!ctx_.daemon.api_version || pin_version(r)) return false;
  std::string_view param_as = r.param;
  if (profile_->rules.confine_to_owned) {
    const auto object = policy::operation_ownership(r.op).object;
    if (object == policy::path_object::container) {
      if (!owned_from_cache(r.param, req_.object_id)) return false;
      param_as = req_.object_id;
    } else if (object != policy::path_object::none) {
      return false;
    }
  }
  if (checks_binds_at_start(r) || !confine_filters(r)) return false;
  build_target(r, param_as);
  return true;
}

std::optional<policy::deny> connection::pin_version(const policy::route& r) {
  // The client's API version is part of what it reads (formats, defaults): forwarded as
  // it asked, within what the route table models (1.24 and up) and what the daemon
  // speaks; a newer one is answered as the daemon answers it. Without one: the daemon's.
  // The request keeps its own copy: another request of this thread may forget the thread's
  // while this one waits on the daemon.
  req_.daemon = ctx_.daemon;
  req_.forward_version = *req_.daemon.api_version;
  req_.version = req_.daemon.version;
  if (!r.version) return std::nullopt;
  if (auto d = policy::version_refusal(*r.version, req_.daemon.version)) return d;
  req_.version = *r.version;
  req_.forward_version = policy::to_string(*r.version);
  return std::nullopt;
}

bool connection::checks_binds_at_start(const policy::route& r) const {
  return policy::operation_mounts_binds(r.op) &&
         (profile_->rules.workspace || profile_->rules.binds);
}

bool connection::confine_filters(const policy::route& r) {
  // "system_info": `/info` goes back with only the profile's kept members (in audit mode too:
  // it is what the profile shows, not a refusal).
  if (r.op == policy::operation::SystemInfo && profile_->system_info_keep) {
    req_.answer_filter = policy::owned_answer::system_info;
    return true;
  }
  if (!profile_->rules.confine_to_owned) return true;
  // Audit mode: the request and its answer go as the client and the daemon have them.
  if (profile_->mode == policy::profile::mode_kind::audit) {
    req_.answer_filter = policy::owned_answer::as_is;
    return true;
  }
  // Lists, events and prunes see only what the profile owns: the owner label joins the
  // client's filters, and the answer is filtered again on the way back (the table of
  // policy/ownership.hpp says which).
  const auto rule = policy::operation_ownership(r.op);
  if (rule.filters != policy::owned_filters::none) {
    auto confined =
        policy::confine_query(req_.query, profile_->rules.owner,
                              rule.filters == policy::owned_filters::container_events_by_owner);
    if (!confined) return false;
    req_.query = std::move(*confined);
  }
  req_.answer_filter = rule.answer;
  return true;
}

void connection::build_target(const policy::route& r, std::string_view param_as) {
  // "/v<version>" + the path, its object as resolved (req_.target keeps its capacity).
  req_.target.assign("/v");
  req_.target += req_.forward_version;
  if (param_as.data() == r.param.data()) {
    req_.target += r.path;
  } else {
    const std::size_t param_at = static_cast<std::size_t>(r.param.data() - r.path.data());
    req_.target.append(r.path.substr(0, param_at));
    req_.target += param_as;
    req_.target.append(r.path.substr(param_at + r.param.size()));
  }
  if (!req_.query.empty()) {
    req_.target += '?';
    req_.target += req_.query;
  }
}

net::awaitable<bool> connection::prepare_target(const policy::route& r) {
  // The daemon's version is learned once: connections arriving meanwhile wait for that
  // one answer instead of each asking (a burst of clients must not become a burst of
  // /version and /info calls); what another thread learned is taken from it.
  ctx_.sync_daemon();
  while (!ctx_.daemon.api_version && ctx_.learning_version) {
    net::steady_timer wait(client_.get_executor(), std::chrono::milliseconds(2));
    co_await wait.async_wait(use_tuple);
  }
  if (!ctx_.daemon.api_version) {
    ctx_.learning_version = true;
    const bool learned = co_await learn_api_version();
    ctx_.learning_version = false;
    if (!learned) {
      co_await refuse(502, "upstream", "dockgate: cannot read the Docker daemon's API version");
      co_return false;
    }
  }
  if (auto d = pin_version(r)) {
    req_.audit.verdict = "deny";
    co_await refuse(d->status, d->rule, d->reason);
    co_return false;
  }
  // The path is forwarded with the object it names replaced by what the daemon resolved
  // it to (req_.object_id: a full ID, or a volume's name), else as the client wrote it.
  std::string_view param_as = r.param;
  std::string_view container =
      r.param;  // the container the request names, by full ID once resolved
  if (profile_->rules.confine_to_owned) {
    const auto rule = policy::operation_ownership(r.op);
    const auto object = rule.object;
    if (object == policy::path_object::container) {
      // Forwarded by full ID: renames change nothing.
      if (co_await owned_container_id(r.param, req_.object_id)) {
        param_as = container = req_.object_id;
      } else {
        const policy::deny not_owned{404, "owner",
                                     "dockgate: no such container: " + std::string(r.param) +
                                         " (profile " + profile_->name +
                                         " sees only its own containers)"};
        if (enforce(not_owned)) {
          req_.audit.verdict = "deny";
          co_await refuse(not_owned.status, not_owned.rule, not_owned.reason);
          co_return false;
        }
        req_.object_id.assign(r.param);  // audit mode: forwarded as the client named it
      }
    } else if (object == policy::path_object::exec) {
      auto [status, body] = co_await upstream_get("/v" + *req_.daemon.api_version + "/exec/" +
                                                  std::string(r.param) + "/json");
      auto exec = status == 200 ? policy::parse_exec_inspect(body) : std::nullopt;
      std::string exec_container;
      if (exec && co_await owned_container_id(exec->container_id, exec_container)) {
        req_.object_id = exec->id;
        param_as = req_.object_id;
      } else {
        const policy::deny not_owned{404, "owner",
                                     "dockgate: no such exec instance: " + std::string(r.param) +
                                         " (profile " + profile_->name +
                                         " sees only its own containers)"};
        if (enforce(not_owned)) {  // else audit mode: forwarded as the client named it
          req_.audit.verdict = "deny";
          co_await refuse(not_owned.status, not_owned.rule, not_owned.reason);
          co_return false;
        }
      }
    } else if (object == policy::path_object::network || object == policy::path_object::volume) {
      const bool network = object == policy::path_object::network;
      const std::string what = network ? "network" : "volume";
      std::optional<std::string> name;  // what the request is forwarded with
      if (policy::valid_object_name(r.param)) {
        auto [status, body] =
            co_await upstream_get("/v" + *req_.daemon.api_version +
                                  (network ? "/networks/" : "/volumes/") + std::string(r.param));
        if (network) {
          auto n = status == 200 ? policy::parse_network_inspect(body) : std::nullopt;
          // The daemon's own networks: anyone may read them (their containers filtered).
          if (n && (n->owner == profile_->rules.owner ||
                    (rule.predefined_networks_readable && n->owner.empty() &&
                     policy::predefined_network(n->name))))
            name = n->id;  // forwarded by full ID
        } else {
          auto v = status == 200 ? policy::parse_volume_inspect(body) : std::nullopt;
          if (v && v->owner == profile_->rules.owner) name = v->name;
        }
      }
      if (name) {
        req_.object_id = std::move(*name);
        param_as = req_.object_id;
      } else {
        const policy::deny not_owned{404, "owner",
                                     "dockgate: no such " + what + ": " + std::string(r.param) +
                                         " (profile " + profile_->name + " sees only its own " +
                                         what + "s)"};
        if (enforce(not_owned)) {
          req_.audit.verdict = "deny";
          co_await refuse(not_owned.status, not_owned.rule, not_owned.reason);
          co_return false;
        }
      }
    }
  }
  if (!confine_filters(r)) {
    req_.audit.verdict = "deny";
    co_await refuse(400, "query", "dockgate: malformed filters");
    co_return false;
  }
  if (checks_binds_at_start(r)) {
    // The daemon mounts binds when a container starts (and for an archive call), not when
    // it is created: every host path it binds is checked again now, the closest the gate
    // gets to the mount.
    if (auto problem = co_await binds_problem(container)) {
      const policy::deny d{403, "binds",
                           std::string(r.op == policy::operation::ContainerStart ||
                                               r.op == policy::operation::ContainerRestart
                                           ? "dockgate: not started: bind source "
                                           : "dockgate: not copied: bind source ") +
                               *problem + " (profile " + profile_->name + ")"};
      if (enforce(d)) {
        req_.audit.verdict = "deny";
        co_await refuse(d.status, d.rule, d.reason);
        co_return false;
      }
    }
  }
  build_target(r, param_as);
  co_return true;
}

net::awaitable<std::optional<std::string>> connection::binds_problem(std::string_view container) {
  auto [status, body] = co_await upstream_get("/v" + *req_.daemon.api_version + "/containers/" +
                                              std::string(container) + "/json");
  if (status == 404) co_return std::nullopt;  // the daemon answers the start itself
  auto c = status == 200 ? policy::parse_container_inspect(body) : std::nullopt;
  if (!c) co_return std::string("of the container cannot be read from the daemon");
  const auto& ws = profile_->rules.workspace;
  for (const auto& source : c->bind_sources) {
    bind_check_options options;
    if (ws && !c->workspace.empty() && source == ws->root + "/" + c->workspace)
      options = {ws->require_fuse, true};
    else if (profile_->rules.binds)
      options = {profile_->rules.binds->require_fuse, false};
    else
      options = {true, true};  // a bind no rule of this profile wrote: held to the strictest check
    if (auto problem = check_bind_source(source, options)) co_return problem;
  }
  co_return std::nullopt;
}

net::awaitable<std::optional<policy::deny>> connection::check_named_objects(const policy::route& r,
                                                                            policy::rewrite& rw) {
  if (!profile_->rules.confine_to_owned) co_return std::nullopt;
  const std::string& owner = profile_->rules.owner;
  const std::string version = "/v" + *req_.daemon.api_version;
  const std::string in_profile = " (profile " + profile_->name + ")";
  if (!rw.container.empty()) {  // NetworkConnect, NetworkDisconnect, a create's NetworkMode
    std::string_view reference = rw.container;
    if (reference.starts_with('/')) reference.remove_prefix(1);  // "/name", as inspect reports it
    std::string id;
    if (!policy::valid_object_name(reference) || !co_await owned_container_id(reference, id))
      co_return policy::deny{404, "owner",
                             "dockgate: no such container: " + rw.container + " (profile " +
                                 profile_->name + " sees only its own containers)"};
    rw.body = policy::with_container(rw.body, r.op, id);  // forwarded by full ID
  }
  for (const auto& name : rw.networks) {
    auto [status, body] = co_await upstream_get(version + "/networks/" + name);
    auto n = status == 200 ? policy::parse_network_inspect(body) : std::nullopt;
    if (!n || n->owner != owner)
      co_return policy::deny{404, "owner",
                             "dockgate: no such network: " + name + " (profile " + profile_->name +
                                 " joins only its own networks)"};
  }
  for (const auto& name : rw.volumes) {
    if (r.op == policy::operation::VolumeCreate) {
      // The daemon answers a create of an existing name with that volume: it must be ours.
      auto [status, body] = co_await upstream_get(version + "/volumes/" + name);
      auto v = status == 200 ? policy::parse_volume_inspect(body) : std::nullopt;
      if (status == 404 || (v && v->owner == owner)) continue;
      co_return policy::deny{
          409, "owner",
          "dockgate: a volume named " + name + " exists and is not the profile's" + in_profile};
    }
    // A container's named volume: created now with the owner label if missing (the daemon
    // would create it without), and the daemon's answer says whose it is.
    std::string create =
        "{\"Name\":\"" + name + "\",\"Labels\":{\"" + std::string(policy::owner_label) + "\":\"";
    common::append_json_escaped(create, owner);
    create += "\"}}";
    auto [status, body] = co_await upstream_request("POST", version + "/volumes/create", create);
    auto v = status / 100 == 2 ? policy::parse_volume_inspect(body) : std::nullopt;
    if (!v || v->owner != owner)
      co_return policy::deny{403, "owner",
                             "dockgate: volume " + name + " is not the profile's" + in_profile};
  }
  co_return std::nullopt;
}

}  // namespace dockgate::proxy
