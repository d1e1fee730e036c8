#include "graph/compiled.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <optional>
#include <queue>
#include <unordered_map>

#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/binding.h"
#include "graph/dump.h"
#include "graph/memory_plan.h"
#include "graph/step_profile.h"
#include "rtc/disk_cache.h"
#include "rtc/host_compiler.h"
#include "rtc/kernel_units.h"
#include "runtime/background.h"
#include "runtime/blocking.h"
#include "runtime/environment.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"
#include "runtime/thread_pool.h"

namespace loom::graph {

using KernelFn = void (*)(const int64_t* ip, const int64_t* sp, void* const* bufs, int64_t lo, int64_t hi);

// Below this many elements a kernel runs on the calling thread: waking the workers costs more.
constexpr int64_t kParallelElements = 1 << 15;
// A kernel that may be interrupted runs in slices of about this much work (elements times work
// per element), checking for an interrupt between them: tens of milliseconds each.
constexpr int64_t kInterruptSliceWork = int64_t{1} << 24;

// An in-place result computed straight into its destination (DESIGN decision 5) instead of into
// fresh memory copied over the destination at the end.
struct Donation {
  int32_t output;  // index into the trace's outputs
  int32_t buffer;  // the result's buffer, bound to the destination at every run
  int32_t step;    // the step that writes it
  // Input buffers that the writing kernel reads element for element where it writes: the
  // destination's old values, read through a tensor that must start where the destination does
  // (checked at every run; otherwise the result goes to fresh memory and is copied, as without
  // donation).
  std::vector<int32_t> same_start;
};

// A plan's compiled kernels, swapped as a whole: a run takes the current ones when it starts and
// keeps them to its end (the units stay loaded while it runs), so a swap to the -O3 kernels
// (below) never changes a run midway, and runs already going finish with the -O1 ones.
struct PlanKernels {
  rtc::HostKernels compiled;        // the units and each function's address (rtc/kernel_units.h)
  std::vector<KernelFn> kernels;    // per kernel
  std::vector<KernelFn> combines;   // per kernel: a split reduction's second pass, or null
};

// Kernels are compiled at -O1 first (rtc/kernel_units.h); a plan's kernels are compiled again at
// -O3 in the background (runtime/background.h) when it runs for the kOptimizeAtRun-th time: a
// plan run twice is a loop's body (a training step), one run once (a first step, a trace seen
// once) never pays for -O3.
constexpr int64_t kOptimizeAtRun = 2;

struct CompiledExecutor::Plan : CachedPlan {
  fusion::Program program;
  std::vector<Donation> donations;
  std::vector<bool> take_aside;  // per output: write back a copy of its old value (binding.h)
  std::atomic<std::shared_ptr<const PlanKernels>> code;  // null: no kernels
  std::vector<std::string> function_symbols;  // the module's functions (RenderedModule), in order
  std::vector<std::string> kernel_symbols;    // per kernel: its function, and its combine's or ""
  std::vector<std::string> combine_symbols;
  std::atomic<int64_t> runs{0};
  std::vector<int64_t> scratch_bytes;  // per kernel: where its split passes' scratch starts in
                                       // the arena (after every buffer), or -1
  std::vector<std::vector<int64_t>> int_params;
  std::vector<fusion::Split> splits;
  MemoryPlan memory;  // where intermediates live in the arena

