#include "graph/cuda_executor.h"

#include <cuda_runtime_api.h>

#include <cstdlib>
#include <cstring>
#include <optional>

#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/binding.h"
#include "graph/cuda_blas.h"
#include "graph/cuda_capture.h"
#include "graph/cuda_library_source.h"
#include "graph/cuda_program.h"
#include "graph/cuda_step_profile.h"
#include "graph/cuda_step_timer.h"
#include "graph/dump.h"
#include "graph/memory_plan.h"
#include "graph/op_trace.h"
#include "graph/plan_cache.h"
#include "graph/step_profile.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/module.h"
#include "runtime/cuda/staging.h"
#include "runtime/cuda/stream.h"
#include "runtime/hash.h"
#include "runtime/matmul_precision.h"
#include "runtime/metrics.h"

namespace loom::graph {
namespace {

struct Plan : CachedPlan {
  int device = 0;
  uint64_t key = 0;
  fusion::Program program;
  MemoryPlan memory;
  CudaProgram lowered;
  std::optional<PlanMemory> pool;  // the device memory below (graph/plan_cache.h)
  Array arena, scratch, table;
  std::shared_ptr<const cuda::Module> fused, library;
  struct Geometry {
    const cuda::Kernel* kernel = nullptr;
    unsigned grid = 1, block = 1;
    std::string what;  // the launch in errors: its op or kernel, and the trace
  };
  std::vector<Geometry> launches;  // per lowered launch
  std::vector<int64_t> words;      // the table as written for the current run (patch_table)
  cudaGraphExec_t graph = nullptr;
  GraphLife life;       // direct, capture, replays; or direct for good after a failed capture
  bool queued = false;  // work of this plan was queued on the device's stream

  // An evicted plan goes once its last run has returned (graph/plan_cache.h), but its work may
  // still be on the stream: wait for it before its graph, memory and modules go. (The wait's
  // result is not checked here: a kernel fault is sticky and the next checked call raises it; a
  // data error stays in the error word for the next wait. The stream exists once work was queued.)
  ~Plan() override {
    if (queued) cudaStreamSynchronize(cuda::stream(device));
    if (graph) cudaGraphExecDestroy(graph);
  }
};

// The executor's cache key: the CPU's (graph/binding.h) and the matmul precision setting.
uint64_t cuda_plan_key(const Trace& t) { return hash_combine(plan_key(t), matmul_allow_tf32() ? 0x7f32 : 0x0f32); }

std::string key_name(uint64_t key) {
  char name[32];
  std::snprintf(name, sizeof name, "trace %016llx", static_cast<unsigned long long>(key));
  return name;
}

// Launch geometry: row kernels reduce a row per block, with as many threads as the row has
// elements (a multiple of a warp, at most the kernel's limit); the others loop over their items
// with the block size the occupancy calculator suggests, on as many blocks as are resident.
Plan::Geometry geometry(int device, const cuda::Kernel& k, const Launch& l) {
  int limit = std::min(k.max_block, fusion::kCudaBlock);
  Plan::Geometry g;
  g.kernel = &k;
  if (l.row_inner >= 0) {
    int64_t threads = std::clamp<int64_t>((l.row_inner + 31) / 32 * 32, 32, limit / 32 * 32);
    g.block = static_cast<unsigned>(threads);
    g.grid = cuda::grid_for(device, k, l.items * threads, static_cast<int>(threads));
    return g;
  }
  int block = std::max(32, std::min(k.occupancy_block, limit) / 32 * 32);
  g.block = static_cast<unsigned>(block);
  g.grid = cuda::grid_for(device, k, l.items, block);
  return g;
}

class CudaExecutor final : public Executor {
 public:
  explicit CudaExecutor(CudaOptions options) : options_(options) {}

  std::vector<Array> run(const Trace& t) override {
    return run_trace(t, options_.graphs && !cuda::launch_blocking());
  }

  void synchronize(Device device) override { cuda::synchronize(static_cast<int>(device.index)); }

