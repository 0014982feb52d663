// libFuzzer target: the upload rule's review of an archive's entries (upload_archive.hpp).
// The input's first line is the query's path, each further line an entry: a kind byte
// (f file, d directory, l symlink, h hard link, s sparse file, anything else: other) and
// its name. Checks on every plan: what goes up lies within one target, each kept name is
// clean and relative, and only regular files and directories are kept.
#include <cstdint>
#include <cstdlib>
#include <string_view>
#include <vector>

#include "dockgate/policy/upload_archive.hpp"

using namespace dockgate::policy;

namespace {

const profile& uploads_profile() {
  static const policy p = *parse_policy(R"({"profiles":{"u":{"allow":["PutContainerArchive"],
      "uploads":{"targets":["/opt/opensandbox","/srv/app","/a"],"max_bytes":1000}}}})")
                               .value;
  return p.default_();
}

upload_entry entry_of(std::string_view line) {
  upload_entry e;
  if (line.empty()) return e;
  using k = upload_entry::kind;
  switch (line.front()) {
    case 'f':
      e.type = k::file;
      break;
    case 'd':
      e.type = k::directory;
      break;
    case 'l':
      e.type = k::symlink;
      break;
    case 'h':
      e.type = k::hardlink;
      break;
    case 's':
      e.type = k::file;
      e.sparse = true;
      break;
    default:
      e.type = k::other;
      break;
  }
  e.name = std::string(line.substr(1));
  e.size = e.name.size();
  return e;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  const auto first = in.find('\n');
  const std::string_view path = in.substr(0, first);
  std::vector<upload_entry> entries;
  for (in = first == std::string_view::npos ? std::string_view{} : in.substr(first + 1);
       !in.empty();) {
    const auto nl = in.find('\n');
    entries.push_back(entry_of(in.substr(0, nl)));
    in = nl == std::string_view::npos ? std::string_view{} : in.substr(nl + 1);
  }
  const profile& p = uploads_profile();
  auto result = review_upload(p, path, entries);
  const auto* plan = std::get_if<upload_plan>(&result);
  if (!plan) return 0;
  if (plan->names.size() != entries.size()) std::abort();
  const std::string* target = nullptr;
  for (const auto& t : p.rules.uploads->targets)
    if (path_within(plan->path, t)) target = &t;
  if (!target || clean_entry_name(plan->path.substr(1)) != plan->path.substr(1)) std::abort();
  for (std::size_t i = 0; i < entries.size(); ++i) {
    if (!plan->names[i]) continue;
    const std::string& name = *plan->names[i];
    const auto& e = entries[i];
    if (e.sparse || (e.type != upload_entry::kind::file && e.type != upload_entry::kind::directory))
      std::abort();
    if (name.empty() || clean_entry_name(name) != name) std::abort();
    if (!path_within(plan->path + "/" + name, *target)) std::abort();
  }
  return 0;
}
