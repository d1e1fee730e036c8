// Asynchronous collectives (torch.distributed's async_op=True) on eager tensors: each runs on a
// thread of its group's own, in the order they were started, and a Work says when it is done.
//
// Order with everything else: a call on a group that is not asynchronous (an eager collective,
// one a lazy plan runs) first waits for the group's queued work (wait_for_queued), so every
// rank still makes its calls in program order. Memory: a Work owns the arrays its call reads and
// writes (they live until it is destroyed, which waits for the call), and is only ever handled
// by the thread that started it; the queued job itself sees raw pointers.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "runtime/array.h"
#include "runtime/distributed/group.h"

namespace loom::distributed {

class Work {
 public:
  struct State;
  Work(std::shared_ptr<State> state, std::vector<Array> keep);
  ~Work();  // waits for the call: it may still use the arrays
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  bool done() const;
  // Blocks until the call has finished; raises its error (each wait does, as in PyTorch).
  void wait();

 private:
  std::shared_ptr<State> state_;
  std::vector<Array> keep_;
};

// Queues `job` on `group`'s thread.
std::unique_ptr<Work> start(const std::shared_ptr<Group>& group, std::function<void()> job, std::vector<Array> keep);
// Waits for the work queued on `group` (a no-op on the group's own thread).
void wait_for_queued(Group& group);
// Waits for and ends the group's thread (destroy_process_group).
void stop_queue(Group& group);

}  // namespace loom::distributed
