// The warm pool's bookkeeping and its one background thread (see pool.hpp for the
// invariants). What a pool container is, and how one is made, is session_pool's
// (pool_sessions.cpp): the same create body as a session's, through the gate.
#include "sessions/pool/pool.hpp"

#include <algorithm>
#include <iostream>

namespace dockgate::sidecar {

warm_pool::warm_pool(std::size_t target, hooks h, timing t)
    : target_(target), hooks_(std::move(h)), timing_(t) {}

warm_pool::~warm_pool() {
  stop();
}

void warm_pool::start() {
  std::lock_guard g(mutex_);
  if (thread_.joinable() || stopping_) return;
  next_check_ = std::chrono::steady_clock::now() + timing_.check_interval;
  thread_ = std::thread([this] { run(); });
}

std::optional<pooled_container> warm_pool::claim(std::chrono::milliseconds wait) {
  const auto deadline = std::chrono::steady_clock::now() + wait;
  while (auto c = take(deadline)) {
    // Outside the lock: the check is a round trip (bounded), and the container is ours.
    if (!hooks_.ready || hooks_.ready(*c, true)) return c;
    discard(c->id);
  }
  return std::nullopt;
}

std::optional<pooled_container> warm_pool::take(std::chrono::steady_clock::time_point deadline) {
  std::optional<pooled_container> out;
  {
    std::unique_lock lock(mutex_);
    const auto fills_before = fills_;
    for (;;) {
      // A container of an image replaced since the last check is not handed out.
      while (!ready_.empty() && !out) {
        if (ready_.front().image_id == image_id_)
          out = std::move(ready_.front());
        else
          jobs_.push_back([this, id = ready_.front().id] { hooks_.remove(id); });
        ready_.pop_front();
      }
      // Only the fill in flight when the claim began is waited for: it is as far along as
      // a create of the caller's own would be, and later ones are not; and a container
      // being checked, which comes back in a moment.
      const bool fill_awaited = filling_ && fills_ == fills_before;
      if (out || (!fill_awaited && !checking_) || stopping_ ||
          std::chrono::steady_clock::now() >= deadline)
        break;
      wake_.wait_until(lock, deadline);
    }
  }
  wake_.notify_all();  // refill
  return out;
}

// Removed on the pool's thread, off the request's path; a refill follows.
void warm_pool::discard(const std::string& id) {
  std::cerr << "dockgate-sidecar: warm pool: container " << id.substr(0, 12)
            << " cannot run a cell now (paused, stopped or without its runner): removed"
            << std::endl;
  post([this, id] { hooks_.remove(id); });
}

void warm_pool::post(std::function<void()> job) {
  {
    std::lock_guard g(mutex_);
    jobs_.push_back(std::move(job));
  }
  wake_.notify_all();
}

void warm_pool::wake() {
  {
    std::lock_guard g(mutex_);
    full_ = false;
  }
  wake_.notify_all();
}

std::size_t warm_pool::size() {
  std::lock_guard g(mutex_);
  return ready_.size();
}

std::chrono::milliseconds warm_pool::backoff() const {
  auto d = timing_.first_backoff;
  for (unsigned i = 1; i < failures_ && d < timing_.max_backoff; ++i) d *= 2;
  return std::min(d, timing_.max_backoff);
}

void warm_pool::run() {
  std::unique_lock lock(mutex_);
  while (!stopping_) {
    if (!jobs_.empty()) {
      auto job = std::move(jobs_.front());
      jobs_.pop_front();
      lock.unlock();
      job();
      lock.lock();
      continue;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_check_) {
      lock.unlock();
      check();
      lock.lock();
      next_check_ = std::chrono::steady_clock::now() + timing_.check_interval;
      continue;
    }
    if (ready_.size() < target_ && !full_ && now >= retry_at_) {
      filling_ = true;
      lock.unlock();
      std::string error;
      bool full = false;
      auto made = hooks_.create(error, full);
      lock.lock();
      filling_ = false;
      ++fills_;
      wake_.notify_all();  // a claim waiting for this fill
      if (made) {
        made_.insert(made->id);
        failures_ = 0;
        if (image_id_.empty()) image_id_ = made->image_id;
        if (made->image_id != image_id_ || stopping_) {
          // Made from another image than the one checked last, or while stopping.
          jobs_.push_back([this, id = made->id] { hooks_.remove(id); });
        } else {
          ready_.push_back(std::move(*made));
        }
      } else if (full) {
        full_ = true;
      } else {
        ++failures_;
        retry_at_ = std::chrono::steady_clock::now() + backoff();
        std::cerr << "dockgate-sidecar: warm pool: " << error << " (retry in " << backoff().count()
                  << " ms)" << std::endl;
      }
      continue;
    }
    auto until = next_check_;
    if (ready_.size() < target_ && !full_) until = std::min(until, retry_at_);
    wake_.wait_until(lock, until);
  }
}

// Every check_interval: a re-tagged image retires the pool's containers; one that no
// longer runs (killed, paused, the engine restarted) or is not ready (hooks::ready: its
// runner gone or frozen) leaves the pool; SANDBOX_MAX_SESSIONS is counted again.
void warm_pool::check() {
  const std::string image = hooks_.image_id();
  const auto running = hooks_.running();
  std::vector<std::string> retired, kept;
  {
    std::lock_guard g(mutex_);
    full_ = false;
    if (!image.empty()) image_id_ = image;
    for (auto it = ready_.begin(); it != ready_.end();) {
      if (it->image_id != image_id_ || (running && !running->contains(it->id))) {
        retired.push_back(it->id);
        it = ready_.erase(it);
      } else {
        kept.push_back(it->id);
        ++it;
      }
    }
  }
  for (const auto& id : retired) hooks_.remove(id);
  if (hooks_.sweep) {
    // No fill is in flight (fills run on this thread): every container this pool made is
    // in `made`.
    std::set<std::string> made;
    {
      std::lock_guard g(mutex_);
      made = made_;
    }
    if (auto existing = hooks_.sweep(made)) {
      std::lock_guard g(mutex_);
      std::erase_if(made_, [&](const std::string& id) { return !existing->contains(id); });
    }
  }
  if (!hooks_.ready) return;
  // One at a time out of the pool while it is checked, so that a claim meanwhile takes
  // another (or this one, before or after) and never shares it.
  for (const auto& id : kept) {
    std::optional<pooled_container> c;
    {
      std::lock_guard g(mutex_);
      auto it =
          std::find_if(ready_.begin(), ready_.end(), [&](const auto& r) { return r.id == id; });
      if (it == ready_.end()) continue;  // claimed meanwhile
      c = std::move(*it);
      ready_.erase(it);
      checking_ = true;
    }
    const bool ok = hooks_.ready(*c, false);
    {
      std::lock_guard g(mutex_);
      checking_ = false;
      if (ok) ready_.push_back(std::move(*c));
    }
    wake_.notify_all();  // a claim waiting for it
    if (!ok) {
      std::cerr << "dockgate-sidecar: warm pool: container " << id.substr(0, 12)
                << " cannot run a cell now (paused, stopped or without its runner): removed"
                << std::endl;
      hooks_.remove(id);
    }
  }
}

std::size_t warm_pool::stop() {
  {
    std::lock_guard g(mutex_);
    if (stopping_ && !thread_.joinable() && ready_.empty() && jobs_.empty()) return 0;
    stopping_ = true;
  }
  wake_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::deque<std::function<void()>> jobs;
  std::deque<pooled_container> ready;
  {
    std::lock_guard g(mutex_);
    jobs.swap(jobs_);
    ready.swap(ready_);
  }
  for (auto& job : jobs) job();
  for (const auto& c : ready) hooks_.remove(c.id);
  return ready.size();
}

}  // namespace dockgate::sidecar
