#pragma once
// A small blocking HTTP/1.1 client for the Docker Engine API over unix:// or tcp://,
// with a deadline on every call. Used by programs that talk to Docker (through the
// gate): one connection per request, so that no state leaks between calls.

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::client {

using clock_type = std::chrono::steady_clock;

// TLS to the daemon (or the gate's tls:// listener), as DOCKER_TLS_VERIFY and
// DOCKER_CERT_PATH configure the docker CLI: the server is verified against `ca_file`
// (and its name or IP), the client presents `cert_file`/`key_file`.
class tls_context {
 public:
  // Empty cert/key: no client certificate. Empty ca_file: the system's CA bundle.
  static std::shared_ptr<tls_context> create(const std::string& ca_file,
                                             const std::string& cert_file,
                                             const std::string& key_file, std::string* error);
  ~tls_context();
  void* native() const { return ctx_; }  // SSL_CTX*

 private:
  void* ctx_ = nullptr;
};

// Where to connect: the endpoint, and TLS when configured.
struct transport {
  common::endpoint endpoint;
  std::shared_ptr<tls_context> tls;
};

struct http_response {
  unsigned status = 0;  // 0: transport error (see error)
  std::string body;
  std::string content_type;
  std::string error;
  std::vector<std::pair<std::string, std::string>> headers;  // every field, names in lower case
  // The first field of that (lower-case) name, or "".
  std::string_view header(std::string_view name) const;
};

// A connected socket (RAII). Reads and writes honour a deadline.
class connection {
 public:
  static std::optional<connection> open(const transport& t, clock_type::time_point deadline,
                                        std::string* error);
  // A connected stream socket this connection now owns (closed with it), set non-blocking
  // as open()'s are: one end of a socketpair, e.g. a test's held exec.
  static connection adopt(int fd);
  connection(connection&& other) noexcept : fd_(other.fd_), ssl_(other.ssl_) {
    other.fd_ = -1;
    other.ssl_ = nullptr;
  }
  connection& operator=(connection&&) = delete;
  ~connection();

  bool write_all(std::string_view data, clock_type::time_point deadline);
  // Reads some bytes; 0 on EOF; -1 on error or deadline.
  long read_some(char* buf, std::size_t size, clock_type::time_point deadline);
  // End of our side: stdin EOF for a hijacked exec (close_notify under TLS).
  void shutdown_write();
  int fd() const { return fd_; }
  bool tls() const { return ssl_ != nullptr; }

 private:
  explicit connection(int fd) : fd_(fd) {}
  bool wait_ssl(int result, clock_type::time_point deadline);
  int fd_ = -1;
  void* ssl_ = nullptr;  // SSL*
};

// Sends one request and reads the whole response (Content-Length, chunked, or until
// close), at most `max_body` bytes of body. A HEAD response has no body.
// `extra_headers` are complete header lines ("Authorization: Bearer x\r\n"); `host` is
// the Host header (what a signature covers), `content_type` that of a body.
// `connect_timeout` (when set) bounds the connect alone: a host that is gone answers
// nothing, and a caller with a long `timeout` for the answer need not wait that long.
http_response http_request(const transport& t, std::string_view method, std::string_view target,
                           std::string_view body, std::chrono::milliseconds timeout,
                           std::size_t max_body = 64 * 1024 * 1024,
                           std::string_view extra_headers = {}, std::string_view host = "docker",
                           std::string_view content_type = "application/json",
                           std::chrono::milliseconds connect_timeout = {});

// Reads a response head from `c` (leftover body bytes stay in `buffer`). nullopt on error.
struct response_head {
  unsigned status = 0;
  std::optional<std::uint64_t> content_length;
  bool chunked = false;
  std::string content_type;
  std::vector<std::pair<std::string, std::string>> headers;  // every field, names in lower case
};
std::optional<response_head> read_response_head(connection& c, std::string& buffer,
                                                clock_type::time_point deadline);

}  // namespace dockgate::client
