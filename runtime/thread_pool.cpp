#include "runtime/thread_pool.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>

namespace loom {
namespace {

class ThreadPool {
 public:
  // Workers are detached: the pool lives as long as the process (see pool()).
  explicit ThreadPool(int threads) : threads_(std::max(threads, 1)) {
    for (int i = 1; i < threads_; ++i) std::thread([this] { work(); }).detach();
  }

  int threads() const noexcept { return threads_; }

  // Work is cut into up to kChunksPerThread chunks per thread, claimed one at a time by whichever
  // thread is free: a worker that wakes late (tens of microseconds on a busy or virtualized
  // machine) then joins for the remaining chunks instead of making the caller wait for a half
  // it had not started.
  static constexpr int64_t kChunksPerThread = 8;

  void run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
    // Whole grains per chunk (rounding the chunk count down keeps every chunk at least a grain).
    int64_t chunks = std::min<int64_t>(threads_ * kChunksPerThread, n / std::max<int64_t>(grain, 1));
    std::unique_lock busy(busy_, std::try_to_lock);
    if (!busy.owns_lock() || chunks <= 1) {
      body(0, n);
      return;
    }
    uint64_t job;
    {
      std::lock_guard lock(mu_);
      body_ = &body;
      n_ = n;
      chunks_ = chunks;
      next_ = 0;
      remaining_ = chunks;
      job = ++generation_;
    }
    wake_.notify_all();
    take_chunks(job);
    std::unique_lock lock(mu_);
    done_.wait(lock, [&] { return remaining_ == 0; });
  }

 private:
  // Claims and runs chunks of job `job` until none is left. Every shared field is read under
  // the lock, and only for the job the thread was woken for.
  void take_chunks(uint64_t job) {
    for (;;) {
      const std::function<void(int64_t, int64_t)>* body;
      int64_t begin, end;
      {
        std::lock_guard lock(mu_);
        if (generation_ != job || next_ >= chunks_) return;
        int64_t c = next_++;
        begin = n_ * c / chunks_;
        end = n_ * (c + 1) / chunks_;
        body = body_;
      }
      (*body)(begin, end);
      std::lock_guard lock(mu_);
      if (--remaining_ == 0) done_.notify_one();
    }
  }

  void work() {
    uint64_t seen = 0;
    for (;;) {
      {
        std::unique_lock lock(mu_);
        wake_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
      }
      take_chunks(seen);
    }
  }

  const int threads_;
  std::mutex busy_;  // held by the thread whose job runs
  std::mutex mu_;    // guards everything below
  std::condition_variable wake_, done_;
  const std::function<void(int64_t, int64_t)>* body_ = nullptr;
  int64_t n_ = 0, chunks_ = 0, next_ = 0, remaining_ = 0;
  uint64_t generation_ = 0;
};

int configured_threads() {
  if (const char* v = std::getenv("LOOM_NUM_THREADS"); v && *v) {
    int n = std::atoi(v);
    if (n >= 1) return n;
  }
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

ThreadPool& pool() {
  static auto* p = new ThreadPool(configured_threads());  // never destroyed: workers never join
  return *p;
}

}  // namespace

int num_threads() noexcept { return pool().threads(); }

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  pool().run(n, grain, body);
}

}  // namespace loom
