#include "dockgate/proxy/options.hpp"

#include <algorithm>
#include <charconv>
#include <optional>
#include <string>

namespace dockgate::proxy {

namespace {

template <class T>
bool parse_uint(std::string_view s, T& out, int base = 10) {
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), out, base);
  return ec == std::errc{} && end == s.data() + s.size() && !s.empty();
}

std::optional<std::chrono::milliseconds> parse_seconds(std::string_view s) {
  unsigned v = 0;
  if (!parse_uint(s, v)) return std::nullopt;
  return std::chrono::milliseconds(std::chrono::seconds(v));
}

// --upstream tls://: the docker CLI's TLS flags, prefixed (its own --tlscacert, --tlscert,
// --tlskey and DOCKER_CERT_PATH), kept in one block.
bool upstream_tls_flag(const std::string& flag, const std::string& value, serve_options& serve,
                       std::string& cert_path) {
  if (flag == "--upstream-tlscacert")
    serve.upstream_tlscacert = value;
  else if (flag == "--upstream-tlscert")
    serve.upstream_tlscert = value;
  else if (flag == "--upstream-tlskey")
    serve.upstream_tlskey = value;
  else if (flag == "--upstream-cert-path")
    cert_path = value;
  else
    return false;
  return true;
}

// A tls:// upstream always verifies the daemon (a CA is required: there is no
// --tls-without-verify), and presents a client certificate only with its key.
std::optional<std::string> finish_upstream_tls(serve_options& serve, const std::string& cert_path) {
  const bool tls = serve.upstream.scheme == common::endpoint::kind::tls;
  const bool any = !cert_path.empty() || !serve.upstream_tlscacert.empty() ||
                   !serve.upstream_tlscert.empty() || !serve.upstream_tlskey.empty();
  if (!tls) {
    if (any) return "--upstream-tls* and --upstream-cert-path need --upstream tls://host:port";
    return std::nullopt;
  }
  if (!cert_path.empty()) {
    const std::string dir = cert_path.back() == '/' ? cert_path : cert_path + "/";
    if (serve.upstream_tlscacert.empty()) serve.upstream_tlscacert = dir + "ca.pem";
    if (serve.upstream_tlscert.empty()) serve.upstream_tlscert = dir + "cert.pem";
    if (serve.upstream_tlskey.empty()) serve.upstream_tlskey = dir + "key.pem";
  }
  if (serve.upstream_tlscacert.empty())
    return "--upstream tls:// needs --upstream-tlscacert (or --upstream-cert-path): the daemon's "
           "certificate is always verified";
  if (serve.upstream_tlscert.empty() != serve.upstream_tlskey.empty())
    return "--upstream-tlscert and --upstream-tlskey go together";
  return std::nullopt;
}

// HOST:PORT, HOST an address or name, [IPv6] in brackets.
bool split_host_port(std::string_view s, std::string& host, std::string& port) {
  const auto colon = s.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == s.size()) return false;
  host = s.substr(0, colon);
  port = s.substr(colon + 1);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  unsigned p = 0;
  return parse_uint(port, p) && p > 0 && p < 65536;
}

}  // namespace

std::optional<audit_target> parse_audit_target(const std::string& spec, std::string& error) {
  audit_target t;
  t.spec = spec;
  const std::string_view s = spec;
  if (s == "stdout") return t;
  if (s == "journald") {
    t.type = audit_target::kind::journald;
    return t;
  }
  if (s.starts_with("file:")) {
    t.type = audit_target::kind::file;
    t.path = s.substr(5);
    if (t.path.empty() || t.path.front() != '/') {
      error = "file:PATH needs an absolute path";
      return std::nullopt;
    }
    return t;
  }
  if (s == "syslog" || s.starts_with("syslog:")) {
    t.type = audit_target::kind::syslog;
    const std::string_view addr = s == "syslog" ? std::string_view("/dev/log") : s.substr(7);
    if (addr.starts_with("/")) {
      t.path = addr;
      return t;
    }
    const bool udp = addr.starts_with("udp://"), tcp = addr.starts_with("tcp://");
    if ((udp || tcp) && split_host_port(addr.substr(6), t.host, t.port)) {
      t.via = udp ? audit_target::transport::udp : audit_target::transport::tcp;
      return t;
    }
    error = "syslog:ADDR is /PATH (unix datagram), udp://HOST:PORT or tcp://HOST:PORT";
    return std::nullopt;
  }
  error = "one of stdout, file:PATH, journald, syslog[:ADDR]";
  return std::nullopt;
}

