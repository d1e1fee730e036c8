#include "runtime/ref.h"

#include <cstdlib>

namespace loom::detail {
namespace {

struct Doomed {
  const RefCounted* object;
  void (*deleter)(const RefCounted*);
};

// The objects waiting to be deleted on this thread, and how deeply deletions nest now.
// Trivially destructible on purpose (as runtime/free_list.h): objects may die while the thread's
// thread_local objects are destroyed. A chain is deleted kMaxNesting links at a time (the last
// queues the next), so the queue holds about as many objects as a few objects own, not the
// length of the chain.
struct Queue {
  Doomed* items = nullptr;
  size_t size = 0;
  size_t capacity = 0;
  uint32_t depth = 0;
};
thread_local Queue queue;

// Nested deletions: each is a few hundred bytes of stack (destructor frames).
constexpr uint32_t kMaxNesting = 16;

bool push(Queue& q, Doomed d) noexcept {
  if (q.size == q.capacity) {
    size_t capacity = q.capacity ? q.capacity * 2 : 64;
    auto* items = static_cast<Doomed*>(std::realloc(q.items, capacity * sizeof(Doomed)));
    if (!items) return false;
    q.items = items;
    q.capacity = capacity;
  }
  q.items[q.size++] = d;
  return true;
}

// Deletes what the outermost deletion queued, and what that queues, until none is left.
[[gnu::noinline]] void drain(Queue* q) noexcept {
  while (q->size > 0) {
    Doomed d = q->items[--q->size];
    ++q->depth;
    d.deleter(d.object);
    --q->depth;
  }
  // Given back at once: a queue is needed only by deep chains, and a thread's queue must not
  // outlive the thread.
  std::free(q->items);
  q->items = nullptr;
  q->capacity = 0;
}

}  // namespace

void delete_iteratively(const RefCounted* p, void (*deleter)(const RefCounted*)) noexcept {
  Queue* q = &queue;
  // The compiler would compute the thread's address of `queue` again after the call (a call into
  // the dynamic linker); it is the same address.
  asm("" : "+r"(q));
  if (q->depth >= kMaxNesting) [[unlikely]] {
    // Out of memory for the queue (a few bytes): delete at once, deeper on the stack.
    if (!push(*q, {p, deleter})) deleter(p);
    return;
  }
  ++q->depth;
  deleter(p);
  --q->depth;
  if (q->depth == 0 && q->size > 0) [[unlikely]] drain(q);
}

}  // namespace loom::detail
