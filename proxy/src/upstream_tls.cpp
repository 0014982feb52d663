// TLS to the daemon (--upstream tls://host:port).
//
// Invariants kept here:
// - The gate talks to a daemon only after it proved who it is: its certificate chains to
//   --upstream-tlscacert and names the host of --upstream (X509_VERIFY_PARAM_set1_host
//   for a name, _set1_ip_asc for an address), checked during the handshake, so neither an
//   untrusted CA nor another host's certificate gets a request (or the client key's use).
//   There is no mode without verification.
// - The name is read where Go reads it (crypto/x509 VerifyHostname, so the docker CLI and
//   dockerd): in the certificate's subjectAltName only. OpenSSL would take the subject's
//   CN of a certificate without DNS names (X509_CHECK_FLAG_NEVER_CHECK_SUBJECT turns that
//   off), so a CN-only certificate Docker's own clients refuse would pass here; and no
//   partial wildcards (`f*.example`), which Go does not match either.
// - The CA, the certificate and the key are read only from files root controls (a user
//   who could replace the CA could choose the daemon; host_path.hpp), from the descriptor
//   that was checked.
// - A relay lives only while the connection holds its plaintext end (upstream_socket),
//   and passes half-closes on as the docker CLI does over TLS (a TCP shutdown, as its
//   CloseWrite): a hijacked stream's stdin EOF reaches the daemon, output keeps flowing.
#include "upstream_tls.hpp"

#include <openssl/crypto.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509v3.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/local/connect_pair.hpp>
#include <boost/asio/local/stream_protocol.hpp>
#include <boost/asio/ssl/stream.hpp>
#include <boost/asio/steady_timer.hpp>
#include <boost/asio/write.hpp>
#include <stdexcept>

#include "dockgate/common/host_path.hpp"

namespace dockgate::proxy {

using namespace net::experimental::awaitable_operators;

class upstream_tls_relay {
 public:
  upstream_tls_relay(const net::any_io_executor& ex, net::ssl::context& tls)
      : tls_(protocol::socket(ex), tls), outer_(ex) {}

  void stop() noexcept {
    beast::error_code ignored;
    tls_.next_layer().close(ignored);
    outer_.close(ignored);
  }

