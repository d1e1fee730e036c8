// Recording a step for loom.compile (DESIGN decision 16): what the lazy layer tells a recording
// while a thread runs a compiled function's Python, and the step's own sync at its end.
//
// Note [Recording a compiled step]
//
// loom.compile runs a step's Python under a StepRecording installed for the thread (Scope). The
// step records lazily as any code does; the hooks below only watch:
//   - note_read: a materialized lazy tensor became a leaf of the trace (TensorImpl::read_node).
//     These are the tensors a replay must find again: arguments, and tensors the step reads
//     that are no arguments (parameters, buffers, optimizer state, globals).
//   - note_created: a materialized lazy tensor was made during the step (from Python data, or a
//     view of another materialized tensor): not a tensor the step found, so not one a replay can
//     look up; a leaf on its memory is a constant of the step, or a view of what it views.
//   - note_first_write: a materialized lazy tensor is written in place for the first time in the
//     step (TensorImpl::rebind): its version counter and the version before, so a replay moves
//     the counter as the step did.
//   - note_backward: backward() ran inside the step without retain_graph: the graphs of its roots
//     are freed, so a result of the step that requires grad can come back from a replay as a
//     tensor whose backward raises, as the freed graph's would (graph/captured_step.h).
//   - note_sync_point: a sync point inside the step (a value read, a sync forced by an aliased
//     write): the step cannot be replayed (its Python would depend on data, or it is two traces).
//     Noted with the Python line (the `where` callback the extension installs); with
//     forbid_syncs (fullgraph=True) it raises there instead, before anything is computed.
// At the end, finish(device) runs the step's own sync, an ordinary one (lazy/sync.h), whose
// trace is handed to the recording (trace_ran) before its tensors are materialized: the trace,
// which tensor each output belongs to, and the views that follow their bases.
//
// Nothing here decides what a replay reads or writes: graph/captured_step.h does, from what was
// collected. The hooks cost one thread-local load where no recording is active.
//
// Note [Where a step's numbers come from]
//
// A trace's Scalar leaves are the numbers its ops took (DESIGN decision 1): a replay must give
// each the value its source has at the call, without running Python. Three kinds of sources
// are known:
//   - a Python float passed to the compiled function (an argument): the extension tags the
//     Scalar made from that very object (pyext/op_args.cpp scalar_of) with add_number();
//   - a number an optimizer update took (lazy/optimizer_steps.h): the update's numbers are a
//     function of its parameter group and per-parameter state, which the update's binding reads
//     (pyext/optim_bindings.cpp); each is tagged with its position in the update's list
//     (optimizer_number), and a replay recomputes the list from the current group and state;
//   - the seed and offset of a random op: found by the op that takes them (graph/captured_step.cpp).
// A tag is Scalar::source(), kept by copies of the number and by the Node made from it; a number
// computed from a tagged one (1 - p in Python, p - 1 in a derivative) has no tag. Such numbers,
// and every other untagged one, are constants of the captured step: the two recordings a capture
// compares must agree on them, so a number that changes from call to call is seen; one that only
// changes later is not (README: what loom.compile cannot see).
#pragma once

#include <functional>
#include <optional>
#include <span>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "lazy/autograd.h"
#include "lazy/executor.h"
#include "lazy/tensor.h"
#include "runtime/random.h"

namespace loom {

// Where a tagged number came from (Scalar::source() - 1 indexes StepRecording::numbers()).
struct NumberSource {
  enum Kind : uint8_t { Argument, Optimizer } kind = Argument;
  int32_t index = 0;     // Argument: the float argument's index; Optimizer: the optimizer call's
  int32_t position = 0;  // Optimizer: the number's position in that call's list
  double value = 0;      // the value recorded (a Scalar whose value differs is not from here)
};

// A sync point inside a recorded step.
struct SyncInStep {
  Device device;
  std::string what;   // the kind of sync point ("a value was read", ...)
  std::string where;  // the Python line
};

class StepRecording {
 public:
  enum class Phase { Running, Finishing, Done };

  // `where` names the Python line running now (called at sync points only). With
  // `forbid_syncs`, a sync point raises.
  StepRecording(std::function<std::string()> where, bool forbid_syncs);
  StepRecording(const StepRecording&) = delete;
  StepRecording& operator=(const StepRecording&) = delete;

  // This thread's recording while `scope` lives (Scope: install, then uninstall; nests nothing:
  // a thread records one step at a time).
  class Scope {
   public:
    explicit Scope(StepRecording& r);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

