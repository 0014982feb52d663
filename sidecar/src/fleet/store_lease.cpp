// The store lease (store_lease.hpp): taken, renewed, lost and released in the fleet's
// object store with conditional writes.
#include "fleet/store_lease.hpp"

#include <unistd.h>

#include <atomic>
#include <condition_variable>
#include <limits>
#include <mutex>
#include <thread>

#include "util/ids.hpp"

namespace dockgate::sidecar {

using clock = std::chrono::steady_clock;

struct store_lease::state {
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;
  std::thread thread;
  // valid_until of the renewal thread (clock ticks), for lapsed(); max until it runs.
  std::atomic<clock::rep> valid_until{std::numeric_limits<clock::rep>::max()};
};

bool store_lease::lapsed() const {
  return clock::now().time_since_epoch().count() >= state_->valid_until.load();
}

bool lease_live(const store_read<lease_record>& r, std::int64_t ttl_s) {
  return r.found() && (r.age_s < 0 || r.age_s <= ttl_s + 1);
}

namespace {

// Whether the store honours If-None-Match: * (a second create of one key is a 412).
std::string conditional_writes_problem(fleet_store& store, const std::string& holder) {
  lease_record probe;
  probe.instance = ".probe-" + holder;
  probe.holder = holder;
  const std::string create;
  auto first = store.write_lease(probe, create);
  if (!first.ok()) return "the fleet store refused a write: " + first.describe();
  auto second = store.write_lease(probe, create);
  store.delete_lease(probe.instance);
  if (second.status == 412) return {};
  return "the fleet store does not honour conditional writes (a second PUT with "
         "If-None-Match: * answered " +
         second.describe() +
         "): sessions could be held by two hosts at once; use a store that does (AWS S3, MinIO, "
         "AIStor)";
}

}  // namespace

store_lease::store_lease(fleet_store& store, const config& c, lease_record r, std::string etag)
    : store_(store),
      ttl_s_(c.instance_lease_s),
      holder_(r.holder),
      record_(std::move(r)),
      etag_(std::move(etag)),
      state_(std::make_unique<state>()) {}

store_lease::~store_lease() {
  {
    std::lock_guard g(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
}

std::unique_ptr<store_lease> store_lease::acquire(fleet_store& store, const config& c,
                                                  std::string& error) {
  lease_record mine;
  mine.instance = c.instance;
  mine.holder = random_hex(16);
  mine.url = c.fleet_url;
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) mine.host = host;
  mine.pid = ::getpid();
  if (auto problem = conditional_writes_problem(store, mine.holder); !problem.empty()) {
    error = problem;
    return nullptr;
  }
  const auto ttl = c.instance_lease_s;
  // Watch a fresh lease for at most its whole life (+2 s): renewed meanwhile, it is live.
  const auto give_up = clock::now() + std::chrono::seconds(ttl + 2);
  std::string first_etag;
  for (;;) {
    auto seen = store.read_lease(c.instance);
    if (!seen.found() && !seen.absent()) {
      error = "the fleet store could not be read: " + seen.error;
      return nullptr;
    }
    std::string if_match;  // "": create
    // Our own write whose answer was lost (a retried PUT answered 412): ours already.
    if (seen.found() && seen.record->holder == mine.holder)
      return std::unique_ptr<store_lease>(new store_lease(store, c, *seen.record, seen.etag));
    if (seen.found()) {
      const bool expired = seen.age_s > ttl + 1 || clock::now() >= give_up;
      if (!expired) {
        if (first_etag.empty()) first_etag = seen.etag;
        if (seen.etag != first_etag) {
          const auto& h = *seen.record;
          error = "instance \"" + c.instance +
                  "\" is held by a live sidecar of the fleet: holder " + h.holder + " on host " +
                  h.host + ", pid " + std::to_string(h.pid) +
                  (h.url.empty() ? std::string() : ", at " + h.url) + " (its store lease " +
                  store.lease_key(c.instance) + " was renewed while this start watched it)";
          return nullptr;
        }
        std::this_thread::sleep_for(std::chrono::seconds(1));
        continue;
      }
      if_match = seen.etag;
    }
    mine.beat = seen.found() ? seen.record->beat + 1 : 0;
    auto wrote = store.write_lease(mine, if_match);
    if (wrote.ok() && !wrote.etag.empty())
      return std::unique_ptr<store_lease>(new store_lease(store, c, mine, wrote.etag));
    if (wrote.ok()) {
      error =
          "the fleet store answered a write without an ETag: conditional renewals are impossible";
      return nullptr;
    }
    if (wrote.status != 412 && wrote.status != 404) {
      error = "the fleet store refused the lease: " + wrote.describe();
      return nullptr;
    }
    first_etag.clear();  // another start wrote it meanwhile: watch it afresh
  }
}

void store_lease::start_renewal(std::function<void(const std::string& why)> on_lost) {
  state_->thread = std::thread([this, on_lost = std::move(on_lost)] {
    const auto ttl = std::chrono::seconds(ttl_s_);
    const auto every = std::chrono::milliseconds(ttl_s_ * 1000 / 3);
    // Held until a lease (less a second) after the last successful renewal was sent.
    auto valid_until = clock::now() + ttl - std::chrono::seconds(1);
    state_->valid_until = valid_until.time_since_epoch().count();
    auto next = clock::now() + every;
    std::unique_lock lock(state_->mutex);
    for (;;) {
      state_->wake.wait_until(lock, std::min(next, valid_until), [&] { return state_->stopping; });
      if (state_->stopping) return;
      if (clock::now() >= valid_until) {
        state_->valid_until = clock::rep{0};
        on_lost("not renewed in the fleet store for a whole lease");
        return;
      }
      if (clock::now() < next) continue;
      lock.unlock();
      const auto sent = clock::now();
      lease_record r = record_;
      ++r.beat;
      auto wrote = store_.write_lease(r, etag_);
      if (wrote.status == 412) {
        // A retried PUT whose first try landed answers 412 too: ours if it says our beat.
        auto seen = store_.read_lease(r.instance);
        if (seen.found() && seen.record->holder == r.holder && seen.record->beat == r.beat) {
          wrote.status = 200;
          wrote.etag = seen.etag;
        }
      }
      lock.lock();
      if (state_->stopping) return;
      if (wrote.ok() && !wrote.etag.empty()) {
        record_ = r;
        etag_ = wrote.etag;
        valid_until = sent + ttl - std::chrono::seconds(1);
        state_->valid_until = valid_until.time_since_epoch().count();
        next = sent + every;
      } else if (wrote.status == 412 || wrote.status == 404) {
        state_->valid_until = clock::rep{0};
        on_lost("the store lease " + store_.lease_key(record_.instance) +
                " was written by another holder");
        return;
      } else {
        next = clock::now() + std::chrono::seconds(1);  // the store is unreachable: again soon
      }
    }
  });
}

void store_lease::release() {
  {
    std::lock_guard g(state_->mutex);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->thread.joinable()) state_->thread.join();
  auto seen = store_.read_lease(record_.instance);
  if (seen.found() && seen.record->holder == record_.holder) store_.delete_lease(record_.instance);
}

}  // namespace dockgate::sidecar
