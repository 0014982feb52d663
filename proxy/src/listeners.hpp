#pragma once
// The gate's listeners: unix sockets (created with a restrictive umask, then the asked-for
// owner and mode), TCP and TLS (only on loopback, with client certificates, or when the
// operator insists), or sockets systemd opened for the process (socket activation).

#include <sys/types.h>

#include <boost/asio/basic_socket_acceptor.hpp>
#include <boost/asio/ssl/context.hpp>
#include <string>

#include "dockgate/common/endpoint.hpp"
#include "dockgate/policy/policy_file.hpp"
#include "dockgate/proxy/audit.hpp"
#include "dockgate/proxy/options.hpp"
#include "net.hpp"

namespace dockgate::proxy {

using acceptor = net::basic_socket_acceptor<protocol>;

struct listener {
  common::endpoint address;
  acceptor socket;
  net::ssl::context* tls = nullptr;  // tls:// listeners
  // unix listeners: the socket file this process created, so that shutdown removes that
  // file and never one another process has bound at the same path since.
  dev_t socket_dev = 0;
  ino_t socket_ino = 0;
};

// The address of an endpoint (a unix socket path, or a numeric host and port).
protocol::endpoint resolve(net::io_context& ioc, const common::endpoint& ep);

// Opens and binds l.address (not listening yet), or adopts systemd's socket for it. Throws
// with a message when the address may not or cannot be used.
void open_listener(listener& l, net::io_context& ioc, const serve_options& opts);
// Listens on a listener open_listener made. The gate listens only once every listener
// (and the metrics one) is open: a start refused for any of them never accepted a
// connection on another (a client could otherwise connect, and wait on a gate that exits).
void start_listening(listener& l);

// Identity of the peer, for the audit line and profile selection.
// `who` gets the same as the audit line's client object (with the process name).
std::string peer_identity(protocol::socket& s, bool is_unix, policy::client_identity& identity,
                          audit_client& who);

}  // namespace dockgate::proxy
