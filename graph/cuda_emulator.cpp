#include "graph/cuda_emulator.h"

#include <cstdio>
#include <cstring>
#include <optional>
#include <unordered_map>

#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/binding.h"
#include "graph/cuda_capture.h"
#include "graph/cuda_library_source.h"
#include "graph/cuda_program.h"
#include "graph/cuda_step_profile.h"
#include "graph/memory_plan.h"
#include "graph/plan_cache.h"
#include "graph/step_profile.h"
#include "rtc/host_compiler.h"
#include "runtime/allocator.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom::graph {
namespace {

// CUDA's vocabulary for the host: a launch is one block of one thread, so atomics need no
// atomicity, a barrier has no one to wait for, and a block's shared memory is a static array.
constexpr const char* kShim = R"(// The host shim of loom's CUDA emulator (graph/cuda_emulator.cpp).
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n)
#define __shared__ static
static inline void __syncthreads() {}
struct loom_emu_dim { unsigned x; };
static const loom_emu_dim blockIdx = {0}, threadIdx = {0}, gridDim = {1}, blockDim = {1};
static inline int atomicAdd(int* p, int v) { int o = *p; *p = o + v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p = o + v; return o; }
static inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p = o + v; return o; }
static inline unsigned atomicCAS(unsigned* p, unsigned expected, unsigned v) { unsigned o = *p; if (o == expected) *p = v; return o; }
static inline unsigned long long atomicCAS(unsigned long long* p, unsigned long long expected, unsigned long long v) { unsigned long long o = *p; if (o == expected) *p = v; return o; }
)";

using CudaAbi = void (*)(const int64_t*, const int64_t*, void* const*);
using CpuAbi = void (*)(const int64_t*, const int64_t*, void* const*, int64_t, int64_t);

struct Plan : CachedPlan {
  fusion::Program program;
  MemoryPlan memory;
  fusion::RenderedModule cpu;  // the fused kernels' C++ rendering
  CudaProgram lowered;
  std::optional<PlanMemory> pool;  // the arena's and scratch's (graph/plan_cache.h)
  Array arena, scratch;
  std::vector<int64_t> table;  // where kernels read their arguments (the "device" table)
  std::shared_ptr<rtc::HostModule> fused;
  std::vector<void*> functions;  // per launch
  uint64_t key = 0;
  GraphLife life;
  std::vector<CudaStep> graph;  // the steps as the capture recorded them, replayed in order
  std::vector<size_t> kernel_of;  // per launch of a fused kernel: its index in the program
};

// The C++ matrix product of one batch in cuBLAS's convention (column-major C' = op(A') op(B')).
template <typename T>
void column_major_gemm(const BlasShape& s, const T* a, const T* b, T* c) {
  for (int64_t j = 0; j < s.n; ++j)
    for (int64_t i = 0; i < s.m; ++i) {
      double acc = 0;
      for (int64_t p = 0; p < s.k; ++p) {
        T x = s.trans_a ? a[p + i * s.lda] : a[i + p * s.lda];
        T y = s.trans_b ? b[j + p * s.ldb] : b[p + j * s.ldb];
        acc += convert<double>(x) * convert<double>(y);
      }
      c[i + j * s.ldc] = convert<T>(acc);
    }
}

class CudaEmulator final : public Executor {
 public:
  CudaEmulator(bool fuse, bool graphs) : fuse_(fuse), graphs_(graphs) {}

  std::vector<Array> run(const Trace& t) override {
    LOOM_CHECK(t.device.is_cpu(), Runtime, "the CUDA emulator runs traces of the CPU device");
    RunSpan profiled("cuda-emulated", t);  // a profile's spans (graph/step_profile.h)
    Pin<Plan> pinned = plan_for(t);
    Plan& plan = *pinned;
    std::vector<Array> arrays = bind_buffers(plan.program, t, plan.memory, plan.arena);
    int32_t error = 0;
    bool aligned = true;
    TableBases bases{reinterpret_cast<uintptr_t>(plan.table.data()), reinterpret_cast<uintptr_t>(plan.scratch.data()),
                     reinterpret_cast<uintptr_t>(&error)};
    std::vector<int64_t> words = patch_table(plan.lowered, t, arrays, bases, aligned);
    std::copy(words.begin(), words.end(), plan.table.begin());  // the upload
    // The executor's decisions (graph/cuda_capture.h), with the same counters.
    GraphLife::Run how = plan.life.start(
        graphs_ && aligned && !plan.lowered.steps.empty(), [&] { capture(plan); },
        [&] { return emulated_name(plan.key); });
    const std::vector<CudaStep>& steps = how == GraphLife::Run::Replay ? plan.graph : plan.lowered.steps;
    profiled.plan(steps.size(), how == GraphLife::Run::Replay);
    for (const CudaStep& step : steps) {
      HostCudaStepSpan step_span(plan.program, plan.lowered, t, step);
      run_step(plan, step);
      if (how == GraphLife::Run::Direct) count(metrics().kernel_launches);
      if (error != 0) {
        const Launch& failed = plan.lowered.launches[static_cast<size_t>(error - 1)];
        detail::throw_error(failed.data_error->first,
                            detail::concat(failed.data_error->second, " (in ", failed.what, ", emulated)"));
      }
    }
    if (how == GraphLife::Run::Replay) count(metrics().graph_replays);
    plan.life.ran();
    return collect_results(plan.program, t, arrays);
  }

