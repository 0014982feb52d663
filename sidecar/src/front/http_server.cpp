#include "front/http_server.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <thread>

#include "dockgate/http/chunked.hpp"
#include "dockgate/http/request_head.hpp"

namespace dockgate::sidecar {

namespace {

std::string reason(unsigned status) {
  switch (status) {
    case 200:
      return "OK";
    case 202:
      return "Accepted";
    case 204:
      return "No Content";
    case 206:
      return "Partial Content";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 416:
      return "Range Not Satisfiable";
    case 422:
      return "Unprocessable Entity";
    case 429:
      return "Too Many Requests";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

bool send_all(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) {
      if (n < 0 && errno == EINTR) continue;
      return false;
    }
    data.remove_prefix(static_cast<std::size_t>(n));
  }
  return true;
}

void append_fields(std::string& head, const header_fields& fields) {
  for (const auto& [name, value] : fields) {
    head += name;
    head += ": ";
    head += value;
    head += "\r\n";
  }
}

bool send_reply(int fd, const http_reply& r, bool keep_alive) {
  std::string out = "HTTP/1.1 " + std::to_string(r.status) + " " + reason(r.status) + "\r\n";
  if (r.status != 204)  // a 204 has neither a body nor its length (RFC 9110, 8.6)
    out += "content-type: " + r.content_type +
           "\r\ncontent-length: " + std::to_string(r.body.size()) + "\r\n";
  append_fields(out, r.headers);
  out += keep_alive ? "\r\n" : "connection: close\r\n\r\n";
  if (r.status != 204) out += r.body;
  return send_all(fd, out);
}

// A chunked reply on the connection's socket. Writes are bounded by SO_SNDTIMEO (set
// only once the stream is opened: a plain reply keeps the socket as it was).
class chunked_reply final : public reply_stream {
 public:
  chunked_reply(int fd, bool keep_alive, std::chrono::milliseconds send_timeout,
                std::string& leftover)
      : fd_(fd), keep_alive_(keep_alive), send_timeout_(send_timeout), leftover_(leftover) {}
  bool open(unsigned status, std::string_view content_type, const header_fields& extra) override {
    if (opened_) return false;
    opened_ = true;
    timeval tv{};
    tv.tv_sec = static_cast<time_t>(send_timeout_.count() / 1000);
    tv.tv_usec = static_cast<suseconds_t>((send_timeout_.count() % 1000) * 1000);
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    std::string head =
        "HTTP/1.1 " + std::to_string(status) + " " + reason(status) + "\r\ncontent-type: ";
    head += content_type;
    head += "\r\n";
    // no-cache unless the handler says otherwise (a forwarded app's own Cache-Control).
    const bool own_cache_control = std::any_of(extra.begin(), extra.end(), [](const auto& f) {
      return f.first.size() == 13 && ::strncasecmp(f.first.c_str(), "cache-control", 13) == 0;
    });
    if (!own_cache_control) head += "cache-control: no-cache\r\n";
    head += "transfer-encoding: chunked\r\n";
    append_fields(head, extra);
    head += keep_alive_ ? "\r\n" : "connection: close\r\n\r\n";
    failed_ = !send_all(fd_, head);
    return !failed_;
  }
  bool write(std::string_view data) override {
    if (!opened_ || failed_) return false;
    if (data.empty()) return true;  // an empty chunk would end the body
    char size[32];
    const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
    std::string chunk(size, static_cast<std::size_t>(n));
    chunk += data;
    chunk += "\r\n";
    failed_ = !send_all(fd_, chunk);
    return !failed_;
  }
  bool opened() const override { return opened_; }
  std::optional<raw_connection> switch_protocols(const header_fields& fields) override {
    if (opened_) return std::nullopt;
    opened_ = switched_ = true;
    std::string head = "HTTP/1.1 101 Switching Protocols\r\n";
    append_fields(head, fields);
    head += "\r\n";
    if (!send_all(fd_, head)) return std::nullopt;
    raw_connection raw{fd_, std::move(leftover_)};
    leftover_.clear();
    return raw;
  }
  bool switched() const { return switched_; }
  // The last chunk; false if the connection cannot be used again.
  bool finish() {
    if (!opened_ || failed_) return false;
    failed_ = !send_all(fd_, "0\r\n\r\n");
    timeval none{};
    ::setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &none, sizeof none);
    return !failed_;
  }

 private:
  int fd_;
  bool keep_alive_;
  std::chrono::milliseconds send_timeout_;
  std::string& leftover_;  // what the client sent after the request (the server's buffer)
  bool opened_ = false;
  bool failed_ = false;
  bool switched_ = false;
};

}  // namespace