   private:
    StepRecording* previous_;
  };

  // ---- sources of numbers (Note [Where a step's numbers come from]) ----
  // A new source; returns the tag for Scalar::with_source.
  uint32_t add_number(NumberSource source);
  // Numbers the optimizer update `call` takes while the scope lives get Optimizer tags, in order.
  class OptimizerCall {
   public:
    OptimizerCall(StepRecording* r, int32_t call);
    ~OptimizerCall();
    OptimizerCall(const OptimizerCall&) = delete;
    OptimizerCall& operator=(const OptimizerCall&) = delete;
    int32_t numbers() const noexcept;  // how many it tagged so far

   private:
    StepRecording* r_;
  };
  // The tag of the next number of the current optimizer call (0 outside one).
  uint32_t optimizer_number(double value);
  const std::vector<NumberSource>& numbers() const noexcept { return numbers_; }

  // ---- hooks (Note [Recording a compiled step]) ----
  void note_read(TensorImpl& t);
  void note_created(const TensorImpl& t) { created_.insert(&t); }
  void note_first_write(TensorImpl& t);
  void note_sync_point(Device device, const char* what);
  void note_backward(std::span<const Tensor> roots);

  // ---- the step's own sync ----
  // Computes the thread's pending tensors of `device`, handing the trace to this recording.
  // Raises what the sync raises.
  void finish(Device device);
  // Called by that sync (lazy/sync.cpp) once its trace ran, before it materializes anything:
  // `roots` are the trace's first outputs in order, then come `orphans` (writes into the memory
  // of tensors that died); `views` follow their bases.
  void trace_ran(const Trace& trace, std::span<const Tensor> roots, std::span<const Tensor> views,
                 std::span<const Array> orphans);
  Phase phase() const noexcept { return phase_; }

  // ---- what was collected ----
  const std::vector<Tensor>& reads() const noexcept { return reads_; }
  bool created(const TensorImpl* t) const { return created_.count(t) > 0; }
  // Counters written in place during the step, with their value before the first write.
  const std::vector<std::pair<Ref<VersionCounter>, uint64_t>>& writes() const noexcept { return writes_; }
  // The materialized tensors written in place during the step, and the bases of those that are
  // views (a view made in the step and written dies with it: its base is what a replay finds).
  const std::vector<Tensor>& written() const noexcept { return written_; }
  const std::vector<SyncInStep>& syncs() const noexcept { return syncs_; }
  // Whether t's grad_fn is the root of a graph a backward inside the step freed.
  bool graph_consumed(TensorImpl& t) const;

  // The step's trace, as finish() ran it: the trace (its nodes kept alive by `nodes`), the
  // tensor of each output (roots, then orphans: null), and the views of roots.
  struct View {
    Tensor tensor;
    int32_t base = -1;  // index into roots of its base
    Layout relative;    // over the base's elements
  };
  struct StepTrace {
    Trace trace;
    std::vector<Ref<Node>> nodes;
    std::vector<Tensor> roots;
    std::vector<Array> orphans;
    std::vector<View> views;
  };
  const std::optional<StepTrace>& step_trace() const noexcept { return step_trace_; }

 private:
  std::function<std::string()> where_;
  bool forbid_syncs_;
  Phase phase_ = Phase::Running;
  std::vector<NumberSource> numbers_;
  int32_t optimizer_call_ = -1;
  int32_t optimizer_position_ = 0;
  std::vector<Tensor> reads_;
  std::unordered_set<const TensorImpl*> read_set_;
  std::unordered_set<const TensorImpl*> created_;
  std::vector<std::pair<Ref<VersionCounter>, uint64_t>> writes_;
  std::unordered_set<const VersionCounter*> written_set_;
  std::vector<Tensor> written_;
  std::vector<SyncInStep> syncs_;
  std::vector<Ref<GradFn>> consumed_;  // held: an address is never reused while compared
  std::optional<StepTrace> step_trace_;
};

namespace detail {
extern thread_local StepRecording* active_recording;
}

// The calling thread's recording, or null (the hooks' cheap test).
inline StepRecording* recording() noexcept { return detail::active_recording; }

// The generator a random op on `device` draws from (runtime/random.h current_generator). A lazy
// draw from a loom.Generator (a `generator=` argument) inside a recorded step is noted as a point
// the step cannot be replayed at: a replay takes its random ops' offsets from the device's default
// generator (graph/captured_step.h), so it would not advance the one the step drew from.
Generator& generator_for_draw(Device device, bool lazy);

}  // namespace loom
