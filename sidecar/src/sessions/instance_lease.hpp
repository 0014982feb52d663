#pragma once
// The instance lease: one live sidecar per SANDBOX_INSTANCE on an engine.
//
// Invariant: a sidecar adopts, reaps or removes the containers of its instance only while
// it holds the instance's lease, and two live sidecars never hold it at once. A second
// sidecar started with the same instance on the same engine would otherwise adopt the
// first one's live sessions and end them (its stop, its reaper, its pool clean-up).
//
// The engine is the only state two such sidecars share, and the sidecar reaches it only
// through the gate's sandbox profile, so the lease is made of what that profile allows:
//   - the lease is a container named `dockgate-instance-<instance>-<tag>` (lease_name):
//     creating a name is atomic on the engine (the second create of a name is a 409), so
//     at most one exists. Container names are one namespace for every owner of the
//     engine, and the gate shows or removes only its own: a name another owner could
//     guess could be taken first by a container this sidecar can neither see nor remove,
//     and deny it service. So the tag is a keyed hash of the instance under
//     SANDBOX_API_KEY (what every sidecar of the instance has and no other owner does);
//     without a key (SANDBOX_ALLOW_NO_AUTH) the name is the plain
//     `dockgate-instance-<instance>`. A name found taken by an object the gate does not
//     show, for longer than a create takes, is refused with that object named and what
//     to do, never mistaken for a lease;
//     its labels name its holder (a random holder ID, host, PID, start time, and what
//     makes the process unique on its kernel: boot ID, PID namespace, start tick);
//   - labels cannot change, so renewal is a heartbeat inside it: the holder keeps one exec
//     open in the container (stdin attached) and writes a line to it every third of the
//     lease; the exec's shell writes the line's sequence number to /tmp/lease-beat. Only
//     a live holder writes: when its process dies, its end of the stream closes and the
//     shell reads EOF and exits;
//   - the lease is live while its container runs and its heartbeat is younger than
//     SANDBOX_INSTANCE_LEASE_S, both read from inside the container on the engine's
//     own clock (`date` and the file's mtime), so no two hosts' clocks are compared;
//   - a starting sidecar that finds a lease watches its heartbeat: renewed while it
//     watches, the holder is alive and the start is refused (exit 1, the holder named);
//     not renewed for a whole lease, or its container stopped, it has expired and is
//     removed by its container ID (never by name: a lease another starter made meanwhile
//     is never removed), and the create is tried again. A lease created and not started
//     yet is another starter's in progress: it is given a lease to start. A holder that
//     is provably gone — same kernel and PID namespace as the starter, and no process
//     with its PID and start tick — is taken over at once;
//   - a holder whose renewal finds its lease container gone or stopped has lost the
//     lease (another sidecar may hold its sessions now): it exits at once, touching
//     nothing, as a SIGKILL would.
// A holder cut off from the engine for longer than a lease can be superseded; it learns
// so at its next renewal and exits. A clean stop removes the lease last.

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "dockgate/client/engine.hpp"
#include "dockgate/sidecar/config.hpp"
#include "engine/container_engine.hpp"

namespace dockgate::sidecar {

inline constexpr std::string_view lease_prefix = "dockgate-instance-";
inline constexpr std::string_view lease_label = "sandbox.lease";  // the instance
inline constexpr std::string_view lease_holder_label = "sandbox.lease.holder";
inline constexpr std::string_view lease_host_label = "sandbox.lease.host";
inline constexpr std::string_view lease_pid_label = "sandbox.lease.pid";
inline constexpr std::string_view lease_started_label = "sandbox.lease.started_at";
inline constexpr std::string_view lease_process_label = "sandbox.lease.process";

// The lease container's name for `c.instance`: "dockgate-instance-<instance>-<16 hex>",
// the hex the first 64 bits of HMAC-SHA256(SANDBOX_API_KEY, "dockgate-instance-lease\n" +
// instance); "dockgate-instance-<instance>" when there is no key.
std::string lease_name(const config& c);

// Who holds a lease, as its labels say.
struct lease_holder {
  std::string id;    // random, this process's alone
  std::string host;  // gethostname()
  std::int64_t pid = 0;
  std::int64_t started_at = 0;  // Unix seconds
  // "<boot ID> <PID namespace> <start tick>": the process among all of its kernel's.
  std::string process;

  static lease_holder of_this_process();
  static lease_holder from_labels(const std::map<std::string, std::string>& labels);
  std::string describe() const;  // for the refusal: holder, host, pid, since
};

// Whether `holder` is provably not running: it ran on this kernel, in this PID
// namespace, and the PID it named is free or another process's (another start tick).
// False whenever that cannot be known (another host or namespace, an unreadable label).
// `start_tick_of(pid)`: the start tick of that PID here, nullopt if there is none.
bool holder_provably_gone(
    const lease_holder& holder, const lease_holder& self,
    const std::function<std::optional<std::string>(std::int64_t)>& start_tick_of);
std::optional<std::string> start_tick_of_pid(std::int64_t pid);  // from /proc

class instance_lease {
 public:
  // Takes the lease of `c.instance` (waiting at most one lease for a silent holder to
  // expire); nullptr with `error` set when another live sidecar holds it or the engine
  // could not make it. `engine` outlives the lease.
  static std::unique_ptr<instance_lease> acquire(const container_engine& engine, const config& c,
                                                 std::string& error);
  ~instance_lease();
  // Renews it on a thread of its own until release(); `on_lost` is called (on that
  // thread) when it is found lost.
  void start_renewal(std::function<void(const std::string& why)> on_lost);
  // Stops renewing and removes the lease container.
  void release();
  const lease_holder& holder() const { return holder_; }
  const std::string& container_id() const { return id_; }

 private:
  struct state;
  struct attempt;  // acquire()'s steps (instance_lease.cpp)
  instance_lease(const container_engine& engine, const config& c, lease_holder h, std::string id);
  enum class beat_result { renewed, transient, lost };
  beat_result beat(std::string& why);

  const container_engine& engine_;
  std::chrono::seconds ttl_;
  lease_holder holder_;
  std::string id_;
  std::unique_ptr<state> state_;
};

}  // namespace dockgate::sidecar