  // The memory of its runs (graph/plan_cache.h PlanMemory), and their arenas: one per run at a
  // time (threads may run one plan at once, as four threads training four copies of a model do);
  // a run takes one and gives it back. So its runs need not take turns (Pin).
  static constexpr bool kExclusiveRuns = false;
  Array take_arena();
  void give_back(Array arena);
  std::optional<PlanMemory> pool;
  std::mutex arenas_mu;
  std::vector<Array> arenas;
};

Array CompiledExecutor::Plan::take_arena() {
  std::lock_guard lock(arenas_mu);
  if (!arenas.empty()) {
    Array a = std::move(arenas.back());
    arenas.pop_back();
    return a;
  }
  return pool->allocate(Dims{memory.arena_bytes}, DType::UInt8);
}

void CompiledExecutor::Plan::give_back(Array arena) {
  std::lock_guard lock(arenas_mu);
  arenas.push_back(std::move(arena));
}

namespace {

// The buffers a step reads.
template <typename Fn>
void for_each_read(const fusion::Program& p, const fusion::Step& step, Fn&& fn) {
  if (step.kind == fusion::Step::RunKernel) {
    for (const fusion::Load& l : p.kernels[step.kernel].loads) fn(p.buffer_of[l.access.value]);
  } else {
    for (const fusion::Operand& o : step.operands)
      if (p.buffer_of[o.value] >= 0) fn(p.buffer_of[o.value]);
  }
}

bool same_elements(const fusion::Access& a, const fusion::Access& b) {
  return a.space == b.space && a.strides == b.strides && a.offset == b.offset;
}

bool fallible(const fusion::Step& step, const Trace& t) {
  return step.kind == fusion::Step::RunOp && !op_def(t.nodes[step.node]->op()).data_safe;
}

// Whether a step can fail at all: every library step can (running out of memory for its
// temporaries, if not on its data); a generated kernel cannot.
bool can_fail(const fusion::Step& step) { return step.kind == fusion::Step::RunOp; }

// The step computing each value of the trace (-1: none, an input or a scalar).
std::vector<int32_t> writers(const fusion::Program& p, const Trace& t) {
  std::vector<int32_t> writer(t.nodes.size(), -1);
  for (size_t s = 0; s < p.steps.size(); ++s) {
    const fusion::Step& step = p.steps[s];
    if (step.kind == fusion::Step::RunKernel)
      for (const fusion::Store& st : p.kernels[step.kernel].stores) writer[st.access.value] = static_cast<int32_t>(s);
    else
      writer[step.node] = static_cast<int32_t>(s);
  }
  return writer;
}

// Per buffer: whether it is an input on `storage` (it holds the old values a destination there
// will be given).
std::vector<bool> inputs_on(const fusion::Program& p, const Trace& t, const Storage* storage) {
  std::vector<bool> on(p.buffers.size(), false);
  for (size_t b = 0; b < p.buffers.size(); ++b)
    on[b] = p.buffers[b].kind == fusion::BufferKind::Input && t.nodes[p.buffers[b].value]->array().storage.get() == storage;
  return on;
}

// Marks every step that needs step `from`'s results, directly or not (`users`: each step's
// direct users); steps marked already are not walked again.
void mark_users(const std::vector<std::vector<int32_t>>& users, int32_t from, std::vector<bool>& marked) {
  std::vector<int32_t> stack(users[from].begin(), users[from].end());
  while (!stack.empty()) {
    int32_t u = stack.back();
    stack.pop_back();
    if (marked[u]) continue;
    marked[u] = true;
    stack.insert(stack.end(), users[u].begin(), users[u].end());
  }
}

// Reorders the steps so that those that can fail on their data, and the steps they need, run
// before all others (each group keeping its order), and in-place results after the reads of
// the old values and after every library step that does not need them: the in-place results
// computed after the last step that can fail and after those reads can be written straight
// into their destinations (plan_donations). Otherwise steps depend
// on each other only through the values they read (intermediates get memory after ordering;
// inputs are not written).
void run_fallible_steps_first(fusion::Program& p, const Trace& t) {
  size_t n = p.steps.size();
  std::vector<int32_t> writer = writers(p, t);
  std::vector<std::vector<int32_t>> users(n);
  std::vector<int32_t> waiting(n, 0);
  for (size_t s = 0; s < n; ++s) {
    std::vector<int32_t> deps;
    for_each_read(p, p.steps[s], [&](int32_t b) {
      int32_t w = writer[p.buffers[b].value];
      if (w >= 0 && w != static_cast<int32_t>(s) && std::ranges::find(deps, w) == deps.end()) deps.push_back(w);
    });
    for (int32_t d : deps) users[d].push_back(static_cast<int32_t>(s));
    waiting[s] = static_cast<int32_t>(deps.size());
  }
  // The steps that can fail and those they need: all of them run before the others.
  std::vector<bool> first(n, false);
  for (size_t s = n; s-- > 0;) {
    first[s] = fallible(p.steps[s], t);
    for (int32_t u : users[s]) first[s] = first[s] || first[u];
  }
  // An in-place result's step also waits for the steps that read its destination's old values
  // (an optimizer update after the backward product that reads the old weight), unless they
  // need its result: it can then be written in place. And writes into destinations come last,
  // as a transaction commits, so that no step that can fail (a library step: plan_donations)
  // runs after one, and a run can be interrupted until then: each "late" writer (one that no
  // library step needs, directly or not) waits for every step that needs no late writer.
  std::vector<bool> needed_by_library(n, false);
  for (size_t s = n; s-- > 0;) {
    needed_by_library[s] = can_fail(p.steps[s]);
    for (int32_t u : users[s]) needed_by_library[s] = needed_by_library[s] || needed_by_library[u];
  }
  std::vector<bool> needs_late(n, false);  // the step needs a late writer's result, directly or not
  std::vector<bool> late(n, false);
  for (const Trace::Output& o : t.outputs) {
    int32_t w = o.destination ? writer[o.node] : -1;
    if (w < 0 || needed_by_library[w]) continue;
    late[w] = true;
    mark_users(users, w, needs_late);
  }
  std::vector<bool> after(n);
  for (const Trace::Output& o : t.outputs) {
    int32_t w = o.destination ? writer[o.node] : -1;
    if (w < 0) continue;
    after.assign(n, false);  // the steps that need w's result, directly or not
    mark_users(users, w, after);
    std::vector<bool> old_values = inputs_on(p, t, o.destination->storage.get());
    for (size_t r = 0; r < n; ++r) {
      if (static_cast<int32_t>(r) == w || after[r] || std::ranges::find(users[r], w) != users[r].end()) continue;
      bool reads_old = false;
      for_each_read(p, p.steps[r], [&](int32_t b) { reads_old = reads_old || old_values[b]; });
      if (!reads_old && !(late[w] && !needs_late[r])) continue;
      users[r].push_back(w);
      ++waiting[w];
    }
  }
  // Ready steps in that order, then by their original position.
  auto later = [&](int32_t a, int32_t b) { return first[a] != first[b] ? first[b] : a > b; };
  std::priority_queue<int32_t, std::vector<int32_t>, decltype(later)> ready(later);
  for (size_t s = 0; s < n; ++s)
    if (waiting[s] == 0) ready.push(static_cast<int32_t>(s));
  std::vector<fusion::Step> ordered;
  ordered.reserve(n);
  while (!ready.empty()) {
    int32_t s = ready.top();
    ready.pop();
    ordered.push_back(std::move(p.steps[s]));
    for (int32_t u : users[s])
      if (--waiting[u] == 0) ready.push(u);
  }
  LOOM_CHECK(ordered.size() == n, Runtime, "internal: the steps of a program form a cycle");
  p.steps = std::move(ordered);
}

// Which in-place results can be computed straight into their destination. The old values of a
// destination are read through Input leaves on its storage (which ones is fixed by the trace
// key: it records which leaves share storage and which leaf's storage each destination is). A
// result is donated when
//   - it is computed by a step (not an input passed through) into a dense destination of its
//     own shape and dtype, the only destination on that storage;
//   - no step after the writing one, and no output handed out at the end, reads the old values;
//   - the writing step is a library op that does not read them, or a pointwise kernel that
//     reads them only element for element where it writes (rendered loads-before-stores,
//     without __restrict__ on the pair: fusion/program.h);
//   - no step after it can fail (a library step: on its data, or running out of memory): a
//     failed sync writes nothing (lazy/sync.h).
// Marks the donated buffers Destination and the kernels' in-place loads and stores.
std::vector<Donation> plan_donations(fusion::Program& p, const Trace& t) {
  std::vector<Donation> donations;
  std::vector<int32_t> writer = writers(p, t);
  int32_t last_fallible = -1;  // the last step that can fail
  for (size_t s = 0; s < p.steps.size(); ++s)
    if (can_fail(p.steps[s])) last_fallible = static_cast<int32_t>(s);
  for (size_t oi = 0; oi < t.outputs.size(); ++oi) {
    const Trace::Output& o = t.outputs[oi];
    if (!o.destination) continue;
    int32_t b = p.buffer_of[o.node];
    int32_t w = writer[o.node];
    const Array& dest = *o.destination;
    if (b < 0 || p.buffers[b].kind != fusion::BufferKind::Intermediate || w < 0 || w <= last_fallible) continue;
    if (!dest.is_contiguous() || dest.numel() == 0 || dest.dtype != p.buffers[b].dtype ||
        !std::ranges::equal(dest.sizes(), t.nodes[o.node]->shape()))
      continue;
    std::vector<bool> old_values = inputs_on(p, t, dest.storage.get());
    if (std::ranges::none_of(old_values, [](bool v) { return v; }))
      continue;  // a storage no leaf reads: the trace key does not pin its aliasing
    bool safe = true;
    for (size_t oj = 0; oj < t.outputs.size(); ++oj) {
      const Trace::Output& other = t.outputs[oj];
      if (oj != oi && other.destination && other.destination->storage == dest.storage) safe = false;
      if (p.buffer_of[other.node] >= 0 && old_values[p.buffer_of[other.node]]) safe = false;
    }
    for (size_t s = static_cast<size_t>(w) + 1; s < p.steps.size() && safe; ++s)
      for_each_read(p, p.steps[s], [&](int32_t rb) { safe = safe && !old_values[rb]; });
    if (!safe) continue;
    Donation d{static_cast<int32_t>(oi), b, w, {}};
    const fusion::Step& step = p.steps[w];
    if (step.kind == fusion::Step::RunOp) {
      for_each_read(p, step, [&](int32_t rb) { safe = safe && !old_values[rb]; });
    } else {
      fusion::Kernel& k = p.kernels[step.kernel];
      auto store = std::ranges::find_if(k.stores, [&](const fusion::Store& st) { return st.access.value == o.node; });
      for (const fusion::Load& l : k.loads) {
        int32_t rb = p.buffer_of[l.access.value];
        if (!old_values[rb]) continue;
        if (k.row || !same_elements(l.access, store->access)) safe = false;
        else d.same_start.push_back(rb);
      }
      if (safe) {
        store->in_place = true;
        for (fusion::Load& l : k.loads) l.in_place = l.in_place || old_values[p.buffer_of[l.access.value]];
      }
    }
    if (!safe) continue;
    p.buffers[b].kind = fusion::BufferKind::Destination;
    p.buffers[b].output = static_cast<int32_t>(oi);
    donations.push_back(std::move(d));
  }
  return donations;
}

}  // namespace

namespace {

// The kernels and combines of `plan` at the addresses `compiled` gives its functions.
std::shared_ptr<const PlanKernels> kernels_of(const CompiledExecutor::Plan& plan, rtc::HostKernels compiled) {
  auto out = std::make_shared<PlanKernels>();
  std::unordered_map<std::string, void*> address;
  for (size_t f = 0; f < plan.function_symbols.size(); ++f) address[plan.function_symbols[f]] = compiled.functions[f];
  for (const std::string& s : plan.kernel_symbols) out->kernels.push_back(reinterpret_cast<KernelFn>(address.at(s)));
  for (const std::string& s : plan.combine_symbols)
    out->combines.push_back(s.empty() ? nullptr : reinterpret_cast<KernelFn>(address.at(s)));
  out->compiled = std::move(compiled);
  return out;
}

// Queues the compile of `plan`'s -O1 kernels at -O3, and the swap once they are loaded. The job
// holds the plan weakly: a plan evicted meanwhile is not kept alive for it (its kernels are still
// compiled, for the next plan of the same program, from the disk cache). Nor does it hold the
// plan's -O1 units, only their sources (rtc::HostKernelSources): they are unloaded with the last
// plan that uses them, so loom.clear_plan_cache() leaves no module of the plans it dropped loaded
// while a compile is in flight, and the -O3 units a job finishes after its plan is gone are
// unloaded as it ends (nothing holds them).
void optimize_in_background(const std::shared_ptr<CompiledExecutor::Plan>& plan, const PlanKernels& quick) {
  std::weak_ptr<CompiledExecutor::Plan> weak = plan;
  run_in_background([weak, sources = rtc::sources_of(quick.compiled),
                     symbols = plan->function_symbols](const std::function<bool()>& stop) {
    std::optional<rtc::HostKernels> full = rtc::optimize_host_kernels(sources, symbols, stop);
    if (!full) return;
    if (std::shared_ptr<CompiledExecutor::Plan> p = weak.lock()) p->code.store(kernels_of(*p, std::move(*full)));
  });
}

}  // namespace

CompiledOptions options_from_environment() {
  CompiledOptions o;
  if (const char* f = std::getenv("LOOM_FUSION"); f && std::string(f) == "0") o.fuse = false;
  return o;
}

CompiledExecutor::CompiledExecutor(CompiledOptions options) : options_(options), owner_(PlanCache::new_owner()) {}
CompiledExecutor::~CompiledExecutor() = default;

Pin<CompiledExecutor::Plan> CompiledExecutor::plan_for(const Trace& t) {
  uint64_t key = plan_key(t);
  LookupSpan lookup(key);  // a profile's span (graph/step_profile.h)
  return plan_cache().pin<Plan>(owner_, key, t.device, [&] {
    lookup.missed();
    return lower(t, key);
  });
}

PlanCache::Lowered CompiledExecutor::lower(const Trace& t, uint64_t key) {
  profiler::Span lowering("lower", "lower plan");
  auto plan = std::make_shared<Plan>();
  plan->program = fusion::partition(t, fusion::PartitionOptions{options_.fuse});
  fusion::Program& p = plan->program;
  run_fallible_steps_first(p, t);
  plan->donations = plan_donations(p, t);
  plan->take_aside = write_backs_to_take_aside(p, t);
  mark_outputs(p, t);
  plan->memory = plan_memory(p);
  // Split reductions' partials (fusion/program.h, Kernel::split_block): after every buffer.
  for (const fusion::Kernel& k : p.kernels) {
    int64_t bytes = fusion::split_scratch_bytes(k);
    int64_t at = (plan->memory.arena_bytes + 63) / 64 * 64;
    plan->scratch_bytes.push_back(bytes > 0 ? at : -1);
    if (bytes > 0) plan->memory.arena_bytes = at + bytes;
  }
  plan->pool.emplace(t.device);
  plan->arenas.push_back(plan->pool->allocate(Dims{plan->memory.arena_bytes}, DType::UInt8));
  fusion::RenderedModule cpu = fusion::render(p, fusion::TargetKind::Cpu);
  // The environment's snapshot: a sync lowers with the GIL released (runtime/environment.h).
  if (std::string dir = environment_value("LOOM_DUMP_DIR"); !dir.empty())
    dump(dir, key, t, p, cpu.source, fusion::render(p, fusion::TargetKind::Cuda).source);
  if (std::string dir = environment_value("LOOM_CUDA_RENDER_DIR"); !dir.empty() && !p.kernels.empty()) {
    // Every module the test suite renders is also compiled with NVRTC (tests/gpu, scripts/test).
    std::string source = fusion::render(p, fusion::TargetKind::Cuda).source;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    char name[32];
    std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(rtc::hash_text(source)));
    std::ofstream(dir + "/" + name + ".cu") << source;
  }
  if (!p.kernels.empty()) {
    CompileSpan compiling("c++", p);
    try {
      // Only kernels no earlier module compiled are compiled, in parallel units.
      rtc::HostKernels compiled = rtc::compile_host_kernels(cpu.prelude, cpu.functions, cpu.function_symbols);
      plan->function_symbols = cpu.function_symbols;
      plan->kernel_symbols = cpu.symbols;
      plan->combine_symbols = cpu.combine_symbols;
      plan->code.store(kernels_of(*plan, std::move(compiled)));
    } catch (const Error&) {
      check_interrupt();  // Ctrl-C reaches the compiler too: then the interrupt is the failure
      throw;
    }
  }
  plan->int_params = std::move(cpu.int_params);
  plan->splits = std::move(cpu.splits);
  int64_t bytes = plan->pool->bytes();
  return {std::move(plan), bytes};
}

