#include "dockgate/policy/upload_archive.hpp"

#include "dockgate/policy/ownership.hpp"
#include "dockgate/policy/query.hpp"

namespace dockgate::policy {

namespace {

constexpr std::size_t max_entry_name = 4096;

// A name for a refusal: bounded, whatever the archive holds.
std::string quoted(std::string_view name) {
  constexpr std::size_t shown = 200;
  std::string out = "\"";
  out += name.substr(0, shown);
  if (name.size() > shown) out += "...";
  out += '"';
  return out;
}

// The docker CLI names a directory with a trailing "/" ("docker cp f c:/opt/app/"): dockerd
// extracts into the directory either way.
std::string_view without_trailing_slash(std::string_view path) {
  if (path.size() > 1 && path.ends_with('/')) path.remove_suffix(1);
  return path;
}

std::string joined(std::string_view path, std::string_view name) {
  if (name.empty()) return std::string(path);
  std::string out(path);
  if (out != "/") out += '/';
  out += name;
  return out;
}

// Why an entry of this kind is not uploaded, or "" when it may be.
std::string_view kind_refusal(const upload_entry& e) {
  switch (e.type) {
    case upload_entry::kind::file:
      return e.sparse ? "is a sparse file" : "";
    case upload_entry::kind::directory:
      return "";
    case upload_entry::kind::symlink:
      return "is a symbolic link";
    case upload_entry::kind::hardlink:
      return "is a hard link";
    case upload_entry::kind::other:
      break;
  }
  return "is a device, fifo or socket";
}

// The plan for `entries` written into target `t`, or nullopt when one of them lies outside
// it (its index in `outside`). `full` holds each entry's path in the container.
std::optional<upload_plan> plan_for(std::string_view path, std::string_view t,
                                    std::span<const upload_entry> entries,
                                    std::span<const std::string> full, std::size_t& outside) {
  const bool inside = path_within(path, t);  // else `path` is a proper ancestor of `t`
  upload_plan plan;
  plan.path = inside ? std::string(path) : std::string(t);
  for (std::size_t i = 0; i < entries.size(); ++i) {
    const bool dir = entries[i].type == upload_entry::kind::directory;
    if (path_within(full[i], t)) {
      // Its name below what goes up; the directory that goes up itself is left out.
      const std::string_view rel = std::string_view(full[i]).substr(
          plan.path.size() == 1 ? 1 : std::min(full[i].size(), plan.path.size() + 1));
      if (rel.empty() && !dir) {  // a file in place of the directory written into
        outside = i;
        return std::nullopt;
      }
      if (rel.empty()) {
        plan.names.emplace_back();
        continue;
      }
      plan.names.emplace_back(std::string(rel));
      if (!dir) plan.bytes += entries[i].size;
    } else if (dir && path_within(t, full[i])) {
      plan.names.emplace_back();  // a directory on the way to the target: the daemon made it
    } else {
      outside = i;
      return std::nullopt;
    }
  }
  return plan;
}

}  // namespace

bool path_within(std::string_view path, std::string_view root) {
  if (root == "/") return path.starts_with('/');
  return path.starts_with(root) && (path.size() == root.size() || path[root.size()] == '/');
}

deny upload_refusal(const profile& p, std::string what, unsigned status) {
  return deny{status, "uploads",
              "dockgate: PutContainerArchive " + std::move(what) + " (profile " + p.name +
                  ", rule uploads)"};
}

std::optional<deny> review_upload_path(const profile& p, std::string_view raw) {
  const upload_rule& rule = *p.rules.uploads;
  const std::string_view path = without_trailing_slash(raw);
  if (!clean_absolute_path(path))
    return upload_refusal(p, "path " + quoted(raw) + " must be an absolute, clean path");
  for (const auto& t : rule.targets)
    if (path_within(path, t) || path_within(t, path)) return std::nullopt;
  return upload_refusal(p, "path " + quoted(raw) + " is not within an upload target");
}

std::optional<std::string> clean_entry_name(std::string_view name) {
  if (name.empty() || name.size() > max_entry_name || name.starts_with('/')) return std::nullopt;
  while (name.starts_with("./")) name.remove_prefix(2);
  if (name == ".") return std::string();
  if (name.ends_with('/')) name.remove_suffix(1);
  std::string_view rest = name;
  while (!rest.empty()) {
    const auto slash = rest.find('/');
    const std::string_view segment = rest.substr(0, slash);
    if (segment.empty() || segment == "." || segment == "..") return std::nullopt;
    if (slash == std::string_view::npos) break;
    rest.remove_prefix(slash + 1);
    if (rest.empty()) return std::nullopt;  // "a//": an empty last segment
  }
  return std::string(name);
}

std::variant<deny, upload_plan> review_upload(const profile& p, std::string_view raw,
                                              std::span<const upload_entry> entries) {
  if (auto d = review_upload_path(p, raw)) return *d;
  const std::string_view path = without_trailing_slash(raw);
  const upload_rule& rule = *p.rules.uploads;
  std::vector<std::string> full;
  full.reserve(entries.size());
  for (const auto& e : entries) {
    if (auto why = kind_refusal(e); !why.empty())
      return upload_refusal(p, "entry " + quoted(e.name) + " " + std::string(why) +
                                   ": only regular files and directories are uploaded");
    auto name = clean_entry_name(e.name);
    if (!name || (name->empty() && e.type != upload_entry::kind::directory))
      return upload_refusal(p, "entry " + quoted(e.name) +
                                   " is not a clean relative name (no \"..\", \".\" or empty "
                                   "segment, not absolute)");
    full.push_back(joined(path, *name));
  }
  std::size_t outside = 0;
  for (const auto& t : rule.targets) {
    if (!path_within(path, t) && !path_within(t, path)) continue;
    auto plan = plan_for(path, t, entries, full, outside);
    if (!plan) continue;
    if (plan->bytes > rule.max_bytes)
      return upload_refusal(p,
                            "content of " + std::to_string(plan->bytes) + " bytes exceeds " +
                                std::to_string(rule.max_bytes),
                            413);
    return std::move(*plan);
  }
  return upload_refusal(p, "entry " + quoted(entries[outside].name) + " at " + quoted(path) +
                               " lies outside the upload targets");
}

std::string with_upload_path(std::string_view query, std::string_view path) {
  std::string out;
  auto params = parse_query(query);
  if (params)
    for (const auto& param : *params) {
      if (param.key == "path") continue;
      out += param.raw;
      out += '&';
    }
  out += "path=";
  out += query_escape(path);
  return out;
}

}  // namespace dockgate::policy
