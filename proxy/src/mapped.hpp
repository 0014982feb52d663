#pragma once
// Objects in mappings of their own (mmap(2)), not on the heap, for what a burst of
// connections takes at once and gives back (the parsed request heads, ~3 KB each): freed,
// it goes back to the system at once, and the heap holes it would leave are not pinned
// by the long-lived objects allocated meanwhile (the connections of held streams, which
// then cost ~5 KiB each instead of ~3). The I/O blocks are mapped for the same reason
// (buffer_pool.cpp). Taking one costs a system call: for objects that are reused.

#include <sys/mman.h>

#include <memory>
#include <new>
#include <utility>

namespace dockgate::proxy {

template <class T>
struct mapped_delete {
  void operator()(T* p) const noexcept {
    p->~T();
    ::munmap(p, sizeof(T));
  }
};

template <class T>
using mapped_ptr = std::unique_ptr<T, mapped_delete<T>>;

template <class T, class... Args>
mapped_ptr<T> make_mapped(Args&&... args) {
  void* p = ::mmap(nullptr, sizeof(T), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  try {
    return mapped_ptr<T>(new (p) T(std::forward<Args>(args)...));
  } catch (...) {
    ::munmap(p, sizeof(T));
    throw;
  }
}

}  // namespace dockgate::proxy
