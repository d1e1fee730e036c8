// Host memory for the CPU allocator: 64-byte aligned, so every tensor starts on a cache line and
// generated loops can use aligned vector loads.
#include <cstdlib>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "runtime/allocator.h"

namespace loom {
namespace {

constexpr size_t kHostAlignment = 64;

class HostMemory final : public MemoryBackend {
 public:
  Device device() const override { return kCPU; }
  void* allocate(size_t nbytes) override {
    void* ptr = nullptr;
    return posix_memalign(&ptr, kHostAlignment, nbytes) == 0 ? ptr : nullptr;
  }
  void free(void* ptr, size_t) noexcept override { std::free(ptr); }
  // glibc keeps freed heap memory (below its mmap threshold, which grows to 32 MiB as large
  // blocks are freed) for later mallocs: hand the free pages back.
  void trim() noexcept override {
#if defined(__GLIBC__)
    malloc_trim(0);
#endif
  }
};

}  // namespace

std::unique_ptr<MemoryBackend> make_host_memory_backend() { return std::make_unique<HostMemory>(); }

}  // namespace loom
