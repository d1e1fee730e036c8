// Work nobody waits for, on one background thread: kernels compiled again at -O3 for plans that
// keep running (graph/compiled.cpp, rtc/kernel_units.h).
//
// Not the thread pool (runtime/thread_pool.h): the pool runs one fork-join loop at a time and
// its caller waits for it, while a background job runs for seconds beside the program, mostly
// waiting for a compiler process. One thread, started with the first job, runs the jobs one
// after the other in the order given, so they take at most one core of the compiler's beside
// the program's own work.
//
// A job gets `stop`, a function that returns true once the process is exiting; a job that sees it
// returns early (a compile kills its compiler: rtc/process.h). At exit (atexit) the jobs not
// started are dropped, the running one is told to stop, and the thread is joined: no compiler
// outlives the process. A forked child starts with no thread and no jobs (the parent's stay the
// parent's). A job that throws is dropped with a warning (runtime/warning.h); the work it would
// have done is optional by definition.
#pragma once

#include <functional>

namespace loom {

using BackgroundJob = std::function<void(const std::function<bool()>& stop)>;

// Queues `job` to run on the background thread. If the system refuses the thread, the job is
// dropped with a warning (once).
void run_in_background(BackgroundJob job);

// Waits until every job queued so far has run (tests; the perf harness before it times a steady
// state). Releases the embedding's lock meanwhile (runtime/blocking.h).
void wait_for_background();

}  // namespace loom
