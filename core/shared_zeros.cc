#include "core/shared_zeros.h"

#include <sys/mman.h>

#include <algorithm>
#include <mutex>
#include <new>

namespace rpa {

const std::byte* shared_zeros(size_t n) {
  static std::mutex mutex;
  static const std::byte* region = nullptr;
  static size_t region_size = 0;
  std::lock_guard<std::mutex> lock(mutex);
  if (n > region_size || region == nullptr) {
    // At least 64 MiB, and double the last: a few mappings serve a whole fuzzing run.
    const size_t size = std::max({n, size_t{64} << 20, 2 * region_size});
    void* p = mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    region = static_cast<const std::byte*>(p);
    region_size = size;
  }
  return region;
}

}  // namespace rpa
