#include "dockgate/policy/query.hpp"

#include <algorithm>
#include <vector>

#include "dockgate/policy/body_review.hpp"
#include "dockgate/policy/image_ref.hpp"
#include "dockgate/policy/ownership.hpp"

namespace dockgate::policy {

namespace {

enum class query_kind : std::uint8_t { boolean, integer, string };

struct query_spec {
  operation op;
  std::string_view name;
  query_kind kind;
  std::string_view enum_values;  // "a|b|c", empty: any
};

constexpr query_spec query_specs[] = {
#define DOCKGATE_QUERY(op, name, kind, values) {operation::op, name, query_kind::kind, values},
#include "dockgate/policy/routes.inc"
#undef DOCKGATE_QUERY
};

// Parameters the API has but the gate refuses: they change what an allowed operation
// does (remove a link between containers, replay logs into an attach) or turn a pull
// into an import.
constexpr std::pair<operation, std::string_view> refused_params[] = {
    {operation::ContainerDelete, "link"}, {operation::ContainerAttach, "logs"},
    {operation::ImageCreate, "fromSrc"},  {operation::ImageCreate, "repo"},
    {operation::ImageCreate, "message"},  {operation::ImageCreate, "changes"},
};

deny bad(unsigned status, std::string reason) { return deny{status, "query", "dockgate: " + std::move(reason)}; }

bool valid_value(const query_spec& spec, std::string_view v) {
  switch (spec.kind) {
    case query_kind::boolean: {
      std::string lower(v);
      std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return std::tolower(c); });
      return lower == "0" || lower == "1" || lower == "true" || lower == "false";
    }
    case query_kind::integer: {
      std::string_view digits = v.starts_with('-') ? v.substr(1) : v;
      return !digits.empty() && digits.size() <= 18 &&
             std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    }
    case query_kind::string: {
      if (spec.enum_values.empty() || v.empty()) return true;
      std::string_view values = spec.enum_values;
      while (true) {
        auto bar = values.find('|');
        if (values.substr(0, bar) == v) return true;
        if (bar == std::string_view::npos) return false;
        values.remove_prefix(bar + 1);
      }
    }
  }
  return false;
}

}  // namespace

std::optional<std::string> effective_pull_reference(std::string_view from_image, std::string_view tag,
                                                    std::string* error) {
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

std::optional<deny> check_query(const profile& p, const route& r) {
  auto params = parse_query(r.query);
  if (!params) return bad(400, "malformed query string");
  for (std::size_t i = 0; i < params->size(); ++i)
    for (std::size_t j = 0; j < i; ++j)
      if ((*params)[j].key == (*params)[i].key)
        return bad(400, "query parameter \"" + (*params)[i].key + "\" given twice");
  const std::string_view op = operation_name(r.op);
  std::string from_image, tag;
  for (const auto& [key, value, raw] : *params) {
    const query_spec* spec = nullptr;
    for (const auto& s : query_specs)
      if (s.op == r.op && s.name == key) spec = &s;
    if (!spec) return bad(400, "query parameter \"" + key + "\" is not taken by " + std::string(op));
    for (const auto& [refused_op, name] : refused_params)
      if (refused_op == r.op && name == key)
        return bad(403, "query parameter \"" + key + "\" is not allowed on " + std::string(op));
    if (!valid_value(*spec, value))
      return bad(400, "query parameter \"" + key + "\" has an invalid value \"" + value + "\"");
    if (key == "fromImage") from_image = value;
    if (key == "tag") tag = value;
  }
  if (r.op == operation::ImageCreate) {
    if (from_image.empty()) return bad(403, "ImageCreate is allowed only as a pull (fromImage)");
    std::string why;
    auto ref = effective_pull_reference(from_image, tag, &why);
    if (!ref) return bad(400, "cannot pull \"" + from_image + "\": " + why);
    auto verdict = review_image_reference(p, *ref);
    if (auto* d = std::get_if<deny>(&verdict)) return *d;
  }
  return std::nullopt;
}

}  // namespace dockgate::policy
