// loom._C._optimizer_step(rule, optimizer, group, params, states): one optimizer update of a
// parameter group (lazy/optimizer_steps.h), with the bookkeeping loom.optim's Python used to do
// around it: the group's hyperparameters and the parameters' scalar state (step counts, NAdam's
// mu_product, ASGD's eta and mu) are read and written here, so that loom.compile can do the same
// at a replay without running Python (Note [Optimizer numbers], lazy/optimizer_steps.h).
#pragma once

#include <string>
#include <vector>

#include "lazy/optimizer_steps.h"
#include "pyext/common.h"

namespace loom::py {

// An update as a recorded step called it, and what a replay reads again.
struct RecordedUpdate {
  int32_t rule = -1;
  PyRef optimizer, group, optimizer_state, param_groups;
  std::vector<PyRef> states;     // the parameters' state dicts
  std::vector<Tensor> params;
  // (key, tensors): the state tensors it read, compared by identity at each replay
  std::vector<std::pair<std::string, std::vector<Tensor>>> tensors;
  optim::Numbers numbers;        // as recorded (tags number positions in `values`)
  int64_t step_count = 0;        // optimizer._step_count when it ran
};

// Where a recording of a compiled step keeps the updates the step makes: the thread's log while
// a step is recorded (pyext/compile_bindings.cpp), else null.
class UpdateLog {
 public:
  virtual ~UpdateLog() = default;
  // Stores an update; returns its index, the call its numbers are tagged with (lazy/capture.h).
  virtual int32_t add(RecordedUpdate update) = 0;
  virtual RecordedUpdate& at(int32_t index) = 0;
};
void set_update_log(UpdateLog* log) noexcept;  // this thread's

// One replay's values of a recorded update: its numbers now, and the writes to the Python state
// (step counts, scalar state) that commit() makes once the replay succeeded.
struct ReplayedUpdate {
  optim::Numbers numbers;
  struct Write {
    PyRef dict, key, value;  // dict[key] = value
  };
  std::vector<Write> writes;
  void commit();
};

// A recorded update's values for a replay now: "" and `out` filled, else what changed since it
// was recorded (a state tensor replaced, another code path: Note [Optimizer numbers]). Writes
// nothing until out.commit().
std::string replay_update(const RecordedUpdate& update, ReplayedUpdate& out);

// The rule's name, for explanations.
const char* update_rule_name(int32_t rule) noexcept;

}  // namespace loom::py
