// The profiler's event store (issue 18): spans of what the engine did while a profile is on,
// read by loom.profiler (pyext/loom/profiler.py) into tables and Chrome traces.
//
// Note [Profiler off path]. Every hook in the engine starts with `if (profiler::active())`: one
// relaxed load of a global flag and a branch that is never taken while no profile runs, so the
// engine records, syncs and replays exactly as without the profiler (the `ops` workload of
// perf/run.py measures the record cost; tests/python/test_profiler.py checks that a step does the
// same work, by loom.metrics(), with the hooks compiled in). Nothing is allocated, timed or
// locked until a profile starts; a hook whose work needs more (a Python line, the ops of a
// kernel) does it behind that branch.
//
// Events. A span has a category (a static string: "sync", "trace", "cache", "compile", "lower",
// "plan", "kernel", "blas", "library", "record", "user", "cuda"), a name, a start and a duration
// on the steady clock, the OS thread it ran on (or a GPU's stream lane), and optional facts:
// bytes read and written, the ops a generated kernel fused with the Python line of each, and
// string arguments. Counter events (category "memory") carry values instead of a duration.
// Spans of one thread nest: they are opened and closed as scopes (Span), so a Chrome trace's
// begin and end events match. The store is locked: executors run without the GIL on several
// threads at once.
//
// Deferred events. Work whose timing is known only later (a GPU's events, read after the step
// ran: graph/cuda_step_timer.h) registers a flusher; stop() calls every flusher before it hands
// the events out, so nothing recorded in a profile is lost.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "runtime/device.h"

namespace loom::profiler {

namespace detail {
extern std::atomic<bool> active;
}

// Whether a profile records now (Note [Profiler off path]).
inline bool active() noexcept { return detail::active.load(std::memory_order_relaxed); }

// Nanoseconds on the steady clock (the clock of every event).
int64_t now_ns() noexcept;
// The OS id of the calling thread (the Chrome trace's tid).
int64_t thread_id() noexcept;

// One op of a generated kernel: its name and where Python recorded it (runtime/source_location.h;
// -1: unknown).
struct FusedOp {
  const char* op;
  int32_t source;
};

struct Event {
  enum Kind : uint8_t { Span, Counter } kind = Span;
  const char* category = "";
  std::string name;
  int64_t start_ns = 0;
  int64_t duration_ns = 0;
  int64_t thread = 0;       // OS thread id, or a lane of its own (a GPU stream: gpu_lane)
  int32_t source = -1;      // the Python line of a span about one op or one sync
  int64_t bytes_read = -1;  // -1: not known or not meaningful
  int64_t bytes_written = -1;
  std::vector<FusedOp> fused;                              // generated kernels
  std::vector<std::pair<std::string, std::string>> args;   // shown as the trace event's args
  std::vector<std::pair<const char*, int64_t>> counters;   // Counter events
};

// The lane of device `index`'s stream in the trace (an id no OS thread has).
constexpr int64_t gpu_lane(int index) noexcept { return -1000 - index; }
// The lane of the ops recorded on OS thread `tid` (lazy/provenance.h): apart from the thread's
// own spans, which they would cross (a record_function range opened between two ops).
constexpr int64_t record_lane(int64_t tid) noexcept { return tid + (int64_t{1} << 32); }

// Starts recording: clears what a previous profile left and sets active().
void start();
// Stops recording, runs the flushers (while still recording), and hands out the events.
std::vector<Event> stop();
// When the running profile started (now_ns()), or 0.
int64_t started_ns() noexcept;
// Adds an event (ignored unless active()).
void emit(Event event);

// Registers a function stop() calls first (deferred events); registered once per process.
void add_flusher(void (*flush)());

// A span over a scope: timed from construction to destruction when a profile was on at
// construction; otherwise empty (event() is null) and free beyond the active() branch.
class Span {
 public:
  Span(const char* category, const char* name) {
    if (active()) [[unlikely]] open(category, name);
  }
  ~Span() {
    if (event_) [[unlikely]] close();
  }
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;
  // The event being recorded (add bytes, args, ops), or null.
  Event* event() noexcept { return event_; }
  // Drops the event: the scope turned out to be no work worth showing.
  void cancel() noexcept;

 private:
  void open(const char* category, const char* name);
  void close() noexcept;
  Event* event_ = nullptr;
};

// Emits a counter event of `device`'s caching allocator: allocated and reserved bytes now
// (memory over time). A no-op unless active().
void sample_memory(Device device);

}  // namespace loom::profiler
