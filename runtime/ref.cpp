#include "runtime/ref.h"

#include <cstdlib>

namespace loom::detail {
namespace {

struct Doomed {
  const RefCounted* object;
  void (*deleter)(const RefCounted*);
};

// The objects waiting to be deleted on this thread. Trivially destructible on purpose (as
// runtime/free_list.h): objects may die while the thread's thread_local objects are destroyed.
// A chain is deleted one link at a time (each deletion queues the next link), so the queue holds
// about as many objects as one object owns, not the length of the chain; a queue grown by a wide
// graph is given back when it empties.
struct Queue {
  Doomed* items = nullptr;
  size_t size = 0;
  size_t capacity = 0;
  bool deleting = false;
};
thread_local Queue queue;

constexpr size_t kKeptCapacity = 256;

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

// Deletes what deleting the outermost object queued, and what that queues, until none is left.
[[gnu::noinline]] void drain(Queue* q) noexcept {
  while (q->size > 0) {
    Doomed d = q->items[--q->size];
    d.deleter(d.object);
  }
  if (q->capacity > kKeptCapacity) {
    std::free(q->items);
    q->items = nullptr;
    q->capacity = 0;
  }
}

}  // namespace

// The common case (nothing else dies with the object) costs one flag set and one check.
void delete_iteratively(const RefCounted* p, void (*deleter)(const RefCounted*)) noexcept {
  Queue* q = &queue;
  if (q->deleting) [[unlikely]] {
    // Out of memory for the queue (a few bytes): delete at once, deeper on the stack.
    if (!push(*q, {p, deleter})) deleter(p);
    return;
  }
  q->deleting = true;
  deleter(p);
  if (q->size > 0) [[unlikely]] drain(q);
  q->deleting = false;
}

}  // namespace loom::detail
