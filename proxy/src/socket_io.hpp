#pragma once
// Reading and writing on the relay's per-request path without a pass through the event
// loop where none is needed. Writing a whole answer or request: one non-blocking sendmsg(2) right
// away, and only what the socket did not take goes through asio. Most writes fit the socket's send
// buffer, so they cost one system call and no pass through the event loop (an asio write that
// completes at once still posts its completion, and the loop polls epoll before running it: an
// epoll_wait per write, measured with strace on GET /_ping).

#include <array>
#include <cstddef>
#include <span>
#include <tuple>

#include "net.hpp"

namespace dockgate::proxy {

// All of `pieces`, in order; the error of the first failed write and the bytes written.
net::awaitable<std::tuple<boost::system::error_code, std::size_t>> write_all(
    protocol::socket& s, std::span<const net::const_buffer> pieces);

inline net::awaitable<std::tuple<boost::system::error_code, std::size_t>> write_all(
    protocol::socket& s, net::const_buffer piece) {
  const std::array<net::const_buffer, 1> one{piece};
  co_return co_await write_all(s, std::span<const net::const_buffer>(one));
}

// What the socket has now, into `into`: one recv(2), no asio operation (for a socket just
// reported readable). {error, bytes}: the end as net::error::eof, like async_read_some, and
// net::error::would_block if it had nothing after all.
std::tuple<boost::system::error_code, std::size_t> read_now(protocol::socket& s,
                                                            net::mutable_buffer into) noexcept;

}  // namespace dockgate::proxy
