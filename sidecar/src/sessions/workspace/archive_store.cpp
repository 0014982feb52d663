// Workspace archives: restore on create, archive on delete and reap, discard (docs/aivory-api.md,
// "Archives and storage").
//
// Nothing is lost: an archive is replaced only by the workspace of a session that was
// restored from exactly that archive (same generation), completely; anything else — a
// partial or failed restore, or another session that wrote the key in between — is
// stored beside it under <stem>.conflict-<session>.tgz, which the next restore reports.
// Before the archive is replaced, its previous generation is kept as <stem>.prev.tgz, and
// the new one must read back whole, so one bad write cannot destroy the last good one.
// The check and the write happen under the key's lock (in this sidecar, and flock on the
// directory for sidecars sharing it); in S3 the write is conditional on the generation
// checked (If-Match / If-None-Match), so a sidecar on another host cannot slip in between
// where the store supports conditional writes.
#include "sessions/workspace/archive_store.hpp"

#include <simdjson.h>

#include <iostream>

#include "sessions/session.hpp"
#include "sessions/session_containers.hpp"
#include "util/util.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

// The workspace, without inputs (uploads, skills) and without what is not data (FIFOs,
// sockets, device nodes), as tar.gz on stdout. Names are given to tar NUL-separated, so
// any file name is archived as it is.
constexpr std::string_view archive_script =
    "cd /workspace && find . -mindepth 1 \\( -path ./uploads -o -path ./skills \\) -prune -o "
    "\\( -type f -o -type d -o -type l \\) -print0 | tar --null --no-recursion -czf - -T -";

// <base>/workspaces/<stem>.tgz → <base>/workspaces/<stem><suffix>
std::string sibling(const std::string& main_key, std::string_view suffix) {
  return main_key.substr(0, main_key.size() - 4) + std::string(suffix);
}

// Why a session's archive goes beside the key's instead of over it (the key's generation
// now: "" when nothing is there), or "" when it may replace it: only the workspace of a
// session restored whole from exactly that generation replaces it.
std::string conflict_reason(const session& s, const std::string& current) {
  if (s.restore_status == "failed" || s.restore_status == "partial")
    return "the restore of this session was " + s.restore_status +
           ": the archive it came from is kept";
  // Nothing under the key now (never written, discarded, or collected): no one's work is
  // in the way.
  if (current.empty()) return {};
  if (!s.restored_generation) return "the archive this session was restored from is not known";
  if (current != *s.restored_generation)
    return "another session wrote the archive after this one was restored";
  return {};
}

}  // namespace

storage_choice request_storage(const std::string& body, const config& c) {
  std::string block;
  if (!body.empty()) {
    simdjson::dom::parser p;
    simdjson::dom::element doc, storage;
    if (p.parse(body).get(doc) == simdjson::SUCCESS && doc.is_object() &&
        doc.at_key("storage").get(storage) == simdjson::SUCCESS && !storage.is_null())
      block = simdjson::minify(storage);
  }
  return choose_storage(block, c);
}

std::shared_ptr<std::mutex> archive_store::key_lock(const std::string& where) {
  std::lock_guard g(key_locks_mutex_);
  auto& slot = key_locks_[where];
  auto lock = slot.lock();
  if (!lock) slot = lock = std::make_shared<std::mutex>();
  for (auto it = key_locks_.begin(); it != key_locks_.end();)
    it = it->second.expired() ? key_locks_.erase(it) : std::next(it);
  return lock;
}