namespace {

// Runs a kernel over its outer loop [0, split.extent): on the calling thread when small, else
// over the thread pool in whole `align` units. `interruptible`: in slices of whole units, with a
// check for an interrupt before each (runtime/blocking.h), so a long kernel stops promptly.
// Cuts at whole units never change results (fusion/render.h).
void run_kernel(KernelFn fn, const int64_t* ip, const int64_t* sp, void* const* bufs, const fusion::Split& split,
                bool interruptible) {
  int64_t units = (split.extent + split.align - 1) / split.align;
  int64_t unit_work = std::max<int64_t>(split.work * split.align, 1);
  int64_t slice = interruptible ? std::max<int64_t>(1, kInterruptSliceWork / unit_work) : units;
  bool parallel = split.extent * split.work >= 2 * kParallelElements && num_threads() > 1;
  int64_t grain = std::max<int64_t>(1, kParallelElements / unit_work);
  for (int64_t begin = 0; begin < units; begin += slice) {
    if (interruptible) check_interrupt();
    int64_t end = std::min(units, begin + slice);
    if (!parallel) {
      fn(ip, sp, bufs, begin * split.align, std::min(end * split.align, split.extent));
      continue;
    }
    // Threads take pieces of whole `align` units; the last unit may be partial.
    parallel_for(end - begin, grain, [&](int64_t lo, int64_t hi) {
      fn(ip, sp, bufs, (begin + lo) * split.align, std::min((begin + hi) * split.align, split.extent));
    });
  }
}

}  // namespace

