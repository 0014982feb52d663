#pragma once
// Asio/Beast aliases for the proxy's I/O code. Kept out of public headers: Beast is heavy
// to compile and is compiled once, in asio_beast.cpp.

#include <boost/asio/as_tuple.hpp>
#include <boost/asio/awaitable.hpp>
#include <boost/asio/co_spawn.hpp>
#include <boost/asio/detached.hpp>
#include <boost/asio/generic/stream_protocol.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/use_awaitable.hpp>
#include <boost/beast/core/basic_stream.hpp>

namespace dockgate::proxy {

namespace net = boost::asio;
namespace beast = boost::beast;

using protocol = net::generic::stream_protocol;
using stream = beast::basic_stream<protocol>;

// Expected I/O outcomes (EOF, reset, timeout) are values, not exceptions.
inline constexpr auto use_tuple = net::as_tuple(net::use_awaitable);

}  // namespace dockgate::proxy
