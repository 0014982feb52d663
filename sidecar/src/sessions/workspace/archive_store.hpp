#pragma once
// The archive store: a session's workspace restored from its archive on create, archived
// on delete and reap, its archives discarded; with the per-key locks that order the
// check and the write of one key in this sidecar. Internal to the sidecar library; the
// invariant (nothing is lost) is at the top of archive_store.cpp.

#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "storage/archive.hpp"
#include "storage/storage.hpp"

namespace dockgate::sidecar {

class session_containers;
struct session;

// What a session's restore did (answered by POST /sessions as "restore": the Aivory front
// writes it, front/aivory/session_routes.cpp).
struct restore_report {
  std::string status = "none";  // restored | partial | none | failed
  std::string key;              // the archive's object key, when storage is used
  std::vector<skipped_member> skipped;
  std::vector<std::string> conflicts;  // archives kept beside it by sessions that lost a race
  std::string error;                   // failed: why
};

// What became of a workspace when its session ended (answered by DELETE as "archive").
// status not_discarded: a discard that could not be done (its reason says why).
struct archive_outcome {
  std::string status;  // written | conflict | not_written | discarded
  std::string key;     // where it went
  std::string reason;  // conflict, not_written: why
  bool retry = false;  // a storage error: a reaped session is kept for the next sweep
};

// An archive fetched and filtered before its session's container exists.
struct prepared_restore {
  restore_report report;
  restore_plan plan;
  std::optional<std::string> generation;
};

// The storage block of a request body (its "storage" member), chosen and validated.
// (A parse of the body: the fronts' and storage_api's, until it moves there.)
storage_choice request_storage(const std::string& body, const config& c);

class archive_store {
 public:
  archive_store(const config& c, const session_containers& containers)
      : config_(c), containers_(containers) {}

  prepared_restore prepare_restore(const storage_spec& storage, const std::string& stem);
  void unpack_restore(const std::string& container, prepared_restore& r);
  // Under the session's lock.
  archive_outcome archive_workspace(session& s);
  archive_outcome discard_archives(const storage_spec& storage, const std::string& stem);

 private:
  std::shared_ptr<std::mutex> key_lock(const std::string& where);
  // The workspace of `s` as tar.gz, checked to read back whole; nullopt with `failed` (a
  // not_written outcome) when it cannot be.
  std::optional<std::string> tar_workspace(const session& s, const std::string& main_key,
                                           archive_outcome& failed) const;
  // `tgz` written under the key's locks: over the archive, or beside it (conflict).
  archive_outcome store_archive(session& s, const std::string& main_key, std::string tgz);
  archive_outcome not_written(const session& s, const std::string& main_key, std::string reason,
                              bool retry) const;

  const config& config_;
  const session_containers& containers_;
  std::mutex key_locks_mutex_;
  std::map<std::string, std::weak_ptr<std::mutex>> key_locks_;
};

}  // namespace dockgate::sidecar
