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
  // Once a second (the watchdog): cached blocks beyond what the last second needed at
  // most (plus `spare`) go back to the system; a steady load keeps its blocks, and the
  // blocks of a burst are gone a second or two after it. True when blocks were freed
  // (the heap is worth trimming too: the burst's connections freed memory there).
  bool settle();
  // Frees every cached block and returns the heap's free memory to the system (when
  // the proxy has gone idle).
  void trim();
  std::size_t in_use() const { return in_use_; }
  std::size_t cached() const { return free_.size(); }
  // No block was in use at any time since the last settle(): the proxy moved no bytes.
  bool quiet() const { return high_water_ == 0; }

 private:
  std::vector<char*> free_;
  std::size_t in_use_ = 0;
  std::size_t high_water_ = 0;  // blocks in use at most since the last settle()
  static constexpr std::size_t spare = 16;
  // Blocks cached at most, whatever the load.
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
