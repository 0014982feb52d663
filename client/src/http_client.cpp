#include "dockgate/client/http_client.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "dockgate/http/chunked.hpp"

namespace dockgate::client {

namespace {

int remaining_ms(clock_type::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock_type::now()).count();
  return left <= 0 ? 0 : static_cast<int>(std::min<long long>(left, 1 << 30));
}

bool wait_for(int fd, short events, clock_type::time_point deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    const int ms = remaining_ms(deadline);
    if (ms == 0) return false;
    const int r = ::poll(&p, 1, ms);
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

}  // namespace

std::shared_ptr<tls_context> tls_context::create(const std::string& ca_file,
                                                 const std::string& cert_file,
                                                 const std::string& key_file, std::string* error) {
  auto ctx = std::make_shared<tls_context>();
  SSL_CTX* c = SSL_CTX_new(TLS_client_method());
  ctx->ctx_ = c;
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  auto fail = [&](std::string what) -> std::shared_ptr<tls_context> {
    if (error) *error = std::move(what);
    return nullptr;
  };
  if (ca_file.empty() ? SSL_CTX_set_default_verify_paths(c) != 1
                      : SSL_CTX_load_verify_locations(c, ca_file.c_str(), nullptr) != 1)
    return fail("cannot load CA " + (ca_file.empty() ? std::string("(system)") : ca_file));
  if (!cert_file.empty() && SSL_CTX_use_certificate_chain_file(c, cert_file.c_str()) != 1)
    return fail("cannot load certificate " + cert_file);
  if (!key_file.empty() && SSL_CTX_use_PrivateKey_file(c, key_file.c_str(), SSL_FILETYPE_PEM) != 1)
    return fail("cannot load key " + key_file);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER, nullptr);
  return ctx;
}

tls_context::~tls_context() {
  if (ctx_) SSL_CTX_free(static_cast<SSL_CTX*>(ctx_));
}

bool connection::wait_ssl(int result, clock_type::time_point deadline) {
  const int err = SSL_get_error(static_cast<SSL*>(ssl_), result);
  if (err == SSL_ERROR_WANT_READ) return wait_for(fd_, POLLIN, deadline);
  if (err == SSL_ERROR_WANT_WRITE) return wait_for(fd_, POLLOUT, deadline);
  return false;
}

std::optional<connection> connection::open(const transport& t, clock_type::time_point deadline,
                                           std::string* error) {
  const common::endpoint& ep = t.endpoint;
  auto fail = [&](std::string why) -> std::optional<connection> {
    if (error) *error = std::move(why);
    return std::nullopt;
  };
  int fd = -1;
  if (ep.scheme == common::endpoint::kind::unix_socket) {
    fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, ep.path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 &&
        errno != EINPROGRESS && errno != EAGAIN) {
      ::close(fd);
      return fail("connect " + ep.to_string() + ": " + std::strerror(errno));
    }
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    addrinfo* res = nullptr;
    if (::getaddrinfo(ep.host.c_str(), std::to_string(ep.port).c_str(), &hints, &res) != 0 || !res)
      return fail("cannot resolve " + ep.host);
    fd = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    const int rc = ::connect(fd, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc != 0 && errno != EINPROGRESS) {
      ::close(fd);
      return fail("connect " + ep.to_string() + ": " + std::strerror(errno));
    }
  }
  connection c(fd);
  if (!wait_for(fd, POLLOUT, deadline)) return fail("connect " + ep.to_string() + ": timed out");
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return fail("connect " + ep.to_string() + ": " + std::strerror(err));
  if (t.tls) {
    SSL* ssl = SSL_new(static_cast<SSL_CTX*>(t.tls->native()));
    c.ssl_ = ssl;
    SSL_set_fd(ssl, fd);
    // The server is who DOCKER_HOST names: its certificate must say so, where Go's
    // crypto/x509 (the docker CLI, dockerd) reads it: in its subjectAltName only, never
    // the subject's CN of a certificate without DNS names (OpenSSL's fallback), and no
    // partial wildcards. A name that cannot be set is a refusal, not an unchecked peer.
    unsigned char ip[16];
    X509_VERIFY_PARAM* param = SSL_get0_param(ssl);
    X509_VERIFY_PARAM_set_hostflags(
        param, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS | X509_CHECK_FLAG_NEVER_CHECK_SUBJECT);
    const bool named = ::inet_pton(AF_INET, ep.host.c_str(), ip) == 1 ||
                               ::inet_pton(AF_INET6, ep.host.c_str(), ip) == 1
                           ? X509_VERIFY_PARAM_set1_ip_asc(param, ep.host.c_str()) == 1
                           : SSL_set_tlsext_host_name(ssl, ep.host.c_str()) == 1 &&
                                 SSL_set1_host(ssl, ep.host.c_str()) == 1;
    if (!named) return fail("TLS: cannot verify the server name " + ep.host);
    for (;;) {
      const int r = SSL_connect(ssl);
      if (r == 1) break;
      if (!c.wait_ssl(r, deadline))
        return fail("TLS handshake with " + ep.to_string() + " failed: " +
                    (SSL_get_verify_result(ssl) != X509_V_OK
                         ? X509_verify_cert_error_string(SSL_get_verify_result(ssl))
                         : "handshake error or timeout"));
    }
  }
  return c;
}

