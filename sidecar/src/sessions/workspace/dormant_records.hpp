#pragma once
// Where a dormant session is kept while it has no container (session_dormancy.cpp): its
// record (what a client said of it and where its workspace is) and, for a session without
// storage of its own, its workspace archive, both in the operator's directory
// (SANDBOX_LOCAL_STORAGE_DIR) under dockgate-dormant/. Internal to the sidecar library.
//
// Invariants it keeps:
// - A record holds nothing secret a container's labels would not: storage is named by its
//   non-secret label (only local storage goes dormant, so no credential is ever needed to
//   bring one back), the environment as the container's create body held it.
// - A record is written whole or not at all (the local store's atomic put): a restart reads
//   the session as it went dormant, or not at all.

#include <memory>
#include <string>
#include <vector>

#include "dockgate/sidecar/config.hpp"
#include "storage/storage.hpp"

namespace dockgate::sidecar {

struct session;

class dormant_records {
 public:
  explicit dormant_records(const config& c) : config_(c) {}

  // The storage a session without its own keeps its dormant archive in:
  // dockgate-dormant/<sid>/workspaces/<key>.tgz of the operator's directory.
  storage_spec own_storage(const std::string& sid) const;
  // The record of `s` written (replacing an earlier one); false with `error`.
  bool write(const session& s, std::string& error) const;
  // The record of `sid` removed (none is no error); false with `error`.
  bool remove(const std::string& sid, std::string& error) const;
  // Every readable record, as a dormant session (no container, paused). One that cannot be
  // read is logged and left where it is.
  std::vector<std::shared_ptr<session>> load_all() const;
  // The record's text for `s`, and the session a text describes (nullptr: unreadable).
  std::string record_of(const session& s) const;
  std::shared_ptr<session> session_of(std::string_view record) const;

 private:
  bool usable() const { return !config_.local_storage_dir.empty(); }
  const config& config_;
};

}  // namespace dockgate::sidecar
