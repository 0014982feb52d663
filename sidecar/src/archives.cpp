// Workspace archives: which storage a session uses, archive on delete/reap, restore on
// create, discard (seed §1.8).
#include "dockgate/sidecar/service.hpp"

#include <simdjson.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "dockgate/sidecar/archive.hpp"
#include "request.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

void service::apply_storage(const std::string& body, session& s) const {
  simdjson::dom::parser p;
  simdjson::dom::element doc, storage;
  const bool given = !body.empty() && p.parse(body).get(doc) == simdjson::SUCCESS &&
                     doc.at_key("storage").get(storage) == simdjson::SUCCESS && storage.is_object();
  auto text = [&](const char* k) {
    std::string_view v;
    return given && storage[k].get_string().get(v) == simdjson::SUCCESS ? std::string(v) : std::string();
  };
  const std::string provider = given ? text("provider") : "local";
  if (auto prefix = text("prefix"); !prefix.empty()) s.storage_prefix = prefix;
  if (provider == "s3") {
    // Effective when a bucket is named (the seed's rule); path-style, SigV4.
    s3_config c;
    c.bucket = text("s3_bucket");
    c.region = text("s3_region").empty() ? "us-east-1" : text("s3_region");
    c.endpoint = text("s3_endpoint").empty() ? "https://s3." + c.region + ".amazonaws.com" : text("s3_endpoint");
    c.access_key = text("s3_access_key");
    c.secret_key = text("s3_secret_key");
    s.archive = !c.bucket.empty();
    if (s.archive) s.s3 = std::move(c);
    return;
  }
  s.archive = storage_effective(provider);
}

void service::discard_archive(const session& s) {
  if (s.s3) {
    if (auto object = archive_object_key(s.storage_prefix, s.archive_key))
      s3_client(*s.s3).delete_object(*object, std::chrono::seconds(config_.s3_read_timeout_s));
    return;
  }
  if (auto path = archive_path(config_.local_storage_dir, s.storage_prefix, s.archive_key)) ::unlink(path->c_str());
}

bool service::storage_effective(const std::string& provider) const {
  // Local archives need the operator's directory; Aliyun OSS is not implemented (not
  // effective: archiving is a no-op, as the seed does for unconfigured storage).
  if (provider != "local") return false;
  std::error_code ec;
  return !config_.local_storage_dir.empty() && std::filesystem::is_directory(config_.local_storage_dir, ec);
}

void service::archive_workspace(const session& s) {
  const auto object = archive_object_key(s.storage_prefix, s.archive_key);
  auto path = archive_path(config_.local_storage_dir, s.storage_prefix, s.archive_key);
  if (s.s3 ? !object : !path) return;
  // At most SANDBOX_MAX_ARCHIVE_BYTES compressed; over it, or on any failure, the archive
  // is skipped (never a half-written one: the write is atomic).
  auto tar = run_in(s.container, {"tar", "czf", "-", "--exclude=./uploads", "--exclude=./skills", "-C", "/workspace", "."},
                    std::chrono::seconds(config_.archive_timeout_s), {}, false, {},
                    static_cast<std::size_t>(config_.max_archive_bytes));
  if (!tar.started || tar.timed_out || tar.exit_code != 0 || tar.stdout_dropped) {
    std::cerr << "dockgate-sidecar: archive of " << s.id << " skipped ("
              << (tar.stdout_dropped ? "over SANDBOX_MAX_ARCHIVE_BYTES" : tar.error + tar.stderr_data) << ")" << std::endl;
    return;
  }
  if (s.s3) {
    // One PUT: the object appears whole or not at all.
    auto put = s3_client(*s.s3).put_object(*object, tar.stdout_data, "application/gzip",
                                           std::chrono::seconds(config_.s3_read_timeout_s));
    if (put.status != 200)
      std::cerr << "dockgate-sidecar: archive of " << s.id << " not stored in S3: "
                << (put.status ? std::to_string(put.status) + " " + put.body.substr(0, 200) : put.error) << std::endl;
    return;
  }
  std::string why;
  if (!write_atomically(*path, tar.stdout_data, &why))
    std::cerr << "dockgate-sidecar: archive of " << s.id << " not written: " << why << std::endl;
}

void service::restore_workspace(const session& s) {
  std::string data;
  std::string where;
  if (s.s3) {
    auto object = archive_object_key(s.storage_prefix, s.archive_key);
    if (!object) return;
    where = "s3://" + s.s3->bucket + "/" + *object;
    auto got = s3_client(*s.s3).get_object(*object, static_cast<std::size_t>(config_.max_archive_bytes) + 1,
                                           std::chrono::seconds(config_.s3_read_timeout_s));
    if (got.status == 404) return;  // nothing archived under this key yet
    if (got.status != 200) {
      std::cerr << "dockgate-sidecar: archive " << where << " not read: "
                << (got.status ? std::to_string(got.status) : got.error) << std::endl;
      return;
    }
    data = std::move(got.body);
  } else {
    auto path = archive_path(config_.local_storage_dir, s.storage_prefix, s.archive_key);
    if (!path) return;
    where = *path;
    std::ifstream in(*path, std::ios::binary);
    if (!in) return;  // nothing archived under this key yet
    data.assign((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  }
  const std::string* path = &where;
  if (data.size() > static_cast<std::size_t>(config_.max_archive_bytes)) {
    std::cerr << "dockgate-sidecar: archive " << *path << " over SANDBOX_MAX_ARCHIVE_BYTES: not restored" << std::endl;
    return;
  }
  const auto max_unpacked = parse_size(config_.workspace_size).value_or(512LL << 20);
  if (auto problem = check_workspace_archive(data, static_cast<std::uint64_t>(max_unpacked))) {
    std::cerr << "dockgate-sidecar: archive " << *path << " refused: " << *problem << std::endl;
    return;
  }
  auto untar = run_in(s.container, {"tar", "--no-same-owner", "-xzf", "-", "-C", "/workspace"},
                      std::chrono::seconds(config_.archive_timeout_s), std::move(data), true);
  if (!untar.started || untar.exit_code != 0)
    std::cerr << "dockgate-sidecar: restore of " << *path << " failed: " << untar.error << untar.stderr_data << std::endl;
}

}  // namespace dockgate::sidecar