connection connection::adopt(int fd) {
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK);
  return connection(fd);
}

connection::~connection() {
  if (ssl_) SSL_free(static_cast<SSL*>(ssl_));
  if (fd_ >= 0) ::close(fd_);
}

bool connection::write_all(std::string_view data, clock_type::time_point deadline) {
  if (ssl_) {
    while (!data.empty()) {
      const int n = SSL_write(static_cast<SSL*>(ssl_), data.data(),
                              static_cast<int>(std::min<std::size_t>(data.size(), 1 << 20)));
      if (n > 0) {
        data.remove_prefix(static_cast<std::size_t>(n));
        continue;
      }
      if (!wait_ssl(n, deadline)) return false;
    }
    return true;
  }
  while (!data.empty()) {
    const ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n > 0) {
      data.remove_prefix(static_cast<std::size_t>(n));
      continue;
    }
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!wait_for(fd_, POLLOUT, deadline)) return false;
      continue;
    }
    return false;
  }
  return true;
}

long connection::read_some(char* buf, std::size_t size, clock_type::time_point deadline) {
  if (ssl_) {
    for (;;) {
      const int n = SSL_read(static_cast<SSL*>(ssl_), buf,
                             static_cast<int>(std::min<std::size_t>(size, 1 << 20)));
      if (n > 0) return n;
      const int err = SSL_get_error(static_cast<SSL*>(ssl_), n);
      if (err == SSL_ERROR_ZERO_RETURN) return 0;  // close_notify
      if (err == SSL_ERROR_SYSCALL && n == 0) return 0;
      if (!wait_ssl(n, deadline)) return -1;
    }
  }
  for (;;) {
    const ssize_t n = ::recv(fd_, buf, size, 0);
    if (n >= 0) return static_cast<long>(n);
    if (errno == EAGAIN || errno == EINTR) {
      if (!wait_for(fd_, POLLIN, deadline)) return -1;
      continue;
    }
    return -1;
  }
}

void connection::shutdown_write() {
  if (ssl_) {
    SSL_shutdown(
        static_cast<SSL*>(ssl_));  // close_notify: the peer sees our EOF, we can still read
    return;
  }
  ::shutdown(fd_, SHUT_WR);
}

std::string_view http_response::header(std::string_view name) const {
  for (const auto& [n, v] : headers)
    if (n == name) return v;
  return {};
}