std::vector<Array> CompiledExecutor::run(const Trace& t) {
  RunSpan profiled("cpu", t);      // a profile's spans of the run and its steps (graph/step_profile.h)
  Pin<Plan> pinned = plan_for(t);  // alive for the run, though another thread may evict it meanwhile
  Plan& plan = *pinned;
  const fusion::Program& p = plan.program;
  profiled.plan(p.steps.size());
  // This run's kernels, whatever a swap does meanwhile (PlanKernels).
  std::shared_ptr<const PlanKernels> code = plan.code.load();
  if (plan.runs.fetch_add(1, std::memory_order_relaxed) + 1 == kOptimizeAtRun && code && !code->compiled.optimized())
    optimize_in_background(pinned.shared(), *code);
  // Bind: every buffer as an array (inputs as given, outputs fresh, intermediates in the arena).
  Array arena = plan.take_arena();
  struct GiveBack {
    Plan& plan;
    Array& arena;
    ~GiveBack() { plan.give_back(std::move(arena)); }
  } give_back{plan, arena};
  std::vector<Array> arrays = bind_buffers(p, t, plan.memory, arena);
  // Donated results go straight to their destination, unless a tensor read element for element
  // does not start where the destination does (then: fresh memory, copied at the end).
  std::vector<bool> written_in_place(t.outputs.size(), false);
  size_t first_write = p.steps.size();  // the first step that writes a destination
  for (const Donation& d : plan.donations) {
    const Array& dest = *t.outputs[d.output].destination;
    bool aligned = std::ranges::all_of(d.same_start, [&](int32_t ib) { return arrays[ib].data() == dest.data(); });
    arrays[d.buffer] = aligned ? dest : empty(dest.sizes(), dest.dtype, t.device);
    written_in_place[d.output] = aligned;
    if (aligned) first_write = std::min(first_write, static_cast<size_t>(d.step));
  }
  // Everything else the run allocates is allocated now, before the first write into a
  // destination, so that nothing can fail after it: a failed sync finds every destination as it
  // was (lazy/sync.h). The results handed out (and their copies), and the in-place results
  // written back last (with the copies of those taken aside).
  ResultPlan results = plan_results(p, t, arrays);
  auto array_of = [&](int32_t value) -> const Array& { return arrays[p.buffer_of[value]]; };
  std::vector<Array> sources(t.outputs.size());
  for (size_t oi = 0; oi < t.outputs.size(); ++oi) {
    if (!t.outputs[oi].destination || written_in_place[oi]) continue;
    const Array& value = array_of(t.outputs[oi].node);
    sources[oi] = plan.take_aside[oi] ? empty(value.sizes(), value.dtype, t.device) : value;
  }
  std::vector<void*> bufs;
  std::vector<int64_t> scalars;
  for (size_t si = 0; si < p.steps.size(); ++si) {
    const fusion::Step& step = p.steps[si];
    StepSpan step_span(p, t, si);
    // Until the first write into a destination the run can stop on request, changing nothing.
    bool interruptible = si < first_write;
    if (interruptible) check_interrupt();
    if (step.kind == fusion::Step::RunKernel) {
      const fusion::Kernel& k = p.kernels[step.kernel];
      bufs.clear();
      for (const fusion::Load& l : k.loads) bufs.push_back(array_of(l.access.value).data());
      for (const fusion::Store& s : k.stores) bufs.push_back(array_of(s.access.value).data());
      int64_t scratch = plan.scratch_bytes[step.kernel];
      if (scratch >= 0) bufs.push_back(static_cast<char*>(arena.data()) + scratch);
      scalars.clear();
      for (int32_t node : k.params) {
        const Scalar& v = t.nodes[node]->scalar();
        double d = v.as_double();
        int64_t bits;
        if (v.is_float()) std::memcpy(&bits, &d, sizeof bits);
        else bits = v.as_int();
        scalars.push_back(bits);
      }
      run_kernel(code->kernels[step.kernel], plan.int_params[step.kernel].data(), scalars.data(), bufs.data(),
                 plan.splits[step.kernel], interruptible);
      count(metrics().kernel_launches);
      if (KernelFn combine = code->combines[step.kernel]) {  // after every block's partial
        combine(plan.int_params[step.kernel].data(), scalars.data(), bufs.data(), 0, 1);
        count(metrics().kernel_launches);
      }
      continue;
    }
    if (step.kind == fusion::Step::RunOp) {
      const Node& n = *t.nodes[step.node];
      SmallVec<Operand, 4> operands;
      std::vector<Array> views;  // operands read as views of stored values (reserved: no moves)
      views.reserve(step.operands.size());
      for (const fusion::Operand& o : step.operands) {
        const Node& x = *t.nodes[o.value];
        if (x.op() == OpId::Scalar || x.op() == OpId::Constant) {
          operands.push_back(Operand::of(x.scalar()));
        } else if (o.view) {
          const Array& base = array_of(o.value);
          Layout l = *o.view;
          l.offset += base.layout.offset;
          views.push_back(Array{base.storage, std::move(l), base.dtype});
          operands.push_back(Operand::of(views.back()));
        } else {
          operands.push_back(Operand::of(array_of(o.value)));
        }
      }
      try {
        op_def(n.op()).run_cpu({operands.data(), operands.size()}, n.attrs(), array_of(step.node));
      } catch (const Error& e) {
        // A library op's error is its node's (its data: an index out of range, a division by
        // zero), except running out of memory: the sync then fails as a whole. Generated
        // kernels cannot fail on data (integer division and indexing are library ops).
        if (e.kind() == ErrorKind::OutOfMemory || e.kind() == ErrorKind::Interrupted) throw;
        throw NodeError(e, step.node, n.op());
      }
      count(metrics().kernel_launches);
    }
  }
  count(metrics().graph_replays);
  metrics().arena_bytes.store(arena.numel(), std::memory_order_relaxed);
  metrics().arena_live_peak_bytes.store(plan.memory.live_peak, std::memory_order_relaxed);
  // Results: in-place outputs are written back last, after every read of the old values.
  for (size_t oi = 0; oi < t.outputs.size(); ++oi)
    if (sources[oi].storage && plan.take_aside[oi]) copy_(sources[oi], array_of(t.outputs[oi].node));
  fill_results(results, arrays);
  for (size_t oi = 0; oi < t.outputs.size(); ++oi)
    if (sources[oi].storage) copy_(*t.outputs[oi].destination, sources[oi]);
  return std::move(results.arrays);
}

}  // namespace loom::graph
