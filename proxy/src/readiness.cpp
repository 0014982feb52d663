// See readiness.hpp.
#include "readiness.hpp"

#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/version.hpp>

static_assert(BOOST_VERSION == 108100,
              "readiness.cpp reads Asio's epoll reactor of Boost 1.81: re-read "
              "epoll_reactor::start_op and descriptor_state::perform_io before building "
              "with another Boost");
#if !defined(BOOST_ASIO_HAS_EPOLL) || defined(BOOST_ASIO_HAS_IO_URING_AS_DEFAULT)
#error "readiness.cpp needs Asio's epoll reactor"
#endif

namespace dockgate::proxy {
namespace {

using reactor = net::detail::epoll_reactor;
using state = reactor::descriptor_state;

// Pointers to descriptor_state's private members, taken where the standard skips access
// checks (the template arguments of an explicit instantiation) and handed out through a
// friend function found by its tag.
template <class Tag, typename Tag::type Member>
struct expose {
  friend typename Tag::type member(Tag) { return Member; }
};
struct try_speculative_of {
  using type = bool (state::*)[reactor::max_ops];
  friend type member(try_speculative_of);
};
struct mutex_of {
  using type = net::detail::conditionally_enabled_mutex state::*;
  friend type member(mutex_of);
};
template struct expose<try_speculative_of, &state::try_speculative_>;
template struct expose<mutex_of, &state::mutex_>;

// The socket's reactor-side implementation (basic_socket::impl_ is protected; a pointer to
// it named through a derived class is the standard's way in).
struct socket_access : protocol::socket {
  static auto& implementation(protocol::socket& s) noexcept {
    return (s.*&socket_access::impl_).get_implementation();
  }
};

state* state_of(protocol::socket& s) noexcept {
  return socket_access::implementation(s).reactor_data_;
}

}  // namespace

void not_readable_yet(protocol::socket& s) noexcept {
  state* d = state_of(s);
  if (!d) return;  // closed: the write reports it
  net::detail::conditionally_enabled_mutex::scoped_lock lock(d->*member(mutex_of{}));
  (d->*member(try_speculative_of{}))[reactor::read_op] = false;
}

bool maybe_readable(protocol::socket& s) noexcept {
  state* d = state_of(s);
  if (!d) return true;
  net::detail::conditionally_enabled_mutex::scoped_lock lock(d->*member(mutex_of{}));
  return (d->*member(try_speculative_of{}))[reactor::read_op];
}

}  // namespace dockgate::proxy
