#include "runtime/profiler.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <chrono>
#include <mutex>

#include "runtime/allocator.h"

namespace loom::profiler {

namespace detail {
std::atomic<bool> active{false};
}

namespace {

struct Store {
  std::mutex mu;
  std::vector<Event> events;
  // Which profile an event belongs to: a span opened in one profile and closed after it
  // stopped (another thread's) is dropped, not handed to the next profile.
  uint64_t generation = 0;
  std::vector<void (*)()> flushers;
};

Store& store() {
  static Store* s = new Store();  // process lifetime: spans may close after static destruction began
  return *s;
}

// The generation an open span started in (read without the lock: a stale value only drops it).
std::atomic<uint64_t> current_generation{0};
std::atomic<int64_t> start_time{0};

}  // namespace

int64_t now_ns() noexcept {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

int64_t thread_id() noexcept {
  static thread_local const int64_t id = static_cast<int64_t>(::syscall(SYS_gettid));
  return id;
}

void start() {
  Store& s = store();
  std::lock_guard lock(s.mu);
  s.events.clear();
  current_generation.store(++s.generation, std::memory_order_relaxed);
  start_time.store(now_ns(), std::memory_order_relaxed);
  detail::active.store(true, std::memory_order_relaxed);
}

std::vector<Event> stop() {
  Store& s = store();
  std::vector<void (*)()> flushers;
  {
    std::lock_guard lock(s.mu);
    flushers = s.flushers;
  }
  for (void (*flush)() : flushers) flush();  // still recording: deferred events land in this profile
  std::lock_guard lock(s.mu);
  detail::active.store(false, std::memory_order_relaxed);
  current_generation.store(++s.generation, std::memory_order_relaxed);
  return std::move(s.events);
}

int64_t started_ns() noexcept { return active() ? start_time.load(std::memory_order_relaxed) : 0; }

void emit(Event event) {
  if (!active()) return;
  Store& s = store();
  std::lock_guard lock(s.mu);
  if (active()) s.events.push_back(std::move(event));
}

void add_flusher(void (*flush)()) {
  Store& s = store();
  std::lock_guard lock(s.mu);
  s.flushers.push_back(flush);
}

namespace {

// An open span's event, with the generation it was opened in (kept in the heap block with it).
struct OpenEvent : Event {
  uint64_t generation;
};

}  // namespace

void Span::open(const char* category, const char* name) {
  auto* e = new OpenEvent();
  e->category = category;
  e->name = name;
  e->thread = thread_id();
  e->generation = current_generation.load(std::memory_order_relaxed);
  e->start_ns = now_ns();
  event_ = e;
}

void Span::close() noexcept {
  auto* e = static_cast<OpenEvent*>(event_);
  event_ = nullptr;
  e->duration_ns = now_ns() - e->start_ns;
  try {
    if (e->generation == current_generation.load(std::memory_order_relaxed)) emit(std::move(static_cast<Event&>(*e)));
  } catch (...) {
    // Out of memory while profiling: the event is lost, the engine's work is not.
  }
  delete e;
}

void Span::cancel() noexcept {
  delete static_cast<OpenEvent*>(event_);
  event_ = nullptr;
}

void sample_memory(Device device) {
  if (!active()) return;
  MemoryStats m = allocator_for(device).stats();
  Event e;
  e.kind = Event::Counter;
  e.category = "memory";
  e.name = device.is_cpu() ? "cpu memory" : "cuda:" + std::to_string(device.index) + " memory";
  e.start_ns = now_ns();
  e.thread = thread_id();
  e.counters = {{"allocated", m.allocated_bytes}, {"reserved", m.reserved_bytes}};
  emit(std::move(e));
}

}  // namespace loom::profiler
