// Asio keeps every per-socket state it ever made (epoll_reactor's descriptor_state, held
// in an object_pool for reuse and never freed). Made by malloc in the middle of a burst
// of connections, each one pins the heap page it landed on: after 1000 held streams had
// closed, malloc_trim could give back almost nothing (RSS stayed ~5 MB above the start).
// So the allocations of exactly that size get their own pages, here: a range of address
// space reserved once (untouched pages cost nothing), slots handed out in order and
// reused from a free list. Everything else goes to malloc as before. Linked into the
// dockgate-proxy program only (a replacement operator new belongs to the program), and
// left out under AddressSanitizer, which brings its own.
#include <sys/mman.h>

#include <atomic>
#include <boost/asio/detail/epoll_reactor.hpp>
#include <cstddef>
#include <cstdlib>
#include <new>

#if !defined(__SANITIZE_ADDRESS__)

namespace {

constexpr std::size_t state_size = sizeof(boost::asio::detail::epoll_reactor::descriptor_state);
constexpr std::size_t slot_size = (state_size + 15) & ~std::size_t{15};
constexpr std::size_t reserve_bytes = std::size_t{64} << 20;  // ~380,000 sockets

// Plain globals, constant-initialised: operator new runs before any constructor does.
constinit char* base = nullptr;
constinit bool reserve_failed = false;
constinit std::size_t used = 0;
constinit void* free_slots = nullptr;
constinit std::atomic_flag busy = ATOMIC_FLAG_INIT;

struct hold {
  hold() {
    while (busy.test_and_set(std::memory_order_acquire)) {
    }
  }
  ~hold() { busy.clear(std::memory_order_release); }
};

void* slab_allocate() {
  hold h;
  if (free_slots) {
    void* p = free_slots;
    free_slots = *static_cast<void**>(p);
    return p;
  }
  if (!base && !reserve_failed) {
    void* r = ::mmap(nullptr, reserve_bytes, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (r == MAP_FAILED)
      reserve_failed = true;
    else
      base = static_cast<char*>(r);
  }
  if (!base || used + slot_size > reserve_bytes) return nullptr;
  void* p = base + used;
  used += slot_size;
  return p;
}

bool in_slab(void* p) {
  const char* c = static_cast<const char*>(p);
  return base && c >= base && c < base + reserve_bytes;
}

void* allocate(std::size_t n) {
  if (n == state_size)
    if (void* p = slab_allocate()) return p;
  return std::malloc(n ? n : 1);
}

}  // namespace

void* operator new(std::size_t n) {
  if (void* p = allocate(n)) return p;
  throw std::bad_alloc();
}

void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  return allocate(n);
}

void operator delete(void* p) noexcept {
  if (!in_slab(p)) return std::free(p);
  hold h;
  *static_cast<void**>(p) = free_slots;
  free_slots = p;
}

void operator delete(void* p, std::size_t) noexcept {
  operator delete(p);
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  operator delete(p);
}

#endif
