// Pinned host memory for what the host sends to a GPU: kernel argument tables and the bytes of
// host-to-device copies.
//
// Each device has a ring of pinned host chunks, each with a device twin. A caller reserves a
// region, writes it on the host and has it copied to the twin (or straight to its own
// destination) on the device's stream; the call returns at once, as a copy from pinned memory is
// truly asynchronous. A chunk is reused only after the work queued while it was current has
// finished (an event recorded when the ring moves past it), so neither the pinned bytes nor the
// twin are overwritten while a queued copy or kernel still reads them. The ring is never used
// while a graph is being captured (a capture cannot wait on events).
//
// Only files compiled with the CUDA toolkit include this header.
#pragma once

#include <cstddef>

namespace loom::cuda {

// Bytes one reservation may take; argument tables and copy pieces are at most this.
inline constexpr size_t kStagingChunk = size_t{1} << 20;
// Every reservation starts at this alignment (cuBLAS pointer arrays want 16 bytes at least).
inline constexpr size_t kStagingAlign = 256;

struct Staged {
  void* host;     // pinned, writable now
  void* device;   // its twin in device memory, valid once upload() was queued
  size_t bytes;
};

// A region of `bytes` (0 < bytes <= kStagingChunk) of the device's ring. Throws RuntimeError for
// larger requests, naming `what`.
Staged stage(int device, size_t bytes, const char* what);

// Queues the copy of a staged region to its twin on the device's stream; returns the twin. A
// region must be uploaded (or copied from) before the next stage() call: the ring guards its
// chunks with events recorded when it moves on, which cover only copies already queued.
void* upload(int device, const Staged& s);

}  // namespace loom::cuda
