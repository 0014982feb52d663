#pragma once
// Byte blocks for the I/O path. A connection takes a block when data arrives and gives
// it back before it waits again, so an idle keep-alive connection or a held stream
// (`events`, `wait`) holds no buffer at all. The proxy runs one io_context on one thread:
// no locking.

#include <cstddef>
#include <vector>

namespace dockgate::proxy {

class buffer_pool {
 public:
  // Fits a typical answer of the daemon (an inspect is ~5 KB) and a socket read's worth
  // of a stream.
  static constexpr std::size_t block_size = 16 * 1024;

  buffer_pool() = default;
  buffer_pool(const buffer_pool&) = delete;
  buffer_pool& operator=(const buffer_pool&) = delete;
  ~buffer_pool();

  char* acquire();
  void release(char* block);
  // Frees the blocks nobody holds and returns the heap's free memory to the system (when
  // the proxy goes idle after a load).
  void trim();
  // After a burst that freed blocks beyond the cache (1000 streams answered at once, now
  // waiting with no block), the heap's free pages go back to the system.
  void return_freed_memory();
  std::size_t in_use() const { return in_use_; }
  std::size_t cached() const { return free_.size(); }
  // True when no block was taken since the last call: the proxy moved no bytes between
  // two looks (a second apart, from the watchdog).
  bool untouched_since_last_look() {
    const bool untouched = acquired_ == looked_at_;
    looked_at_ = acquired_;
    return untouched;
  }

 private:
  std::vector<char*> free_;
  std::size_t in_use_ = 0;
  std::size_t acquired_ = 0, looked_at_ = 0;  // blocks taken ever, and at the last look
  std::size_t freed_since_trim_ = 0;  // bytes
  static constexpr std::size_t trim_after = 1024 * 1024;
  // Blocks kept for reuse: as many as are in use now plus `spare`, at most `keep`. A
  // steady load finds its blocks here; after a burst (1000 streams answered, now waiting
  // with no block) the rest are freed at once and the heap trimmed at the next
  // watchdog tick, not kept for the next burst.
  static constexpr std::size_t spare = 16;
  static constexpr std::size_t keep = 256;
};

// One block held by one user, given back when it goes out of scope or on release().
class pooled_block {
 public:
  explicit pooled_block(buffer_pool& pool) : pool_(&pool) {}
  pooled_block(const pooled_block&) = delete;
  pooled_block& operator=(const pooled_block&) = delete;
  ~pooled_block() { release(); }

  char* get() {
    if (!data_) data_ = pool_->acquire();
    return data_;
  }
  bool held() const { return data_ != nullptr; }
  void release() {
    if (data_) pool_->release(data_);
    data_ = nullptr;
  }
  static constexpr std::size_t size() { return buffer_pool::block_size; }

 private:
  buffer_pool* pool_;
  char* data_ = nullptr;
};

}  // namespace dockgate::proxy
