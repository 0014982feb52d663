#pragma once
// The fleet's routing (SANDBOX_WORKSPACE_MODE=fuse, sessions in the store:
// fleet/fleet_store.hpp): a call for a session this sidecar does not hold is served here,
// forwarded to its holder (fleet/forward.hpp) or taken over (the session lifecycle), by the
// session's record. It sits in the front, above the sessions it takes over and the fleet's
// store and hop it uses. Internal to the sidecar library.
//
// - No record: not a session of the fleet; served here (the local 404, DELETE's ok).
// - Its holder's store lease is live: the call is forwarded to the holder at the address
//   the operator listed for it (SANDBOX_FLEET_MEMBERS; never the `url` its records hold),
//   signed with the fleet's key and without the client's Authorization (fleet_auth.hpp),
//   once — a forwarded call (X-Dockgate-Forwarded) is never forwarded again; the client
//   sees one service whichever member it reached. A holder not listed: 503 naming it.
// - Its holder's lease has expired (or is this instance's own, a hold it lost track of):
//   the record is rewritten to name this holder (If-Match: of two sidecars taking it, one
//   wins; the other looks again) and the session is made here (take_over).
// Takeovers of one session on this sidecar are serialised; those of different sessions run
// side by side. Where a session's live holder is reached is remembered for a third of a
// lease, so that a forwarded call costs no read of the store; an answer of 503 (or none)
// from the holder forgets it. Only the forward is cached: a takeover always reads the store.

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "dockgate/sidecar/config.hpp"
#include "fleet/store_lease.hpp"
#include "front/http_server.hpp"
#include "util/refusal.hpp"

namespace dockgate::sidecar {

class session_lifecycle;
class session_registry;

class fleet_routing {
 public:
  fleet_routing(const config& c, store_lease* lease, session_registry& registry,
                session_lifecycle& lifecycle)
      : config_(c), lease_(lease), registry_(registry), lifecycle_(lifecycle) {}
  bool enabled() const { return lease_ != nullptr; }
  // For a call `r` (authenticated): nullopt to serve it here (it names no session, one
  // this sidecar holds, one taken over now, or one not the fleet's), else the answer (the
  // holder's, or a 503). The session is the path's /sessions/{id}, or the body's
  // session_id for POST /exec and /files*; a body the route will refuse names none.
  std::optional<http_reply> route(const http_request& r);
  // The same for a call another front has read the session `sid` from (OpenSandbox's
  // /sandboxes/{id}…), its refusals in that front's shape. The call is passed on with its
  // query, its body's type and the fields forward.hpp lets travel; the holder's answer
  // comes back with its status, type and returnable fields.
  using answer_shape = http_reply (*)(const refusal&);
  std::optional<http_reply> route_session(const http_request& r, const std::string& sid,
                                          bool deleting, answer_shape shape);

 private:
  // For a call `r` naming session `sid`, which this sidecar does not hold. `deleting`: a
  // DELETE, which needs the record only (no container is made to be removed).
  std::optional<http_reply> route(const http_request& r, const std::string& sid, bool deleting,
                                  answer_shape shape);
  // Under the session's takeover lock: the refusal, or nullopt with `forward_to` set (the
  // call goes to that live holder) or not (served here).
  std::optional<refusal> decide(const http_request& r, const std::string& sid, bool deleting,
                                std::optional<lease_record>& forward_to);
  // A takeover's new generation (`mine`, written with `etag`; `was` the record it replaced):
  // the old generation copied into it on the store, the key's current generation moved on,
  // the record's copy marked done. nullopt when done, else the refusal.
  std::optional<refusal> new_generation(const session_record& was, session_record& mine,
                                        std::string etag);
  http_reply forward(const http_request& r, const lease_record& holder, const std::string& sid,
                     answer_shape shape);
  std::shared_ptr<std::mutex> takeover_lock(const std::string& sid);
  void drop_takeover_lock(const std::string& sid);

  const config& config_;
  store_lease* lease_;
  session_registry& registry_;
  session_lifecycle& lifecycle_;
  struct known_holder {
    lease_record lease;
    std::chrono::steady_clock::time_point until;
  };
  std::optional<lease_record> cached_holder(const std::string& sid);
  void remember_holder(const std::string& sid, const lease_record& lease);
  void forget_holder(const std::string& sid);
  std::mutex holders_mutex_;
  std::map<std::string, known_holder> holders_;
  std::mutex locks_mutex_;
  std::map<std::string, std::weak_ptr<std::mutex>> takeover_locks_;
};

}  // namespace dockgate::sidecar