prepared_restore archive_store::prepare_restore(const storage_spec& storage,
                                                const std::string& stem) {
  prepared_restore r;
  const std::string key = storage.archive_key(stem);
  r.report.key = key;
  auto store = open_store(storage, config_);
  auto got = store->get(key, static_cast<std::size_t>(config_.max_archive_bytes));
  if (got.what == stored_object::state::missing) {
    r.generation = std::string();  // nothing archived under this key yet: not an error
  } else if (got.what == stored_object::state::error) {
    r.report.status = "failed";
    r.report.error = got.error;
  } else {
    r.generation = got.generation;
    restore_limits limits;
    limits.max_unpacked =
        static_cast<std::uint64_t>(parse_size(config_.workspace_size).value_or(512LL << 20));
    r.plan = plan_restore(got.data, limits);
    if (r.plan.error) {
      r.report.status = "failed";
      r.report.error = *r.plan.error;
    } else {
      r.report.status = r.plan.skipped.empty() ? "restored" : "partial";
      r.report.skipped = r.plan.skipped;
    }
  }
  std::vector<object_entry> conflicts;
  std::string error;
  if (store->list(sibling(key, ".conflict-"), conflicts, error)) {
    for (auto& c : conflicts)
      if (c.key.ends_with(".tgz")) r.report.conflicts.push_back(std::move(c.key));
  }
  if (r.report.status == "failed" || r.report.status == "partial")
    std::cerr << "dockgate-sidecar: restore of " << storage.where() << " " << key << " "
              << r.report.status << (r.report.error.empty() ? "" : ": " + r.report.error) << " ("
              << r.report.skipped.size() << " member(s) left out)" << std::endl;
  return r;
}

void archive_store::unpack_restore(const std::string& container, prepared_restore& r) {
  if (r.report.status != "restored" && r.report.status != "partial") return;
  if (r.plan.members == 0) return;
  // --no-overwrite-dir: the directories the session already has keep their owner and mode.
  auto untar = containers_.run_in(
      container, {"tar", "--no-same-owner", "--no-overwrite-dir", "-xzf", "-", "-C", "/workspace"},
      std::chrono::seconds(config_.archive_timeout_s), std::move(r.plan.tgz), true);
  if (!untar.started || untar.timed_out || untar.exit_code != 0) {
    r.report.status = "failed";
    r.report.error = "unpacking failed: " + (untar.error.empty() ? untar.stderr_data : untar.error);
    std::cerr << "dockgate-sidecar: restore of " << r.report.key << " into " << container
              << " failed: " << r.report.error << std::endl;
  }
}

archive_outcome archive_store::archive_workspace(session& s) {
  const storage_spec& storage = *s.storage;
  const std::string main_key = storage.archive_key(s.archive_key);
  if (!storage.has_credentials)
    return not_written(
        s, main_key,
        "the credentials of " + storage.where() +
            " are not known since the sidecar restarted; DELETE with the storage block archives it",
        true);
  // The workspace first (the long part, no lock held), checked to read back whole.
  archive_outcome failed;
  auto tgz = tar_workspace(s, main_key, failed);
  if (!tgz) return failed;
  return store_archive(s, main_key, std::move(*tgz));
}

archive_outcome archive_store::not_written(const session& s, const std::string& main_key,
                                           std::string reason, bool retry) const {
  archive_outcome out;
  out.status = "not_written";
  out.reason = std::move(reason);
  out.retry = retry;
  std::cerr << "dockgate-sidecar: archive of session " << s.id << " (" << s.storage->where() << " "
            << main_key << ") not written: " << out.reason << std::endl;
  return out;
}

