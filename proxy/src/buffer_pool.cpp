#include "buffer_pool.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <new>

namespace dockgate::proxy {

namespace {

// Blocks are mappings of their own, not heap memory: a block freed after a burst goes
// back to the system at once, and the heap holes it would leave are not filled by the
// long-lived objects of the connections accepted meanwhile (which then pinned the
// heap's pages: 1000 held streams cost ~6 KiB each instead of ~3).
char* new_block() {
  void* p = ::mmap(nullptr, buffer_pool::block_size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<char*>(p);
}

void free_block(char* b) {
  ::munmap(b, buffer_pool::block_size);
}

}  // namespace

buffer_pool::~buffer_pool() {
  for (char* b : free_) free_block(b);
}

char* buffer_pool::acquire() {
  ++in_use_;
  high_water_ = std::max(high_water_, in_use_);
  if (free_.empty()) return new_block();
  char* b = free_.back();
  free_.pop_back();
  return b;
}

void buffer_pool::release(char* block) {
  --in_use_;
  if (free_.size() >= keep) return free_block(block);
  free_.push_back(block);
}

bool buffer_pool::settle() {
  const std::size_t wanted = high_water_ + spare > in_use_ ? high_water_ + spare - in_use_ : 0;
  bool freed = false;
  while (free_.size() > wanted) {
    free_block(free_.back());
    free_.pop_back();
    freed = true;
  }
  high_water_ = in_use_;
  return freed;
}

void buffer_pool::trim() {
  for (char* b : free_) free_block(b);
  free_.clear();
  free_.shrink_to_fit();
  // One trim at a time in the process: each shard's watchdog trims at its own quiet tick,
  // and two malloc_trim calls at once can both run glibc's first-use initialisation of
  // its arenas (ptmalloc_init, not thread-safe) where nothing allocated through glibc's
  // malloc before: under AddressSanitizer, whose allocator replaces it, the second shard's
  // trim crashed the gate in mtrim (seen 1 run in 25 of the transparency test).
  static std::mutex trimming;
  std::lock_guard hold(trimming);
  ::malloc_trim(0);
}

}  // namespace dockgate::proxy
