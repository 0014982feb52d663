// Ownership and version pinning on the request path (DESIGN.md step 6): a container or
// exec reference is resolved by the daemon and forwarded by full ID only when it carries
// the profile's owner label; lists and events are confined by an injected label filter
// and filtered again on the way back; every request is pinned to one API version.
//
// Invariant: the daemon's word decides, at the time of the request. A name is resolved on
// every request (a rename between check and use changes nothing: the forwarded target
// names the ID that was checked); only positive answers are cached, by full ID.
#include <boost/asio/write.hpp>
#include <boost/beast/http/read.hpp>
#include <boost/beast/http/string_body.hpp>

#include "bind_check.hpp"
#include "connection.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/responses.hpp"

namespace dockgate::proxy {

namespace http = beast::http;
using namespace std::chrono_literals;

net::awaitable<std::pair<unsigned, std::string>> connection::upstream_get(std::string_view target) {
  if (!co_await connect_upstream()) co_return std::pair<unsigned, std::string>{0, {}};
  std::string request = "GET ";
  request += target;
  request += " HTTP/1.1\r\nHost: docker\r\n\r\n";
  auto [wec, wn] = co_await net::async_write(*upstream_, net::buffer(request), use_tuple);
  if (wec) {
    upstream_.reset();
    co_return std::pair<unsigned, std::string>{0, {}};
  }
  http::response_parser<http::string_body> parser;
  parser.body_limit(8 * 1024 * 1024);
  parser.header_limit(max_head_bytes);
  auto [rec, rn] = co_await http::async_read(*upstream_, upstream_buffer_, parser, use_tuple);
  if (rec) {
    upstream_.reset();
    co_return std::pair<unsigned, std::string>{0, {}};
  }
  if (!parser.keep_alive()) upstream_.reset();
  co_return std::pair<unsigned, std::string>{parser.get().result_int(), std::move(parser.get().body())};
}

net::awaitable<bool> connection::learn_api_version() {
  auto [status, body] = co_await upstream_get("/version");
  auto version = status == 200 ? policy::parse_version_api(body) : std::nullopt;
  auto parsed = version ? policy::parse_api_version(*version) : std::nullopt;
  if (!parsed) co_return false;
  // The daemon's version, capped at the newest the route table knows.
  ctx_.daemon_version = std::min(*parsed, policy::max_api_version);
  ctx_.api_version = policy::to_string(ctx_.daemon_version);
  // What the daemon does for older clients' empty fields depends on its host's cgroups.
  auto [info_status, info] = co_await upstream_get("/v" + *ctx_.api_version + "/info");
  ctx_.daemon_cgroup_v1 = info_status != 200 || policy::info_says_cgroup_v1(info);
  ctx_.log->info("daemon API version {} (cgroup v{}): requests without a version are forwarded as /v{}", *version,
                 ctx_.daemon_cgroup_v1 ? 1 : 2, *ctx_.api_version);
  co_return true;
}

// The full ID of the container `reference` names, if the daemon says it carries this
// profile's owner label.
net::awaitable<std::optional<std::string>> connection::owned_container_id(std::string_view reference) {
  const std::string& owner = profile_.rules.owner;
  if (reference.size() == 64 && ctx_.owned_containers.count(owner + "/" + std::string(reference)))
    co_return std::string(reference);
  auto [status, body] = co_await upstream_get("/v" + *ctx_.api_version + "/containers/" + std::string(reference) + "/json");
  if (status != 200) co_return std::nullopt;
  auto c = policy::parse_container_inspect(body);
  if (!c || c->owner != owner) co_return std::nullopt;
  if (ctx_.owned_containers.size() >= proxy_context::owned_cache_limit) ctx_.owned_containers.clear();
  ctx_.owned_containers.insert(owner + "/" + c->id);
  co_return c->id;
}

net::awaitable<bool> connection::prepare_target(const policy::route& r) {
  filter_ = response_filter::none;
  if (!ctx_.api_version && !co_await learn_api_version()) {
    co_await refuse(502, "upstream", "dockgate: cannot read the Docker daemon's API version");
    co_return false;
  }
  // The client's API version is part of what it reads (formats, defaults): forwarded as
  // it asked, within what the route table models (1.24 and up) and what the daemon
  // speaks; a newer one is answered as the daemon answers it. Without one: the daemon's.
  forward_version_ = *ctx_.api_version;
  version_ = ctx_.daemon_version;
  if (r.version) {
    if (*r.version > ctx_.daemon_version) {
      audit_.verdict = "deny";
      co_await refuse(400, "version", "client version " + policy::to_string(*r.version) +
                                          " is too new. Maximum supported API version is " + *ctx_.api_version);
      co_return false;
    }
    version_ = *r.version;
    forward_version_ = policy::to_string(*r.version);
  }
  std::string path(r.path);
  std::string container(r.param);  // the container the request names, by full ID once resolved
  std::string& query = query_;  // the reviewed query (review_query)
  if (profile_.rules.confine_to_owned) {
    const auto object = policy::operation_object(r.op);
    const std::size_t param_at = static_cast<std::size_t>(r.param.data() - r.path.data());
    if (object == policy::path_object::container) {
      auto id = co_await owned_container_id(r.param);
      const policy::deny not_owned{404, "owner", "dockgate: no such container: " + std::string(r.param) +
                                                     " (profile " + profile_.name + " sees only its own containers)"};
      if (!id && !enforce(not_owned)) {
        id = std::string(r.param);  // audit mode: forwarded as the client named it
      } else if (!id) {
        audit_.verdict = "deny";
        co_await refuse(404, "owner", "dockgate: no such container: " + std::string(r.param) +
                                          " (profile " + profile_.name + " sees only its own containers)");
        co_return false;
      }
      path.replace(param_at, r.param.size(), *id);  // forwarded by full ID: renames change nothing
      container = *id;
    } else if (object == policy::path_object::exec) {
      auto [status, body] = co_await upstream_get("/v" + *ctx_.api_version + "/exec/" + std::string(r.param) + "/json");
      auto exec = status == 200 ? policy::parse_exec_inspect(body) : std::nullopt;
      std::optional<std::string> container;
      if (exec) container = co_await owned_container_id(exec->container_id);
      const policy::deny not_owned{404, "owner", "dockgate: no such exec instance: " + std::string(r.param)};
      if (!container && !enforce(not_owned)) {
        // audit mode: forwarded as the client named it
      } else if (!container) {
        audit_.verdict = "deny";
        co_await refuse(404, "owner", "dockgate: no such exec instance: " + std::string(r.param) +
                                          " (profile " + profile_.name + " sees only its own containers)");
        co_return false;
      }
      if (container) path.replace(param_at, r.param.size(), exec->id);
    }
    const bool audit_only = profile_.mode == policy::profile::mode_kind::audit;
    // Lists, events and prunes see only what the profile owns: the owner label joins the
    // client's filters (and lists and events are filtered again on the way back).
    const bool confined_filters = r.op == policy::operation::ContainerList || r.op == policy::operation::SystemEvents ||
                                  r.op == policy::operation::ContainerPrune;
    if (!audit_only && confined_filters) {
      const bool events = r.op == policy::operation::SystemEvents;
      auto confined = policy::confine_query(query, profile_.rules.owner, events);
      if (!confined) {
        audit_.verdict = "deny";
        co_await refuse(400, "query", "dockgate: malformed filters");
        co_return false;
      }
      query = std::move(*confined);
      if (r.op != policy::operation::ContainerPrune)
        filter_ = events ? response_filter::events : response_filter::container_list;
    }
  }
  if (r.op == policy::operation::ContainerStart && (profile_.rules.workspace || profile_.rules.binds)) {
    // The daemon mounts binds when a container starts, not when it is created: every
    // host path it binds is checked again now, the closest the gate gets to the mount.
    if (auto problem = co_await binds_problem(container)) {
      const policy::deny d{403, "binds", "dockgate: not started: bind source " + *problem + " (profile " + profile_.name + ")"};
      if (enforce(d)) {
        audit_.verdict = "deny";
        co_await refuse(d.status, d.rule, d.reason);
        co_return false;
      }
    }
  }
  target_ = "/v" + forward_version_ + path;
  if (!query.empty()) target_ += "?" + query;
  co_return true;
}

net::awaitable<std::optional<std::string>> connection::binds_problem(const std::string& container) {
  auto [status, body] = co_await upstream_get("/v" + *ctx_.api_version + "/containers/" + container + "/json");
  if (status == 404) co_return std::nullopt;  // the daemon answers the start itself
  auto c = status == 200 ? policy::parse_container_inspect(body) : std::nullopt;
  if (!c) co_return std::string("of the container cannot be read from the daemon");
  const auto& ws = profile_.rules.workspace;
  for (const auto& source : c->bind_sources) {
    bind_check_options options;
    if (ws && !c->workspace.empty() && source == ws->root + "/" + c->workspace) options = {ws->require_fuse, true};
    else if (profile_.rules.binds) options = {profile_.rules.binds->require_fuse, false};
    else options = {true, true};  // a bind no rule of this profile wrote: held to the strictest check
    if (auto problem = check_bind_source(source, options)) co_return problem;
  }
  co_return std::nullopt;
}

net::awaitable<void> connection::relay_filtered_list(http::response_parser<http::buffer_body>& parser, bool keep) {
  auto& res = parser.get();
  std::string& whole = json_body_;
  whole.clear();
  while (!parser.is_done()) {
    res.body().data = body_.get();
    res.body().size = chunk_size;
    auto [ec, n] = co_await http::async_read_some(*upstream_, upstream_buffer_, parser, use_tuple);
    if (ec == http::error::need_buffer) ec = {};
    if (ec || whole.size() > 64 * 1024 * 1024) {
      upstream_.reset();
      co_return;  // the client sees the connection close without an answer
    }
    whole.append(body_.get(), chunk_size - res.body().size);
  }
  std::optional<std::string> filtered;
  if (filter_ == response_filter::create_warnings) {
    filtered = policy::add_create_warnings(whole, warnings_);
    if (!filtered) filtered = whole;  // not a create answer: as the daemon wrote it
  } else {
    filtered = policy::filter_container_list(whole, profile_.rules.owner);
    if (!filtered) filtered = "[]\n";  // not a list: nothing of it is known to be owned
  }
  res.erase(http::field::transfer_encoding);
  res.erase(http::field::content_length);
  res.set(http::field::content_length, std::to_string(filtered->size()));
  write_response_head(res, response_framing::length, keep);
  const std::array<net::const_buffer, 2> pieces{net::buffer(out_), net::buffer(*filtered)};
  co_await net::async_write(client_, pieces, use_tuple);
  audit_.bytes_out += filtered->size();
}

}  // namespace dockgate::proxy
