// The instance lease. See instance_lease.hpp for the invariant kept and why it is made
// this way.
#include "sessions/instance_lease.hpp"

#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <simdjson.h>
#include <unistd.h>

#include <condition_variable>
#include <ctime>
#include <fstream>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>
#include <vector>

#include "engine/labels.hpp"  // session_user
#include "util/ids.hpp"

namespace dockgate::sidecar {

using namespace std::chrono_literals;

namespace {

std::string read_first_line(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// Field 22 of /proc/<pid>/stat (the start time in clock ticks since boot), read after
// the last ')' so that no process name can shift the fields.
std::optional<std::string> stat_start_tick(const std::string& stat_line) {
  const auto close = stat_line.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream fields(stat_line.substr(close + 1));
  std::string f;
  for (int i = 3; i <= 22; ++i)
    if (!(fields >> f)) return std::nullopt;
  return f;
}

std::vector<std::string> words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

// The lease container: the smallest container the sandbox profile makes (the gate forces
// its hardening, and its user, as for a session's), running `sleep`. The heartbeat file is
// made by the holder's exec (the exec user, which need not be the container's) at once
// after the start. Its labels name the holder; it has none of a session's. It runs on the
// sessions' default runtime (SANDBOX_RUNTIMES' first, none: the engine's). Its PIDs limit
// is 128: a gVisor sandbox's (runsc's) own sentry and gofer threads count against it on the
// host, about 60 once started and more with each exec; under 64 it does not start, and at 64
// its heartbeat execs crash the sandbox within a few beats (the lease then looks lost),
// whether the sidecar asks for runsc or the gate's profile forces it.
std::string lease_body(const config& c, const lease_holder& h) {
  std::string b = "{\"Image\":";
  client::append_json_string(b, c.image);
  b += R"(,"Cmd":["sleep","infinity"],"User":"1000:1000",)";
  b += R"("WorkingDir":"/tmp","Labels":{)";
  bool first = true;
  auto label = [&](std::string_view name, std::string_view value) {
    if (!first) b += ',';
    first = false;
    client::append_json_string(b, name);
    b += ':';
    client::append_json_string(b, value);
  };
  label(lease_label, c.instance);
  label(lease_holder_label, h.id);
  label(lease_host_label, h.host);
  label(lease_pid_label, std::to_string(h.pid));
  label(lease_started_label, std::to_string(h.started_at));
  label(lease_process_label, h.process);
  b += R"(},"HostConfig":{"NetworkMode":"none","Memory":33554432,"MemorySwap":33554432,)"
       R"("NanoCpus":100000000,"PidsLimit":128,"Init":true,"SecurityOpt":["no-new-privileges"],)"
       R"("CapDrop":["ALL"],"ReadonlyRootfs":true,"Tmpfs":{"/tmp":"rw,nosuid,nodev,size=1m"})";
  if (const std::string runtime = default_runtime(c); !runtime.empty()) {
    b += ",\"Runtime\":";
    client::append_json_string(b, runtime);
  }
  return b + "}}";
}

struct seen_lease {
  std::string id;
  bool running = false;
  bool created = false;  // made and not started yet: its holder is starting it
  lease_holder holder;
};

// The lease container as the engine has it; nullopt with `status` the engine's answer.
std::optional<seen_lease> inspect_lease(const container_engine& engine, const std::string& name,
                                        unsigned& status) {
  auto r = engine.inspect(name, 20s);
  status = r.status;
  if (r.status != 200) return std::nullopt;
  simdjson::dom::parser p;
  simdjson::dom::element doc;
  std::string_view id;
  if (p.parse(r.body).get(doc) != simdjson::SUCCESS ||
      doc["Id"].get_string().get(id) != simdjson::SUCCESS)
    return std::nullopt;
  seen_lease s;
  s.id = std::string(id);
  if (doc["State"]["Running"].get_bool().get(s.running) != simdjson::SUCCESS) s.running = false;
  std::string_view state;
  s.created =
      doc["State"]["Status"].get_string().get(state) == simdjson::SUCCESS && state == "created";
  std::map<std::string, std::string> labels;
  simdjson::dom::object obj;
  if (doc["Config"]["Labels"].get_object().get(obj) == simdjson::SUCCESS)
    for (auto [k, v] : obj) {
      std::string_view value;
      if (v.get_string().get(value) == simdjson::SUCCESS)
        labels[std::string(k)] = std::string(value);
    }
  s.holder = lease_holder::from_labels(labels);
  return s;
}

// The heartbeat as the lease container sees it: its clock, the file's mtime and content.
struct heartbeat {
  std::int64_t now = 0;
  std::optional<std::int64_t> mtime;  // none: no heartbeat written yet
  std::string seq;
};
std::optional<heartbeat> read_heartbeat(const container_engine& engine, const std::string& id) {
  client::exec_options o;
  // Exits 0 while the container runs, with or without a heartbeat yet: a holder between
  // its start and its first beat is alive (watched until it beats or a lease passes), not
  // gone (which sent a starter round its attempts and out with "changed hands").
  // The mtime from find's %T@ (seconds.fraction, read up to the '.'), not coreutils' stat:
  // under gVisor (runsc 20221219) its statx with AT_NO_AUTOMOUNT fails with EINVAL on every
  // path, which read as "no heartbeat yet" for a lease that beats.
  o.cmd = {"sh", "-c",
           "date +%s; find /tmp/lease-beat -maxdepth 0 -printf '%T@\\n' 2>/dev/null || echo -; "
           "cat /tmp/lease-beat 2>/dev/null; true"};
  o.timeout = 20s;
  o.max_stdout = 4096;
  o.user = session_user;
  auto r = engine.exec(id, o);
  if (!r.started || r.exit_code != 0) return std::nullopt;  // gone or stopped: looked at again
  auto lines = words(r.stdout_data);
  if (lines.size() < 2) return std::nullopt;
  heartbeat h;
  h.now = std::strtoll(lines[0].c_str(), nullptr, 10);
  if (lines[1] != "-") h.mtime = std::strtoll(lines[1].c_str(), nullptr, 10);
  if (lines.size() > 2) h.seq = lines[2];
  return h;
}

void remove_by_id(const container_engine& engine, const std::string& id) {
  engine.remove(id, 30s);
}

std::string utc(std::int64_t t) {
  const std::time_t tt = static_cast<std::time_t>(t);
  std::tm tm{};
  ::gmtime_r(&tt, &tm);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y-%m-%dT%H:%M:%SZ", &tm);
  return buf;
}

}  // namespace

std::string lease_name(const config& c) {
  std::string name = std::string(lease_prefix) + c.instance;
  if (c.api_key.empty()) return name;
  const std::string text = "dockgate-instance-lease\n" + c.instance;
  unsigned char mac[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  HMAC(EVP_sha256(), c.api_key.data(), static_cast<int>(c.api_key.size()),
       reinterpret_cast<const unsigned char*>(text.data()), text.size(), mac, &len);
  static constexpr char digits[] = "0123456789abcdef";
  name += '-';
  for (unsigned i = 0; i < 8 && i < len; ++i) {
    name += digits[mac[i] >> 4];
    name += digits[mac[i] & 15];
  }
  return name;
}

lease_holder lease_holder::of_this_process() {
  lease_holder h;
  h.id = random_hex(16);
  char host[256] = {};
  if (::gethostname(host, sizeof host - 1) == 0) h.host = host;
  h.pid = ::getpid();
  h.started_at = static_cast<std::int64_t>(std::time(nullptr));
  // Only when /proc is this process's own (its /proc/self is this PID): a /proc of another
  // PID namespace could not tell whether a holder is gone.
  const std::string self_stat = read_first_line("/proc/self/stat");
  const std::string boot = read_first_line("/proc/sys/kernel/random/boot_id");
  char ns[128] = {};
  const ssize_t n = ::readlink("/proc/self/ns/pid", ns, sizeof ns - 1);
  auto tick = stat_start_tick(self_stat);
  if (n > 0 && !boot.empty() && tick && std::strtoll(self_stat.c_str(), nullptr, 10) == h.pid)
    h.process = boot + " " + std::string(ns, static_cast<std::size_t>(n)) + " " + *tick;
  return h;
}

lease_holder lease_holder::from_labels(const std::map<std::string, std::string>& labels) {
  auto get = [&](std::string_view k) {
    auto it = labels.find(std::string(k));
    return it == labels.end() ? std::string() : it->second;
  };
  lease_holder h;
  h.id = get(lease_holder_label);
  h.host = get(lease_host_label);
  h.pid = std::strtoll(get(lease_pid_label).c_str(), nullptr, 10);
  h.started_at = std::strtoll(get(lease_started_label).c_str(), nullptr, 10);
  h.process = get(lease_process_label);
  return h;
}

std::string lease_holder::describe() const {
  return "holder " + (id.empty() ? std::string("(unnamed)") : id) + " on host " +
         (host.empty() ? std::string("(unknown)") : host) + ", pid " + std::to_string(pid) +
         ", since " + (started_at > 0 ? utc(started_at) : std::string("(unknown)"));
}

bool holder_provably_gone(
    const lease_holder& holder, const lease_holder& self,
    const std::function<std::optional<std::string>(std::int64_t)>& start_tick_of) {
  const auto theirs = words(holder.process), ours = words(self.process);
  if (theirs.size() != 3 || ours.size() != 3 || holder.pid <= 0) return false;
  if (theirs[0] != ours[0] || theirs[1] != ours[1]) return false;    // another kernel or namespace
  if (holder.pid == self.pid && theirs[2] == ours[2]) return false;  // this very process
  const auto tick = start_tick_of(holder.pid);
  return !tick || *tick != theirs[2];
}

std::optional<std::string> start_tick_of_pid(std::int64_t pid) {
  const std::string line = read_first_line("/proc/" + std::to_string(pid) + "/stat");
  if (line.empty()) return std::nullopt;
  return stat_start_tick(line);
}

struct instance_lease::state {
  std::optional<client::exec_stream> stream;
  std::uint64_t seq = 0;
  std::mutex m;
  std::condition_variable wake;
  bool stopping = false;
  std::thread renewer;
  bool released = false;
};

instance_lease::instance_lease(const container_engine& engine, const config& c, lease_holder h,
                               std::string id)
    : engine_(engine),
      ttl_(std::chrono::seconds(c.instance_lease_s)),
      holder_(std::move(h)),
      id_(std::move(id)),
      state_(std::make_unique<state>()) {}

instance_lease::~instance_lease() {
  release();
}

// One start's try for the lease, step by step: create it; or, its name taken, look at the
// lease there (waiting out another starter's create or start), and judge its holder:
// expired or provably gone (removed, tried again), or alive (refused).
struct instance_lease::attempt {
  enum class next {
    again,       // tried again (an attempt spent)
    again_free,  // looked at again shortly, no attempt spent (another starter's create)
    done,        // the answer is made: the lease, or nullptr with `error`
  };

  attempt(const container_engine& e, const config& cfg, std::string& err)
      : engine(e), c(cfg), error(err) {}

  const container_engine& engine;
  const config& c;
  std::string& error;
  const lease_holder self = lease_holder::of_this_process();
  const std::string name = lease_name(c);
  const std::int64_t ttl = c.instance_lease_s;
  const std::chrono::steady_clock::time_point creating_patience =
      std::chrono::steady_clock::now() + std::chrono::seconds(ttl);
  std::unique_ptr<instance_lease> lease;

  next once() {
    auto created = engine.create(name, lease_body(c, self), 60s);
    if (created.status == 201) return made(created.body);
    if (created.status != 409) {
      error =
          "the instance lease " + name + " could not be created: " +
          (created.status ? std::to_string(created.status) + " " + created.body : created.error);
      return next::done;
    }
    // The name is taken: by a live holder, a dead one, or another starter just now.
    unsigned status = 0;
    auto seen = inspect_lease(engine, name, status);
    if (!seen) return unseen(status);
    // Made and not started yet: its holder is between its create and its start. Given a
    // lease to start it; still not started then, it is a dead holder's.
    for (int i = 0; seen && seen->created && i < 4 * ttl; ++i) {
      std::this_thread::sleep_for(250ms);
      seen = inspect_lease(engine, name, status);
    }
    if (!seen) return next::again;
    return judge(*seen);
  }

  // The lease container made: started, and live once its first heartbeat is written.
  next made(const std::string& body) {
    simdjson::dom::parser p;
    simdjson::dom::element doc;
    std::string_view id;
    if (p.parse(body).get(doc) != simdjson::SUCCESS ||
        doc["Id"].get_string().get(id) != simdjson::SUCCESS) {
      error = "the instance lease " + name + ": no Id in the engine's answer";
      return next::done;
    }
    std::unique_ptr<instance_lease> made(new instance_lease(engine, c, self, std::string(id)));
    auto started = engine.start(made->id_, 60s);
    std::string why;
    // Removed before it ran (another start took it for a dead one): tried again.
    if (started.status == 404 || started.status == 409) return next::again;
    if (started.status != 204 && started.status != 304) {
      why = "start: " + (started.status ? started.body : started.error);
    } else if (const auto first = made->beat(why); first == beat_result::renewed) {
      lease = std::move(made);
      return next::done;
    } else if (first == beat_result::lost) {
      return next::again;  // likewise, between its start and its first heartbeat
    }
    error = "the instance lease " + name + " could not be made live (" + why + ")";
    return next::done;  // its destructor removes the container
  }

  // The name is taken but names no container this gate shows.
  next unseen(unsigned status) {
    if (status != 404) {
      error = "the instance lease " + name + " exists but cannot be read through this gate (" +
              std::to_string(status) + "): is it another profile's container?";
      return next::done;
    }
    // Removed meanwhile, or another starter's create is still under way (dockerd reserves
    // the name before the container it names can be inspected, for as long as making its
    // layer takes). Looked at again shortly, without spending an attempt, for up to a
    // lease; only then is it counted.
    if (std::chrono::steady_clock::now() < creating_patience) {
      std::this_thread::sleep_for(100ms);
      return next::again_free;
    }
    // Still taken and still unseen after a lease: no create takes that long. It is an
    // object of another owner of the engine (made through another gate, or on the engine
    // directly), which this gate neither shows nor removes: not a lease.
    error = "the instance lease's name " + name +
            " is taken on the engine by a container this gate does not show (another "
            "owner's: made through another gate or on the engine directly); it is not a "
            "lease of instance \"" +
            c.instance + "\", and this sidecar cannot remove it. " +
            "Remove it on the engine (docker rm -f " + name +
            ") or give this sidecar another SANDBOX_INSTANCE";
    return next::done;
  }

  // A lease another holder made: taken over when it has expired or its holder is gone.
  next judge(const seen_lease& seen) {
    const std::string who = seen.holder.describe();
    if (!seen.running) {
      std::cerr << "dockgate-sidecar: the lease of instance " << c.instance << " (" << who
                << ") has expired: its container is not running; taking it over" << std::endl;
      remove_by_id(engine, seen.id);
      return next::again;
    }
    if (holder_provably_gone(seen.holder, self, start_tick_of_pid)) {
      std::cerr << "dockgate-sidecar: the lease of instance " << c.instance << " (" << who
                << ") is taken over: no such process runs on this host any more" << std::endl;
      remove_by_id(engine, seen.id);
      return next::again;
    }
    switch (watch(seen)) {
      case verdict::renewed:
        error = "instance \"" + c.instance + "\" is held by a live sidecar: " + who +
                " (lease container " + name +
                ", renewed while this one watched). Two sidecars must not share an instance: " +
                "give this one its own SANDBOX_INSTANCE, or stop that one first";
        return next::done;
      case verdict::expired:
        std::cerr << "dockgate-sidecar: the lease of instance " << c.instance << " (" << who
                  << ") has expired: not renewed for " << ttl << " s; taking it over" << std::endl;
        remove_by_id(engine, seen.id);
        return next::again;
      case verdict::vanished:
        return next::again;  // gone or stopped meanwhile: looked at again
    }
    return next::again;
  }

  // Its heartbeat watched: renewed while watched, the holder is alive; not renewed for a
  // whole lease, it has expired.
  enum class verdict { expired, renewed, vanished };
  verdict watch(const seen_lease& seen) {
    auto first = read_heartbeat(engine, seen.id);
    if (!first) return verdict::vanished;
    const std::int64_t since = first->mtime.value_or(first->now);
    if (first->now - since < ttl)
      std::cerr << "dockgate-sidecar: instance " << c.instance << " has a lease ("
                << seen.holder.describe() << ", renewed " << first->now - since
                << " s ago): watching it for up to " << ttl - (first->now - since) << " s"
                << std::endl;
    for (auto beat = first;;) {
      if (beat->seq != first->seq || beat->mtime != first->mtime) return verdict::renewed;
      if (beat->now - since >= ttl) return verdict::expired;
      std::this_thread::sleep_for(
          std::chrono::milliseconds(std::min<std::int64_t>(1000, ttl * 200)));
      beat = read_heartbeat(engine, seen.id);
      if (!beat) return verdict::vanished;
    }
  }
};

std::unique_ptr<instance_lease> instance_lease::acquire(const container_engine& engine,
                                                        const config& c, std::string& error) {
  attempt a{engine, c, error};
  for (int tries = 0; tries < 8; ++tries) {
    switch (a.once()) {
      case attempt::next::done:
        return std::move(a.lease);
      case attempt::next::again_free:
        --tries;
        break;
      case attempt::next::again:
        break;
    }
  }
  error = "the instance lease " + a.name +
          " could not be taken: it changed hands while this sidecar tried";
  return nullptr;
}

instance_lease::beat_result instance_lease::beat(std::string& why) {
  auto& st = *state_;
  const auto deadline = client::clock_type::now() + 20s;
  if (!st.stream) {
    // One exec for as long as it lasts: the shell writes each line's number to the
    // heartbeat file and answers "ok". When this process dies, its stdin ends.
    std::string err;
    auto attached = engine_.exec_attach(
        id_,
        {"sh", "-c", "while read -r n; do echo \"$n\" > /tmp/lease-beat || exit 1; echo ok; done"},
        session_user, deadline, &err);
    if (attached) st.stream.emplace(std::move(*attached));
    if (!st.stream) {
      why = err;
      // 404: the lease container is gone (removed by a sidecar that took it over); 409: it
      // is not running, and a starter may take it over at any moment.
      if (err.starts_with("exec create: 404") || err.starts_with("exec create: 409"))
        return beat_result::lost;
      return beat_result::transient;
    }
  }
  const std::string line = std::to_string(++st.seq) + "\n";
  if (!st.stream->write(line, deadline)) {
    st.stream.reset();
    why = "heartbeat write failed";
    return beat_result::transient;
  }
  std::string out;
  while (out.find("ok\n") == std::string::npos) {
    client::exec_stream::read_error e{};
    auto f = st.stream->read(deadline, 4096, e);
    if (!f || f->stream == 2) {
      why = f ? "heartbeat: " + f->data : "heartbeat stream ended";
      st.stream.reset();
      return beat_result::transient;
    }
    out += f->data;
    if (out.size() > 4096) out.erase(0, out.size() - 16);
  }
  return beat_result::renewed;
}

void instance_lease::start_renewal(std::function<void(const std::string&)> on_lost) {
  state_->renewer = std::thread([this, on_lost = std::move(on_lost)] {
    auto& st = *state_;
    const auto period = std::max<std::chrono::seconds>(1s, ttl_ / 3);
    std::unique_lock lock(st.m);
    auto next = std::chrono::steady_clock::now() + period;
    std::string last_problem;
    while (!st.stopping) {
      st.wake.wait_until(lock, next, [&] { return st.stopping; });
      if (st.stopping) break;
      lock.unlock();
      std::string why;
      const auto r = beat(why);
      lock.lock();
      if (r == beat_result::lost) {
        lock.unlock();
        on_lost(why);
        return;
      }
      if (r == beat_result::transient && why != last_problem)
        std::cerr << "dockgate-sidecar: instance lease not renewed (" << why << "); retrying"
                  << std::endl;
      last_problem = r == beat_result::transient ? why : std::string();
      next = std::chrono::steady_clock::now() + (r == beat_result::renewed ? period : 1s);
    }
  });
}

void instance_lease::release() {
  if (!state_ || state_->released) return;
  {
    std::lock_guard g(state_->m);
    state_->stopping = true;
  }
  state_->wake.notify_all();
  if (state_->renewer.joinable()) state_->renewer.join();
  state_->stream.reset();
  remove_by_id(engine_, id_);
  state_->released = true;
}

}  // namespace dockgate::sidecar
