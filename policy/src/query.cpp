#include "dockgate/policy/query.hpp"

#include <algorithm>
#include <vector>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/image_ref.hpp"
#include "dockgate/policy/json_value.hpp"
#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/upload_archive.hpp"

namespace dockgate::policy {

namespace {

// The parameters each operation takes, from the specification. (The table also carries
// their types and enums; the gate no longer judges values by them: it reads the values it
// decides on as dockerd's handlers do, and passes the rest to the daemon.)
struct query_spec {
  operation op;
  std::string_view name;
};

constexpr query_spec query_specs[] = {
#define DOCKGATE_QUERY(op, name, kind, values) {operation::op, name},
#include "dockgate/policy/routes.inc"
#undef DOCKGATE_QUERY
};

// Parameters refused for what their true value does on an allowed operation: remove the
// link between containers instead of the container, replay the logs into an attach.
constexpr std::pair<operation, std::string_view> refused_when_true[] = {
    {operation::ContainerDelete, "link"},
    {operation::ContainerAttach, "logs"},
};
// ImageCreate's import form: ignored by the daemon when fromImage is given (a pull).
constexpr std::string_view import_only[] = {"fromSrc", "repo", "message", "changes"};

deny bad(unsigned status, std::string reason) {
  return deny{status, "query", "dockgate: " + std::move(reason)};
}

// Under an upload rule (upload_archive.hpp): a ContainerDelete removes the container's
// anonymous volumes with it (v=1: the upload volumes are anonymous; v never removes a
// named volume), and a PutContainerArchive's path must be a target's or on the way to one.
std::optional<deny> review_upload_query(const profile& p, const route& r,
                                        std::vector<const query_param*>& kept, query_review& out) {
  if (!p.rules.uploads) return std::nullopt;
  if (r.op == operation::PutContainerArchive) {
    const query_param* path = nullptr;
    for (const auto* param : kept)
      if (param->key == "path") path = param;
    return review_upload_path(p, path ? std::string_view(path->value) : std::string_view());
  }
  if (r.op != operation::ContainerDelete) return std::nullopt;
  static const query_param v_one{"v", "1", "v=1"};
  std::optional<std::string> from;
  for (auto it = kept.begin(); it != kept.end(); ++it)
    if ((*it)->key == "v") {
      if (go_form_bool((*it)->value)) return std::nullopt;
      from = to_json(json_value((*it)->value));  // escaped: the audit line is JSON
      kept.erase(it);
      break;
    }
  kept.push_back(&v_one);
  out.changes.push_back({"query:v", "upload volumes removed", std::move(from), "\"1\""});
  return std::nullopt;
}

}  // namespace

std::optional<std::string> effective_pull_reference(std::string_view from_image,
                                                    std::string_view tag, std::string* error) {
  auto ref = parse_image_reference(from_image, false, error);
  if (!ref) return std::nullopt;
  if (!tag.empty()) {
    // The daemon tries the tag as a digest first.
    auto as_digest = parse_image_reference("x@" + std::string(tag), false);
    if (as_digest) {
      ref->tag.clear();
      ref->digest = as_digest->digest;
    } else {
      auto as_tag = parse_image_reference("x:" + std::string(tag), false);
      if (!as_tag) {
        if (error) *error = "invalid tag";
        return std::nullopt;
      }
      ref->tag = as_tag->tag;
    }
  }
  if (ref->tag.empty() && ref->digest.empty()) {
    if (error) *error = "no tag or digest: the daemon would pull every tag";
    return std::nullopt;
  }
  return ref->normalized();
}

std::optional<std::vector<query_param>> parse_query(std::string_view raw) {
  std::vector<query_param> params;
  while (!raw.empty()) {
    const auto amp = raw.find('&');
    const std::string_view pair = raw.substr(0, amp);
    raw = amp == std::string_view::npos ? std::string_view{} : raw.substr(amp + 1);
    const auto eq = pair.find('=');
    auto key = query_unescape(pair.substr(0, eq));
    auto value = query_unescape(eq == std::string_view::npos ? "" : pair.substr(eq + 1));
    if (!key || !value) return std::nullopt;
    params.push_back({std::move(*key), std::move(*value), pair});
  }
  return params;
}

bool go_form_bool(std::string_view v) {
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.front()))) v.remove_prefix(1);
  while (!v.empty() && std::isspace(static_cast<unsigned char>(v.back()))) v.remove_suffix(1);
  std::string lower(v);
  std::transform(lower.begin(), lower.end(), lower.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return !(lower.empty() || lower == "0" || lower == "no" || lower == "false" || lower == "none");
}

std::variant<deny, query_review> review_query(const profile& p, const route& r) {
  auto params = parse_query(r.query);
  if (!params) return bad(400, "malformed query string");
  const std::string_view op = operation_name(r.op);
  auto taken = [&](std::string_view key) {
    return std::any_of(std::begin(query_specs), std::end(query_specs),
                       [&](const query_spec& s) { return s.op == r.op && s.name == key; });
  };
  std::string from_image, tag;
  for (const auto& [key, value, raw] : *params) {
    if (key == "fromImage") from_image = value;
    if (key == "tag") tag = value;
  }
  const bool pull = r.op == operation::ImageCreate && !from_image.empty();
  query_review out;
  std::vector<const query_param*> kept;
  for (const auto& param : *params) {
    const auto& [key, value, raw] = param;
    const bool ignored =
        !taken(key) || (pull && std::find(std::begin(import_only), std::end(import_only), key) !=
                                    std::end(import_only));
    if (ignored) {
      if (std::find(out.dropped.begin(), out.dropped.end(), key) == out.dropped.end())
        out.dropped.push_back(key);
      continue;
    }
    for (const auto* earlier : kept)
      if (earlier->key == key) return bad(400, "query parameter \"" + key + "\" given twice");
    for (const auto& [refused_op, name] : refused_when_true)
      if (refused_op == r.op && name == key && go_form_bool(value))
        return bad(403, "query parameter \"" + key + "=" + value + "\" is not allowed on " +
                            std::string(op));
    kept.push_back(&param);
  }
  if (r.op == operation::ImageCreate) {
    if (!pull) return bad(403, "ImageCreate is allowed only as a pull (fromImage)");
    std::string why;
    auto ref = effective_pull_reference(from_image, tag, &why);
    if (!ref) return bad(400, "cannot pull \"" + from_image + "\": " + why);
    auto verdict = review_image_reference(p, *ref);
    if (auto* d = std::get_if<deny>(&verdict)) return *d;
  }
  if (auto d = review_upload_query(p, r, kept, out)) return *d;
  for (const auto* param : kept) {
    if (!out.query.empty()) out.query += '&';
    out.query += param->raw;
  }
  return out;
}

}  // namespace dockgate::policy
