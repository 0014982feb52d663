// Step 9 of the request path (connection.hpp): a hijacked connection (ContainerAttach,
// ExecStart after the daemon's 101), spliced both ways.
//
// Invariants kept here:
// - `Upgrade` is forwarded only for ContainerAttach and ExecStart (request_shape), and the
//   connection is spliced only after the daemon answered 101 (or the legacy 200 raw
//   stream; relay_response). Bytes already buffered on either side are forwarded first;
//   half-close is passed on.
// - A hijacked stream moves through a pipe with splice(2), never through user space.
#include <fcntl.h>
#include <unistd.h>

#include <boost/asio/experimental/awaitable_operators.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>

#include "connection.hpp"
#include "socket_io.hpp"

namespace dockgate::proxy {

using namespace net::experimental::awaitable_operators;

net::awaitable<void> connection::splice(std::string_view response_leftover) {
  // Bytes the daemon sent right behind its 101, and bytes the client sent right behind
  // its request (stdin typed early): both belong to the stream.
  if (!response_leftover.empty()) {
    auto [ec, n] = co_await write_all(
        client_, net::buffer(response_leftover.data(), response_leftover.size()));
    if (ec) co_return;
    req_.audit.bytes_out += n;
  }
  response_.release();
  if (!buffered().empty()) {
    auto [ec, n] =
        co_await write_all(*upstream_, net::buffer(buffered().data(), buffered().size()));
    if (ec) co_return;
    req_.audit.bytes_in += n;
  }
  in_begin_ = in_end_ = 0;
  release_in_buffer_if_empty();
  clear_deadline();
  // `&&` keeps output flowing after the client has shut down its side (stdin EOF).
  co_await (splice_one_way(client_, *upstream_, req_.audit.bytes_in) &&
            splice_one_way(*upstream_, client_, req_.audit.bytes_out));
  upstream_.reset();
}

// One direction of a hijacked stream: socket -> pipe -> socket with splice(2), the bytes
// never copied through the proxy. At EOF the half-close is passed on (shutdown(send)).
net::awaitable<void> connection::splice_one_way(protocol::socket& from, protocol::socket& to,
                                                std::uint64_t& bytes) {
  int pipe_fds[2];
  if (::pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) {
    co_await copy_one_way(from, to, bytes);
    co_return;
  }
  struct pipe_closer {
    int* fds;
    ~pipe_closer() {
      ::close(fds[0]);
      ::close(fds[1]);
    }
  } closer{pipe_fds};
  beast::error_code ignored;
  from.native_non_blocking(true, ignored);
  to.native_non_blocking(true, ignored);
  constexpr std::size_t pipe_capacity = 64 * 1024;
  std::size_t in_pipe = 0;
  bool eof = false, write_failed = false;
  while (!write_failed && (!eof || in_pipe > 0)) {
    if (!eof && in_pipe < pipe_capacity) {
      const ssize_t n = ::splice(from.native_handle(), nullptr, pipe_fds[1], nullptr,
                                 pipe_capacity - in_pipe, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (n > 0) {
        in_pipe += static_cast<std::size_t>(n);
      } else if (n == 0) {
        eof = true;
      } else if (errno == EINVAL && in_pipe == 0 && bytes == 0) {
        co_await copy_one_way(from, to, bytes);  // a socket that cannot splice
        co_return;
      } else if (errno != EAGAIN && errno != EINTR) {
        eof = true;  // reset: what is in the pipe still goes out
      } else if (in_pipe == 0) {
        auto [ec] = co_await from.async_wait(net::socket_base::wait_read, use_tuple);
        if (ec) eof = true;
        continue;
      }
    }
    if (in_pipe > 0) {
      const ssize_t m = ::splice(pipe_fds[0], nullptr, to.native_handle(), nullptr, in_pipe,
                                 SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
      if (m > 0) {
        in_pipe -= static_cast<std::size_t>(m);
        bytes += static_cast<std::uint64_t>(m);
      } else if (m < 0 && (errno == EAGAIN || errno == EINTR)) {
        auto [ec] = co_await to.async_wait(net::socket_base::wait_write, use_tuple);
        if (ec) write_failed = true;
      } else {
        write_failed = true;
      }
    }
  }
  if (write_failed) from.shutdown(net::socket_base::shutdown_receive, ignored);
  to.shutdown(net::socket_base::shutdown_send, ignored);
}

// The same through a pooled block, where splice(2) is not available.
net::awaitable<void> connection::copy_one_way(protocol::socket& from, protocol::socket& to,
                                              std::uint64_t& bytes) {
  pooled_block block(ctx_.buffers);
  for (;;) {
    auto [ec, n] = co_await from.async_read_some(net::buffer(block.get(), block.size()), use_tuple);
    if (n > 0) {
      auto [wec, wn] = co_await net::async_write(to, net::buffer(block.get(), n), use_tuple);
      bytes += wn;
      if (wec) {
        beast::error_code ignored;
        from.shutdown(net::socket_base::shutdown_receive, ignored);
        co_return;
      }
    }
    if (ec) break;
  }
  beast::error_code ignored;
  to.shutdown(net::socket_base::shutdown_send, ignored);
}

}  // namespace dockgate::proxy
