#pragma once
// Blocking socket helpers shared by dockgate-load's scenarios: connect to a Docker
// endpoint, send a whole buffer, read one HTTP/1.1 response. Deliberately independent of
// the proxy's framing code, so the client that measures the proxy does not share its bugs.

#include <string>
#include <string_view>

#include "dockgate/common/endpoint.hpp"

namespace dockgate::bench {

// A connected stream socket (TCP_NODELAY on TCP), or -1. `nonblocking` sockets may come
// back before the connection is complete; `*would_block` is set when a unix listener's
// backlog is full (EAGAIN), the caller retries later.
int connect_to(const common::endpoint& ep, bool nonblocking = false, bool* would_block = nullptr);

bool send_all(int fd, std::string_view data);

// The status code of a response head, 0 when `head` is not an HTTP/1.x status line.
int status_of(std::string_view head);

// Reads one whole response from `fd` (Content-Length or chunked body) through `buf`: bytes
// read past its end stay there for the next call on a keep-alive connection. Returns the
// status code, 0 on a framing or I/O error; the body goes to `*body` when asked for.
int read_response(int fd, std::string& buf, std::string* body = nullptr);

// Reads until the end of a response head; `buf` keeps everything after the head.
// Returns the head (with its final CRLFCRLF), or an empty string on EOF or error.
std::string read_head(int fd, std::string& buf);

// GET/POST request text with the fields dockgate-load always sends.
std::string request(std::string_view method, std::string_view target,
                    std::string_view json_body = {}, std::string_view extra_fields = {});

}  // namespace dockgate::bench
