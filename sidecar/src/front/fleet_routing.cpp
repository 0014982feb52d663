// The fleet's routing of a call for a session held elsewhere: forwarded to a live holder,
// taken over from a gone one (fleet_routing.hpp).
#include "front/fleet_routing.hpp"

#include <algorithm>
#include <iostream>

#include "fleet/forward.hpp"
#include "front/aivory/replies.hpp"
#include "front/request.hpp"
#include "sessions/session_lifecycle.hpp"
#include "sessions/session_registry.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

std::shared_ptr<std::mutex> fleet_routing::takeover_lock(const std::string& sid) {
  std::lock_guard g(locks_mutex_);
  auto& slot = takeover_locks_[sid];
  auto lock = slot.lock();
  if (!lock) slot = lock = std::make_shared<std::mutex>();
  return lock;
}

void fleet_routing::drop_takeover_lock(const std::string& sid) {
  std::lock_guard g(locks_mutex_);
  auto it = takeover_locks_.find(sid);
  if (it != takeover_locks_.end() && it->second.expired()) takeover_locks_.erase(it);
}

std::optional<lease_record> fleet_routing::cached_holder(const std::string& sid) {
  std::lock_guard g(holders_mutex_);
  auto it = holders_.find(sid);
  if (it == holders_.end()) return std::nullopt;
  if (std::chrono::steady_clock::now() >= it->second.until) {
    holders_.erase(it);
    return std::nullopt;
  }
  return it->second.lease;
}

void fleet_routing::remember_holder(const std::string& sid, const lease_record& lease) {
  std::lock_guard g(holders_mutex_);
  const auto now = std::chrono::steady_clock::now();
  // Expired entries go as new ones come: the table holds only the sessions called lately.
  for (auto it = holders_.begin(); it != holders_.end();)
    it = it->second.until <= now ? holders_.erase(it) : std::next(it);
  holders_[sid] = {lease, now + std::chrono::milliseconds(lease_->ttl_s() * 1000 / 3)};
}

void fleet_routing::forget_holder(const std::string& sid) {
  std::lock_guard g(holders_mutex_);
  holders_.erase(sid);
}

std::optional<http_reply> fleet_routing::route(const http_request& r) {
  if (!enabled()) return std::nullopt;
  std::string sid;
  bool deleting = false;
  if (r.path.starts_with("/sessions/")) {
    const auto end = r.path.find('/', 10);
    sid = r.path.substr(10, end == std::string::npos ? std::string::npos : end - 10);
    deleting = end == std::string::npos && r.method == "DELETE";
  } else if (r.method == "POST" && (r.path == "/exec" || r.path.starts_with("/files"))) {
    // A body the route will refuse names no session here: the route answers it.
    body_fields f(r.body);
    std::optional<http_reply> err;
    if (!f.error)
      if (auto id = f.string("session_id", true, err); id && !err) sid = *id;
  }
  if (!valid_session_id(sid) || registry_.find(sid)) return std::nullopt;
  return route(r, sid, deleting, aivory::reply);
}

std::optional<http_reply> fleet_routing::route_session(const http_request& r,
                                                       const std::string& sid, bool deleting,
                                                       answer_shape shape) {
  if (!enabled() || !valid_session_id(sid) || registry_.find(sid)) return std::nullopt;
  return route(r, sid, deleting, shape);
}

std::optional<http_reply> fleet_routing::route(const http_request& r, const std::string& sid,
                                               bool deleting, answer_shape shape) {
  if (!enabled()) return std::nullopt;
  if (r.forwarded.empty())
    if (auto holder = cached_holder(sid)) return forward(r, *holder, sid, shape);
  // Decided under the session's takeover lock; a forward leaves it first (a holder that
  // is slow to answer never holds up this session's other calls, nor a takeover).
  std::optional<lease_record> forward_to;
  {
    auto lock = takeover_lock(sid);
    struct unlocker {
      fleet_routing& f;
      const std::string& sid;
      std::shared_ptr<std::mutex>& lock;
      ~unlocker() {
        lock.reset();
        f.drop_takeover_lock(sid);
      }
    } drop{*this, sid, lock};
    std::lock_guard hold(*lock);
    if (registry_.find(sid)) return std::nullopt;  // another call took it over meanwhile
    auto decided = decide(r, sid, deleting, forward_to);
    if (!forward_to) return decided ? std::optional<http_reply>(shape(*decided)) : std::nullopt;
  }
  return forward(r, *forward_to, sid, shape);
}

