// The block pool: a steady load keeps its blocks (no map/unmap per request), a burst's
// blocks go back a settle or two after it, and nothing cached survives a trim.
#include "buffer_pool.hpp"

#include <catch2/catch.hpp>
#include <vector>

using dockgate::proxy::buffer_pool;

TEST_CASE("buffer pool: a steady load keeps its blocks across settles", "[pool]") {
  buffer_pool pool;
  for (int second = 0; second < 5; ++second) {
    // 50 connections, each taking and giving back a block per request: in use goes up
    // and down within the second, the cache covers it.
    for (int round = 0; round < 100; ++round) {
      std::vector<char*> taken;
      for (int i = 0; i < 50; ++i) taken.push_back(pool.acquire());
      for (char* b : taken) pool.release(b);
    }
    pool.settle();
    CHECK(pool.cached() == 50);  // all of the second's peak kept: nothing unmapped
  }
}

TEST_CASE("buffer pool: a burst's blocks go back within two settles", "[pool]") {
  buffer_pool pool;
  std::vector<char*> taken;
  for (int i = 0; i < 200; ++i) taken.push_back(pool.acquire());
  for (char* b : taken) pool.release(b);
  CHECK(pool.in_use() == 0);
  CHECK(pool.cached() == 200);
  CHECK_FALSE(pool.quiet());  // the burst came and went between two looks: it is seen
  pool.settle();              // the burst's second: its peak is still wanted
  CHECK(pool.cached() == 200);
  CHECK(pool.quiet());
  CHECK(pool.settle());  // a second with nothing in use: only the spare stays
  CHECK(pool.cached() == 16);
  CHECK_FALSE(pool.settle());
  pool.trim();
  CHECK(pool.cached() == 0);
}

TEST_CASE("buffer pool: blocks are usable memory of the full size", "[pool]") {
  buffer_pool pool;
  char* b = pool.acquire();
  for (std::size_t i = 0; i < buffer_pool::block_size; ++i) b[i] = static_cast<char>(i);
  CHECK(b[buffer_pool::block_size - 1] == static_cast<char>(buffer_pool::block_size - 1));
  pool.release(b);
  CHECK(pool.acquire() == b);  // the cached block comes back first
  pool.release(b);
}
