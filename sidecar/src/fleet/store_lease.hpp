#pragma once
// The store lease: an instance's hold on its sessions in the fleet's object store
// (SANDBOX_WORKSPACE_MODE=fuse; fleet_store.hpp), beside the instance lease on the engine
// (instance_lease.hpp), which keeps one live sidecar per instance on an engine.
//
// Invariant: a sidecar serves a session whose record names its instance only while it
// holds its instance's store lease; another sidecar takes such a session over only once
// that lease has expired. So no two sidecars serve one session at once, wherever they run.
//   - The lease is the object instances/<instance>.json: created with If-None-Match: *,
//     renewed every third of SANDBOX_INSTANCE_LEASE_S by rewriting it with If-Match: the
//     ETag of the last write (each rewrite has a new beat, so a new ETag). A renewal
//     answered 412 or 404 means another holder wrote it: the lease is lost.
//   - It has expired when the store's Date is more than a lease (+1 s for the one-second
//     resolution of HTTP dates) past its Last-Modified, both in one answer: the store's
//     clock alone, no host's.
//   - The holder counts its hold from when it *sent* its last successful renewal (the
//     store stamped it later), on its own monotonic clock, and stops serving (its
//     process exits, as on a lost instance lease) one second before a lease has passed
//     since: a taker, judging on the store's clock, comes after that.
//   - A start that finds the lease fresh watches it: rewritten while it watches, another
//     live sidecar holds the instance and the start is refused (the holder named);
//     otherwise it waits for the expiry and takes it with If-Match.
//   - A store that ignores conditional writes would let two holders in: the start writes
//     a probe object twice with If-None-Match: * and refuses to run unless the second is
//     412.

#include <chrono>
#include <functional>
#include <memory>
#include <string>

#include "dockgate/sidecar/config.hpp"
#include "fleet/fleet_store.hpp"

namespace dockgate::sidecar {

class store_lease {
 public:
  static std::unique_ptr<store_lease> acquire(fleet_store& store, const config& c,
                                              std::string& error);
  ~store_lease();
  store_lease(const store_lease&) = delete;
  store_lease& operator=(const store_lease&) = delete;
  // Renews it on a thread of its own until release(); `on_lost` is called on that thread
  // when it is lost (rewritten by another holder, or not renewed for a whole lease).
  void start_renewal(std::function<void(const std::string& why)> on_lost);
  // Stops renewing and deletes the lease if it is still this holder's: the instance's
  // sessions can be taken over at once.
  void release();
  // This process's holder ID (the same for the whole hold).
  // Whether its renewals have lapsed: a lease has passed (less a second) since the last
  // renewal that succeeded was sent, or it was lost. Any thread.
  bool lapsed() const;
  const std::string& holder() const { return holder_; }
  fleet_store& store() const { return store_; }
  std::int64_t ttl_s() const { return ttl_s_; }

 private:
  struct state;
  store_lease(fleet_store& store, const config& c, lease_record r, std::string etag);
  fleet_store& store_;
  std::int64_t ttl_s_;
  const std::string holder_;
  lease_record record_;  // the renewal thread's (and acquire's) alone
  std::string etag_;
  std::unique_ptr<state> state_;
};

// Whether a lease read from the store is live: found, and rewritten within a lease (+1 s)
// on the store's clock. A lease whose age the store did not say counts as live.
bool lease_live(const store_read<lease_record>& r, std::int64_t ttl_s);

}  // namespace dockgate::sidecar