  net::ssl::stream<protocol::socket> tls_;
  net::local::stream_protocol::socket outer_;        // the relay's end of the socketpair
  static constexpr std::size_t buffer_size = 16384;  // one TLS record
  std::unique_ptr<char[]> buffers_ = std::make_unique<char[]>(2 * buffer_size);
};

void stop_upstream_tls_relay(upstream_tls_relay& relay) noexcept {
  relay.stop();
}

std::unique_ptr<upstream_tls_config> make_upstream_tls(const serve_options& options) {
  net::ssl::context tls(net::ssl::context::tls_client);
  tls.set_options(net::ssl::context::default_workarounds | net::ssl::context::no_sslv2 |
                  net::ssl::context::no_sslv3 | net::ssl::context::no_tlsv1 |
                  net::ssl::context::no_tlsv1_1);
  auto read = [](std::string_view flag, const std::string& path) {
    auto file = common::read_root_controlled_file(path);
    if (!file)
      throw std::runtime_error(std::string(flag) + " " + path + ": refused: " + file.error);
    return std::move(file.bytes);
  };
  beast::error_code ec;
  const std::string ca = read("--upstream-tlscacert", options.upstream_tlscacert);
  tls.add_certificate_authority(net::buffer(ca), ec);
  if (ec)
    throw std::runtime_error("--upstream-tlscacert " + options.upstream_tlscacert + ": " +
                             ec.message());
  tls.set_verify_mode(net::ssl::verify_peer);
  if (!options.upstream_tlscert.empty()) {
    const std::string cert = read("--upstream-tlscert", options.upstream_tlscert);
    tls.use_certificate_chain(net::buffer(cert), ec);
    if (ec)
      throw std::runtime_error("--upstream-tlscert " + options.upstream_tlscert + ": " +
                               ec.message());
    std::string key = read("--upstream-tlskey", options.upstream_tlskey);
    tls.use_private_key(net::buffer(key), net::ssl::context::pem, ec);
    OPENSSL_cleanse(key.data(), key.size());
    if (ec)
      throw std::runtime_error("--upstream-tlskey " + options.upstream_tlskey + ": " +
                               ec.message());
    if (SSL_CTX_check_private_key(tls.native_handle()) != 1)
      throw std::runtime_error("--upstream-tlskey " + options.upstream_tlskey +
                               ": does not match --upstream-tlscert");
  }
  auto config = std::make_unique<upstream_tls_config>(std::move(tls));
  config->server_name = options.upstream.host;
  beast::error_code not_ip;
  net::ip::make_address(config->server_name, not_ip);
  config->server_is_ip = !not_ip;
  return config;
}

namespace {

// Why the handshake failed, in OpenSSL's words for a certificate it refused.
std::string handshake_failure(SSL* ssl, const beast::error_code& ec) {
  std::string why = "TLS handshake: " + ec.message();
  const long verify = SSL_get_verify_result(ssl);
  if (verify != X509_V_OK) {
    why += " (";
    why += X509_verify_cert_error_string(verify);
    why += ")";
  }
  return why;
}

// The daemon's bytes to the request path; its end (close_notify, or a bare close) is
// passed on as the plaintext socket's EOF.
net::awaitable<void> daemon_to_gate(upstream_tls_relay& r) {
  char* buf = r.buffers_.get();
  for (;;) {
    auto [ec, n] = co_await r.tls_.async_read_some(
        net::buffer(buf, upstream_tls_relay::buffer_size), use_tuple);
    if (n > 0) {
      auto [wec, wn] = co_await net::async_write(r.outer_, net::buffer(buf, n), use_tuple);
      if (wec) break;
    }
    if (ec) break;
  }
  beast::error_code ignored;
  r.outer_.shutdown(net::socket_base::shutdown_send, ignored);
}

// The request path's bytes to the daemon; its EOF becomes a TCP half-close, as the docker
// CLI's CloseWrite does over TLS (dockerd, Go's crypto/tls, reads it as EOF).
net::awaitable<void> gate_to_daemon(upstream_tls_relay& r) {
  char* buf = r.buffers_.get() + upstream_tls_relay::buffer_size;
  for (;;) {
    auto [ec, n] = co_await r.outer_.async_read_some(
        net::buffer(buf, upstream_tls_relay::buffer_size), use_tuple);
    if (n > 0) {
      auto [wec, wn] = co_await net::async_write(r.tls_, net::buffer(buf, n), use_tuple);
      if (wec) break;
    }
    if (ec) break;
  }
  beast::error_code ignored;
  r.tls_.next_layer().shutdown(net::socket_base::shutdown_send, ignored);
}

net::awaitable<void> relay(std::shared_ptr<upstream_tls_relay> r) {
  co_await (daemon_to_gate(*r) && gate_to_daemon(*r));
  r->stop();
}

}  // namespace

net::awaitable<std::string> connect_tls_upstream(proxy_context& ctx, upstream_socket& into,
                                                 std::chrono::steady_clock::duration timeout) {
  const auto ex = co_await net::this_coro::executor;
  const upstream_tls_config& config = *ctx.upstream_tls;
  auto r = std::make_shared<upstream_tls_relay>(ex, ctx.upstream_tls->context);
  // One timer for connect and handshake: on expiry the TCP socket closes under them.
  net::steady_timer timer(ex, timeout);
  timer.async_wait([weak = std::weak_ptr(r)](beast::error_code ec) {
    if (auto live = weak.lock(); live && !ec) {
      beast::error_code ignored;
      live->tls_.next_layer().close(ignored);
    }
  });
  auto [cec] = co_await r->tls_.next_layer().async_connect(ctx.upstream, use_tuple);
  if (cec) co_return "connect: " + cec.message();
  beast::error_code ignored;
  r->tls_.next_layer().set_option(net::ip::tcp::no_delay(true), ignored);

  SSL* ssl = r->tls_.native_handle();
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
  X509_VERIFY_PARAM_set_hostflags(
      param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
  const bool named =
      config.server_is_ip
          ? X509_VERIFY_PARAM_set1_ip_asc(param, config.server_name.c_str()) == 1
          : X509_VERIFY_PARAM_set1_host(param, config.server_name.c_str(), 0) == 1 &&
                SSL_set_tlsext_host_name(ssl, config.server_name.c_str()) == 1;  // SNI: names only
  if (!named) co_return "cannot verify the server name " + config.server_name;
  auto [hec] = co_await r->tls_.async_handshake(net::ssl::stream_base::client, use_tuple);
  timer.cancel();
  if (hec) co_return handshake_failure(ssl, hec);

  net::local::stream_protocol::socket inner(ex);
  beast::error_code pec;
  net::local::connect_pair(inner, r->outer_, pec);
  if (pec) co_return "socketpair: " + pec.message();
  into.adopt(protocol::socket(std::move(inner)), r);
  net::co_spawn(ex, relay(std::move(r)), net::detached);
  co_return std::string();
}

}  // namespace dockgate::proxy
