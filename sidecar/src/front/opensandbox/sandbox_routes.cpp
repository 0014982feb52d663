// The OpenSandbox lifecycle routes (docs/opensandbox-api.md, "Lifecycle"): a sandbox is a
// session of the core, its id the session's; each handler parses its request, calls the
// core (session_lifecycle, session_controls) and answers in OpenSandbox's shapes.
#include "front/opensandbox/sandbox_routes.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cctype>
#include <charconv>

#include "front/opensandbox/access_token.hpp"
#include "front/opensandbox/sandbox_json.hpp"
#include "front/request.hpp"
#include "util/ids.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar::opensandbox {

namespace {

// The session of sandbox `id`, or the 404 to answer.
std::shared_ptr<session> sandbox_of(session_core& core, std::string_view id,
                                    std::optional<http_reply>& missing) {
  auto s = valid_session_id(id) ? core.registry.find(std::string(id)) : nullptr;
  if (s && !s->terminating) return s;
  missing = error(404, "SANDBOX::NOT_FOUND",
                  valid_session_id(id) ? "sandbox " + std::string(id) + " not found"
                                       : std::string("sandbox not found"));
  return nullptr;
}

http_reply empty(unsigned status) {
  return {status, ""};  // Content-Length: 0 (the SDK reads any other empty 2xx as JSON)
}

bool is_name_char(char ch) {
  return std::isalnum(static_cast<unsigned char>(ch)) || ch == '-' || ch == '_' || ch == '.';
}

// A label name or value: 1-63 of [A-Za-z0-9._-], alphanumeric at both ends.
bool label_name(std::string_view n) {
  return !n.empty() && n.size() <= 63 && std::isalnum(static_cast<unsigned char>(n.front())) &&
         std::isalnum(static_cast<unsigned char>(n.back())) &&
         std::all_of(n.begin(), n.end(), is_name_char);
}

// A DNS subdomain: dot-separated labels of [a-z0-9-], at most 253 in all.
bool dns_subdomain(std::string_view p) {
  if (p.empty() || p.size() > 253) return false;
  for (std::size_t start = 0; start <= p.size();) {
    const auto dot = std::min(p.find('.', start), p.size());
    const auto label = p.substr(start, dot - start);
    if (label.empty() || label.size() > 63 || label.front() == '-' || label.back() == '-' ||
        !std::all_of(label.begin(), label.end(), [](char ch) {
          return (ch >= 'a' && ch <= 'z') || (ch >= '0' && ch <= '9') || ch == '-';
        }))
      return false;
    start = dot + 1;
  }
  return true;
}

}  // namespace

std::optional<std::string> metadata_problem(std::string_view key, std::string_view value) {
  const std::string shown = "\"" + valid_utf8(key) + "\"";
  if (key.starts_with(reserved_prefix)) return shown + ": the opensandbox.io/ prefix is reserved";
  const auto slash = key.rfind('/');
  const auto name = slash == std::string_view::npos ? key : key.substr(slash + 1);
  if ((slash != std::string_view::npos && !dns_subdomain(key.substr(0, slash))) ||
      !label_name(name))
    return shown +
           " is not a label key ([prefix/]name: the name 1-63 of letters, digits, '-', '_', '.', "
           "alphanumeric at both ends; the prefix a DNS subdomain)";
  if (!value.empty() && !label_name(value))
    return shown +
           ": its value is not a label value (empty, or 1-63 of letters, digits, '-', "
           "'_', '.', alphanumeric at both ends)";
  return std::nullopt;
}

http_reply create_sandbox(session_core& core, const http_request& r, const route_args&) {
  auto request = parse_create_body(r.body, core.config_of);
  if (!request) return request.error();
  auto created = core.lifecycle.create_session(*request);
  if (!created) return reply(created.error());
  auto s = core.registry.find(created->session_id);
  if (!s) return error(500, "GENERAL::UNKNOWN_ERROR", "the sandbox ended before its answer");
  // Synchronous, as OpenSandbox's Docker runtime: the 202 already says Running.
  return {202, sandbox_json(*s, core.config_of, false)};
}