  // An emulated stream, as far as graphs go: waiting for it while it captures is refused, as the
  // driver refuses it (cudaErrorStreamCaptureUnsupported), so a capture that never ended shows.
  void synchronize(Device) override {
    LOOM_CHECK(!capturing_, Runtime, "operation not permitted when stream is capturing (emulated)");
  }

 private:
  Pin<Plan> plan_for(const Trace& t) {
    uint64_t key = plan_key(t);
    LookupSpan lookup(key);
    return plan_cache().pin<Plan>(owner_, key, t.device, [&] {
      lookup.missed();
      return lower(t, key);
    });
  }

  PlanCache::Lowered lower(const Trace& t, uint64_t key) {
    auto plan = std::make_shared<Plan>();
    Plan& p = *plan;
    p.key = key;
    p.program = partition_for_run(t, fuse_);
    p.memory = plan_memory(p.program);
    p.pool.emplace(kCPU);
    p.arena = p.pool->allocate(Dims{p.memory.arena_bytes}, DType::UInt8);
    fusion::RenderedModule cuda;
    if (!p.program.kernels.empty()) {
      cuda = fusion::render(p.program, fusion::TargetKind::Cuda);
      p.cpu = fusion::render(p.program, fusion::TargetKind::Cpu);
      LOOM_CHECK(p.cpu.int_params == cuda.int_params, Runtime,
                 "internal: the C++ and CUDA renderings of a program take different ip arrays");
      p.fused = rtc::compile_host(p.cpu.source, static_cast<int>(p.program.kernels.size()));
    }
    p.lowered = lower_for_cuda(t, p.program, cuda, false);
    p.scratch = p.pool->allocate(Dims{std::max<int64_t>(p.lowered.scratch_bytes, 1)}, DType::UInt8);
    p.table.assign(std::max<size_t>(p.lowered.table.size(), 1), 0);
    // A launch names its kernel (`what`); kernels whose text is the same share a function
    // (fusion/render.h), which may differ between the two renderings.
    std::unordered_map<std::string, size_t> kernel_named;
    for (size_t k = 0; k < p.program.kernels.size(); ++k) kernel_named.emplace(p.program.kernels[k].name, k);
    for (size_t i = 0; i < p.lowered.launches.size(); ++i) {
      Launch& l = p.lowered.launches[i];
      if (l.module == CudaModule::Fused) {
        auto it = kernel_named.find(l.what);
        LOOM_CHECK(it != kernel_named.end(), Runtime, "internal: a launch of an unknown kernel ", l.what);
        size_t k = it->second;
        p.kernel_of.push_back(k);
        p.functions.push_back(p.fused->symbol(l.second_pass ? p.cpu.combine_symbols[k] : p.cpu.symbols[k]));
      } else {
        p.kernel_of.push_back(0);
        p.functions.push_back(kernels()->symbol(l.kernel));
      }
      if (l.data_error) p.lowered.table[static_cast<size_t>(l.error_code_word)] = static_cast<int64_t>(i + 1);
    }
    // As a GPU plan's pool: its arena, scratch and table (a host vector here).
    int64_t bytes = p.pool->bytes() + static_cast<int64_t>(p.table.size() * sizeof(int64_t));
    return {std::move(plan), bytes};
  }

