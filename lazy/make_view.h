// Views and hand-written backwards for composites of the op library (lazy/ops*.cpp).
//
// A primitive's backward is recorded by dispatch (apply); a composite that is a view, or whose
// gradient is better written by hand than derived from its primitives, records its own here.
#pragma once

#include <functional>

#include "lazy/autograd.h"
#include "lazy/dispatch.h"
#include "runtime/error.h"

namespace loom::ops {

// A result that is not a view (a copy) with its backward recorded (only primitive ops are
// recorded by dispatch).
inline Tensor viewed(const Tensor& x, Tensor out, const char* name, std::function<Tensor(const Tensor&)> backward) {
  record_function(name, *x, *out, std::move(backward));
  return out;
}

// A view of x: view_of(x, transform) (dispatch.h) with its backward recorded, and what autograd
// needs to know of views (lazy/autograd_inplace.cpp): whether it was made in no_grad mode, and the
// version its history is of when it has one. `not_a_view` is the error to raise where the
// transform cannot express the result without a copy (nullptr: copy, as reshape does). A copy is
// not a view: only its backward is recorded.
template <typename Transform>
Tensor make_view(const Tensor& x, Transform&& transform, const char* name, std::function<Tensor(const Tensor&)> backward,
                 const char* not_a_view = nullptr) {
  Tensor out = view_of(x, [&](const Layout& l) {
    std::optional<Layout> v = transform(l);
    LOOM_CHECK(v || !not_a_view, Runtime, not_a_view);
    return v;
  });
  // Integer and bool views never take part in autograd (their writes cannot carry gradients).
  if (out->is_view() && is_floating(out->dtype())) {
    if (!grad_enabled()) out->mark_made_in_no_grad_mode();
    else if (requires_grad(*x)) record_view(*out);
  }
  return viewed(x, std::move(out), name, std::move(backward));
}

}  // namespace loom::ops
