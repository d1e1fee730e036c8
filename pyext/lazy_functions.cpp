// Module functions of execution: loom.sync(), loom.synchronize(), loom.metrics(),
// loom.metrics_reset() (DESIGN decisions 3 and 13), loom.get_num_threads() / set_num_threads().
#include <map>

#include "graph/compiled.h"
#include "graph/cuda_capture.h"
#include "graph/cuda_emulator.h"
#include "graph/cuda_executor.h"
#include "graph/device_router.h"
#include "graph/interpreter.h"
#include "lazy/capture.h"
#include "lazy/sync.h"
#include "pyext/objects.h"
#include "rtc/disk_cache.h"
#include "rtc/nvrtc.h"
#include "runtime/background.h"
#include "runtime/blas.h"
#include "runtime/blocking.h"
#include "runtime/error.h"
#include "runtime/metrics.h"
#include "runtime/thread_pool.h"

namespace loom::py {
namespace {

PyObject* f_sync(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  SyncReason reason(SyncCause::Explicit);
  sync_all();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// The end of an optimizer step (loom.optim.Optimizer.step): what the step recorded runs now, as
// one trace. A training loop that reads no value every step (it logs every N steps, or never)
// would otherwise grow one trace over many steps: its compile grows with them, a log interval
// that varies makes a new graph each time, and LOOM_MAX_TRACE_NODES would cut it at a different
// op each time, so every piece would be a new graph too. Cut here, each step is the same trace
// and replays the same graph. Inside a loom.compile recording the step's own sync at its end
// plays this part (a sync point here would make the step uncapturable), so none is made.
PyObject* f_end_of_step(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  if (recording() == nullptr) {
    SyncReason reason(SyncCause::Step);
    sync_all();
  }
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_synchronize(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  SyncReason reason(SyncCause::Explicit);
  synchronize_all();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_metrics(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  const Metrics& m = metrics();
  PyRef dict = PyRef::checked(PyDict_New());
  for (const MetricField& f : metric_fields()) {
    int64_t value = (m.*f.field).load(std::memory_order_relaxed);
    PyRef item = PyRef::checked(f.scale == 1.0 ? PyLong_FromLongLong(value)
                                                : PyFloat_FromDouble(static_cast<double>(value) * f.scale));
    check_status(PyDict_SetItemString(dict.get(), f.name, item.get()));
  }
  return dict.release();
  LOOM_PY_END(nullptr)
}

PyObject* f_metrics_reset(PyObject*, PyObject*) {
  metrics().reset();
  return Py_NewRef(Py_None);
}

PyObject* f_get_num_threads(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  return PyLong_FromLong(num_threads());
  LOOM_PY_END(nullptr)
}

// set_num_threads(n): the pool's threads and OpenBLAS's, as torch.set_num_threads sets its
// intra-op pool's and its BLAS's. An int only (PyTorch refuses floats and strings too).
PyObject* f_set_num_threads(PyObject*, PyObject* arg) {
  LOOM_PY_BEGIN
  if (!PyLong_Check(arg) || PyBool_Check(arg)) {
    PyErr_Format(PyExc_RuntimeError, "set_num_threads expects an int, but got %s", Py_TYPE(arg)->tp_name);
    return nullptr;
  }
  long long n = PyLong_AsLongLong(arg);
  if (n == -1 && PyErr_Occurred()) PyErr_Clear();
  if (n < 1 || n > kMaxThreads) {
    PyErr_Format(PyExc_RuntimeError, "set_num_threads expects a positive integer (at most %d), but got %S",
                 kMaxThreads, arg);
    return nullptr;
  }
  {
    BlockingRegion region;  // waits for a parallel loop another thread runs
    set_num_threads(static_cast<int>(n));
  }
  blas::set_threads(static_cast<int>(n));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// The folder compiled CPU modules are cached in: LOOM_CACHE_DIR's, or the private temporary folder
// used instead of an untrusted one (rtc/disk_cache.h).
PyObject* f_cache_dir(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  const std::string& path = rtc::DiskCache::of("cpu", ".so", ".cpp").dir().path();
  return PyUnicode_DecodeFSDefaultAndSize(path.data(), static_cast<Py_ssize_t>(path.size()));
  LOOM_PY_END(nullptr)
}

PyObject* f_pending_count(PyObject*, PyObject* device) {
  LOOM_PY_BEGIN
  return PyLong_FromLongLong(pending_count(device_from_py(device)));
  LOOM_PY_END(nullptr)
}

PyObject* f_last_trace_key(PyObject*, PyObject*) { return PyLong_FromUnsignedLongLong(last_trace_key()); }

// Tests and the perf harness compare executors in one process: "compiled" (fusion as LOOM_FUSION
// says), "fused", "unfused" (one kernel per op, same compiled path), "fused-nograph" (fused, GPU
// traces launched without CUDA Graphs), "interpreter" (the CPU reference) or "cuda-emulated"
// ("-unfused"): CPU traces through the CUDA lowering, on the host (graph/cuda_emulator.h). Each kind is created once and keeps its graph cache across switches, so a process
// can alternate between kinds without lowering its traces again.
class SharedExecutor final : public Executor {
 public:
  explicit SharedExecutor(std::shared_ptr<Executor> e) : e_(std::move(e)) {}
  std::vector<Array> run(const Trace& t) override { return e_->run(t); }
  bool thread_safe() const noexcept override { return e_->thread_safe(); }
  void synchronize(Device d) override { e_->synchronize(d); }
  Array run_op(OpId op, std::span<const Operand> in, const Attrs& attrs, const OutputMeta& meta, Device d) override {
    return e_->run_op(op, in, attrs, meta, d);
  }

 private:
  std::shared_ptr<Executor> e_;
};

PyObject* f_set_executor(PyObject*, PyObject* name) {
  LOOM_PY_BEGIN
  const char* n = PyUnicode_AsUTF8(name);
  if (!n) return nullptr;
  std::string kind(n);
  static std::map<std::string, std::shared_ptr<Executor>> executors;
  std::shared_ptr<Executor>& e = executors[kind];
  if (!e) {
    // Each kind pairs a CPU executor with a CUDA one; GPU traces never run on the interpreter.
    graph::CudaOptions cuda = graph::cuda_options_from_environment();
    std::shared_ptr<Executor> cpu;
    if (kind == "interpreter") {
      cpu = std::make_shared<graph::Interpreter>();
    } else if (kind == "cuda-emulated" || kind == "cuda-emulated-unfused") {
      cpu = graph::make_cuda_emulator(kind == "cuda-emulated", cuda.graphs);  // CPU traces through the CUDA lowering
    } else if (kind == "compiled" || kind == "fused" || kind == "unfused" || kind == "fused-nograph") {
      graph::CompiledOptions o = graph::options_from_environment();
      if (kind != "compiled") o.fuse = cuda.fuse = kind != "unfused";
      if (kind == "fused-nograph") cuda.graphs = false;
      cpu = std::make_shared<graph::CompiledExecutor>(o);
    } else {
      executors.erase(kind);
      LOOM_FAIL(Value, "unknown executor '", kind,
                "' (compiled, fused, unfused, fused-nograph, interpreter, cuda-emulated or cuda-emulated-unfused)");
    }
    e = std::make_shared<graph::DeviceRouter>(cpu, graph::make_cuda_executor(cuda));
  }
  install_executor(std::make_unique<SharedExecutor>(e));
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

// The test hooks of graph/cuda_capture.h.
PyObject* f_inject_capture_fault(PyObject*, PyObject* name) {
  LOOM_PY_BEGIN
  const char* n = PyUnicode_AsUTF8(name);
  if (!n) return nullptr;
  std::string kind(n);
  LOOM_CHECK(kind == "allocate" || kind == "synchronize" || kind.empty(), Value, "unknown capture fault '", kind,
             "' (allocate, synchronize, or '' for none)");
  graph::inject_capture_fault(kind == "allocate"      ? graph::CaptureFault::Allocate
                              : kind == "synchronize" ? graph::CaptureFault::Synchronize
                                                      : graph::CaptureFault::None);
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

PyObject* f_set_strict_cuda_graphs(PyObject*, PyObject* on) {
  LOOM_PY_BEGIN
  return PyBool_FromLong(graph::set_strict_cuda_graphs(check_truth(on)));
  LOOM_PY_END(nullptr)
}

PyObject* f_nvrtc_compile(PyObject*, PyObject* args) {
  LOOM_PY_BEGIN
  const char* source = nullptr;
  int arch = 90;
  const char* name = "module.cu";
  int ptx = 0;
  if (!PyArg_ParseTuple(args, "s|isp:_nvrtc_compile", &source, &arch, &name, &ptx)) return nullptr;
  std::string cubin = rtc::compile_cuda(source, arch, name, ptx != 0);
  return PyLong_FromSize_t(cubin.size());
  LOOM_PY_END(nullptr)
}

PyObject* f_nvrtc_available(PyObject*, PyObject*) { return PyBool_FromLong(rtc::nvrtc_available()); }

PyObject* f_wait_for_optimized_kernels(PyObject*, PyObject*) {
  LOOM_PY_BEGIN
  wait_for_background();
  return Py_NewRef(Py_None);
  LOOM_PY_END(nullptr)
}

}  // namespace

PyMethodDef lazy_functions[] = {
    {"sync", f_sync, METH_NOARGS,
     "sync(): materialize every live pending lazy tensor this thread recorded, of every device (one trace per "
     "device); does not wait for the device. A failed sync raises and changes no tensor it would have written"},
    {"synchronize", f_synchronize, METH_NOARGS, "synchronize(): sync(), then wait until the work has finished"},
    {"_end_of_step", f_end_of_step, METH_NOARGS,
     "_end_of_step(): sync() at the end of an optimizer step (counted as syncs_step), except while loom.compile "
     "records a step"},
    {"metrics", f_metrics, METH_NOARGS,
     "metrics(): counters of traces, graph cache hits and misses, kernels compiled (kernels_optimized: compiled again "
     "at -O3 in the background), modules loaded from disk, "
     "kernel launches, graph replays, plans whose CUDA Graph capture failed, compile seconds and IR nodes recorded; arena_bytes and "
     "arena_live_peak_bytes describe the memory plan of the graph run last; plan_cache_entries and "
     "plan_cache_bytes what the plan cache holds now, plan_cache_evictions the plans it evicted for its bounds"},
    {"metrics_reset", f_metrics_reset, METH_NOARGS,
     "metrics_reset(): zero every counter of metrics() (plan_cache_entries and plan_cache_bytes describe the cache "
     "as it is, and stay)"},
    {"get_num_threads", f_get_num_threads, METH_NOARGS,
     "get_num_threads(): threads the CPU kernels use (set_num_threads's, else LOOM_NUM_THREADS, default: the "
     "machine's cores)"},
    {"set_num_threads", f_set_num_threads, METH_O,
     "set_num_threads(int): the threads the CPU kernels (and OpenBLAS's products) use from now on"},
    {"_cache_dir", f_cache_dir, METH_NOARGS,
     "_cache_dir(): the folder compiled CPU modules are cached in (LOOM_CACHE_DIR, else the user's cache folder)"},
    {"_set_executor", f_set_executor, METH_O, "_set_executor(name): 'compiled', 'fused', 'unfused', 'fused-nograph', 'interpreter', 'cuda-emulated' or 'cuda-emulated-unfused'; each keeps its caches across switches"},
    {"_inject_capture_fault", f_inject_capture_fault, METH_O,
     "_inject_capture_fault(kind): the next CUDA Graph capture fails: 'allocate' (a step allocates), "
     "'synchronize' (a step waits for the capturing stream), '' (none)"},
    {"_set_strict_cuda_graphs", f_set_strict_cuda_graphs, METH_O,
     "_set_strict_cuda_graphs(on): a failed capture raises (as LOOM_CUDA_GRAPHS=strict) instead of falling back to "
     "direct launches; returns the previous setting"},
    {"_nvrtc_compile", f_nvrtc_compile, METH_VARARGS, "_nvrtc_compile(source, arch=90, name, ptx=False): size of the cubin (or PTX)"},
    {"_nvrtc_available", f_nvrtc_available, METH_NOARGS, "True when this build has NVRTC"},
    {"_wait_for_optimized_kernels", f_wait_for_optimized_kernels, METH_NOARGS,
     "_wait_for_optimized_kernels(): wait until the kernels being compiled again at -O3 in the background (for plans "
     "that kept running: rtc/kernel_units.h) are compiled and swapped in"},
    {"_last_trace_key", f_last_trace_key, METH_NOARGS, "_last_trace_key(): the key of the last trace executed"},
    {"_pending_count", f_pending_count, METH_O,
     "_pending_count(device): live pending lazy tensors this thread recorded on a backend device"},
    {nullptr, nullptr, 0, nullptr},
};

}  // namespace loom::py