  void run_step(Plan& plan, const CudaStep& step) {
    const int64_t* table = plan.table.data();
    if (step.kind == CudaStep::MatMul) {
      gemm(plan.lowered.gemms[static_cast<size_t>(step.index)], table);
      return;
    }
    if (step.kind == CudaStep::Collective) {
      // On the host, through a CPU (Gloo) group: the same fixed scratch regions a GPU's NCCL
      // call would be captured with.
      const CollectiveCall& c = plan.lowered.collectives[static_cast<size_t>(step.index)];
      auto at = [&](const Address& a) {
        LOOM_CHECK(a.kind == Address::Scratch, Runtime, "internal: ", c.what, " is not between scratch regions");
        return static_cast<char*>(plan.scratch.data()) + plan.lowered.scratch[static_cast<size_t>(a.index)] +
               a.byte_offset;
      };
      distributed::run(*distributed::group(c.group), c.call, at(c.in), at(c.out));
      return;
    }
    const Launch& l = plan.lowered.launches[static_cast<size_t>(step.index)];
    auto ip = table + l.ip, sp = table + l.sp;
    auto bufs = reinterpret_cast<void* const*>(table + l.bufs);
    void* fn = plan.functions[static_cast<size_t>(step.index)];
    if (l.module == CudaModule::Fused) {
      size_t k = plan.kernel_of[static_cast<size_t>(step.index)];
      reinterpret_cast<CpuAbi>(fn)(ip, sp, bufs, 0, l.second_pass ? 1 : plan.cpu.splits[k].extent);
    } else {
      reinterpret_cast<CudaAbi>(fn)(ip, sp, bufs);
    }
  }

  // A capture as the executor makes one: the steps are recorded, not run, under the allocator's
  // CaptureGuard, with the stream capturing; whatever fails, the capture ends and its partial
  // graph is dropped before the error leaves.
  void capture(Plan& plan) {
    std::string name = emulated_name(plan.key);
    CaptureGuard memory(allocator_for(kCPU), "the CUDA Graph of " + name);
    struct Capturing {
      bool& flag;
      explicit Capturing(bool& f) : flag(f) { flag = true; }
      ~Capturing() { flag = false; }  // cudaStreamEndCapture
    } capturing(capturing_);
    std::vector<CudaStep> recorded;
    for (const CudaStep& step : plan.lowered.steps) {
      memory.set_step(step.kind == CudaStep::MatMul       ? plan.lowered.gemms[static_cast<size_t>(step.index)].what
                      : step.kind == CudaStep::Collective ? plan.lowered.collectives[static_cast<size_t>(step.index)].what
                                                          : plan.lowered.launches[static_cast<size_t>(step.index)].what);
      recorded.push_back(step);
    }
    switch (take_capture_fault()) {  // the test hook of graph/cuda_capture.h
      case CaptureFault::None:
        break;
      case CaptureFault::Allocate:
        static_cast<void>(empty(Dims{16}, DType::UInt8, kCPU));
        break;
      case CaptureFault::Synchronize:
        synchronize(kCPU);
        break;
    }
    plan.graph = std::move(recorded);  // instantiated
  }

  static std::string emulated_name(uint64_t key) {
    char name[40];
    std::snprintf(name, sizeof name, "trace %016llx (emulated)", static_cast<unsigned long long>(key));
    return name;
  }

  static const rtc::HostModule* kernels() {
    // Loaded once and never unloaded: plans point into it.
    static const auto* m = new std::shared_ptr<rtc::HostModule>(rtc::compile_host(emulated_kernel_source(), 0));
    return m->get();
  }

  static void gemm(const Gemm& g, const int64_t* table) {
    BlasShape s = blas_shape(g);
    const int64_t* arrays = table + g.pointers;  // left, right, out: as cuBLAS reads them in a graph
    for (int64_t b = 0; b < g.batches; ++b) {
      visit_dtype(g.dtype, [&](auto tag) {
        using T = decltype(tag);
        column_major_gemm(s, reinterpret_cast<const T*>(arrays[g.padded + b]), reinterpret_cast<const T*>(arrays[b]),
                          reinterpret_cast<T*>(arrays[2 * g.padded + b]));
      });
    }
  }

  bool fuse_, graphs_;
  bool capturing_ = false;
  PlanCache::Owner owner_ = PlanCache::new_owner();  // its plans in the plan cache (graph/plan_cache.h)
};

}  // namespace

std::string emulated_kernel_source() {
  return std::string(kShim) + cuda::runtime_kernel_source() + cuda_library_kernels();
}

std::shared_ptr<Executor> make_cuda_emulator(bool fuse, bool graphs) {
  return std::make_shared<CudaEmulator>(fuse, graphs);
}

}  // namespace loom::graph
