#include "graph/compiled.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/binding.h"
#include "graph/dump.h"
#include "graph/memory_plan.h"
#include "rtc/disk_cache.h"
#include "rtc/host_compiler.h"
#include "runtime/error.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"
#include "runtime/thread_pool.h"

namespace loom::graph {

using KernelFn = void (*)(const int64_t* ip, const int64_t* sp, void* const* bufs, int64_t lo, int64_t hi);

// Below this many elements a kernel runs on the calling thread: waking the workers costs more.
constexpr int64_t kParallelElements = 1 << 15;

struct CompiledExecutor::Plan {
  fusion::Program program;
  std::shared_ptr<rtc::HostModule> module;
  std::vector<KernelFn> kernels;
  std::vector<std::vector<int64_t>> int_params;
  std::vector<fusion::Split> splits;
  MemoryPlan memory;  // where intermediates live in the arena
  Array arena;
};

CompiledOptions options_from_environment() {
  CompiledOptions o;
  if (const char* f = std::getenv("LOOM_FUSION"); f && std::string(f) == "0") o.fuse = false;
  return o;
}

CompiledExecutor::CompiledExecutor(CompiledOptions options) : options_(options) {}
CompiledExecutor::~CompiledExecutor() = default;

const CompiledExecutor::Plan& CompiledExecutor::plan_for(const Trace& t) {
  uint64_t key = plan_key(t);
  if (auto it = cache_.find(key); it != cache_.end()) {
    count(metrics().graph_cache_hits);
    return *it->second;
  }
  count(metrics().graph_cache_misses);
  auto plan = std::make_unique<Plan>();
  plan->program = partition_for_run(t, options_.fuse);
  fusion::Program& p = plan->program;
  plan->memory = plan_memory(p);
  plan->arena = empty(Dims{plan->memory.arena_bytes}, DType::UInt8, t.device);
  fusion::RenderedModule cpu = fusion::render(p, fusion::TargetKind::Cpu);
  if (const char* dir = std::getenv("LOOM_DUMP_DIR"); dir && *dir)
    dump(dir, key, t, p, cpu.source, fusion::render(p, fusion::TargetKind::Cuda).source);
  if (const char* dir = std::getenv("LOOM_CUDA_RENDER_DIR"); dir && *dir && !p.kernels.empty()) {
    // Every module the test suite renders is also compiled with NVRTC (tests/gpu, scripts/test).
    std::string source = fusion::render(p, fusion::TargetKind::Cuda).source;
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    char name[32];
    std::snprintf(name, sizeof name, "%016llx", static_cast<unsigned long long>(rtc::hash_text(source)));
    std::ofstream(std::string(dir) + "/" + name + ".cu") << source;
  }
  if (!p.kernels.empty()) {
    plan->module = rtc::compile_host(cpu.source, static_cast<int>(p.kernels.size()));
    for (const std::string& s : cpu.symbols) plan->kernels.push_back(reinterpret_cast<KernelFn>(plan->module->symbol(s)));
  }
  plan->int_params = std::move(cpu.int_params);
  plan->splits = std::move(cpu.splits);
  return *cache_.emplace(key, std::move(plan)).first->second;
}

std::vector<Array> CompiledExecutor::run(const Trace& t) {
  const Plan& plan = plan_for(t);
  const fusion::Program& p = plan.program;
  // Bind: every buffer as an array (inputs as given, outputs fresh, intermediates in the arena).
  std::vector<Array> arrays = bind_buffers(p, t, plan.memory, plan.arena);
  auto array_of = [&](int32_t value) -> const Array& { return arrays[p.buffer_of[value]]; };
  std::vector<void*> bufs;
  std::vector<int64_t> scalars;
  for (const fusion::Step& step : p.steps) {
    if (step.kind == fusion::Step::RunKernel) {
      const fusion::Kernel& k = p.kernels[step.kernel];
      bufs.clear();
      for (const fusion::Load& l : k.loads) bufs.push_back(array_of(l.access.value).data());
      for (const fusion::Store& s : k.stores) bufs.push_back(array_of(s.access.value).data());
      scalars.clear();
      for (int32_t node : k.params) {
        const Scalar& v = t.nodes[node]->scalar();
        double d = v.as_double();
        int64_t bits;
        if (v.is_float()) std::memcpy(&bits, &d, sizeof bits);
        else bits = v.as_int();
        scalars.push_back(bits);
      }
      KernelFn fn = plan.kernels[step.kernel];
      const int64_t* ip = plan.int_params[step.kernel].data();
      const fusion::Split& split = plan.splits[step.kernel];
      if (split.extent * split.work < 2 * kParallelElements || num_threads() == 1) {
        fn(ip, scalars.data(), bufs.data(), 0, split.extent);
      } else {
        // Threads take pieces of whole `align` units; the last unit may be partial.
        int64_t units = (split.extent + split.align - 1) / split.align;
        int64_t grain = std::max<int64_t>(1, kParallelElements / std::max<int64_t>(split.work * split.align, 1));
        parallel_for(units, grain, [&](int64_t lo, int64_t hi) {
          fn(ip, scalars.data(), bufs.data(), lo * split.align, std::min(hi * split.align, split.extent));
        });
      }
      count(metrics().kernel_launches);
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
        if (e.kind() == ErrorKind::OutOfMemory) throw;
        throw NodeError(e, step.node, n.op());
      }
      count(metrics().kernel_launches);
    }
  }
  count(metrics().graph_replays);
  metrics().arena_bytes.store(plan.arena.numel(), std::memory_order_relaxed);
  metrics().arena_live_peak_bytes.store(plan.memory.live_peak, std::memory_order_relaxed);
  // Results: in-place outputs are written back last, after every read of the old values.
  std::vector<Array> results = collect_results(p, t, arrays);
  for (const Trace::Output& o : t.outputs)
    if (o.destination) copy_(*o.destination, array_of(o.node));
  return results;
}

}  // namespace loom::graph
