// The isolation report as JSON (isolation.hpp isolation_json; docs/aivory-api.md,
// "GET /sessions/{id}"): each wall as the daemon's record has it ("record") and as the
// session user saw it inside the container ("seen"); a value that could not be read is null
// and named in "unreadable", never guessed.
#include <mutex>

#include "dockgate/client/engine.hpp"
#include "egress/egress_policy.hpp"
#include "sessions/isolation/isolation.hpp"
#include "sessions/session.hpp"

namespace dockgate::sidecar {

namespace {

struct writer {
  const isolation_report& r;
  std::vector<std::string> unreadable;
  std::string out;

  void key(std::string_view k) {
    if (out.back() != '{') out += ',';
    client::append_json_string(out, k);
    out += ':';
  }
  void str(std::string_view k, std::string_view v) {
    key(k);
    client::append_json_string(out, v);
  }
  void num(std::string_view k, std::int64_t v) {
    key(k);
    out += std::to_string(v);
  }
  void flag(std::string_view k, bool v) {
    key(k);
    out += v ? "true" : "false";
  }
  // What the container showed under `seen_key`, or null (and named as unreadable).
  void seen(std::string_view k, const std::string& seen_key, std::string_view what) {
    key(k);
    auto it = r.seen.find(seen_key);
    if (it == r.seen.end()) {
      out += "null";
      unreadable.push_back(std::string(what) + ": not shown inside the container");
      return;
    }
    client::append_json_string(out, it->second);
  }
  void open(std::string_view k) {
    key(k);
    out += '{';
  }
  void close() { out += '}'; }
  void strings(std::string_view k, const std::vector<std::string>& v) {
    key(k);
    out += client::json_string_array(v);
  }
};

void write_identity(writer& w) {
  const auto& rec = w.r.record;
  if (rec.runtime.empty()) {  // a daemon names its default too: none is not guessed
    w.key("runtime");
    w.out += "null";
    w.unreadable.push_back("the runtime: not in the daemon's record");
  } else {
    w.str("runtime", rec.runtime);
  }
  w.seen("kernel", "kernel", "the kernel's release");
  w.open("user");
  w.str("container", rec.user);
  w.seen("uid", "status.Uid", "the session user's uid");
  w.seen("gid", "status.Gid", "the session user's gid");
  w.seen("groups", "status.Groups", "the session user's groups");
  w.close();
  w.open("capabilities");
  w.strings("cap_add", rec.cap_add);
  w.strings("cap_drop", rec.cap_drop);
  w.flag("privileged", rec.privileged);
  w.seen("effective", "status.CapEff", "the effective capabilities");
  w.seen("bounding", "status.CapBnd", "the bounding set");
  w.seen("permitted", "status.CapPrm", "the permitted capabilities");
  w.seen("ambient", "status.CapAmb", "the ambient capabilities");
  w.close();
  w.open("no_new_privileges");
  w.flag("record", rec.no_new_privileges);
  w.seen("seen", "status.NoNewPrivs", "NoNewPrivs");
  w.close();
  w.open("seccomp");
  w.str("record", rec.seccomp);
  w.str("profile", rec.seccomp_profile);
  w.seen("mode", "status.Seccomp", "the seccomp mode");
  w.seen("filters", "status.Seccomp_filters", "the seccomp filters");
  w.close();
  w.open("read_only_root");
  w.flag("record", rec.read_only_root);
  w.seen("seen", "root.ro", "the root file system's read-only flag");
  w.close();
}

void write_tmpfs(writer& w) {
  w.key("tmpfs");
  w.out += '[';
  bool first = true;
  for (const auto& [path, options] : w.r.record.tmpfs) {
    w.out += first ? "{" : ",{";
    first = false;
    w.str("path", path);
    w.str("options", options);
    // "<type> <size in bytes> <options>" as /proc/self/mounts and statvfs show it.
    w.seen("seen", "mount." + path, "the mount at " + path);
    w.close();
  }
  w.out += ']';
}

void write_limits(writer& w) {
  const auto& rec = w.r.record;
  auto limit = [&](std::string_view k, std::int64_t record, const std::string& seen_key,
                   std::string_view what) {
    w.open(k);
    w.num("record", record);
    if (!seen_key.empty()) w.seen("seen", seen_key, what);
    w.close();
  };
  w.open("limits");
  limit("memory", rec.memory, "memory", "the memory cgroup's limit");
  limit("memory_swap", rec.memory_swap, "", "");
  limit("nano_cpus", rec.nano_cpus, "cpu", "the CPU cgroup's quota and period");
  limit("pids", rec.pids, "pids", "the pids cgroup's limit");
  w.open("nofile");
  w.key("record");
  w.out += rec.nofile ? "[" + std::to_string(rec.nofile->first) + "," +
                            std::to_string(rec.nofile->second) + "]"
                      : std::string("null");
  w.seen("seen", "nofile", "RLIMIT_NOFILE");
  w.close();
  w.close();
}

void write_network(writer& w, const config& c) {
  w.open("network");
  w.str("mode", w.r.record.network);
  w.seen("interfaces", "net", "the network interfaces");
  w.key("egress_allowlist");
  // The list the egress proxy reads for this session's network (its file, read back when
  // the container was proved); null without an egress network, or when it could not be
  // read (said so: the proxy then refuses every name).
  const auto read = w.r.egress_list ? parse_egress_policy_text(*w.r.egress_list) : std::nullopt;
  if (c.network != "allowlist" || w.r.record.network == "none" || !read) {
    w.out += "null";
    if (c.network == "allowlist" && w.r.record.network != "none")
      w.unreadable.push_back("the egress proxy's list for its network: not read");
  } else {
    const egress_rules& rules = *read;
    w.out += '[';
    for (std::size_t i = 0; i < rules.size(); ++i) {
      w.out += i ? ",{" : "{";
      w.str("action", rules[i].allow ? "allow" : "deny");
      w.str("target", rules[i].target);
      w.close();
    }
    w.out += ']';
  }
  w.close();
}

void write_workspace(writer& w, const session& s) {
  w.open("workspace");
  // fuse: the gate binds the live mount the label names; store: a tmpfs archived to and
  // restored from the session's storage; tmpfs: a tmpfs that ends with the session.
  const bool fuse = !w.r.record.workspace_label.empty();
  w.str("backing", fuse ? "fuse" : s.storage ? "store" : "tmpfs");
  w.key("id");
  if (fuse)
    client::append_json_string(w.out, w.r.record.workspace_label);
  else if (s.storage)
    client::append_json_string(w.out, s.storage->archive_key(s.archive_key));
  else
    w.out += "null";
  w.seen("seen", "mount./workspace", "the mount at /workspace");
  w.close();
}

void write_self_test(writer& w) {
  w.open("self_test");
  w.flag("passed", w.r.failures.empty());
  for (const char* wall : {"root_write", "raw_inet", "raw_packet", "mount", "ptrace"})
    w.seen(wall, std::string("deny.") + wall, std::string("the self-test's ") + wall);
  w.strings("failures", w.r.failures);
  w.close();
}

}  // namespace

std::string isolation_json(const session& s, const config& c) {
  std::shared_ptr<const isolation_report> report;
  {
    std::lock_guard g(s.facts_mutex);
    report = s.isolation;
  }
  if (!report)
    return "{\"read\":false,\"unreadable\":[\"not read: the session has no container now "
           "(it is dormant), or its sidecar runs without the self-test\"]}";
  writer w{*report, {}, "{"};
  w.flag("read", report->record.read);
  w.str("read_at", report->read_at);
  w.num("read_time",
        std::chrono::duration_cast<std::chrono::seconds>(report->read_time.time_since_epoch())
            .count());
  w.num("cost_us", report->cost.count());
  write_identity(w);
  write_tmpfs(w);
  write_limits(w);
  write_network(w, c);
  write_workspace(w, s);
  write_self_test(w);
  if (!report->record.read) w.unreadable.push_back("the daemon's record: not readable");
  w.strings("unreadable", w.unreadable);
  return w.out + "}";
}

}  // namespace dockgate::sidecar