std::optional<refusal> fleet_routing::decide(const http_request& r, const std::string& sid,
                                             bool deleting,
                                             std::optional<lease_record>& forward_to) {
  auto& store = lease_->store();
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto seen = store.read_session(sid);
    if (seen.absent()) return std::nullopt;
    if (!seen.found())
      return refuse(refusal_kind::unavailable, "the fleet's store is unreachable: " + seen.error);
    const session_record& record = *seen.record;
    if (record.owner != config_.instance) {
      auto holder = store.read_lease(record.owner);
      if (!holder.found() && !holder.absent())
        return refuse(refusal_kind::unavailable,
                      "the fleet's store is unreachable: " + holder.error);
      if (lease_live(holder, lease_->ttl_s())) {
        if (!r.forwarded.empty())
          return refuse(refusal_kind::unavailable,
                        "session " + sid + " is held by instance " + record.owner +
                            " (a forwarded call is not forwarded again)");
        // Dialled only where the operator listed the holder (fleet_auth.hpp): the record's
        // `url` is never used, so a store writer cannot send calls elsewhere.
        if (!config_.fleet_members.contains(record.owner))
          return refuse(refusal_kind::unavailable,
                        "session " + sid + " is held by instance " + record.owner +
                            ", which is not a member of this sidecar's fleet "
                            "(SANDBOX_FLEET_MEMBERS): the call is not forwarded");
        lease_record to = *holder.record;
        to.instance = record.owner;  // the member is the one the record names
        remember_holder(sid, to);
        forward_to = to;
        return std::nullopt;
      }
    }
    // Its holder is gone (its lease expired or was released), or the hold is this
    // instance's own and was lost track of: taken over, if no other sidecar is first.
    session_record mine = record;
    mine.owner = config_.instance;
    mine.holder = lease_->holder();
    mine.handed_over.clear();
    // A new generation unless the last holder said it writes no more: a clean stop marks
    // the record handed over by its holder once the container is gone (a record not
    // mid-copy). Any other holder may be stalled, its container and s3fs still writing
    // (fleet_store.hpp): its generation is copied, never mounted again.
    const bool handed_over = !record.handed_over.empty() && record.handed_over == record.holder;
    const bool fence = !deleting && (!handed_over || record.copy_from);
    if (fence) {
      mine.copy_from = record.copy_from ? *record.copy_from : record.generation;
      mine.generation = fleet_store::new_generation();
      mine.storage = store.workspace_place(mine.archive_key, mine.generation);
    }
    auto wrote = store.write_session(mine, seen.etag);
    if (wrote.status == 412 || wrote.status == 404) continue;  // it moved first: look again
    if (!wrote.ok())
      return refuse(refusal_kind::unavailable,
                    "the fleet's store refused the takeover: " + wrote.describe());
    std::cerr << "dockgate-sidecar: session " << sid << " taken over from instance " << record.owner
              << (fence ? " into generation " + mine.generation + " of its workspace"
                        : std::string())
              << std::endl;
    if (deleting) return std::nullopt;  // ended here: its record goes with it
    if (fence) {
      if (auto failed = new_generation(record, mine, wrote.etag)) return failed;
    }
    if (auto refused = lifecycle_.take_over(mine)) return refused;
    return std::nullopt;
  }
  return refuse(refusal_kind::unavailable,
                "session " + sid + " moved while it was being taken over; try again");
}

