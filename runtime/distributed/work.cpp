#include "runtime/distributed/work.h"

#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>

#include "runtime/error.h"

namespace loom::distributed {

struct Work::State {
  std::mutex mutex;
  std::condition_variable cv;
  bool done = false;
  bool failed = false;
  ErrorKind kind = ErrorKind::Runtime;
  std::string error;
};

namespace {

// One group's thread and its jobs, in order.
class Queue {
 public:
  Queue() : thread_([this] { serve(); }) {}
  ~Queue() {
    {
      std::lock_guard lock(mutex_);
      stopping_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  void push(std::function<void()> job, std::shared_ptr<Work::State> state) {
    {
      std::lock_guard lock(mutex_);
      jobs_.push_back({std::move(job), std::move(state)});
      ++queued_;
    }
    cv_.notify_all();
  }

  void drain() {
    std::unique_lock lock(mutex_);
    idle_.wait(lock, [&] { return queued_ == 0; });
  }

  bool on_thread() const noexcept { return std::this_thread::get_id() == thread_.get_id(); }

 private:
  struct Job {
    std::function<void()> run;
    std::shared_ptr<Work::State> state;
  };

  void serve() {
    while (true) {
      Job job;
      {
        std::unique_lock lock(mutex_);
        cv_.wait(lock, [&] { return stopping_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      bool failed = false;
      ErrorKind kind = ErrorKind::Runtime;
      std::string error;
      try {
        job.run();
      } catch (const Error& e) {
        failed = true, kind = e.kind(), error = e.what();
      } catch (const std::exception& e) {
        failed = true, error = e.what();
      }
      job.run = nullptr;
      {
        std::lock_guard lock(job.state->mutex);
        job.state->done = true;
        job.state->failed = failed;
        job.state->kind = kind;
        job.state->error = std::move(error);
      }
      job.state->cv.notify_all();
      {
        std::lock_guard lock(mutex_);
        --queued_;
      }
      idle_.notify_all();
    }
  }

  std::mutex mutex_;
  std::condition_variable cv_, idle_;
  std::deque<Job> jobs_;
  int64_t queued_ = 0;
  bool stopping_ = false;
  std::thread thread_;  // last: starts after the rest is made
};

struct Queues {
  std::mutex mutex;
  std::map<const Group*, std::unique_ptr<Queue>> by_group;
};
Queues& queues() {
  static auto* q = new Queues();  // never destroyed: threads are not joined during exit
  return *q;
}

Queue* queue_of(const Group& g, bool make) {
  Queues& q = queues();
  std::lock_guard lock(q.mutex);
  auto it = q.by_group.find(&g);
  if (it != q.by_group.end()) return it->second.get();
  if (!make) return nullptr;
  return q.by_group.emplace(&g, std::make_unique<Queue>()).first->second.get();
}

}  // namespace

Work::Work(std::shared_ptr<State> state, std::vector<Array> keep) : state_(std::move(state)), keep_(std::move(keep)) {}

Work::~Work() {
  std::unique_lock lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->done; });
}

bool Work::done() const {
  std::lock_guard lock(state_->mutex);
  return state_->done;
}

void Work::wait() {
  std::unique_lock lock(state_->mutex);
  state_->cv.wait(lock, [&] { return state_->done; });
  if (state_->failed) detail::throw_error(state_->kind, state_->error);
}

std::unique_ptr<Work> start(const std::shared_ptr<Group>& group, std::function<void()> job, std::vector<Array> keep) {
  group->check_usable();
  auto state = std::make_shared<Work::State>();
  queue_of(*group, true)->push(std::move(job), state);
  return std::make_unique<Work>(std::move(state), std::move(keep));
}

void wait_for_queued(Group& group) {
  Queue* q = queue_of(group, false);
  if (q && !q->on_thread()) q->drain();
}

void stop_queue(Group& group) {
  std::unique_ptr<Queue> q;
  {
    Queues& all = queues();
    std::lock_guard lock(all.mutex);
    auto it = all.by_group.find(&group);
    if (it == all.by_group.end()) return;
    q = std::move(it->second);
    all.by_group.erase(it);
  }
  q->drain();
}  // joined here

}  // namespace loom::distributed