std::string usage() {
  return R"(usage:
  dockgate-proxy [serve] --upstream URL --listen URL [--listen URL ...] --policy FILE [options]
  dockgate-proxy check --policy FILE
  dockgate-proxy healthcheck URL   (exit 0 if the --metrics listener at URL says the daemon answers)
  dockgate-proxy explain --policy FILE [--profile NAME] METHOD TARGET [BODY_FILE]
  dockgate-proxy learn --policy FILE --audit FILE [--audit FILE ...] [--profile NAME] [--name NAME] [-o OUT]

serve options:
  --upstream URL            the Docker daemon: unix:///var/run/docker.sock, tcp://host:port,
                            or tls://host:2376 (a remote engine behind dockerd --tlsverify)
  --listen URL              where clients connect: unix:///path or tcp://127.0.0.1:2375 (repeatable)
  --policy FILE             policy file (JSON); see compose/policies/. Without it, the
                            Tecnativa docker-socket-proxy variables of the environment
                            (CONTAINERS=1, POST=0, ...) make the profile "tecnativa"
  --socket-mode OCTAL       mode of unix listener sockets (default 0660)
  --socket-owner UID[:GID]  owner of unix listener sockets (numeric)
  --shutdown-timeout SECS   on SIGTERM, how long in-flight requests may finish (default 10)
  --head-timeout SECS       idle keep-alive / slow request head limit (default 60)
  --body-timeout SECS       idle limit between reads of a request body (default 60)
  --metrics URL             Prometheus metrics (GET /metrics) and GET /healthz (does the
                            daemon answer?) on their own listener, e.g. tcp://127.0.0.1:9323
  --log-level LEVEL         trace, debug, info, warn, error (default info)
  --max-connections N       serve at most N client connections (default: as many as the
                            descriptor limit allows, raised to its hard limit at start)
  --threads N               threads serving connections (default: one per CPU the process
                            may run on, within its cgroup's CPU quota, at most 64); a
                            connection stays on one thread
  --allow-insecure-tcp      allow plaintext --listen tcp:// (or tls:// without --tls-client-ca)
                            on a non-loopback address
  --tls-cert FILE           server certificate (PEM) for tls:// listeners
  --tls-key FILE            its private key (PEM)
  --tls-client-ca FILE      require client certificates chaining to this CA; their subject
                            (RFC 2253) selects the profile through clients[].tls_subject
  --upstream-tlscacert FILE  tls:// upstream: the CA the daemon's certificate must chain to
  --upstream-tlscert FILE    the client certificate the gate presents to the daemon
  --upstream-tlskey FILE     its private key
  --upstream-cert-path DIR   ca.pem, cert.pem and key.pem in DIR (DOCKER_CERT_PATH's layout),
                            for any of the three not given on its own
  --audit SINK              where audit lines go (repeatable; default stdout): stdout,
                            file:PATH, journald, syslog (/dev/log), syslog:/PATH,
                            syslog:udp://HOST:PORT, syslog:tcp://HOST:PORT (RFC 5424)
  --audit-mode MODE         batch (default: written about once a second) or blocking (a
                            request is forwarded only once its line is written to every sink)
  --audit-max-bytes N       file sinks: rotate past N bytes (default 104857600; 0: never)
  --audit-keep N            file sinks: rotated files kept, PATH.1 newest (default 5)

explain prints what the profile decides for one request, and the body it would forward.

check validates a policy file and prints every error at once (exit status 1 if any).

learn reads audit lines (a profile with "record": "fields", e.g. compose/policies/learn.json)
and writes the narrowest policy file that allows what they show: the operations, image
repositories, body values (allow lists, max clamps), binds, networks and volumes seen, each
with where it came from. --policy is the policy the gate recorded the lines under: a line
is read only if it matches docs/audit.schema.json, names one of its profiles, and is one
that profile could have let through. --profile reads only that profile's lines; --name
names the result (default: the --profile, else "learned"). What the security invariants
forbid is never learned: it is printed on stderr as "seen and refused" and kept in the
profile's comment; a line that is no record the gate could have written is printed with
its number and why. Exit status 1 when no line was learned (nothing is written).
)";
}

namespace {
std::variant<command, parse_error> parse_explain(const std::vector<std::string>& args) {
  explain_options e;
  std::vector<std::string> positional;
  for (std::size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--policy" || args[i] == "--profile") {
      if (i + 1 >= args.size()) return parse_error{args[i] + ": missing value"};
      (args[i] == "--policy" ? e.policy_file : e.profile) = args[i + 1];
      ++i;
    } else if (args[i].starts_with("--")) {
      return parse_error{"explain: unknown flag " + args[i]};
    } else {
      positional.push_back(args[i]);
    }
  }
  // Without --policy: the Tecnativa variables of the environment, as for serve.
  if (positional.size() < 2 || positional.size() > 3)
    return parse_error{"explain: METHOD TARGET [BODY_FILE]"};
  e.method = positional[0];
  e.target = positional[1];
  if (positional.size() == 3) e.body_file = positional[2];
  return command{e};
}

std::variant<command, parse_error> parse_learn(const std::vector<std::string>& args) {
  learn_command l;
  for (std::size_t i = 1; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") return command{help_request{usage()}};
    std::string* into = a == "--audit"     ? nullptr
                        : a == "--policy"  ? &l.policy_file
                        : a == "--profile" ? &l.profile
                        : a == "--name"    ? &l.name
                        : a == "-o"        ? &l.output
                                           : nullptr;
    if (!into && a != "--audit") return parse_error{"learn: unknown argument " + a};
    if (i + 1 >= args.size()) return parse_error{a + ": missing value"};
    if (into)
      *into = args[++i];
    else
      l.audit_files.push_back(args[++i]);
  }
  if (l.audit_files.empty()) return parse_error{"learn: at least one --audit FILE"};
  if (l.policy_file.empty())
    return parse_error{
        "learn: --policy FILE, the policy the audit lines were recorded under (e.g. "
        "compose/policies/learn.json)"};
  if (l.name.empty()) l.name = l.profile.empty() ? "learned" : l.profile;
  return command{l};
}
}  // namespace

