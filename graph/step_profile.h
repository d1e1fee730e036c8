// What a plan's run shows a profile (issue 18, runtime/profiler.h): one span per step of the
// plan, named for what the step is, with the bytes it reads and writes and, for a generated
// kernel, the ops it fused and the Python line that recorded each (lazy/provenance.h); the plan
// cache's lookup; the lowering and its compile. Executors hold these scopes around their work;
// while no profile runs each is one branch (Note [Profiler off path]).
//
// Step names (the rows of loom.profiler's tables): a generated kernel is "<kernel>: <ops>" (its
// name in the module and the distinct ops it computes, in trace order), category "kernel"; a
// matrix product is "MatMul", category "blas"; a collective (lazy/collectives.h) is its op's name,
// category "collective"; another library step is its op's name, category "library"; a copy into
// an in-place destination is "copy to destination", category "copy".
// Bytes: the values a step reads and writes, each counted once at its dtype (a broadcast input
// counts its own elements), so they are what the step moves at least.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fusion/program.h"
#include "runtime/profiler.h"

namespace loom::graph {

// The ops generated kernel `kernel` of `p` computes (every non-leaf node reached from its stores
// without passing through a value it loads), in trace order, with their Python lines.
std::vector<profiler::FusedOp> fused_ops(const fusion::Program& p, const Trace& t, int32_t kernel);

// Fills a step's event: its name, category, bytes and fused ops.
void describe_step(profiler::Event& e, const fusion::Program& p, const Trace& t, const fusion::Step& step);

// The span of one step of a run: open while it lives. Empty (no cost beyond the branch) unless a
// profile runs.
class StepSpan {
 public:
  StepSpan(const fusion::Program& p, const Trace& t, size_t step) : span_("kernel", "") {
    if (profiler::Event* e = span_.event()) [[unlikely]] describe_step(*e, p, t, p.steps[step]);
  }

 private:
  profiler::Span span_;
};

// The span of a plan's run: which executor, the plan's key and its number of steps; at its end,
// a sample of the device's memory (allocator reserved and allocated over time).
class RunSpan {
 public:
  RunSpan(const char* executor, const Trace& t) : span_("plan", "run plan"), device_(t.device) {
    if (profiler::Event* e = span_.event()) [[unlikely]] describe(*e, executor, t);
  }
  ~RunSpan() {
    if (span_.event()) [[unlikely]] profiler::sample_memory(device_);
  }
  // The plan it runs, once known.
  void plan(size_t steps, bool graph_replay = false) {
    if (profiler::Event* e = span_.event()) [[unlikely]] describe_plan(*e, steps, graph_replay);
  }

 private:
  static void describe(profiler::Event& e, const char* executor, const Trace& t);
  static void describe_plan(profiler::Event& e, size_t steps, bool graph_replay);
  profiler::Span span_;
  Device device_;
};

// The span of a plan cache lookup: a hit, or a miss whose lowering (and compile) nest inside it.
class LookupSpan {
 public:
  explicit LookupSpan(uint64_t key) : span_("cache", "plan cache lookup") {
    if (profiler::Event* e = span_.event()) [[unlikely]] describe(*e, key);
  }
  ~LookupSpan() {
    if (profiler::Event* e = span_.event()) [[unlikely]] e->args.emplace_back("result", missed_ ? "miss" : "hit");
  }
  void missed() noexcept { missed_ = true; }

 private:
  static void describe(profiler::Event& e, uint64_t key);
  profiler::Span span_;
  bool missed_ = false;
};

// The span of a module's compile: its kernels, and where the module came from (the compiler,
// the disk cache or the memory cache; read from loom.metrics()'s counters, runtime/metrics.h).
class CompileSpan {
 public:
  CompileSpan(const char* target, const fusion::Program& p);
  ~CompileSpan();
  CompileSpan(const CompileSpan&) = delete;
  CompileSpan& operator=(const CompileSpan&) = delete;

 private:
  profiler::Span span_;
  int64_t compiled_before_ = 0, loaded_before_ = 0, nanoseconds_before_ = 0;
};

}  // namespace loom::graph
