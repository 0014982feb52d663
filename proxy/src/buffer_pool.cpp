#include "buffer_pool.hpp"

#include <malloc.h>

namespace dockgate::proxy {

buffer_pool::~buffer_pool() {
  for (char* b : free_) delete[] b;
}

char* buffer_pool::acquire() {
  ++in_use_;
  ++acquired_;
  if (free_.empty()) return new char[block_size];
  char* b = free_.back();
  free_.pop_back();
  return b;
}

void buffer_pool::release(char* block) {
  --in_use_;
  if (free_.size() >= keep || free_.size() >= in_use_ + spare) {
    delete[] block;
    freed_since_trim_ += block_size;
    return;
  }
  free_.push_back(block);
}

void buffer_pool::trim() {
  for (char* b : free_) delete[] b;
  free_.clear();
  free_.shrink_to_fit();
  ::malloc_trim(0);
  freed_since_trim_ = 0;
}

void buffer_pool::return_freed_memory() {
  if (freed_since_trim_ < trim_after) return;
  ::malloc_trim(0);
  freed_since_trim_ = 0;
}

}  // namespace dockgate::proxy