std::optional<refusal> fleet_routing::new_generation(const session_record& was,
                                                     session_record& mine, std::string etag) {
  auto& store = lease_->store();
  const std::string from = *mine.copy_from;
  // The copy: the old generation as the store has it now. Whatever the old holder writes
  // there later is read by nobody (the answer to this call comes after the copy).
  if (auto error = store.copy_workspace(mine.archive_key, from, mine.generation); !error.empty())
    return refuse(refusal_kind::unavailable,
                  "session " + mine.session_id +
                      ": the takeover could not copy its workspace (asked again, it copies "
                      "again): " +
                      error);
  // The key's pointer moves on from the generation copied (or from the half-made one of a
  // taker that died mid-copy), never from one another session of the key moved it to.
  for (int attempt = 0; attempt < 3; ++attempt) {
    auto current = store.read_workspace(mine.archive_key);
    if (!current.found() && !current.absent())
      return refuse(refusal_kind::unavailable,
                    "the fleet's store is unreachable: " + current.error);
    const std::string at = current.found() ? current.record->generation : std::string();
    if (at != from && at != was.generation) break;
    workspace_record moved{mine.archive_key, mine.generation};
    auto wrote = store.write_workspace(moved, current.found() ? current.etag : std::string());
    if (wrote.ok()) break;
    if (wrote.status != 412 && wrote.status != 404)
      return refuse(refusal_kind::unavailable,
                    "the fleet's store refused the workspace's generation: " + wrote.describe());
  }
  // Copied: the record says so (If-Match: a taker that stalled since its write finds the
  // session moved on, and stops here).
  mine.copy_from.reset();
  auto done = store.write_session(mine, etag);
  if (!done.ok())
    return refuse(refusal_kind::unavailable,
                  "session " + mine.session_id + " moved while it was being taken over; try again");
  return std::nullopt;
}

http_reply fleet_routing::forward(const http_request& r, const lease_record& holder,
                                  const std::string& sid, answer_shape shape) {
  auto unavailable = [&](std::string message) {
    return shape(refuse(refusal_kind::unavailable, std::move(message)));
  };
  // Only to a member the operator listed, at the address listed (SANDBOX_FLEET_MEMBERS,
  // http://host:port, checked by config.cpp): never where a record in the store points.
  const auto member = config_.fleet_members.find(holder.instance);
  if (member == config_.fleet_members.end() || config_.fleet_key.empty())
    return unavailable("session " + sid + " is held by instance " + holder.instance +
                       ", which is not a member of this sidecar's fleet "
                       "(SANDBOX_FLEET_MEMBERS): the call is not forwarded");
  // The hop carries whole answers: a connection switched to another protocol (a
  // WebSocket on OpenSandbox's proxy path) is not carried, and said so.
  if (r.field("upgrade"))
    return unavailable("session " + sid + " is held by instance " + holder.instance +
                       ": an Upgrade (WebSocket) is not forwarded between members; ask that "
                       "member");
  const std::string& url = member->second;
  std::string error;
  auto where = common::parse_endpoint("tcp://" + url.substr(7), &error);
  if (!where || where->scheme != common::endpoint::kind::tcp)
    return unavailable("session " + sid + " is held by instance " + holder.instance +
                       ", whose address cannot be used: " + url);
  // A host that is gone answers nothing, not even a refusal: the connect is bounded on
  // its own, well inside a lease, so the call is answered (503) and asked again soon.
  const auto connect_timeout =
      std::chrono::milliseconds(std::clamp<std::int64_t>(lease_->ttl_s() * 1000 / 5, 500, 3000));
  fleet_call call{r.method, r.path, r.body, r.accept, r.query, {}, {}};
  for (const auto& [name, value] : r.fields) {
    if (name == "content-type")
      call.content_type = value;
    else if (forwardable_field(name))
      call.fields.emplace_back(name, value);
  }
  auto answer =
      send_to_member(config_, holder.instance, *where, url.substr(7), call, connect_timeout);
  if (answer.status == 0 || answer.status == 503) forget_holder(sid);
  if (answer.status == 0)
    return unavailable("session " + sid + " is held by instance " + holder.instance + " at " + url +
                       ", which did not answer: " + answer.error);
  const bool plain =
      answer.content_type.empty() || answer.content_type.starts_with("application/json");
  // A streamed answer (an exec's events): passed on whole, with its type.
  if (!plain && r.stream && r.stream->open(answer.status, answer.content_type, answer.fields)) {
    r.stream->write(answer.body);
    http_reply streamed;
    streamed.streamed = true;
    return streamed;
  }
  http_reply whole(answer.status, std::move(answer.body));
  if (!plain) whole.content_type = answer.content_type;
  whole.headers = std::move(answer.fields);
  return whole;
}

}  // namespace dockgate::sidecar