std::optional<response_head> read_response_head(connection& c, std::string& buffer,
                                                clock_type::time_point deadline) {
  char chunk[16384];
  std::size_t end;
  while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > 64 * 1024) return std::nullopt;
    const long n = c.read_some(chunk, sizeof chunk, deadline);
    if (n <= 0) return std::nullopt;
    buffer.append(chunk, static_cast<std::size_t>(n));
  }
  const std::string head = buffer.substr(0, end + 2);
  buffer.erase(0, end + 4);
  response_head h;
  if (head.size() < 12 || head.compare(0, 5, "HTTP/") != 0) return std::nullopt;
  h.status = static_cast<unsigned>(std::atoi(head.c_str() + 9));
  std::size_t pos = head.find("\r\n") + 2;
  while (pos < head.size()) {
    const auto eol = head.find("\r\n", pos);
    const std::string line = head.substr(pos, eol - pos);
    pos = eol + 2;
    const auto colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::string name = lower(line.substr(0, colon));
    std::string value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t')) value.erase(0, 1);
    if (name == "content-length")
      h.content_length = std::strtoull(value.c_str(), nullptr, 10);
    else if (name == "transfer-encoding" && lower(value).find("chunked") != std::string::npos)
      h.chunked = true;
    else if (name == "content-type")
      h.content_type = value;
    h.headers.emplace_back(name, std::move(value));
  }
  return h;
}

http_response http_request(const transport& t, std::string_view method, std::string_view target,
                           std::string_view body, std::chrono::milliseconds timeout,
                           std::size_t max_body, std::string_view extra_headers,
                           std::string_view host, std::string_view content_type,
                           std::chrono::milliseconds connect_timeout) {
  http_response r;
  const auto deadline = clock_type::now() + timeout;
  auto c = connection::open(t,
                            connect_timeout.count() > 0
                                ? std::min(deadline, clock_type::now() + connect_timeout)
                                : deadline,
                            &r.error);
  if (!c) return r;
  std::string request;
  request.reserve(256 + body.size());
  request += method;
  request += ' ';
  request += target;
  request += " HTTP/1.1\r\nHost: ";
  request += host;
  request += "\r\nConnection: close\r\n";
  request += extra_headers;
  if (!body.empty() || method == "POST" || method == "PUT") {
    request += "Content-Type: ";
    request += content_type;
    request += "\r\nContent-Length: ";
    request += std::to_string(body.size());
    request += "\r\n";
  }
  request += "\r\n";
  request += body;
  if (!c->write_all(request, deadline)) {
    r.error = "write failed or timed out";
    return r;
  }
  std::string buffer;
  auto head = read_response_head(*c, buffer, deadline);
  if (!head) {
    r.error = "no response (or timed out)";
    return r;
  }
  r.content_type = head->content_type;
  r.headers = std::move(head->headers);
  char chunk[65536];
  auto fill = [&]() {
    const long n = c->read_some(chunk, sizeof chunk, deadline);
    if (n > 0) buffer.append(chunk, static_cast<std::size_t>(n));
    return n;
  };
  if (method == "HEAD") {
    // No body, whatever Content-Length says (it is the size of the object).
  } else if (head->chunked) {
    http::chunked_decoder decoder;
    for (;;) {
      auto res = decoder.feed(buffer);
      if (res.state == http::chunked_decoder::status::data) r.body.append(res.data);
      buffer.erase(0, res.consumed);
      if (res.state == http::chunked_decoder::status::done) break;
      if (res.state == http::chunked_decoder::status::error) {
        r.error = "malformed chunked response";
        return r;
      }
      if (r.body.size() > max_body) {
        r.error = "response too large";
        return r;
      }
      if (res.state == http::chunked_decoder::status::need_more && fill() <= 0) {
        r.error = "response cut short (or timed out)";
        return r;
      }
    }
  } else if (head->content_length) {
    if (*head->content_length > max_body) {
      r.error = "response too large";
      return r;
    }
    while (buffer.size() < *head->content_length)
      if (fill() <= 0) {
        r.error = "response cut short (or timed out)";
        return r;
      }
    r.body = buffer.substr(0, static_cast<std::size_t>(*head->content_length));
  } else if (head->status != 204 && head->status != 304) {
    for (long n; (n = fill()) > 0;)
      if (buffer.size() > max_body) {
        r.error = "response too large";
        return r;
      }
    r.body = std::move(buffer);
  }
  r.status = head->status;
  return r;
}

}  // namespace dockgate::client
