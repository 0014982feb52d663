#pragma once
// Command line of dockgate-proxy.

#include <sys/types.h>

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::proxy {

// --audit SINK: where audit lines go (docs/operating.md, "Audit sinks").
struct audit_target {
  enum class kind { standard_output, file, journald, syslog };
  kind type = kind::standard_output;
  std::string path;  // file: the file; syslog over a unix datagram socket: the socket
  enum class transport { unix_datagram, udp, tcp };
  transport via = transport::unix_datagram;  // syslog
  std::string host, port;                    // syslog over udp or tcp
  std::string spec;                          // as given, for messages
};

struct serve_options {
  common::endpoint upstream;
  std::vector<common::endpoint> listen;
  std::string policy_file;
  mode_t socket_mode = 0660;        // unix listeners
  std::optional<uid_t> socket_uid;  // unix listeners: chown
  std::optional<gid_t> socket_gid;
  std::chrono::milliseconds shutdown_timeout{10'000};
  std::chrono::milliseconds head_timeout{60'000};  // idle keep-alive and slow heads
  std::chrono::milliseconds body_timeout{60'000};  // between request body reads
  std::string log_level = "info";
  // Plaintext TCP on a non-loopback address hands the daemon to the network: only with
  // this explicit opt-in.
  bool allow_insecure_tcp = false;
  // --max-connections N: at most this many (0: as many as the descriptor limit allows).
  std::size_t max_connections = 0;
  // --threads N: threads serving connections, each its own event loop (0: one per CPU the
  // process may run on, within its cgroup's CPU quota: thread_count.hpp).
  std::size_t threads = 0;
  // --metrics URL: Prometheus metrics (GET /metrics) and a health check that asks the
  // daemon (GET /healthz) on a listener of their own, never on a gate listener.
  std::optional<common::endpoint> metrics;
  // tls:// listeners: server certificate and key (PEM), and the CA that client
  // certificates must chain to (then a client certificate is required, and its subject
  // is the client's identity for profile selection).
  std::string tls_cert;
  std::string tls_key;
  std::string tls_client_ca;
  // --upstream tls://host:port (a remote engine, as dockerd --tlsverify serves it): the CA
  // the daemon's certificate must chain to, and the client certificate and key the gate
  // presents, in the docker CLI's words (--tlscacert, --tlscert, --tlskey); each defaults
  // to ca.pem, cert.pem, key.pem under --upstream-cert-path (DOCKER_CERT_PATH's layout).
  std::string upstream_tlscacert;
  std::string upstream_tlscert;
  std::string upstream_tlskey;
  // --audit (repeatable; none: stdout), --audit-mode, and file sinks' size rotation.
  std::vector<audit_target> audit;
  bool audit_blocking = false;                   // --audit-mode blocking
  std::uint64_t audit_max_bytes = 100ull << 20;  // --audit-max-bytes (0: never rotate)
  unsigned audit_keep = 5;                       // --audit-keep: rotated files kept
};

// Parses one --audit value: stdout, file:PATH, journald, syslog, syslog:/PATH,
// syslog:udp://HOST:PORT, syslog:tcp://HOST:PORT.
std::optional<audit_target> parse_audit_target(const std::string& spec, std::string& error);

struct check_options {
  std::string policy_file;
};

struct explain_options {
  std::string policy_file;
  std::string profile;  // empty: the default profile
  std::string method;
  std::string target;
  std::string body_file;  // optional
};

// `learn`: the narrowest profile for what audit lines show (docs/policy.md, "Learning a
// profile").
struct learn_command {
  std::vector<std::string> audit_files;  // --audit FILE, repeatable, at least one
  std::string policy_file;               // --policy FILE: the policy the lines were recorded under
  std::string profile;                   // --profile NAME: lines of that profile only
  std::string name;    // --name NAME: the learned profile's (default: NAME or "learned")
  std::string output;  // -o FILE; empty: stdout
};

struct help_request {
  std::string text;
};

using command =
    std::variant<serve_options, check_options, explain_options, learn_command, help_request>;

struct parse_error {
  std::string message;
};

std::variant<command, parse_error> parse_command_line(const std::vector<std::string>& args);

std::string usage();

}  // namespace dockgate::proxy
