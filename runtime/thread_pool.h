// The host's worker threads: generated CPU kernels split their outer loop across them.
//
// One process-wide pool of (threads - 1) workers; the calling thread takes a share too, so a
// parallel_for on a 2-core machine runs on both cores. Workers sleep on a condition variable
// between jobs (no spinning: the engine alternates short parallel kernels with serial work, and
// a spinning worker would steal the core the serial work needs). One job runs at a time; a
// parallel_for called while another runs (from a worker, or from a second engine thread) runs
// its loop on the calling thread alone, so nesting can never deadlock.
//
// LOOM_NUM_THREADS sets the thread count (default: the hardware's); 1 disables the pool.
#pragma once

#include <cstdint>
#include <functional>

namespace loom {

// Threads a parallel_for uses (workers + the caller).
int num_threads() noexcept;

// Runs body(begin, end) over [0, n) in chunks of at least `grain` iterations, spread over the
// pool's threads, and returns when all chunks are done. `body` must not throw.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

}  // namespace loom
