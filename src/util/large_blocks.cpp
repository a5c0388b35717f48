// The program's operator new, for the executables (trainsim, trainsim_bench; not the libraries, the
// tests or the Python module): a block of 4 MiB or more comes aligned to 2 MiB and marked for
// transparent huge pages (madvise MADV_HUGEPAGE, which Debian's kernels honour by default: THP
// "madvise"), smaller ones from malloc as before. An every-rank step builds task arrays of
// gigabytes, and faulting them in 4 KiB pages (twice, as a vector grows by copying) took about
// 40% of its time (docs/performance.md). Both kinds of block are released by free(). Not compiled
// under the sanitizers, whose allocator stands in for new and delete.
#include <cstdlib>
#include <new>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define TRAINSIM_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define TRAINSIM_SANITIZED 1
#endif

#if defined(__linux__) && !defined(TRAINSIM_SANITIZED)
#include <sys/mman.h>

namespace {

constexpr std::size_t kHugePage = std::size_t{2} << 20;
constexpr std::size_t kLargeBlock = 2 * kHugePage;

void* allocate(std::size_t size) {
  if (size >= kLargeBlock) {
    const std::size_t rounded = (size + kHugePage - 1) / kHugePage * kHugePage;
    if (void* p = std::aligned_alloc(kHugePage, rounded)) {
      madvise(p, rounded, MADV_HUGEPAGE);  // advice: a kernel without THP ignores it
      return p;
    }
  } else if (void* p = std::malloc(size == 0 ? 1 : size)) {
    return p;
  }
  throw std::bad_alloc();
}

}  // namespace

void* operator new(std::size_t size) {
  return allocate(size);
}
void* operator new[](std::size_t size) {
  return allocate(size);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}

#endif
