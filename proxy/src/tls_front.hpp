#pragma once
// TLS listeners: TLS is terminated here and the plaintext handed to an ordinary
// connection through a socketpair, so that one request path serves every listener.

#include <boost/asio/ssl/context.hpp>
#include <memory>

#include "context.hpp"

namespace dockgate::proxy {

// The server context from the options: certificate, key, and (when given) the client CA,
// with client certificates then required. Throws with a message on bad files.
std::unique_ptr<net::ssl::context> make_tls_context(const serve_options& options);

// Handshake (under the head timeout), learn the client's certificate subject, then pump
// bytes between the TLS stream and a connection serving the plaintext end. Runs on the
// thread of `ctx`; `slot` (taken at accept) passes to the connection.
net::awaitable<void> serve_tls(proxy_context& ctx, net::ssl::context& tls, protocol::socket socket,
                               connection_slot slot);

}  // namespace dockgate::proxy
