// The session registry: the table, acquire, and the idle reaper (docs/aivory-api.md, "Session
// lifecycle"). See session_registry.hpp for the invariants.
#include "sessions/session_registry.hpp"

#include "sessions/session_containers.hpp"
#include "util/ids.hpp"

namespace dockgate::sidecar {

session_registry::~session_registry() {
  stop_reaper();
}

std::shared_ptr<session> session_registry::find(const std::string& id) {
  std::lock_guard g(table_mutex_);
  auto it = sessions_.find(id);
  return it == sessions_.end() ? nullptr : it->second;
}

void session_registry::add(std::shared_ptr<session> s) {
  std::lock_guard g(table_mutex_);
  const std::string id = s->id;
  sessions_[id] = std::move(s);
}

void session_registry::forget(const std::string& id) {
  std::lock_guard g(table_mutex_);
  sessions_.erase(id);
}

std::size_t session_registry::size() {
  std::lock_guard g(table_mutex_);
  return sessions_.size();
}

std::vector<std::shared_ptr<session>> session_registry::all() {
  std::vector<std::shared_ptr<session>> out;
  std::lock_guard g(table_mutex_);
  for (auto& [id, s] : sessions_) out.push_back(s);
  return out;
}

std::optional<refusal> session_registry::acquire(const std::string& id, held_session& out,
                                                 bool paused_too) {
  if (!valid_session_id(id)) return refuse(refusal_kind::invalid, "invalid session_id");
  out.s = find(id);
  if (!out.s || out.s->terminating)
    return refuse(refusal_kind::not_found, "session not found or not running");
  out.lock = std::unique_lock(out.s->lock, std::defer_lock);
  if (!out.lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return refuse(refusal_kind::busy, "session is busy");
  if (out.s->dormant) {
    if (paused_too) return std::nullopt;
    if (auto refused = wake_held(*out.s)) return refused;
  }
  if (!containers_.running(out.s->container))
    return refuse(refusal_kind::not_found, "session not found or not running");
  if (out.s->paused && !paused_too) return refuse(refusal_kind::conflict, "session is paused");
  return std::nullopt;
}

std::optional<refusal> session_registry::wake_held(session& s) {
  if (!s.dormant) return std::nullopt;
  if (!waker_) return refuse(refusal_kind::unavailable, "dormant sessions cannot be woken here");
  return waker_(s);
}

std::optional<refusal> session_registry::wake(const std::string& id) {
  auto s = valid_session_id(id) ? find(id) : nullptr;
  if (!s || s->terminating || !s->dormant) return std::nullopt;
  std::unique_lock lock(s->lock, std::defer_lock);
  if (!lock.try_lock_for(std::chrono::seconds(config_.queue_timeout_seconds)))
    return refuse(refusal_kind::busy, "session is busy");
  if (s->terminating) return std::nullopt;
  return wake_held(*s);
}

idle_action idle_decision(const session& s, const config& c,
                          std::chrono::steady_clock::time_point now,
                          std::chrono::system_clock::time_point wall) {
  if (s.expired(wall)) return idle_action::reap;
  const auto idle = now - s.last_used.load();
  const auto ttl = std::chrono::seconds(s.ttl_seconds > 0 ? s.ttl_seconds : c.idle_ttl_seconds);
  if (s.idle_reaped && idle > ttl) return idle_action::reap;
  if (c.dormant_after_seconds > 0 && !s.dormant && (s.paused || c.dormant_idle) &&
      idle > std::chrono::seconds(c.dormant_after_seconds))
    return idle_action::sleep;
  return idle_action::keep;
}

void session_registry::reap_idle(const std::function<void(session&)>& reap,
                                 const std::function<void(session&)>& sleep) {
  for (const auto& s : all()) {
    auto decided = [&] {
      return idle_decision(*s, config_, std::chrono::steady_clock::now(),
                           std::chrono::system_clock::now());
    };
    if (decided() == idle_action::keep) continue;
    std::unique_lock lock(s->lock, std::try_to_lock);
    if (!lock.owns_lock() || s->terminating) continue;  // busy: next sweep
    const auto action = decided();                      // again, under the lock
    if (action == idle_action::reap)
      reap(*s);
    else if (action == idle_action::sleep && sleep)
      sleep(*s);
  }
}

void session_registry::start_reaper(std::function<void(session&)> reap,
                                    std::function<void(session&)> sleep) {
  reap_ = std::move(reap);
  sleep_ = std::move(sleep);
  reaper_ = std::thread([this] {
    std::unique_lock lock(reaper_mutex_);
    while (!stopping_) {
      reaper_wake_.wait_for(lock, std::chrono::seconds(config_.idle_reaper_sweep_interval));
      if (stopping_) break;
      lock.unlock();
      reap_idle(reap_, sleep_);
      lock.lock();
    }
  });
}

void session_registry::stop_reaper() {
  {
    std::lock_guard g(reaper_mutex_);
    stopping_ = true;
  }
  reaper_wake_.notify_all();
  if (reaper_.joinable()) reaper_.join();
}

}  // namespace dockgate::sidecar
