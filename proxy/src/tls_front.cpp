// TLS termination in front of the request path.
//
// Invariant: a client's TLS identity is the subject of a certificate the configured CA
// verified during this handshake; without a client CA, no subject is ever reported. The
// key, certificate and CA come from files only root (or the gate's user) can change.
#include "tls_front.hpp"

#include <netdb.h>
#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/ssl/ssl_stream.hpp>
#include <cstdlib>
#include <stdexcept>

#include "connection.hpp"
#include "dockgate/common/host_path.hpp"

namespace dockgate::proxy {

using namespace net::experimental::awaitable_operators;

namespace {

std::string subject_rfc2253(SSL* ssl) {
  if (SSL_get_verify_result(ssl) != X509_V_OK) return {};
  X509* cert = SSL_get1_peer_certificate(ssl);
  if (!cert) return {};
  std::string out;
  if (BIO* bio = BIO_new(BIO_s_mem())) {
    if (X509_NAME_print_ex(bio, X509_get_subject_name(cert), 0, XN_FLAG_RFC2253) >= 0) {
      char* data = nullptr;
      const long n = BIO_get_mem_data(bio, &data);
      if (n > 0) out.assign(data, static_cast<std::size_t>(n));
    }
    BIO_free(bio);
  }
  X509_free(cert);
  return out;
}

}  // namespace

std::unique_ptr<net::ssl::context> make_tls_context(const serve_options& options) {
  auto tls = std::make_unique<net::ssl::context>(net::ssl::context::tls_server);
  tls->set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                   net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                   net::ssl::context::no_tlsv1_1);
  // The key, the certificate and the CA are read only if root controls them (a user who
  // could replace the CA could choose who is a client; host_path.hpp), from the
  // descriptor that was checked.
  auto read = [](std::string_view flag, const std::string& path) {
    auto file = common::read_root_controlled_file(path);
    if (!file) throw std::runtime_error(std::string(flag) + ": refused: " + file.error);
    return std::move(file.bytes);
  };
  beast::error_code ec;
  const std::string cert = read("--tls-cert", options.tls_cert);
  tls->use_certificate_chain(net::buffer(cert), ec);
  if (ec) throw std::runtime_error("--tls-cert " + options.tls_cert + ": " + ec.message());
  std::string key = read("--tls-key", options.tls_key);
  tls->use_private_key(net::buffer(key), net::ssl::context::pem, ec);
  OPENSSL_cleanse(key.data(), key.size());
  if (ec) throw std::runtime_error("--tls-key " + options.tls_key + ": " + ec.message());
  if (!options.tls_client_ca.empty()) {
    const std::string ca = read("--tls-client-ca", options.tls_client_ca);
    tls->add_certificate_authority(net::buffer(ca), ec);
    if (ec)
      throw std::runtime_error("--tls-client-ca " + options.tls_client_ca + ": " + ec.message());
    tls->set_verify_mode(net::ssl::verify_peer | net::ssl::verify_fail_if_no_peer_cert);
  }
  return tls;
}

net::awaitable<void> serve_tls(proxy_context& ctx, net::ssl::context& tls, protocol::socket socket,
                               connection_slot slot) {
  policy::client_identity identity;
  audit_client who;
  who.transport = "tls";
  std::string peer = "unknown";
  {
    beast::error_code ec;
    auto ep = socket.remote_endpoint(ec);
    char host[NI_MAXHOST];
    char port[NI_MAXSERV];
    if (!ec && ::getnameinfo(ep.data(), static_cast<socklen_t>(ep.size()), host, sizeof host, port,
                             sizeof port, NI_NUMERICHOST | NI_NUMERICSERV) == 0) {
      identity.address = host;
      who.address = host;
      who.port = static_cast<std::uint16_t>(std::atoi(port));
      peer = std::string(host) + ":" + port;
    }
  }
  auto executor = socket.get_executor();
  beast::ssl_stream<stream> secure(stream(std::move(socket)), tls);
  beast::get_lowest_layer(secure).expires_after(ctx.options.head_timeout);
  // Closed by the shutdown deadline like a connection (server.cpp), if still here then.
  ctx.tls_handshakes.insert(&beast::get_lowest_layer(secure));
  auto [hec] = co_await secure.async_handshake(net::ssl::stream_base::server, use_tuple);
  ctx.tls_handshakes.erase(&beast::get_lowest_layer(secure));
  if (hec) {
    ctx.log->info("tls:{}: handshake failed: {}", peer, hec.message());
    co_return;
  }
  beast::get_lowest_layer(secure).expires_never();
  identity.tls_subject = subject_rfc2253(secure.native_handle());
  std::string client = "tls:" + peer;
  if (!identity.tls_subject.empty()) client += ",subject=" + identity.tls_subject;

  net::local::stream_protocol::socket inner(executor), outer(executor);
  net::local::connect_pair(inner, outer);
  who.subject = identity.tls_subject;
  auto c = std::make_unique<connection>(ctx, std::move(slot), protocol::socket(std::move(inner)),
                                        client, identity, format_audit_client(who));
  net::co_spawn(executor, connection::start(std::move(c)), net::detached);

  auto buffers = std::make_unique<char[]>(2 * 16384);
  auto from_client = [&]() -> net::awaitable<void> {
    char* buf = buffers.get();
    for (;;) {
      auto [ec, n] = co_await secure.async_read_some(net::buffer(buf, 16384), use_tuple);
      if (n > 0) {
        auto [wec, wn] = co_await net::async_write(outer, net::buffer(buf, n), use_tuple);
        if (wec) break;
      }
      if (ec) break;
    }
    beast::error_code ignored;
    outer.shutdown(net::socket_base::shutdown_send, ignored);  // the client's EOF, passed on
  };
  auto to_client = [&]() -> net::awaitable<void> {
    char* buf = buffers.get() + 16384;
    for (;;) {
      auto [ec, n] = co_await outer.async_read_some(net::buffer(buf, 16384), use_tuple);
      if (n > 0) {
        auto [wec, wn] = co_await net::async_write(secure, net::buffer(buf, n), use_tuple);
        if (wec) break;
      }
      if (ec) break;
    }
    beast::get_lowest_layer(secure).expires_after(std::chrono::seconds(5));
    co_await secure.async_shutdown(use_tuple);  // close_notify
    beast::get_lowest_layer(secure).close();
  };
  co_await (from_client() && to_client());
}

}  // namespace dockgate::proxy
