#include "runtime/cuda/staging.h"

#include <array>
#include <memory>
#include <mutex>

#include "runtime/cuda/stream.h"

namespace loom::cuda {
namespace {

constexpr int kChunks = 4;

struct Ring {
  char* host = nullptr;    // kChunks * kStagingChunk pinned bytes
  char* device = nullptr;  // the twin
  std::array<cudaEvent_t, kChunks> done{};
  std::array<bool, kChunks> pending{};  // done[c] was recorded and not yet waited for
  int current = 0;
  size_t used = 0;  // bytes of the current chunk handed out
};

std::array<std::unique_ptr<Ring>, 64>& rings() {
  static auto* r = new std::array<std::unique_ptr<Ring>, 64>();  // never destroyed (see stream.cpp)
  return *r;
}

std::mutex& ring_mutex() {
  static auto* mu = new std::mutex();
  return *mu;
}

Ring& ring(int device) {
  LOOM_CHECK(device >= 0 && device < 64, Runtime, "device ordinal ", device, " is out of range");
  std::unique_ptr<Ring>& r = rings()[static_cast<size_t>(device)];
  if (r) [[likely]]
    return *r;
  set_device(device);
  auto fresh = std::make_unique<Ring>();
  std::string what = "the staging ring of cuda:" + std::to_string(device);
  void* host = nullptr;
  check(cudaHostAlloc(&host, kChunks * kStagingChunk, cudaHostAllocPortable), "cudaHostAlloc", what);
  fresh->host = static_cast<char*>(host);
  void* dev = nullptr;
  check(cudaMalloc(&dev, kChunks * kStagingChunk), "cudaMalloc", what);
  fresh->device = static_cast<char*>(dev);
  for (cudaEvent_t& e : fresh->done) check(cudaEventCreateWithFlags(&e, cudaEventDisableTiming), "cudaEventCreate", what);
  r = std::move(fresh);
  return *r;
}

}  // namespace

Staged stage(int device, size_t bytes, const char* what) {
  LOOM_CHECK(!capturing(), Runtime, "internal: staging ", what, " while capturing a CUDA graph");
  LOOM_CHECK(bytes > 0 && bytes <= kStagingChunk, Runtime, what, " needs ", bytes,
             " bytes of staging, more than a chunk of the ring (", kStagingChunk, " bytes)");
  std::lock_guard lock(ring_mutex());
  Ring& r = ring(device);
  size_t at = (r.used + kStagingAlign - 1) / kStagingAlign * kStagingAlign;
  if (at + bytes > kStagingChunk) {
    // Move on: mark the end of the work that used this chunk, then wait until the next chunk's
    // last users have finished (long ago, unless the host runs a whole ring ahead).
    check(cudaEventRecord(r.done[static_cast<size_t>(r.current)], stream(device)), "cudaEventRecord", what);
    r.pending[static_cast<size_t>(r.current)] = true;
    r.current = (r.current + 1) % kChunks;
    if (r.pending[static_cast<size_t>(r.current)]) {
      check(cudaEventSynchronize(r.done[static_cast<size_t>(r.current)]), "cudaEventSynchronize", what);
      r.pending[static_cast<size_t>(r.current)] = false;
    }
    at = 0;
  }
  r.used = at + bytes;
  size_t offset = static_cast<size_t>(r.current) * kStagingChunk + at;
  return {r.host + offset, r.device + offset, bytes};
}

void* upload(int device, const Staged& s) {
  set_device(device);
  check(cudaMemcpyAsync(s.device, s.host, s.bytes, cudaMemcpyHostToDevice, stream(device)), "cudaMemcpyAsync",
        "staged upload");
  return s.device;
}

}  // namespace loom::cuda
