// Autocast (mixed precision), PyTorch's torch.autocast: inside an enabled region, the ops named
// in one table (autocast.cpp, kPolicies) cast their floating tensor arguments before they run.
//
// Where the casts happen. Only where an op enters from Python: the op table's rows (op_table.cpp
// applies the policy to a call's parsed arguments before the row's body runs), the operators
// `@` and `**` (tensor_operators.cpp), and the Python composites of loom.nn.functional that the
// table names (layer_norm, the losses: wrapped at import by autocast_function(), which casts
// their arguments and suspends autocast while they run, as PyTorch excludes the Autocast key
// below an autocast kernel). So a composite counts as one op, as an ATen op does; backward
// formulas and optimizer updates (called from C++) are never autocast, like PyTorch's, whose
// backward runs each op in the dtype its forward used. A cast is an ordinary op (ops::cast):
// eager it runs, lazy it is a recorded node that fuses into its neighbours, and autograd
// records it like any other.
//
// The policy of an op depends on the device type of its tensors (a lazy tensor's is its
// backend's: lazy:cpu tensors follow autocast("cpu")), as PyTorch's AutocastCPU and
// AutocastCUDA keys do, with PyTorch 1.13's lists: on CUDA, matrix products and convolutions
// in the low precision, pointwise transcendentals, norms and losses in float32, the reductions
// that take a dtype computed in float32, a few multi-input ops promoted to their widest input,
// binary_cross_entropy refused; on the CPU, matrix products and convolutions in bfloat16, the
// losses and a few numerically touchy ops in float32, and everything else in its input dtype.
// Ops not listed run on whatever dtypes they get (mixed inputs promote as usual).
//
// State is per thread (PyTorch's is thread-local too): whether each device type's autocast is
// on and its dtype, the nesting depth of regions (the cache of casts is cleared when the
// outermost region exits), and whether casts are cached. The cache holds the low-precision cast
// of float32 leaves that require grad (the weights) so a weight used by several ops in one
// region is cast once (and its gradient flows back through one cast); an entry is dropped if
// the weight is written in place since (its version counter moved).
#pragma once

#include <string_view>
#include <vector>

#include "pyext/common.h"
#include "runtime/device.h"

namespace loom::py {

// How an op treats its floating tensor arguments (float16, bfloat16, float32; never float64)
// inside an enabled region.
enum class CastClass : uint8_t {
  None,             // runs as given
  LowerPrecision,   // cast to the region's dtype (float16 / bfloat16)
  Float32,          // cast to float32
  Float32Dtype,     // the op's `dtype=` becomes float32 when left out and its input is eligible
  Promote,          // cast to the widest dtype among them
  Banned,           // raises (binary_cross_entropy on CUDA)
};

// An op's class per device type.
struct AutocastPolicy {
  CastClass cpu = CastClass::None, cuda = CastClass::None;
  bool any() const noexcept { return cpu != CastClass::None || cuda != CastClass::None; }
};

// The policy of the op Python calls `name` (a row of the op table, an operator's op, a function
// of loom.nn.functional); unlisted names have none.
AutocastPolicy autocast_policy(std::string_view name) noexcept;

namespace detail {
extern thread_local int autocast_on;  // regions enabled on this thread, less suspensions
}
// Whether any device type's autocast is on for this thread (one load: the check every op pays).
inline bool autocast_active() noexcept { return detail::autocast_on > 0; }

// Applies `policy` to one call's arguments, in place: slots[0, n) are borrowed references
// (nullptr: left out), each a tensor, a list or tuple of tensors, or anything else (left
// alone); a cast argument's slot is replaced by a new object, owned by `keep`. `dtype_slot` is
// the slot of the op's `dtype=` parameter (-1 if it has none): Float32Dtype fills it. Raises
// for a Banned op.
void autocast_arguments(const AutocastPolicy& policy, std::string_view name, PyObject** slots, int n,
                        int dtype_slot, std::vector<PyRef>& keep);

// Suspends autocast on this thread while it lives (inside a composite the table names).
class AutocastSuspend {
 public:
  AutocastSuspend() noexcept;
  ~AutocastSuspend();
  AutocastSuspend(const AutocastSuspend&) = delete;
  AutocastSuspend& operator=(const AutocastSuspend&) = delete;

 private:
  bool suspended_;
};

}  // namespace loom::py