namespace {

// GET /sandboxes's query, read: states (lower case), metadata pairs, page, page size.
struct list_query {
  std::vector<std::string> states;
  std::vector<std::pair<std::string, std::string>> metadata;
  std::int64_t page = 1, page_size = 20;
};

std::optional<std::int64_t> whole(std::string_view t) {
  std::int64_t n = 0;
  auto [end, ec] = std::from_chars(t.data(), t.data() + t.size(), n);
  if (t.empty() || ec != std::errc{} || end != t.data() + t.size()) return std::nullopt;
  return n;
}

std::optional<http_reply> read_list_query(std::string_view query, list_query& q) {
  auto states = query_values(query, "state");
  auto metadata = query_values(query, "metadata");
  auto page = query_values(query, "page");
  auto size = query_values(query, "pageSize");
  if (!states || !metadata || !page || !size)
    return invalid_parameter("the query has a malformed %-escape");
  for (auto s : *states) {
    std::transform(s.begin(), s.end(), s.begin(), [](char ch) { return std::tolower(ch); });
    q.states.push_back(s);
  }
  // One value holding k=v&k2=v2: decoded once with the query, then split here.
  for (const auto& value : *metadata)
    for (std::string_view rest = value; !rest.empty();) {
      const auto amp = std::min(rest.find('&'), rest.size());
      const auto pair = rest.substr(0, amp);
      rest.remove_prefix(std::min(amp + 1, rest.size()));
      const auto eq = pair.find('=');
      if (eq == std::string_view::npos || eq == 0)
        return invalid_parameter("metadata: key=value pairs joined by '&'");
      q.metadata.emplace_back(pair.substr(0, eq), pair.substr(eq + 1));
    }
  if (!page->empty()) {
    auto n = whole(page->front());
    if (!n || *n < 1) return invalid_parameter("page: an integer >= 1");
    q.page = *n;
  }
  if (!size->empty()) {
    auto n = whole(size->front());
    if (!n || *n < 1 || *n > 200) return invalid_parameter("pageSize: an integer from 1 to 200");
    q.page_size = *n;
  }
  return std::nullopt;
}

bool listed(const session& s, const list_query& q) {
  if (s.terminating) return false;
  std::string state(state_of(s));
  std::transform(state.begin(), state.end(), state.begin(),
                 [](char ch) { return std::tolower(ch); });
  if (!q.states.empty() && std::find(q.states.begin(), q.states.end(), state) == q.states.end())
    return false;
  std::lock_guard g(s.facts_mutex);
  for (const auto& [k, v] : q.metadata) {
    const auto it = s.metadata.find(k);
    if (k.starts_with(reserved_prefix) || it == s.metadata.end() || it->second != v) return false;
  }
  return true;
}

}  // namespace

http_reply list_sandboxes(session_core& core, const http_request& r, const route_args&) {
  list_query q;
  if (auto refused = read_list_query(r.query, q)) return *refused;
  auto all = core.registry.all();
  std::erase_if(all, [&](const auto& s) { return !listed(*s, q); });
  // Newest first (ties by id, so that pages do not overlap).
  std::sort(all.begin(), all.end(), [](const auto& a, const auto& b) {
    return a->created_at != b->created_at ? a->created_at > b->created_at : a->id < b->id;
  });
  const auto total = static_cast<std::int64_t>(all.size());
  const std::int64_t pages = (total + q.page_size - 1) / q.page_size;
  std::string body = "{\"items\":[";
  const std::int64_t first = (q.page - 1) * q.page_size;
  for (std::int64_t i = first; i < total && i < first + q.page_size; ++i) {
    if (i > first) body += ',';
    body += sandbox_json(*all[static_cast<std::size_t>(i)], core.config_of, true);
  }
  body += "],\"pagination\":{\"page\":" + std::to_string(q.page) +
          ",\"pageSize\":" + std::to_string(q.page_size) +
          ",\"totalItems\":" + std::to_string(total) + ",\"totalPages\":" + std::to_string(pages) +
          ",\"hasNextPage\":" + (q.page < pages ? "true" : "false") + "}}";
  return {200, body};
}

