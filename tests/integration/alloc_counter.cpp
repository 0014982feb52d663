// A malloc counter to LD_PRELOAD into dockgate-proxy, so that a test can show that the
// proxy allocates nothing per forwarded chunk. On SIGUSR2 it writes the number of
// malloc/calloc/realloc calls so far, and of the aligned ones (memalign, aligned_alloc,
// posix_memalign: Asio's coroutine frames and handlers come from aligned_new, which never
// calls malloc), to $DOCKGATE_ALLOC_COUNT_FILE.
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstddef>
#include <cstdlib>

extern "C" {
void* __libc_malloc(std::size_t);
void* __libc_calloc(std::size_t, std::size_t);
void* __libc_realloc(void*, std::size_t);
void* __libc_memalign(std::size_t, std::size_t);
}

namespace {
std::atomic<unsigned long> allocations{0};
const char* count_file = nullptr;

void report(int) {
  if (!count_file) return;
  char digits[32];
  int n = 0;
  unsigned long v = allocations.load(std::memory_order_relaxed);
  do {
    digits[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  char out[33];
  for (int i = 0; i < n; ++i) out[i] = digits[n - 1 - i];
  out[n] = '\n';
  int fd = ::open(count_file, O_WRONLY | O_CREAT | O_TRUNC, 0600);  // async-signal-safe
  if (fd < 0) return;
  (void)!::write(fd, out, static_cast<std::size_t>(n + 1));
  ::close(fd);
}

__attribute__((constructor)) void install() {
  count_file = std::getenv("DOCKGATE_ALLOC_COUNT_FILE");
  struct sigaction sa {};
  sa.sa_handler = report;
  sa.sa_flags = SA_RESTART;
  ::sigaction(SIGUSR2, &sa, nullptr);
}
}  // namespace

extern "C" {
void* malloc(std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_malloc(n);
}
void* calloc(std::size_t a, std::size_t b) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_calloc(a, b);
}
void* realloc(void* p, std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_realloc(p, n);
}
void* memalign(std::size_t align, std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(align, n);
}
void* aligned_alloc(std::size_t align, std::size_t n) {
  allocations.fetch_add(1, std::memory_order_relaxed);
  return __libc_memalign(align, n);
}
int posix_memalign(void** out, std::size_t align, std::size_t n) {
  if (align % sizeof(void*) != 0 || (align & (align - 1)) != 0) return EINVAL;
  allocations.fetch_add(1, std::memory_order_relaxed);
  void* p = __libc_memalign(align, n);
  if (!p) return ENOMEM;
  *out = p;
  return 0;
}
}
