// See socket_io.hpp.
#include "socket_io.hpp"

#include <sys/socket.h>
#include <sys/uio.h>

#include <boost/asio/error.hpp>
#include <boost/asio/write.hpp>
#include <cerrno>

namespace dockgate::proxy {

net::awaitable<std::tuple<boost::system::error_code, std::size_t>> write_all(
    protocol::socket& s, std::span<const net::const_buffer> pieces) {
  constexpr std::size_t max_pieces = 8;  // the relay gathers at most 3
  std::array<iovec, max_pieces> iov;
  std::size_t count = 0, total = 0;
  for (const auto& piece : pieces) {
    if (piece.size() == 0) continue;
    if (count == max_pieces) co_return co_await net::async_write(s, pieces, use_tuple);
    iov[count++] = {const_cast<void*>(piece.data()), piece.size()};
    total += piece.size();
  }
  if (total == 0) co_return std::tuple{boost::system::error_code{}, std::size_t{0}};
  msghdr msg{};
  msg.msg_iov = iov.data();
  msg.msg_iovlen = count;
  ssize_t n;
  do n = ::sendmsg(s.native_handle(), &msg, MSG_NOSIGNAL | MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n >= 0 && static_cast<std::size_t>(n) == total)
    co_return std::tuple{boost::system::error_code{}, total};
  if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK)
    co_return std::tuple{boost::system::error_code(errno, boost::system::system_category()),
                         std::size_t{0}};
  // The socket took part (or none): the rest waits for room, through asio.
  std::size_t done = n > 0 ? static_cast<std::size_t>(n) : 0;
  std::array<net::const_buffer, max_pieces> rest;
  std::size_t left = 0, skip = done;
  for (std::size_t i = 0; i < count; ++i) {
    if (skip >= iov[i].iov_len) {
      skip -= iov[i].iov_len;
      continue;
    }
    rest[left++] =
        net::const_buffer(static_cast<const char*>(iov[i].iov_base) + skip, iov[i].iov_len - skip);
    skip = 0;
  }
  auto [ec, m] = co_await net::async_write(s, std::span<const net::const_buffer>(rest.data(), left),
                                           use_tuple);
  co_return std::tuple{ec, done + m};
}

std::tuple<boost::system::error_code, std::size_t> read_now(protocol::socket& s,
                                                            net::mutable_buffer into) noexcept {
  ssize_t n;
  do n = ::recv(s.native_handle(), into.data(), into.size(), MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  if (n > 0) return {boost::system::error_code{}, static_cast<std::size_t>(n)};
  if (n == 0 && into.size() > 0) return {boost::system::error_code(net::error::eof), 0};
  if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
    return {boost::system::error_code(net::error::would_block), 0};
  if (n < 0) return {boost::system::error_code(errno, boost::system::system_category()), 0};
  return {boost::system::error_code{}, 0};
}

}  // namespace dockgate::proxy