std::optional<std::string> archive_store::tar_workspace(const session& s,
                                                        const std::string& main_key,
                                                        archive_outcome& failed) const {
  auto tar = containers_.run_in(s.container, {"sh", "-c", std::string(archive_script)},
                                std::chrono::seconds(config_.archive_timeout_s), {}, false, {},
                                static_cast<std::size_t>(config_.max_archive_bytes));
  if (!tar.started) {
    failed = not_written(s, main_key, "tar could not run: " + tar.error, true);
    return std::nullopt;
  }
  if (tar.timed_out) {
    failed = not_written(s, main_key,
                         "tar did not finish within SANDBOX_ARCHIVE_TIMEOUT_S (" +
                             std::to_string(config_.archive_timeout_s) + " s)",
                         false);
    return std::nullopt;
  }
  if (tar.stdout_dropped) {
    failed = not_written(s, main_key,
                         "the workspace archive is larger than SANDBOX_MAX_ARCHIVE_BYTES (" +
                             std::to_string(config_.max_archive_bytes) + " bytes)",
                         false);
    return std::nullopt;
  }
  const auto check = check_archive(tar.stdout_data);
  if (check.error) {
    failed = not_written(s, main_key,
                         "tar exited " + std::to_string(tar.exit_code) +
                             " with an unreadable archive (" + *check.error +
                             "): " + tar.stderr_data.substr(0, 300),
                         false);
    return std::nullopt;
  }
  if (tar.exit_code != 0)
    std::cerr << "dockgate-sidecar: archive of session " << s.id << ": tar exited " << tar.exit_code
              << " (archived what it could read): " << tar.stderr_data.substr(0, 300) << std::endl;
  return std::move(tar.stdout_data);
}

archive_outcome archive_store::store_archive(session& s, const std::string& main_key,
                                             std::string tgz) {
  // Under the key's locks (this sidecar's, and the store's across sidecars on this host),
  // where it may go: over the archive only if it came from exactly that one.
  const storage_spec& storage = *s.storage;
  auto store = open_store(storage, config_);
  auto lock = key_lock(storage.where() + "\n" + main_key);
  std::lock_guard held(*lock);
  auto shared = store->lock_key(main_key);
  const std::string conflict_key = sibling(main_key, ".conflict-" + s.id + ".tgz");
  std::string error;
  const auto current = store->generation(main_key, error);
  if (!current) return not_written(s, main_key, error, true);
  archive_outcome out;
  out.reason = conflict_reason(s, *current);
  if (out.reason.empty()) {
    if (!current->empty() && !store->copy(main_key, sibling(main_key, ".prev.tgz"), error))
      return not_written(s, main_key, "the previous generation could not be kept: " + error, true);
    bool changed = false;
    // Conditional: a sidecar on another host may have written the key since the check.
    if (auto written =
            store->replace(main_key, tgz, "application/gzip", *current, changed, error)) {
      s.restored_generation = *written;  // a second archive of this session replaces its own
      out.status = "written";
      out.key = main_key;
      return out;
    }
    if (!changed) return not_written(s, main_key, error, true);
    out.reason = "another session wrote the archive after this one was restored";
  }
  if (!store->put(conflict_key, tgz, "application/gzip", error))
    return not_written(s, main_key, error, true);
  out.status = "conflict";
  out.key = conflict_key;
  std::cerr << "dockgate-sidecar: archive of session " << s.id << " kept as " << conflict_key
            << ": " << out.reason << std::endl;
  return out;
}

archive_outcome archive_store::discard_archives(const storage_spec& storage,
                                                const std::string& stem) {
  archive_outcome out;
  const std::string main_key = storage.archive_key(stem);
  out.key = main_key;
  if (!storage.has_credentials) {
    out.status = "not_discarded";
    out.reason = "the credentials of " + storage.where() + " are not known";
    return out;
  }
  auto store = open_store(storage, config_);
  auto lock = key_lock(storage.where() + "\n" + main_key);
  std::lock_guard held(*lock);
  auto shared = store->lock_key(main_key);
  std::vector<std::string> keys{main_key, sibling(main_key, ".prev.tgz")};
  std::vector<object_entry> conflicts;
  std::string error;
  if (store->list(sibling(main_key, ".conflict-"), conflicts, error))
    for (auto& c : conflicts) keys.push_back(std::move(c.key));
  for (const auto& k : keys)
    if (!store->remove(k, error)) {
      out.status = "not_discarded";
      out.reason = error;
      return out;
    }
  out.status = "discarded";
  return out;
}

}  // namespace dockgate::sidecar
