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
  if (!containers_.running(out.s->container))
    return refuse(refusal_kind::not_found, "session not found or not running");
  if (out.s->paused && !paused_too) return refuse(refusal_kind::conflict, "session is paused");
  return std::nullopt;
}

void session_registry::reap_idle(const std::function<void(session&)>& reap) {
  const auto sessions = all();
  const auto now = std::chrono::steady_clock::now();
  for (const auto& s : sessions) {
    const auto ttl =
        std::chrono::seconds(s->ttl_seconds > 0 ? s->ttl_seconds : config_.idle_ttl_seconds);
    const bool expired = s->expired(std::chrono::system_clock::now());
    if (!expired && (!s->idle_reaped || now - s->last_used.load() <= ttl)) continue;
    std::unique_lock lock(s->lock, std::try_to_lock);
    if (!lock.owns_lock()) continue;  // busy: next sweep
    if (!expired && std::chrono::steady_clock::now() - s->last_used.load() <= ttl) continue;
    reap(*s);
  }
}

void session_registry::start_reaper(std::function<void(session&)> reap) {
  reap_ = std::move(reap);
  reaper_ = std::thread([this] {
    std::unique_lock lock(reaper_mutex_);
    while (!stopping_) {
      reaper_wake_.wait_for(lock, std::chrono::seconds(config_.idle_reaper_sweep_interval));
      if (stopping_) break;
      lock.unlock();
      reap_idle(reap_);
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
