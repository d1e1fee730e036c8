#include "runtime/background.h"

#include <pthread.h>

#include <atomic>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>

#include "runtime/blocking.h"
#include "runtime/thread_pool.h"
#include "runtime/warning.h"

namespace loom {
namespace {

struct Background {
  std::mutex mu;
  std::condition_variable wake, idle;
  std::deque<BackgroundJob> jobs;
  bool busy = false;              // a job is running
  std::atomic<bool> exiting{false};
  std::thread* worker = nullptr;  // started with the first job; never destroyed while it runs

  void work() {
    std::function<bool()> stop = [this] { return exiting.load(std::memory_order_relaxed); };
    std::unique_lock lock(mu);
    for (;;) {
      wake.wait(lock, [this] { return exiting || !jobs.empty(); });
      if (exiting) break;
      BackgroundJob job = std::move(jobs.front());
      jobs.pop_front();
      busy = true;
      lock.unlock();
      try {
        job(stop);
      } catch (const std::exception& e) {
        if (!stop()) warn_once("background job", std::string("a background job of loom failed: ") + e.what());
      }
      // What the job holds (its captures) goes before it counts as done, so that nothing it held
      // outlives wait_for_background(); outside the lock, as releasing may unload a module.
      job = nullptr;
      lock.lock();
      busy = false;
      idle.notify_all();
    }
    jobs.clear();
    busy = false;
    idle.notify_all();
  }
};

// Made on first use and never destroyed (its thread may run until atexit); a forked child gets a
// fresh one, since the parent's thread does not exist there (the old one is left as it was).
std::atomic<Background*> state{nullptr};

void stop_at_exit() {
  Background* b = state.load();
  if (!b) return;
  std::thread* worker;
  {
    std::lock_guard lock(b->mu);
    b->exiting = true;
    worker = b->worker;
  }
  b->wake.notify_all();
  if (worker && worker->joinable() && worker->get_id() != std::this_thread::get_id()) worker->join();
}

Background& background() {
  static std::once_flag registered;
  std::call_once(registered, [] {
    state.store(new Background());
    std::atexit(stop_at_exit);
    ::pthread_atfork(nullptr, nullptr, [] { state.store(new Background()); });
  });
  return *state.load();
}

}  // namespace

void run_in_background(BackgroundJob job) {
  Background& b = background();
  std::lock_guard lock(b.mu);
  if (b.exiting) return;
  if (!b.worker) {
    std::optional<std::thread> t = ThreadPool::start_thread([&b] { b.work(); });
    if (!t) {
      warn_once("background thread", "loom could not start its background thread (a thread limit?): kernels "
                                     "stay at their first optimisation level");
      return;
    }
    b.worker = new std::thread(std::move(*t));
  }
  b.jobs.push_back(std::move(job));
  b.wake.notify_one();
}

void wait_for_background() {
  Background& b = background();
  BlockingRegion region;  // the jobs never need the embedding's lock
  std::unique_lock lock(b.mu);
  b.idle.wait(lock, [&b] { return b.jobs.empty() && !b.busy; });
}

}  // namespace loom