http_reply get_sandbox(session_core& core, const http_request&, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  return {200, sandbox_json(*s, core.config_of, true)};
}

http_reply delete_sandbox(session_core& core, const http_request&, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  delete_request request;
  request.session_id = s->id;
  auto deleted = core.lifecycle.delete_session(request);
  if (!deleted) return reply(deleted.error());
  return empty(204);
}

http_reply pause_sandbox(session_core& core, const http_request&, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  if (auto refused = core.controls.pause(s->id)) return reply(*refused);
  return empty(202);
}

http_reply resume_sandbox(session_core& core, const http_request&, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  if (auto refused = core.controls.resume(s->id)) return reply(*refused);
  return empty(202);
}

http_reply renew_expiration(session_core& core, const http_request& r, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  simdjson::dom::parser parser;
  simdjson::dom::object body;
  if (parser.parse(r.body).get_object().get(body) != simdjson::SUCCESS)
    return invalid_parameter("the body must be a JSON object {expiresAt}");
  std::optional<std::chrono::system_clock::time_point> until;
  for (auto [k, v] : body) {
    if (k != "expiresAt") return invalid_parameter(valid_utf8(k) + ": unknown field");
    std::string_view text;
    if (v.get_string().get(text) == simdjson::SUCCESS) until = parse_rfc3339(text);
  }
  if (!until) return invalid_parameter("expiresAt: required, an RFC 3339 date-time");
  auto renewed = core.controls.renew(s->id, *until);
  if (!renewed) return reply(renewed.error());
  if (auto unrecorded = core.lifecycle.refresh_record(s->id)) return reply(*unrecorded);
  return {200, "{\"expiresAt\":\"" + rfc3339(renewed.value()) + "\"}"};
}

http_reply patch_metadata(session_core& core, const http_request& r, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  simdjson::dom::parser parser;
  simdjson::dom::object body;
  if (parser.parse(r.body).get_object().get(body) != simdjson::SUCCESS)
    return invalid_parameter("the body must be a JSON object (a JSON merge patch of metadata)");
  metadata_patch patch;
  for (auto [k, v] : body) {
    std::string_view value;
    if (!v.is_null() && v.get_string().get(value) != simdjson::SUCCESS)
      return invalid_parameter("metadata." + valid_utf8(k) + ": a string, or null to remove it");
    if (auto why = metadata_problem(k, value)) return invalid_parameter("metadata: " + *why);
    patch[std::string(k)] =
        v.is_null() ? std::nullopt : std::optional<std::string>(std::string(value));
  }
  auto patched = core.controls.patch_metadata(s->id, patch);
  if (!patched) return reply(patched.error());
  if (auto unrecorded = core.lifecycle.refresh_record(s->id)) return reply(*unrecorded);
  return {200, sandbox_json(*s, core.config_of, true)};
}

http_reply get_endpoint(session_core& core, const http_request& r, const route_args& a) {
  std::optional<http_reply> missing;
  auto s = sandbox_of(core, a.id, missing);
  if (!s) return *missing;
  auto port = whole(a.port);
  if (!port || *port < 1 || *port > 65535)
    return invalid_parameter("port: an integer from 1 to 65535");
  auto expires = query_values(r.query, "expires");
  if (expires && !expires->empty())
    return invalid_parameter("expires: signed endpoints are not offered (the server proxy is)");
  // Always the server-proxy form, whatever use_server_proxy says: no port of a sandbox is
  // published, its endpoints are this sidecar's proxy path.
  const auto host = r.field("host");
  std::string endpoint = valid_utf8(host ? *host : core.config_of.listen) + "/v1/sandboxes/" +
                         s->id + "/proxy/" + std::to_string(*port);
  std::string body = "{\"endpoint\":";
  client::append_json_string(body, endpoint);
  body += ",\"headers\":{";
  client::append_json_string(body, access_token_header);
  body += ':';
  client::append_json_string(body, access_token(core.config_of, s->id));
  return {200, body + "}}"};
}

http_reply metrics_event(session_core&, const http_request&, const route_args&) {
  return empty(204);  // the SDK's telemetry: accepted, not kept
}

}  // namespace dockgate::sidecar::opensandbox