  Array run_op(OpId op, std::span<const Operand> inputs, const Attrs& attrs, const OutputMeta& meta,
               Device device) override {
    OpTrace o = op_trace(op, inputs, attrs, meta, device);
    return std::move(run_trace(o.trace, false)[0]);  // eager: one kernel per op, never a graph
  }

 private:
  Pin<Plan> plan_for(const Trace& t);
  void upload(Plan& plan);
  void execute(Plan& plan, bool pointer_arrays, CaptureGuard* capturing = nullptr);
  void capture(Plan& plan);
  std::vector<Array> run_trace(const Trace& t, bool graphs);
  PlanCache::Lowered lower(const Trace& t, uint64_t key);

  CudaOptions options_;
  PlanCache::Owner owner_ = PlanCache::new_owner();  // its plans in the plan cache
  const Trace* profiled_ = nullptr;                  // the trace run_trace runs (profiles name its steps)
};

// Eager ops' one-node plans and lazy traces' plans share the cache (graph/plan_cache.h).
Pin<Plan> CudaExecutor::plan_for(const Trace& t) {
  uint64_t key = cuda_plan_key(t);
  LookupSpan lookup(key);  // a profile's span (graph/step_profile.h)
  return plan_cache().pin<Plan>(owner_, key, t.device, [&] {
    lookup.missed();
    return lower(t, key);
  });
}

PlanCache::Lowered CudaExecutor::lower(const Trace& t, uint64_t key) {
  auto plan = std::make_shared<Plan>();
  Plan& p = *plan;
  p.device = t.device.index;
  p.key = key;
  p.program = partition_for_run(t, options_.fuse);
  p.memory = plan_memory(p.program);
  fusion::RenderedModule rendered;
  if (!p.program.kernels.empty()) rendered = fusion::render(p.program, fusion::TargetKind::Cuda);
  if (const char* dir = std::getenv("LOOM_DUMP_DIR"); dir && *dir) dump(dir, key, t, p.program, "", rendered.source);
  p.lowered = lower_for_cuda(t, p.program, rendered, matmul_allow_tf32());

  p.pool.emplace(t.device);
  p.arena = p.pool->allocate(Dims{p.memory.arena_bytes}, DType::UInt8);
  p.scratch = p.pool->allocate(Dims{std::max<int64_t>(p.lowered.scratch_bytes, 1)}, DType::UInt8);
  p.table = p.pool->allocate(Dims{std::max<int64_t>(static_cast<int64_t>(p.lowered.table.size()), 1)}, DType::Int64);
  // Modules and kernels now, so that neither a run nor a capture loads anything.
  const cuda::Module& runtime = cuda::runtime_module(p.device);
  if (!rendered.source.empty()) {
    CompileSpan compiling("cuda", p.program);
    p.fused = cuda::module_for(p.device, rendered.source, key_name(key), static_cast<int>(p.program.kernels.size()));
  }
  for (const Launch& l : p.lowered.launches) {
    const cuda::Module* m = &runtime;
    if (l.module == CudaModule::Fused) m = p.fused.get();
    if (l.module == CudaModule::Library) {
      if (!p.library) p.library = cuda::module_for(p.device, cuda_library_source(), "loom library kernels", 0);
      m = p.library.get();
    }
    p.launches.push_back(geometry(p.device, m->kernel(l.kernel), l));
    p.launches.back().what = l.what + " of " + key_name(key);
  }
  if (!p.lowered.gemms.empty()) prepare_blas(p.device);
  // Data errors a kernel may report: their codes are constant words of the table.
  for (const Launch& l : p.lowered.launches)
    if (l.data_error)
      p.lowered.table[static_cast<size_t>(l.error_code_word)] =
          cuda::register_data_error(l.data_error->first, l.data_error->second + " (in " + l.what + ")");
  int64_t bytes = p.pool->bytes();
  return {std::move(plan), bytes};
}

// Copies the table to the device, a staging chunk at a time, ahead of the run on the stream.
void CudaExecutor::upload(Plan& plan) {
  cudaStream_t s = cuda::stream(plan.device);
  auto bytes = static_cast<size_t>(plan.words.size()) * sizeof(int64_t);
  const char* src = reinterpret_cast<const char*>(plan.words.data());
  char* dst = static_cast<char*>(plan.table.data());
  for (size_t done = 0; done < bytes;) {
    size_t piece = std::min(bytes - done, cuda::kStagingChunk);
    cuda::Staged staged = cuda::stage(plan.device, piece, "an argument table");
    std::memcpy(staged.host, src + done, piece);
    cuda::check(cudaMemcpyAsync(dst + done, staged.host, piece, cudaMemcpyHostToDevice, s), "cudaMemcpyAsync",
                "the argument table of " + key_name(plan.key));
    done += piece;
  }
}

// Queues every step of the plan. Matrix products read their pointers from the table when
// `pointer_arrays` (a graph records them, and its warm-up run loads the same cuBLAS kernels and
// computes the same bits), else take them by value (graph/cuda_blas.h). While `capturing`, each
// step is named to the capture's guard, for the error an allocation inside it raises.
void CudaExecutor::execute(Plan& plan, bool pointer_arrays, CaptureGuard* capturing) {
  const auto* table = static_cast<const int64_t*>(plan.table.data());
  for (const CudaStep& step : plan.lowered.steps) {
    CudaStepTimer timer(plan.device);  // a profile's span of the step, on the stream
    if (profiler::Event* e = timer.event(); e && profiled_)
      describe_cuda_step(*e, plan.program, plan.lowered, *profiled_, step);
    if (step.kind == CudaStep::Kernel) {
      const Launch& l = plan.lowered.launches[static_cast<size_t>(step.index)];
      const Plan::Geometry& g = plan.launches[static_cast<size_t>(step.index)];
      if (capturing) capturing->set_step(g.what);
      cuda::launch(plan.device, *g.kernel, g.grid, g.block, table + l.ip, table + l.sp, table + l.bufs, g.what);
      continue;
    }
    if (step.kind == CudaStep::Collective) {
      // NCCL on the device's stream: a capture records the call with these (fixed) addresses.
      const CollectiveCall& c = plan.lowered.collectives[static_cast<size_t>(step.index)];
      if (capturing) capturing->set_step(c.what);
      char* scratch = static_cast<char*>(plan.scratch.data());
      auto at = [&](const Address& a) { return scratch + plan.lowered.scratch[static_cast<size_t>(a.index)] + a.byte_offset; };
      distributed::run(*distributed::group(c.group), c.call, at(c.in), at(c.out));
      continue;
    }
    const Gemm& g = plan.lowered.gemms[static_cast<size_t>(step.index)];
    if (capturing) capturing->set_step(g.what);
    if (pointer_arrays) {
      gemm_pointer_arrays(plan.device, g, reinterpret_cast<const void* const*>(table + g.pointers));
      continue;
    }
    const int64_t* w = plan.words.data() + g.pointers;
    std::vector<const void*> left, right;
    std::vector<void*> out;
    for (int64_t b = 0; b < g.batches; ++b) {
      left.push_back(reinterpret_cast<const void*>(w[b]));
      right.push_back(reinterpret_cast<const void*>(w[g.padded + b]));
      out.push_back(reinterpret_cast<void*>(w[2 * g.padded + b]));
    }
    gemm_direct(plan.device, g, left, right, out);
  }
}

// Records the plan's steps on the device's stream as a CUDA Graph and instantiates it. The
// table the graph reads was uploaded before, as it is before every replay. Whatever fails, the
// capture has ended and its partial graph is gone when the error leaves, so the stream is usable
// again; graph/cuda_capture.h decides what the plan does next.
void CudaExecutor::capture(Plan& plan) {
  cudaStream_t s = cuda::stream(plan.device);
  std::string name = key_name(plan.key);
  Device device(DeviceType::CUDA, static_cast<int16_t>(plan.device));
  // Alive until after the capture has ended: no memory may go back to the system before.
  CaptureGuard memory(allocator_for(device), "the CUDA Graph of " + name);
  cuda::check(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal), "cudaStreamBeginCapture", name);
  cudaGraph_t graph = nullptr;
  try {
    cuda::CaptureScope scope;
    execute(plan, true, &memory);
    switch (take_capture_fault()) {  // the test hook of graph/cuda_capture.h
      case CaptureFault::None:
        break;
      case CaptureFault::Allocate:
        static_cast<void>(empty(Dims{16}, DType::UInt8, device));
        break;
      case CaptureFault::Synchronize:  // the driver refuses it and invalidates the capture
        cuda::check(cudaStreamSynchronize(s), "cudaStreamSynchronize", "a wait injected into the capture of " + name);
        break;
    }
  } catch (...) {
    // End the capture whatever happened (the driver may have invalidated it already), or the
    // stream stays unusable; clear the error the refused call left.
    if (cudaStreamEndCapture(s, &graph) == cudaSuccess && graph) cudaGraphDestroy(graph);
    cudaGetLastError();
    throw;
  }
  cuda::check(cudaStreamEndCapture(s, &graph), "cudaStreamEndCapture", name);
  cudaGraphExec_t exec = nullptr;
  cudaError_t err = cudaGraphInstantiate(&exec, graph, 0);
  cudaGraphDestroy(graph);
  cuda::check(err, "cudaGraphInstantiate", name);
  plan.graph = exec;
}

std::vector<Array> CudaExecutor::run_trace(const Trace& t, bool graphs) {
  RunSpan profiled("cuda", t);  // a profile's spans (graph/step_profile.h)
  profiled_ = &t;
  cuda::set_device(t.device.index);
  Pin<Plan> pinned = plan_for(t);
  Plan& plan = *pinned;
  std::vector<Array> arrays = bind_buffers(plan.program, t, plan.memory, plan.arena);
  bool aligned = true;
  TableBases bases{reinterpret_cast<uintptr_t>(plan.table.data()), reinterpret_cast<uintptr_t>(plan.scratch.data()),
                   reinterpret_cast<uintptr_t>(cuda::error_word(plan.device))};
  plan.words = patch_table(plan.lowered, t, arrays, bases, aligned);
  plan.queued = true;
  upload(plan);
  bool eligible = graphs && aligned && !plan.lowered.steps.empty();
  GraphLife::Run how = plan.life.start(eligible, [&] { capture(plan); }, [&] { return key_name(plan.key); });
  profiled.plan(plan.lowered.steps.size(), how == GraphLife::Run::Replay);
  if (how == GraphLife::Run::Replay) {
    CudaStepTimer timer(plan.device);  // a profile's span of the whole graph, on the stream
    if (profiler::Event* e = timer.event())
      e->name = "cuda graph replay (" + std::to_string(plan.lowered.steps.size()) + " steps)";
    cuda::check(cudaGraphLaunch(plan.graph, cuda::stream(plan.device)), "cudaGraphLaunch", key_name(plan.key));
    count(metrics().graph_replays);
  } else {
    // The first run of a plan warms up what its capture will record (the same cuBLAS calls);
    // a plan that will never capture takes its products' pointers by value.
    execute(plan, eligible && plan.life.failure().empty());
  }
  plan.life.ran();
  metrics().arena_bytes.store(plan.arena.numel(), std::memory_order_relaxed);
  metrics().arena_live_peak_bytes.store(plan.memory.live_peak, std::memory_order_relaxed);
  return collect_results(plan.program, t, arrays);
}

}  // namespace

CudaOptions cuda_options_from_environment() {
  CudaOptions o;
  if (const char* f = std::getenv("LOOM_FUSION"); f && std::string(f) == "0") o.fuse = false;
  if (const char* g = std::getenv("LOOM_CUDA_GRAPHS"); g && std::string(g) == "0") o.graphs = false;
  return o;
}

std::shared_ptr<Executor> make_cuda_executor(CudaOptions options) { return std::make_shared<CudaExecutor>(options); }

}  // namespace loom::graph