std::variant<command, parse_error> parse_command_line(const std::vector<std::string>& args) {
  if (!args.empty() && args[0] == "explain") return parse_explain(args);
  if (!args.empty() && args[0] == "learn") return parse_learn(args);
  std::size_t i = 0;
  bool check = false;
  if (!args.empty() && (args[0] == "serve" || args[0] == "check")) {
    check = args[0] == "check";
    i = 1;
  }
  serve_options serve;
  bool have_upstream = false;
  std::string upstream_cert_path;
  for (; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") return command{help_request{usage()}};
    if (a == "--allow-insecure-tcp") {
      serve.allow_insecure_tcp = true;
      continue;
    }
    auto value = [&]() -> std::optional<std::string> {
      if (i + 1 >= args.size()) return std::nullopt;
      return args[++i];
    };
    auto v = value();
    if (!v) return parse_error{a + ": missing value (or unknown flag)"};
    std::string error;
    if (a == "--policy") {
      if (!serve.policy_file.empty()) return parse_error{"--policy given twice"};
      serve.policy_file = *v;
    } else if (check) {
      return parse_error{"check takes only --policy, not " + a};
    } else if (a == "--upstream") {
      if (have_upstream) return parse_error{"--upstream given twice"};
      auto ep = common::parse_endpoint(*v, &error);
      if (!ep) return parse_error{"--upstream " + *v + ": " + error};
      serve.upstream = *ep;
      have_upstream = true;
    } else if (a == "--listen") {
      auto ep = common::parse_endpoint(*v, &error);
      if (!ep) return parse_error{"--listen " + *v + ": " + error};
      serve.listen.push_back(*ep);
    } else if (a == "--socket-mode") {
      unsigned mode = 0;
      if (!parse_uint(*v, mode, 8) || mode > 0777)
        return parse_error{"--socket-mode: octal mode like 0660"};
      serve.socket_mode = static_cast<mode_t>(mode);
    } else if (a == "--socket-owner") {
      auto colon = v->find(':');
      uid_t uid = 0;
      if (!parse_uint(std::string_view(*v).substr(0, colon), uid))
        return parse_error{"--socket-owner: numeric UID[:GID]"};
      serve.socket_uid = uid;
      if (colon != std::string::npos) {
        gid_t gid = 0;
        if (!parse_uint(std::string_view(*v).substr(colon + 1), gid))
          return parse_error{"--socket-owner: numeric UID[:GID]"};
        serve.socket_gid = gid;
      }
    } else if (a == "--shutdown-timeout" || a == "--head-timeout" || a == "--body-timeout") {
      auto d = parse_seconds(*v);
      if (!d) return parse_error{a + ": whole seconds"};
      (a == "--shutdown-timeout" ? serve.shutdown_timeout
       : a == "--head-timeout"   ? serve.head_timeout
                                 : serve.body_timeout) = *d;
    } else if (a == "--max-connections") {
      const auto n = std::strtoull(v->c_str(), nullptr, 10);
      if (n == 0 || v->find_first_not_of("0123456789") != std::string::npos)
        return parse_error{a + ": a positive number"};
      serve.max_connections = static_cast<std::size_t>(n);
    } else if (a == "--threads") {
      const auto n = std::strtoull(v->c_str(), nullptr, 10);
      if (n == 0 || n > 64 || v->find_first_not_of("0123456789") != std::string::npos)
        return parse_error{a + ": a number from 1 to 64"};
      serve.threads = static_cast<std::size_t>(n);
    } else if (a == "--metrics") {
      auto ep = common::parse_endpoint(*v, &error);
      if (!ep || ep->scheme == common::endpoint::kind::tls)
        return parse_error{"--metrics " + *v + ": unix:// or tcp:// " + error};
      serve.metrics = *ep;
    } else if (a == "--audit") {
      auto t = parse_audit_target(*v, error);
      if (!t) return parse_error{"--audit " + *v + ": " + error};
      serve.audit.push_back(std::move(*t));
    } else if (a == "--audit-mode") {
      if (*v != "batch" && *v != "blocking") return parse_error{"--audit-mode: batch or blocking"};
      serve.audit_blocking = *v == "blocking";
    } else if (a == "--audit-max-bytes") {
      if (!parse_uint(*v, serve.audit_max_bytes)) return parse_error{a + ": a number of bytes"};
    } else if (a == "--audit-keep") {
      if (!parse_uint(*v, serve.audit_keep) || serve.audit_keep == 0 || serve.audit_keep > 1000)
        return parse_error{a + ": 1 to 1000"};
    } else if (a == "--log-level") {
      serve.log_level = *v;
    } else if (a == "--tls-cert") {
      serve.tls_cert = *v;
    } else if (a == "--tls-key") {
      serve.tls_key = *v;
    } else if (a == "--tls-client-ca") {
      serve.tls_client_ca = *v;
    } else if (upstream_tls_flag(a, *v, serve, upstream_cert_path)) {
      // --upstream-tls*: upstream_tls_flag, below
    } else {
      return parse_error{"unknown flag " + a};
    }
  }
  // Without --policy: Tecnativa's docker-socket-proxy variables from the environment.
  if (check) return command{check_options{serve.policy_file}};
  if (!have_upstream) return parse_error{"--upstream URL is required"};
  if (auto e = finish_upstream_tls(serve, upstream_cert_path)) return parse_error{*e};
  const bool any_tls = std::any_of(serve.listen.begin(), serve.listen.end(), [](const auto& l) {
    return l.scheme == common::endpoint::kind::tls;
  });
  if (any_tls && (serve.tls_cert.empty() || serve.tls_key.empty()))
    return parse_error{"tls:// listeners need --tls-cert and --tls-key"};
  if (serve.listen.empty()) return parse_error{"at least one --listen URL is required"};
  if (serve.audit.empty()) serve.audit.push_back(audit_target{});  // stdout
  return command{serve};
}

}  // namespace dockgate::proxy
