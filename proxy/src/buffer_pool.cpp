#include "buffer_pool.hpp"

#include <malloc.h>
#include <sys/mman.h>

#include <new>

namespace dockgate::proxy {

namespace {

// Blocks are mappings of their own, not heap memory: a block freed after a burst goes
// back to the system at once, and the heap holes it would leave are not filled by the
// long-lived objects of the connections accepted meanwhile (which then pinned the
// heap's pages: 1000 held streams cost ~6 KiB each instead of ~3).
char* new_block() {
  void* p = ::mmap(nullptr, buffer_pool::block_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) throw std::bad_alloc();
  return static_cast<char*>(p);
}

void free_block(char* b) { ::munmap(b, buffer_pool::block_size); }

}  // namespace

buffer_pool::~buffer_pool() {
  for (char* b : free_) free_block(b);
}

char* buffer_pool::acquire() {
  ++in_use_;
  ++acquired_;
  if (free_.empty()) return new_block();
  char* b = free_.back();
  free_.pop_back();
  return b;
}

void buffer_pool::release(char* block) {
  --in_use_;
  if (free_.size() >= keep || free_.size() >= in_use_ + spare) {
    free_block(block);
    freed_since_trim_ += block_size;
    return;
  }
  free_.push_back(block);
}

void buffer_pool::trim() {
  for (char* b : free_) free_block(b);
  free_.clear();
  free_.shrink_to_fit();
  ::malloc_trim(0);
  freed_since_trim_ = 0;
}

void buffer_pool::return_freed_memory() {
  if (freed_since_trim_ < trim_after) return;
  ::malloc_trim(0);  // what the burst's connections freed besides the blocks
  freed_since_trim_ = 0;
}

}  // namespace dockgate::proxy
