// A cell's artifacts: new or changed regular files under /workspace/outputs, by path.
// Invariant: only files under /workspace/outputs are read, and within the limits. The
// listing comes from the container (NUL-separated: no name can forge a record) and every
// path is checked again here; sizes are those of the bytes read, not of the listing.
#include "cells/executors.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

namespace {

bool under_outputs(const std::string& path) {
  return path.starts_with("/workspace/outputs/") && path.find("/../") == std::string::npos &&
         path.find("/./") == std::string::npos && !path.ends_with("/..") && !path.ends_with("/.");
}

std::vector<std::string> changed_files(const cell_listing& listing) {
  std::vector<std::string> changed;
  for (const auto& [path, stamp] : listing.after) {
    if (!under_outputs(path)) continue;
    auto it = listing.before.find(path);
    if (it == listing.before.end() || it->second != stamp) changed.push_back(path);
  }
  return changed;
}

}  // namespace

std::vector<cell_artifact> collect_artifacts(const config& c, const cell_listing& listing,
                                             const artifact_reader& read, std::string& errs) {
  std::vector<cell_artifact> files;
  std::int64_t total = 0, skipped = 0;
  const auto collect_deadline =
      std::chrono::steady_clock::now() + std::chrono::seconds(c.max_collect_seconds);
  for (const auto& path : changed_files(listing)) {
    const std::string& stamp = listing.after.at(path);
    const std::int64_t size = std::strtoll(stamp.substr(stamp.find('\t') + 1).c_str(), nullptr, 10);
    if (std::chrono::steady_clock::now() > collect_deadline || size > c.max_artifact_bytes ||
        static_cast<std::int64_t>(files.size()) >= c.max_files_per_exec ||
        total + size > c.max_total_artifact_bytes) {
      ++skipped;
      continue;
    }
    auto data = read({"cat", "--", path}, std::chrono::seconds(c.collect_file_timeout_s),
                     static_cast<std::size_t>(c.max_artifact_bytes));
    if (!data.started || data.exit_code != 0 || data.stdout_dropped ||
        total + static_cast<std::int64_t>(data.stdout_data.size()) > c.max_total_artifact_bytes) {
      ++skipped;
      continue;
    }
    const std::string name = path.substr(path.rfind('/') + 1);
    total += static_cast<std::int64_t>(data.stdout_data.size());
    files.push_back({valid_utf8(name), mime_type_for(name), std::move(data.stdout_data)});
  }
  if (skipped) {
    errs += "\n[sandbox] skipped " + std::to_string(skipped) +
            " output file(s) because artifact limits are " + std::to_string(c.max_files_per_exec) +
            " files, " + std::to_string(c.max_artifact_bytes) + " bytes per file, " +
            std::to_string(c.max_total_artifact_bytes) + " bytes total";
  }
  return files;
}

}  // namespace dockgate::sidecar
