// See readiness.hpp: the fast path, built when DOCKGATE_ASIO_REACTOR_PEEK is ON (CMake turns
// it on by default only with Boost 1.81.0; the static_assert below is the last guard).
#include "readiness.hpp"

#include <sys/epoll.h>

#include <boost/asio/associated_cancellation_slot.hpp>
#include <boost/asio/detail/epoll_reactor.hpp>
#include <boost/asio/detail/handler_cont_helpers.hpp>
#include <boost/asio/detail/reactive_wait_op.hpp>
#include <boost/asio/detail/socket_ops.hpp>
#include <boost/version.hpp>
#include <memory>

static_assert(BOOST_VERSION == 108100,
              "readiness.cpp reads Asio's epoll reactor of Boost 1.81: re-read "
              "epoll_reactor::start_op, epoll_reactor::run, descriptor_state::perform_io "
              "and reactive_socket_service_base::async_wait before building with another "
              "Boost");
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
struct registered_events_of {
  using type = uint32_t state::*;
  friend type member(registered_events_of);
};
struct reactor_of {
  using type = reactor* state::*;
  friend type member(reactor_of);
};
struct epoll_fd_of {
  using type = int reactor::*;
  friend type member(epoll_fd_of);
};
// The events of the last epoll report the reactor took for the socket (set_ready_events),
// kept in the descriptor_state's operation base until the next one.
struct last_events_of {
  using type = unsigned int net::detail::scheduler_operation::*;
  friend type member(last_events_of);
};
template struct expose<try_speculative_of, &state::try_speculative_>;
template struct expose<mutex_of, &state::mutex_>;
template struct expose<registered_events_of, &state::registered_events_>;
template struct expose<reactor_of, &state::reactor_>;
template struct expose<epoll_fd_of, &reactor::epoll_fd_>;
template struct expose<last_events_of, &net::detail::scheduler_operation::task_result_>;

using lock = net::detail::conditionally_enabled_mutex::scoped_lock;

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

unsigned int last_events(state* d) noexcept {
  // descriptor_state derives privately from its operation base; a C-style cast is the
  // language's conversion to an inaccessible base.
  return ((net::detail::scheduler_operation*)d)->*member(last_events_of{});
}

// What reactive_socket_service_base::reactor_op_cancellation does for asio's own operations.
struct cancel_wait {
  reactor* r;
  reactor::per_descriptor_data* data;
  int descriptor;
  void operator()(net::cancellation_type_t type) {
    using net::cancellation_type;
    if (!!(type &
           (cancellation_type::terminal | cancellation_type::partial | cancellation_type::total)))
      r->cancel_ops_by_key(descriptor, *data, reactor::read_op, this);
  }
};

// socket.async_wait(wait_read), but started the way a read is (the reactor's
// allow_speculative): with the flag set it completes at once, with it clear it is queued;
// async_wait instead always re-arms with epoll_ctl.
struct initiate_until_readable {
  template <typename Handler>
  void operator()(Handler&& handler, protocol::socket* s) const {
    using handler_type = std::decay_t<Handler>;
    using op = net::detail::reactive_wait_op<handler_type, protocol::socket::executor_type>;
    auto& impl = socket_access::implementation(*s);
    const bool is_continuation = boost_asio_handler_cont_helpers::is_continuation(handler);
    auto slot = net::get_associated_cancellation_slot(handler);
    typename op::ptr p = {std::addressof(handler), op::ptr::allocate(handler), nullptr};
    p.p = new (p.v) op(boost::system::error_code(), handler, s->get_executor());
    state* d = impl.reactor_data_;
    if (!d) {  // closed: asio's start_op answers bad_descriptor
      auto& r = net::use_service<reactor>(net::query(s->get_executor(), net::execution::context));
      r.start_op(reactor::read_op, impl.socket_, impl.reactor_data_, p.p, is_continuation, true);
      p.v = p.p = nullptr;
      return;
    }
    reactor& r = *(d->*member(reactor_of{}));
    if (slot.is_connected())
      p.p->cancellation_key_ =
          &slot.template emplace<cancel_wait>(&r, &impl.reactor_data_, impl.socket_);
    if ((impl.state_ & net::detail::socket_ops::non_blocking) ||
        net::detail::socket_ops::set_internal_non_blocking(impl.socket_, impl.state_, true,
                                                           p.p->ec_))
      r.start_op(reactor::read_op, impl.socket_, impl.reactor_data_, p.p, is_continuation, true);
    else
      r.post_immediate_completion(p.p, is_continuation);
    p.v = p.p = nullptr;
  }
};

}  // namespace

void not_readable_yet(protocol::socket& s) noexcept {
  state* d = state_of(s);
  if (!d) return;  // closed: the write reports it
  lock held(d->*member(mutex_of{}));
  (d->*member(try_speculative_of{}))[reactor::read_op] = false;
}

bool maybe_readable(protocol::socket& s) noexcept {
  state* d = state_of(s);
  if (!d) return true;
  lock held(d->*member(mutex_of{}));
  return (d->*member(try_speculative_of{}))[reactor::read_op];
}

bool report_end(protocol::socket& s) noexcept {
  state* d = state_of(s);
  if (!d) return false;
  lock held(d->*member(mutex_of{}));
  uint32_t& registered = d->*member(registered_events_of{});
  if (registered & EPOLLRDHUP) return true;
  if (registered == 0) return false;  // not on epoll at all (asio's fallback for odd files)
  epoll_event ev{};
  ev.events = registered | EPOLLRDHUP;
  ev.data.ptr = d;
  // The modification also re-arms the edge: whatever the socket holds now, an end included,
  // is reported again by the next epoll_wait.
  if (::epoll_ctl(d->*member(reactor_of{})->*member(epoll_fd_of{}), EPOLL_CTL_MOD,
                  s.native_handle(), &ev) != 0)
    return false;
  registered = ev.events;  // asio's later modifications (EPOLLOUT) keep it
  return true;
}

void drained_unless_ended(protocol::socket& s) noexcept {
  state* d = state_of(s);
  if (!d) return;
  lock held(d->*member(mutex_of{}));
  if (!(d->*member(registered_events_of{}) & EPOLLRDHUP)) return;   // an end would go unseen
  if (last_events(d) & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) return;  // the end is in: read it
  (d->*member(try_speculative_of{}))[reactor::read_op] = false;
}

net::awaitable<std::tuple<boost::system::error_code>> until_readable(protocol::socket& s) {
  return net::async_initiate<decltype(use_tuple), void(boost::system::error_code)>(
      initiate_until_readable{}, use_tuple, &s);
}

}  // namespace dockgate::proxy
