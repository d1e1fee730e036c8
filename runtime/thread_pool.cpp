#include "runtime/thread_pool.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <string>
#include <string_view>
#include <system_error>

#include "runtime/error.h"
#include "runtime/warning.h"

namespace loom {
namespace {

// Polls `ready` for up to kPollNanoseconds; true when it became true. A pause between polls
// spares the memory system; a yield every 64 polls lets any other runnable thread on this core
// (OpenBLAS's workers, another process) run.
template <typename Ready>
bool poll_for(Ready&& ready) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::nanoseconds(kPollNanoseconds);
  for (int i = 1;; ++i) {
    if (ready()) return true;
    __builtin_ia32_pause();
    if (i % 64 == 0) {
      if (std::chrono::steady_clock::now() >= deadline) return ready();
      std::this_thread::yield();
    }
  }
}

}  // namespace

std::optional<std::thread> ThreadPool::start_thread(std::function<void()> work) {
  try {
    return std::thread(std::move(work));
  } catch (const std::system_error&) {  // EAGAIN: a thread or pids limit, or no room for a stack
    return std::nullopt;
  }
}

ThreadPool::ThreadPool(int asked, StartThread start) : start_(start) { start_workers(asked); }

ThreadPool::~ThreadPool() { stop_workers(); }

void ThreadPool::start_workers(int asked) {
  int wanted = std::max(asked, 1) - 1;
  workers_.reserve(static_cast<size_t>(wanted));
  uint64_t now;
  {
    std::lock_guard lock(mu_);
    stopping_ = false;
    now = generation_;  // new workers wait for the next job, not the one already done
  }
  // Never throws once a worker runs: a worker outliving a half-built pool would wait on freed
  // memory, and the caller would find no pool (the hang this avoids).
  for (int i = 0; i < wanted; ++i) {
    std::optional<std::thread> t = start_([this, now] { work(now); });
    if (!t) break;
    workers_.push_back(std::move(*t));
  }
  threads_.store(static_cast<int>(workers_.size()) + 1, std::memory_order_relaxed);
  if (static_cast<int>(workers_.size()) < wanted) {
    warn_once("thread_pool", "the system refused to start more than " + std::to_string(workers_.size()) + " of " +
                                 std::to_string(wanted) + " worker threads (a thread, pids or address-space limit); " +
                                 "CPU kernels run on " + std::to_string(threads()) + " threads instead of " +
                                 std::to_string(wanted + 1) + " (set LOOM_NUM_THREADS to choose)");
  }
}

void ThreadPool::stop_workers() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  workers_.clear();
  threads_.store(1, std::memory_order_relaxed);
}

void ThreadPool::resize(int asked) {
  std::lock_guard busy(busy_);
  if (asked == threads()) return;
  stop_workers();
  start_workers(asked);
}

// Work is cut into up to kChunksPerThread chunks per thread, claimed one at a time by whichever
// thread is free: a worker that wakes late (tens of microseconds on a busy or virtualized
// machine) then joins for the remaining chunks instead of making the caller wait for a half it
// had not started.
constexpr int64_t kChunksPerThread = 8;

void ThreadPool::run(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  // Whole grains per chunk (rounding the chunk count down keeps every chunk at least a grain).
  std::unique_lock busy(busy_, std::try_to_lock);
  int64_t chunks = std::min<int64_t>(threads() * kChunksPerThread, n / std::max<int64_t>(grain, 1));
  if (!busy.owns_lock() || chunks <= 1 || workers_.empty()) {
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
  if (poll_for([&] { return remaining_.load(std::memory_order_acquire) == 0; })) return;
  std::unique_lock lock(mu_);
  done_.wait(lock, [&] { return remaining_ == 0; });
}

// Claims and runs chunks of job `job` until none is left. Every shared field is read under the
// lock, and only for the job the thread was woken for.
void ThreadPool::take_chunks(uint64_t job) {
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

void ThreadPool::work(uint64_t seen) {
  for (;;) {
    {
      std::unique_lock lock(mu_);
      wake_.wait(lock, [&] { return generation_ != seen || stopping_; });
      if (stopping_) return;
      seen = generation_;
    }
    take_chunks(seen);
  }
}

int parse_thread_count(const char* text) {
  std::string_view s(text);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  int n = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), n);
  bool digits_only = !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
  LOOM_CHECK(digits_only && ec == std::errc() && end == s.data() + s.size() && n >= 1 && n <= kMaxThreads, Value,
             "LOOM_NUM_THREADS='", text, "' is not a thread count: expected a whole number from 1 to ", kMaxThreads,
             " (unset it to use every core)");
  return n;
}

namespace {
std::atomic<int> threads_set{0};  // set_num_threads's count; 0: none
}  // namespace

int configured_threads() {
  if (int n = threads_set.load(std::memory_order_relaxed)) return n;
  if (const char* v = std::getenv("LOOM_NUM_THREADS"); v && *v) return parse_thread_count(v);
  return static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, static_cast<unsigned>(kMaxThreads)));
}

namespace {

ThreadPool& pool() {
  // Never destroyed: the workers would have to be joined while other statics may still use
  // them. A bad LOOM_NUM_THREADS throws here, and the next call checks it again.
  static auto* p = new ThreadPool(configured_threads());
  return *p;
}

}  // namespace

int num_threads() { return pool().threads(); }

void set_num_threads(int threads) {
  LOOM_CHECK(threads >= 1 && threads <= kMaxThreads, Value, "set_num_threads expects a positive integer up to ",
             kMaxThreads, ", but got ", threads);
  threads_set.store(threads, std::memory_order_relaxed);
  pool().resize(threads);
}

void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& body) {
  if (n <= 0) return;
  pool().run(n, grain, body);
}

}  // namespace loom