common::endpoint listen_endpoint(const std::string& text) {
  std::string error;
  if (text.starts_with("unix://") || text.starts_with("tcp://")) {
    auto ep = common::parse_endpoint(text, &error);
    if (!ep) throw std::runtime_error("SANDBOX_LISTEN: " + error);
    return *ep;
  }
  auto ep = common::parse_endpoint("tcp://" + text, &error);
  if (!ep) throw std::runtime_error("SANDBOX_LISTEN \"" + text + "\": " + error);
  return *ep;
}

http_server::http_server(const common::endpoint& listen, handler h, server_limits limits)
    : handler_(std::move(h)), limits_(std::move(limits)) {
  if (::pipe2(wake_, O_CLOEXEC) != 0) throw std::runtime_error("pipe failed");
  if (listen.scheme == common::endpoint::kind::unix_socket) {
    listen_fd_ = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, listen.path.c_str(), sizeof addr.sun_path - 1);
    ::unlink(listen.path.c_str());
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0)
      throw std::runtime_error("bind " + listen.to_string() + ": " + std::strerror(errno));
  } else {
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    addrinfo* res = nullptr;
    if (::getaddrinfo(listen.host.c_str(), std::to_string(listen.port).c_str(), &hints, &res) !=
            0 ||
        !res)
      throw std::runtime_error("cannot resolve " + listen.host);
    listen_fd_ = ::socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    int one = 1;
    ::setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    const int rc = ::bind(listen_fd_, res->ai_addr, res->ai_addrlen);
    ::freeaddrinfo(res);
    if (rc != 0)
      throw std::runtime_error("bind " + listen.to_string() + ": " + std::strerror(errno));
    sockaddr_storage bound{};
    socklen_t len = sizeof bound;
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                             : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  }
  if (::listen(listen_fd_, 128) != 0)
    throw std::runtime_error(std::string("listen: ") + std::strerror(errno));
}

http_server::~http_server() {
  if (listen_fd_ >= 0) ::close(listen_fd_);
  for (int fd : wake_)
    if (fd >= 0) ::close(fd);
}

void http_server::stop() {
  stopping_ = true;
  const char b = 1;
  (void)!::write(wake_[1], &b, 1);  // async-signal-safe
}

void http_server::run() {
  while (!stopping_) {
    pollfd p[2] = {{listen_fd_, POLLIN, 0}, {wake_[0], POLLIN, 0}};
    if (::poll(p, 2, -1) < 0) continue;
    if (p[1].revents) break;
    if (!(p[0].revents & POLLIN)) continue;
    sockaddr_storage addr{};
    socklen_t len = sizeof addr;
    const int fd = ::accept4(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len, SOCK_CLOEXEC);
    if (fd < 0) continue;
    char host[INET6_ADDRSTRLEN] = "unix";
    if (addr.ss_family == AF_INET)
      ::inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&addr)->sin_addr, host, sizeof host);
    if (addr.ss_family == AF_INET6)
      ::inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&addr)->sin6_addr, host, sizeof host);
    if (!admit(fd, host)) {
      send_reply(fd, {503, R"({"detail":"too many connections"})"}, false);
      ::close(fd);
      continue;
    }
    ++active_;
    std::thread([this, fd] {
      serve_connection(fd);
      forget(fd);
      ::close(fd);
      --active_;
    }).detach();
  }
  // Let requests in flight finish (bounded).
  for (int i = 0; i < 600 && active_.load() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
}

bool http_server::admit(int fd, const std::string& peer) {
  std::lock_guard g(table_mutex_);
  auto evict_oldest = [&](bool same_peer) {
    auto oldest = table_.end();
    for (auto it = table_.begin(); it != table_.end(); ++it)
      if (it->second.waiting_head && (!same_peer || it->second.peer == peer) &&
          (oldest == table_.end() || it->second.since < oldest->second.since))
        oldest = it;
    if (oldest == table_.end()) return false;
    ::shutdown(oldest->first, SHUT_RDWR);  // its thread sees the end, forgets and closes it
    table_.erase(oldest);
    return true;
  };
  std::size_t from_peer = 0;
  for (const auto& [other, t] : table_) from_peer += t.peer == peer;
  if (from_peer >= limits_.max_per_peer && !evict_oldest(true)) return false;
  if (table_.size() >= limits_.max_connections && !evict_oldest(false)) return false;
  table_[fd] = tracked{peer, true, std::chrono::steady_clock::now()};
  return true;
}

void http_server::set_phase(int fd, bool waiting_head) {
  std::lock_guard g(table_mutex_);
  if (auto it = table_.find(fd); it != table_.end()) {
    it->second.waiting_head = waiting_head;
    it->second.since = std::chrono::steady_clock::now();
  }
}

void http_server::forget(int fd) {
  std::lock_guard g(table_mutex_);
  table_.erase(fd);
}

