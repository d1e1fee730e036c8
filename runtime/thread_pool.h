// The host's worker threads: generated CPU kernels split their outer loop across them.
//
// One process-wide pool of (threads - 1) workers; the calling thread takes a share too, so a
// parallel_for on a 2-core machine runs on both cores. Workers sleep on a condition variable
// between jobs (no spinning: the engine alternates short parallel kernels with serial work, and
// a spinning worker would steal the core the serial work needs, or OpenBLAS's threads). The
// caller, once its own chunks are done, polls for the workers' last ones for up to
// kPollNanoseconds (yielding its core between polls) before it sleeps too: a futex wake-up costs
// 13 to 25 us on the VMs loom is measured on, and a caller that slept paid one more after the
// worker's own (perf/RESULTS.md). One job runs at a time; a
// parallel_for called while another runs (from a worker, or from a second engine thread) runs
// its loop on the calling thread alone, so nesting can never deadlock.
//
// LOOM_NUM_THREADS sets the thread count (default: the hardware's); 1 disables the pool. A value
// that is not a whole number from 1 to kMaxThreads is an error (loom::Error, Value), raised by
// every function below, never read as a number it does not spell. set_num_threads (the program's
// torch.set_num_threads) changes the count later: the pool stops its workers and starts the new
// number, once the loop running now (if any) has ended.
//
// Starting never fails and never hangs: when the system refuses a thread (a pids cgroup, a thread
// limit, an address-space limit too small for one more stack), the pool keeps the workers it
// started, runs with fewer threads than asked, and warns once (runtime/warning.h).
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace loom {

inline constexpr int kMaxThreads = 1024;
// How long a caller whose chunks are done polls for the workers' before it sleeps.
inline constexpr int64_t kPollNanoseconds = 100'000;

// Threads a parallel_for uses (workers + the caller): what the process's pool could start.
int num_threads();

// Runs body(begin, end) over [0, n) in chunks of at least `grain` iterations, spread over the
// pool's threads, and returns when all chunks are done. `body` must not throw.
void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);

// The thread count asked for: the last set_num_threads's, else LOOM_NUM_THREADS's (unset or empty:
// the hardware's), checked; the extension calls it at import so a bad value fails there.
int configured_threads();
// Makes the process's pool run `threads` threads (workers + the caller) from now on; 1 to
// kMaxThreads, else Error(Value). Waits for the parallel loop running now, if any.
void set_num_threads(int threads);
// The same check of one value of LOOM_NUM_THREADS (exposed for tests).
int parse_thread_count(const char* text);

// A pool of worker threads. The process's pool (the functions above) is made on first use and
// never destroyed; tests make their own.
class ThreadPool {
 public:
  // Starts one thread running `work`, or returns nullopt when the system refuses it.
  using StartThread = std::optional<std::thread> (*)(std::function<void()> work);
  static std::optional<std::thread> start_thread(std::function<void()> work);

  // Asks for `threads` threads in all (threads - 1 workers), started with `start`.
  explicit ThreadPool(int threads, StartThread start = start_thread);
  // Stops and joins the workers.
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Read without a lock: a loop deciding whether to go parallel may race with resize().
  int threads() const noexcept { return threads_.load(std::memory_order_relaxed); }
  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body);
  // Stops the workers and starts threads - 1 new ones, after the loop running now (if any). A loop
  // started meanwhile runs on its caller alone.
  void resize(int threads);

 private:
  void start_workers(int asked);
  void stop_workers();
  void take_chunks(uint64_t job);
  void work(uint64_t seen);

  StartThread start_;
  std::atomic<int> threads_{1};
  std::vector<std::thread> workers_;  // changed only with busy_ held
  std::mutex busy_;  // held by the thread whose job runs
  std::mutex mu_;    // guards everything below
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, chunks_ = 0, next_ = 0;
  std::atomic<int64_t> remaining_{0};  // written under mu_; the polling caller reads it without
  uint64_t generation_ = 0;
  bool stopping_ = false;
};

}  // namespace loom
