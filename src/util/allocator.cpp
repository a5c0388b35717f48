#include "trainsim/util/allocator.hpp"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace trainsim {

void keep_freed_memory_for_reuse() {
#if defined(__GLIBC__)
  constexpr int kMmapThreshold = 32 << 20;  // glibc's largest (DEFAULT_MMAP_THRESHOLD_MAX, 64-bit)
  constexpr int kTrimThreshold = 1 << 30;
  mallopt(M_MMAP_THRESHOLD, kMmapThreshold);
  mallopt(M_TRIM_THRESHOLD, kTrimThreshold);
#endif
}

}  // namespace trainsim