namespace {

// The request as a handler sees it: the method, the path without its query, and the
// fields the sidecar reads.
http_request request_of(const http::request_head& head) {
  http_request req;
  req.method = std::string(http::method_name(head.method));
  const auto q = head.target.find('?');
  req.path = std::string(head.target.substr(0, q));
  if (q != std::string_view::npos) req.query = std::string(head.target.substr(q + 1));
  for (std::size_t i = 0; i < head.field_count; ++i) {
    const auto& f = head.fields[i];
    if (http::iequals(f.name, "authorization"))
      req.authorization = std::string(f.value);
    else if (http::iequals(f.name, "accept"))
      req.accept = std::string(f.value);
    else if (http::iequals(f.name, "x-dockgate-forwarded"))
      req.forwarded = std::string(f.value);
    else if (http::iequals(f.name, "x-dockgate-fleet"))
      req.fleet_auth = std::string(f.value);
    else {
      std::string name(f.name);
      for (auto& c : name) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      req.fields.emplace_back(std::move(name), std::string(f.value));
    }
  }
  return req;
}

enum class chunked_read { whole, too_large, invalid, closed };

// A chunked body decoded from `buffer` into `body` (consumed as decoded), `fill` reading
// more until it is whole; stopped as soon as it is over `limit`.
chunked_read read_chunked(std::string& buffer, std::string& body, std::size_t limit,
                          const std::function<bool()>& fill) {
  http::chunked_decoder decoder;
  for (;;) {
    auto res = decoder.feed(buffer);
    if (res.state == http::chunked_decoder::status::data) body.append(res.data);
    buffer.erase(0, res.consumed);
    if (body.size() > limit) return chunked_read::too_large;
    if (res.state == http::chunked_decoder::status::done) return chunked_read::whole;
    if (res.state == http::chunked_decoder::status::error) return chunked_read::invalid;
    if (res.state == http::chunked_decoder::status::need_more && !fill())
      return chunked_read::closed;
  }
}

}  // namespace

void http_server::serve_connection(int fd) {
  std::string buffer;
  char chunk[65536];
  using clock = std::chrono::steady_clock;
  clock::time_point deadline;
  // One read, before the deadline of what is being read (the whole head, the whole body).
  auto fill = [&]() {
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - clock::now()).count();
    if (left <= 0) return false;
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(left)) <= 0) return false;
    const ssize_t n = ::recv(fd, chunk, sizeof chunk, 0);
    if (n > 0) buffer.append(chunk, static_cast<std::size_t>(n));
    return n > 0;
  };
  while (!stopping_) {
    set_phase(fd, true);
    deadline = clock::now() + limits_.head_timeout;
    std::size_t head_size;
    while ((head_size = http::find_head_end(buffer)) == 0) {
      if (buffer.size() > http::max_head_bytes) {
        send_reply(fd, {400, R"({"error":"request head too large"})"}, false);
        return;
      }
      if (!fill()) return;
    }
    http::request_head head;
    // PATCH too: OpenSandbox's PATCH /sandboxes/{id}/metadata.
    if (auto err =
            http::parse_request_head(std::string_view(buffer).substr(0, head_size), head, true)) {
      send_reply(fd, {400, R"({"error":"malformed request"})"}, false);
      return;
    }
    set_phase(fd, false);
    deadline = clock::now() + limits_.body_timeout;
    http_request req = request_of(head);
    const bool keep = head.keep_alive;
    buffer.erase(0, head_size);
    // Body limits are answered before the body is read (the Aivory sidecar's middleware, which
    // also runs before auth); a chunked body is limited as it is read.
    const std::size_t limit = limits_.max_body(req.path);
    if (head.content_length && *head.content_length > limit) {
      send_reply(fd,
                 {413, "{\"error\":\"request body exceeds " + std::to_string(limit) + " bytes\"}"},
                 false);
      return;
    }
    if (head.chunked) {
      const auto read = read_chunked(buffer, req.body, limit, fill);
      if (read == chunked_read::too_large)
        send_reply(
            fd, {413, "{\"error\":\"request body exceeds " + std::to_string(limit) + " bytes\"}"},
            false);
      if (read == chunked_read::invalid)
        send_reply(fd, {400, R"({"error":"invalid chunked body"})"}, false);
      if (read != chunked_read::whole) return;
    } else {
      const std::size_t length = static_cast<std::size_t>(head.content_length.value_or(0));
      while (buffer.size() < length)
        if (!fill()) return;
      req.body = buffer.substr(0, length);
      buffer.erase(0, length);
    }
    chunked_reply stream(fd, keep, limits_.stream_send_timeout, buffer);
    req.stream = &stream;
    http_reply reply;
    try {
      reply = handler_(req);
    } catch (const std::exception& e) {
      reply = {500, "{\"detail\":\"internal error\"}"};
    }
    if (stream.opened()) {
      // Answered through the stream only (a switched connection: ended by its handler).
      if (stream.switched() || !reply.streamed || !stream.finish() || !keep) return;
      continue;
    }
    if (!send_reply(fd, reply, keep) || !keep) return;
  }
}

}  // namespace dockgate::sidecar
