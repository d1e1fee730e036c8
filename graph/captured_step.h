// A captured step of loom.compile (DESIGN decision 16): the trace of one recorded call of a
// compiled function, and how a later call replays it without running Python, recording
// anything or building a trace. The code that records and decides when to capture is the
// extension's (pyext/compile_bindings.cpp); this is the captured object: its key (the trace's
// own, lazy/executor.h trace_key), its plan (whatever the executor cached for that key) and its
// guards on tensors.
//
// Note [Replaying a captured step]
//
// A captured step is a trace (lazy/executor.h) whose leaves and destinations are slots, filled
// anew at every call from where their values are now. Each is resolved in O(slots), never by
// looking at the step's ops:
//   - an Input leaf is an array on the memory of a root: a tensor argument of the call (its
//     position among the call's tensor arguments), a tensor the step found by identity (a
//     parameter, a buffer, optimizer state, a global), or the .grad of such a tensor as it is at
//     the call. The leaf's layout is the recorded one, moved by as many elements as the root's
//     offset moved (a batch sliced from a larger tensor). An array the step made from Python
//     data is a constant of the step;
//   - a destination (an in-place result) is found the same way; the executor writes it;
//   - a Scalar leaf is a constant, a number input of the call (NumberSource, lazy/capture.h:
//     an argument, an optimizer's number; the caller gives their values), or the seed or the
//     offset of a random op: the device's generator is advanced by as many ops as the step drew,
//     and each op takes its offset in that block, so a replay draws fresh numbers as the step did.
// The trace's leaf nodes are private copies (Node::set_leaf_value); the executor runs it as it
// runs any trace, so its plan is the one cached for the trace's key: on a GPU one CUDA Graph
// launch. A replay takes the step's lock: two threads never fill one step's slots at once
// (try_replay says when it is busy, and the caller runs the step uncompiled instead).
//
// Guards: before a replay, every root must have the dtype, sizes, strides, device and autograd
// flags it had, the roots must share storage exactly as they did (the trace key depends on it),
// and a .grad read must exist. Every tensor argument on the memory of a root is a root itself,
// read or not (f(a, a): the step read both through the first), so a call that passes separate
// tensors there fails this guard instead of reading one twice. check() says what differs, in one sentence.
//
// After the run: the fresh results become new tensors (a result that required grad, and whose
// backward the step ran, with a grad_fn that raises as the freed graph would) (never memory an earlier result holds:
// the executor hands out fresh outputs, graph/binding.h), returned to the caller or set as the
// .grad of their tensor; the version counters of the tensors the step wrote move as the step
// moved them; the .grad the step dropped is dropped. A run that throws changed nothing (the
// executor writes no destination then, lazy/executor.h): no counter moved, no .grad set, and
// the caller's Python state is left as it was (Note [A failed replay], pyext/compile_bindings.cpp).
#pragma once

#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <variant>
#include <vector>

#include "lazy/capture.h"
#include "lazy/executor.h"
#include "lazy/tensor.h"

namespace loom::graph {

// A tensor a replay reads or writes, found again at every call.
struct TensorRef {
  enum Kind : uint8_t { Argument, Identity, GradOf } kind = Identity;
  int32_t argument = -1;  // Argument: index into the call's tensor arguments
  Tensor tensor;          // Identity: the tensor; GradOf: the tensor whose .grad it is
};

// What the caller of a step knows of one recorded call.
struct StepContext {
  std::vector<Tensor> arguments;  // the call's tensor arguments, flattened
  std::vector<Tensor> returned;   // the tensors its result holds, in order (repeats allowed)
  // The .grad of tensors the step may read or set, as they were when the call began (null for
  // none); a tensor the step reads whose .grad is not listed makes the recording fail.
  std::vector<std::pair<Tensor, Tensor>> grads_at_start;
  // The random generator of the step's device: its offset when the call began.
  uint64_t random_offset_at_start = 0;
};

// One call's inputs: the tensor arguments, and the value of each NumberSource of the recording
// (lazy/capture.h numbers(), by index; only those the step uses are read).
struct ReplayInputs {
  std::span<TensorImpl* const> arguments;
  std::span<const double> numbers;
};

class CapturedStep {
 public:
  // The captured step of a finished recording, or why it cannot be replayed.
  static std::variant<std::unique_ptr<CapturedStep>, std::string> make(const StepRecording& recording,
                                                                      const StepContext& context);

