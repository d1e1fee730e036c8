// Intrusive reference counting.
//
// Storage and tensors are shared by Python objects, views, autograd records and cached graphs.
// An intrusive count keeps the handle one pointer wide and lets a raw pointer be re-wrapped
// (the Python extension stores the pointer in its object), which std::shared_ptr cannot do.
//
// Invariant: a RefCounted object is created with count 0 and is owned by Ref handles only; the
// last Ref to let go deletes it through its static type, so types used with Ref are final or
// have virtual destructors.
//
// Invariant: only a holder of a reference makes another (no count is raised from a raw pointer
// that holds none, as a weak pointer would). So a holder that sees the count at 1 holds the only
// reference and no other thread can raise it: release() then needs no atomic write, and a fresh
// object's first reference (make_ref, Ref::fresh) is a plain store. Each atomic read-modify-write
// costs 15-20 cycles; recording one lazy op made seventeen, four of them this way (a node and a
// tensor, created and released).
//
// Iterative release (DESIGN decision 14: graph depth is bounded by memory, never by the C stack).
// IR nodes, autograd functions and tensors own one another in chains as long as a program's loop
// (`for _ in range(10**6): x = x * w`). Releasing such a chain through nested destructors would
// overflow the stack, so a type that can form one declares
//     static constexpr bool kReleaseIteratively = true;
// and its objects are deleted by delete_iteratively: deletions of such objects nest (a tensor's
// node dies inside the tensor's destructor) up to a small depth on each thread; past it, an object
// whose last reference goes is queued, and the outermost call deletes the queue in a loop. Any
// chain through these types (node -> node, function -> edge -> function, tensor -> grad_fn ->
// saved tensor -> ...) then takes constant stack, and the common release, a few objects deep,
// costs no queueing. The rule for a
// new owner type: if it can end up owning (transitively) another object of its own kind, either
// own it through one of these types or declare the trait.
#pragma once

#include <atomic>
#include <cassert>
#include <cstdint>
#include <utility>

namespace loom {

class RefCounted {
 public:
  RefCounted(const RefCounted&) = delete;
  RefCounted& operator=(const RefCounted&) = delete;

  void retain() const noexcept { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference; the caller then deletes the object. The
  // acquire load orders the deletion after every other holder's release (see above).
  bool release() const noexcept {
    return refs_.load(std::memory_order_acquire) == 1 || refs_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  int32_t use_count() const noexcept { return refs_.load(std::memory_order_relaxed); }

 protected:
  RefCounted() = default;
  ~RefCounted() = default;

 private:
  template <typename T>
  friend class Ref;
  // The first reference to an object no other thread can see yet.
  void retain_fresh() const noexcept { refs_.store(1, std::memory_order_relaxed); }

  mutable std::atomic<int32_t> refs_{0};
};

namespace detail {
// Deletes `p` with `deleter` now, or, nested too deep in other such deletions on this thread,
// queues it for the outermost call (see above). When the outermost call returns, every object it
// queued is gone.
void delete_iteratively(const RefCounted* p, void (*deleter)(const RefCounted*)) noexcept;
}  // namespace detail

template <typename T>
class Ref {
 public:
  Ref() noexcept = default;
  Ref(std::nullptr_t) noexcept {}
  explicit Ref(T* p) noexcept : p_(p) {
    if (p_) p_->retain();
  }
  Ref(const Ref& o) noexcept : Ref(o.p_) {}
  Ref(Ref&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  template <typename U>
  Ref(Ref<U> o) noexcept : p_(o.leak()) {}
  ~Ref() { reset(); }

  Ref& operator=(Ref o) noexcept {
    std::swap(p_, o.p_);
    return *this;
  }

  void reset() noexcept {
    if (p_ && p_->release()) destroy(p_);
    p_ = nullptr;
  }
  // Gives up ownership without releasing: the caller now holds one reference.
  T* leak() noexcept { return std::exchange(p_, nullptr); }
  // Adopts a pointer whose reference the caller already holds (the inverse of leak()).
  static Ref adopt(T* p) noexcept {
    Ref r;
    r.p_ = p;
    return r;
  }
  // The first reference to `p`, just made (count 0) and not yet seen by another thread.
  static Ref fresh(T* p) noexcept {
    assert(p->use_count() == 0 && "a constructor took a reference to its own object");
    p->retain_fresh();
    return adopt(p);
  }

  T* get() const noexcept { return p_; }
  T* operator->() const noexcept { return p_; }
  T& operator*() const noexcept { return *p_; }
  explicit operator bool() const noexcept { return p_ != nullptr; }
  friend bool operator==(const Ref& a, const Ref& b) noexcept { return a.p_ == b.p_; }

 private:
  template <typename U>
  friend class Ref;
  static void destroy(T* p) noexcept {
    if constexpr (requires { requires T::kReleaseIteratively; })
      detail::delete_iteratively(p, [](const RefCounted* q) { delete static_cast<const T*>(q); });
    else
      delete p;
  }
  T* p_ = nullptr;
};

template <typename T, typename... Args>
Ref<T> make_ref(Args&&... args) {
  return Ref<T>::fresh(new T(std::forward<Args>(args)...));
}

}  // namespace loom
