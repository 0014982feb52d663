#pragma once
// tls:// upstreams: a remote engine as `dockerd --tlsverify` serves it (:2376). The gate
// verifies the daemon's certificate (the CA, and the name in --upstream) and presents its
// own client certificate; the request path speaks plaintext to a socketpair that a relay
// pumps through the TLS stream (upstream_socket.hpp), as the TLS listeners do on the
// client's side (tls_front.hpp).

#include <boost/asio/ssl/context.hpp>
#include <chrono>
#include <memory>
#include <string>

#include "context.hpp"
#include "upstream_socket.hpp"

namespace dockgate::proxy {

struct upstream_tls_config {
  explicit upstream_tls_config(net::ssl::context c) : context(std::move(c)) {}
  net::ssl::context context;
  std::string server_name;  // the host of --upstream: verified, and sent as SNI if a name
  bool server_is_ip = false;
};

// From --upstream-tlscacert, --upstream-tlscert, --upstream-tlskey (files root controls).
// Throws with a message naming the flag and the file on anything wrong.
std::unique_ptr<upstream_tls_config> make_upstream_tls(const serve_options& options);

// Connects to ctx.upstream, handshakes within `timeout` (the daemon's certificate verified
// against the CA and the server name) and puts the plaintext end of the relay into `into`.
// Returns why not (for the log), or an empty string.
net::awaitable<std::string> connect_tls_upstream(proxy_context& ctx, upstream_socket& into,
                                                 std::chrono::steady_clock::duration timeout);

}  // namespace dockgate::proxy