  // The roots of one call (check() finds them, replay() uses them).
  struct Resolved {
    std::vector<Tensor> roots;
  };

  // "" when a call with these inputs can replay this step, else what differs. Materializes a
  // root another thread has pending (and raises a root's error if it is errored).
  std::string check(const ReplayInputs& in, Resolved& out) const;

  // Replays the step for a call check() passed: the executor runs the trace with this call's
  // values. Returns the fresh tensor of each returned tensor of the recorded call
  // (StepContext::returned, in order; null where it was no result of the step: the caller
  // returns the same tensor). `busy`: another thread replays this step now; nothing was done.
  // Throws what the run throws; nothing has changed then.
  std::vector<Tensor> replay(const ReplayInputs& in, const Resolved& roots, bool& busy);

  // Whether another recording of the same call captured the same step: "" if so, else the first
  // difference (Note [Where a step's numbers come from]: a number that changed and has no known
  // source is Python state the trace does not see).
  std::string agrees_with(const CapturedStep& other) const;

  uint64_t key() const noexcept { return trace_.key; }
  Device device() const noexcept { return trace_.device; }
  // What a replay reads and writes, one item a line (loom.compile's dump and explain).
  std::string describe() const;
  // The NumberSources the step uses (index into the recording's numbers).
  const std::vector<int32_t>& numbers_used() const noexcept { return numbers_used_; }

  struct Root {
    TensorRef ref;
    DType dtype;
    Dims sizes, strides;
    int64_t offset = 0;  // at capture: leaves on it move with it
    bool requires_grad = false;
    bool leaf = true;
    int32_t same_storage_as = -1;  // the first root on the same storage at capture, or -1
    const Storage* storage = nullptr;  // at capture (compared, never read)
  };
  struct InputSlot {
    int32_t node;  // in the trace
    int32_t root;  // -1: a constant (the node keeps its array)
    Layout layout;
  };
  struct ScalarSlot {
    enum Kind : uint8_t { Fixed, Number, Seed, Offset } kind = Fixed;
    int32_t node = -1;
    int32_t number = -1;  // Number: the NumberSource's index
    int64_t delta = 0;    // Offset: the op's place among the step's random ops
    Scalar recorded{int64_t{0}};
  };
  struct DestinationSlot {
    int32_t output;  // in the trace
    int32_t root;
    Layout layout;
  };
  // A fresh result and where it goes.
  struct Fresh {
    int32_t output;                 // in the trace
    std::vector<int32_t> returned;  // positions in StepContext::returned
    std::vector<int32_t> grad_of;   // roots whose .grad it becomes
    uint64_t version = 0;           // its version counter at the end of the recorded call
    // A result that requires grad whose graph a backward inside the step freed (the loss of a
    // training step): a replay returns it with a grad_fn of this name that raises as a freed
    // graph does. Empty: the result requires no grad.
    std::string freed_grad_fn;
  };
  // A view of a fresh result that the call returned.
  struct ReturnedView {
    int32_t base;  // index into fresh_
    Layout relative;
    std::vector<int32_t> returned;
  };
  struct Bump {
    int32_t root;
    uint64_t by;
  };

 private:
  CapturedStep() = default;

  Trace trace_;
  std::vector<Ref<Node>> nodes_;         // every node of the recorded trace
  std::vector<Ref<Node>> private_leaves_;  // the slots' leaves, in trace_.nodes in their place
  std::vector<Root> roots_;
  std::vector<InputSlot> inputs_;
  std::vector<ScalarSlot> scalars_;
  std::vector<DestinationSlot> destinations_;
  std::vector<Fresh> fresh_;
  std::vector<ReturnedView> views_;
  std::vector<Bump> bumps_;
  std::vector<int32_t> grads_dropped_;  // roots whose .grad the step set to None (and no result)
  std::vector<int32_t> numbers_used_;
  size_t returned_count_ = 0;
  uint64_t random_ops_ = 0;  // random ops the step drew (the generator advances by as many)
  std::vector<std::string> constants_;  // each constant leaf's bytes, for agrees_with
  // Where each root's memory was when its slots were last filled (at capture, then each replay):
  // a root still there (a parameter updated in place, the same batch) keeps its slots' values.
  // The slots hold those storages, so an address seen here is never reused meanwhile.
  struct Bound {
    const Storage* storage = nullptr;
    int64_t offset = 0;
  };
  std::vector<Bound> bound_;

  std::mutex replaying_;
};

}  // namespace loom::graph
