// Per-thread free lists for the small objects a training step makes and drops by the hundred
// (IR nodes, tensor handles). malloc keeps only a few blocks of a size in its per-thread cache,
// so a burst of hundreds of same-sized objects freed at a sync sends the next step's
// allocations down its slow path; a class that routes its operator new/delete here reuses its
// own blocks instead.
//
// The lists are trivially destructible on purpose: objects may be freed while the process exits,
// after the thread's thread_local objects were destroyed. A thread's list is leaked when the
// thread ends (at most kMaxBlocks blocks). Under AddressSanitizer every block goes to malloc so
// that a use after free is still caught.
#pragma once

#include <cstddef>
#include <new>

namespace loom {

template <typename Owner>
class FreeList {
 public:
  static constexpr size_t kMaxBlocks = size_t{1} << 14;

  static void* allocate(size_t size) {
#if !defined(__SANITIZE_ADDRESS__)
    List& l = list_;
    if (l.head) {
      void* p = l.head;
      l.head = *static_cast<void**>(p);
      --l.count;
      return p;
    }
#endif
    return ::operator new(size);
  }

  static void release(void* p, size_t size) noexcept {
#if !defined(__SANITIZE_ADDRESS__)
    List& l = list_;
    if (l.count < kMaxBlocks) {
      *static_cast<void**>(p) = l.head;
      l.head = p;
      ++l.count;
      return;
    }
#endif
    ::operator delete(p, size);
  }

 private:
  struct List {
    void* head = nullptr;
    size_t count = 0;
  };
  static thread_local List list_;
};

template <typename Owner>
thread_local typename FreeList<Owner>::List FreeList<Owner>::list_;

}  // namespace loom
