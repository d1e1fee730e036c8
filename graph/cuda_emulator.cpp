#include "graph/cuda_emulator.h"

#include <cstring>
#include <unordered_map>

#include "fusion/program.h"
#include "fusion/render.h"
#include "graph/binding.h"
#include "graph/cuda_library_source.h"
#include "graph/cuda_program.h"
#include "graph/memory_plan.h"
#include "rtc/host_compiler.h"
#include "runtime/cuda/kernel_source.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom::graph {
namespace {

// CUDA's vocabulary for the host: a launch is one block of one thread, and atomics need no
// atomicity on one thread.
constexpr const char* kShim = R"(// The host shim of loom's CUDA emulator (graph/cuda_emulator.cpp).
#include <math.h>
#define __global__
#define __device__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(n)
struct loom_emu_dim { unsigned x; };
static const loom_emu_dim blockIdx = {0}, threadIdx = {0}, gridDim = {1}, blockDim = {1};
static inline int atomicAdd(int* p, int v) { int o = *p; *p = o + v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { unsigned long long o = *p; *p = o + v; return o; }
static inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p = o + v; return o; }
static inline unsigned atomicCAS(unsigned* p, unsigned expected, unsigned v) { unsigned o = *p; if (o == expected) *p = v; return o; }
)";

using CudaAbi = void (*)(const int64_t*, const int64_t*, void* const*);
using CpuAbi = void (*)(const int64_t*, const int64_t*, void* const*, int64_t, int64_t);

struct Plan {
  fusion::Program program;
  MemoryPlan memory;
  fusion::RenderedModule cpu;  // the fused kernels' C++ rendering
  CudaProgram lowered;
  Array arena, scratch;
  std::vector<int64_t> table;  // where kernels read their arguments (the "device" table)
  std::shared_ptr<rtc::HostModule> fused;
  std::vector<void*> functions;  // per launch
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
  explicit CudaEmulator(bool fuse) : fuse_(fuse) {}

  std::vector<Array> run(const Trace& t) override {
    LOOM_CHECK(t.device.is_cpu(), Runtime, "the CUDA emulator runs traces of the CPU device");
    Plan& plan = plan_for(t);
    std::vector<Array> arrays = bind_buffers(plan.program, t, plan.memory, plan.arena);
    int32_t error = 0;
    bool aligned = true;
    TableBases bases{reinterpret_cast<uintptr_t>(plan.table.data()), reinterpret_cast<uintptr_t>(plan.scratch.data()),
                     reinterpret_cast<uintptr_t>(&error)};
    std::vector<int64_t> words = patch_table(plan.lowered, t, arrays, bases, aligned);
    std::copy(words.begin(), words.end(), plan.table.begin());  // the upload
    const int64_t* table = plan.table.data();
    for (const CudaStep& step : plan.lowered.steps) {
      if (step.kind == CudaStep::MatMul) {
        gemm(plan.lowered.gemms[static_cast<size_t>(step.index)], table);
        continue;
      }
      const Launch& l = plan.lowered.launches[static_cast<size_t>(step.index)];
      auto ip = table + l.ip, sp = table + l.sp;
      auto bufs = reinterpret_cast<void* const*>(table + l.bufs);
      void* fn = plan.functions[static_cast<size_t>(step.index)];
      if (l.module == CudaModule::Fused) {
        size_t k = plan.kernel_of[static_cast<size_t>(step.index)];
        reinterpret_cast<CpuAbi>(fn)(ip, sp, bufs, 0, plan.cpu.splits[k].extent);
      } else {
        reinterpret_cast<CudaAbi>(fn)(ip, sp, bufs);
      }
      count(metrics().kernel_launches);
      if (error != 0) {
        const Launch& failed = plan.lowered.launches[static_cast<size_t>(error - 1)];
        detail::throw_error(failed.data_error->first,
                            detail::concat(failed.data_error->second, " (in ", failed.what, ", emulated)"));
      }
    }
    count(metrics().graph_replays);
    return collect_results(plan.program, t, arrays);
  }

  void synchronize(Device) override {}

 private:
  Plan& plan_for(const Trace& t) {
    uint64_t key = plan_key(t);
    if (auto it = cache_.find(key); it != cache_.end()) return *it->second;
    auto plan = std::make_unique<Plan>();
    Plan& p = *plan;
    p.program = partition_for_run(t, fuse_);
    p.memory = plan_memory(p.program);
    p.arena = empty(Dims{p.memory.arena_bytes}, DType::UInt8, kCPU);
    fusion::RenderedModule cuda;
    if (!p.program.kernels.empty()) {
      cuda = fusion::render(p.program, fusion::TargetKind::Cuda);
      p.cpu = fusion::render(p.program, fusion::TargetKind::Cpu);
      LOOM_CHECK(p.cpu.int_params == cuda.int_params, Runtime,
                 "internal: the C++ and CUDA renderings of a program take different ip arrays");
      p.fused = rtc::compile_host(p.cpu.source, static_cast<int>(p.program.kernels.size()));
    }
    p.lowered = lower_for_cuda(t, p.program, cuda, false);
    p.scratch = empty(Dims{std::max<int64_t>(p.lowered.scratch_bytes, 1)}, DType::UInt8, kCPU);
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
        p.functions.push_back(p.fused->symbol(p.cpu.symbols[k]));
      } else {
        p.kernel_of.push_back(0);
        p.functions.push_back(kernels()->symbol(l.kernel));
      }
      if (l.data_error) p.lowered.table[static_cast<size_t>(l.error_code_word)] = static_cast<int64_t>(i + 1);
    }
    return *cache_.emplace(key, std::move(plan)).first->second;
  }

  static std::shared_ptr<rtc::HostModule> kernels() {
    static std::shared_ptr<rtc::HostModule> m = rtc::compile_host(emulated_kernel_source(), 0);
    return m;
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

  bool fuse_;
  std::unordered_map<uint64_t, std::unique_ptr<Plan>> cache_;
};

}  // namespace

std::string emulated_kernel_source() {
  return std::string(kShim) + cuda::runtime_kernel_source() + cuda_library_kernels();
}

std::shared_ptr<Executor> make_cuda_emulator(bool fuse) { return std::make_shared<CudaEmulator>(fuse); }

}  // namespace loom::graph
