// The NCCL transport (runtime/distributed/group.h): GPU memory, NCCL's own transports (NVLink,
// PCIe, sockets, InfiniBand between nodes). Compiled against the toolkit's nccl.h, but libnccl
// is opened when the first NCCL group is made, as the driver is (DESIGN decision 12): a build
// with NCCL loads and runs on machines without it, or without a GPU.
//
// Every call is queued on loom's stream of the group's GPU (runtime/cuda/stream.h) and returns:
// its result is ordered with loom's kernels like any of them, and a CUDA Graph capturing that
// stream records it (NCCL 2.9 and later; the step's graph then holds its all-reduces).
//
// Rendezvous: every rank announces itself in the store and waits for the others (bounded by the
// timeout), rank 0 publishes the unique id, then ncclCommInitRank. What NCCL does not have here:
// the agreement check (exchange() returns nothing: a call a graph replays cannot wait for the
// host), tags on send/recv, and a watchdog that aborts a communicator stuck past the timeout
// (PyTorch's); a collective whose peer died is left to NCCL's own error reporting.
#include <dlfcn.h>
#include <nccl.h>

#include <cstring>

#include "runtime/array.h"
#include "runtime/cuda/cuda_device.h"
#include "runtime/cuda/stream.h"
#include "runtime/distributed/group.h"
#include "runtime/distributed/store.h"
#include "runtime/error.h"

namespace loom::distributed {
namespace {

// The NCCL functions loom calls, from libnccl.so.2 opened at run time.
struct Nccl {
#define LOOM_NCCL_FUNCTIONS(X)                                                                                  \
  X(ncclGetVersion) X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)                 \
  X(ncclGetErrorString) X(ncclAllReduce) X(ncclBroadcast) X(ncclAllGather)               \
  X(ncclReduceScatter) X(ncclReduce) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)
#define LOOM_NCCL_MEMBER(name) decltype(&::name) name = nullptr;
  LOOM_NCCL_FUNCTIONS(LOOM_NCCL_MEMBER)
#undef LOOM_NCCL_MEMBER
  decltype(&::ncclGetLastError) ncclGetLastError = nullptr;  // NCCL 2.13 and later
  std::string error;  // why it could not be loaded
};

const Nccl& loaded() {
  static const Nccl* n = [] {
    auto* t = new Nccl();
    void* lib = nullptr;
    for (const char* name : {"libnccl.so.2", "libnccl.so"})
      if ((lib = ::dlopen(name, RTLD_NOW | RTLD_LOCAL))) break;
    if (!lib) {
      t->error = std::string("libnccl.so.2 cannot be loaded (") + ::dlerror() + ")";
      return t;
    }
#define LOOM_NCCL_LOAD(name)                                                 \
  t->name = reinterpret_cast<decltype(&::name)>(::dlsym(lib, #name));       \
  if (!t->name && t->error.empty()) t->error = "libnccl has no " #name " (NCCL 2.10 or later is needed)";
    LOOM_NCCL_FUNCTIONS(LOOM_NCCL_LOAD)
#undef LOOM_NCCL_LOAD
    t->ncclGetLastError = reinterpret_cast<decltype(&::ncclGetLastError)>(::dlsym(lib, "ncclGetLastError"));
    return t;
  }();
  return *n;
}

const Nccl& nccl() {
  const Nccl& n = loaded();
  LOOM_CHECK(n.error.empty(), Runtime, "the nccl backend is not available: ", n.error);
  return n;
}

ncclDataType_t nccl_type(DType d) {
  switch (d) {
    case DType::Bool:
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::Float16: return ncclFloat16;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
  }
  return ncclUint8;
}

// Bool is carried as uint8: "or" is MAX, "and" is MIN, as in PyTorch.
ncclRedOp_t nccl_op(ReduceOp op, DType d) {
  if (d == DType::Bool) return op == ReduceOp::Sum || op == ReduceOp::Max ? ncclMax : ncclMin;
  switch (op) {
    case ReduceOp::Sum: return ncclSum;
    case ReduceOp::Avg: return ncclAvg;
    case ReduceOp::Product: return ncclProd;
    case ReduceOp::Min: return ncclMin;
    case ReduceOp::Max: return ncclMax;
  }
  return ncclSum;
}

class NcclGroup final : public Group {
 public:
  NcclGroup(ncclComm_t comm, int rank, int size, int device, std::chrono::milliseconds timeout)
      : Group(rank, size, Device(DeviceType::CUDA, static_cast<int16_t>(device)), timeout), comm_(comm) {}
  ~NcclGroup() override {
    // A broken communicator may have work that never ends: abort it rather than wait.
    if (broken_by().empty()) nccl().ncclCommDestroy(comm_);
    else nccl().ncclCommAbort(comm_);
  }

  const char* backend() const noexcept override { return "nccl"; }
  bool has_avg() const noexcept override { return true; }
  bool has_reduce_scatter() const noexcept override { return true; }

  void all_reduce(Span in, Span out, ReduceOp op) override {
    call("all_reduce", nccl().ncclAllReduce(in.data, out.data, size_t(in.count), nccl_type(in.dtype),
                                            nccl_op(op, in.dtype), comm_, stream()));
  }
  void broadcast(Span buf, int root) override {
    call("broadcast", nccl().ncclBroadcast(buf.data, buf.data, size_t(buf.count), nccl_type(buf.dtype), root, comm_,
                                           stream()));
  }
  void all_gather(Span in, Span out) override {
    call("all_gather",
         nccl().ncclAllGather(in.data, out.data, size_t(in.count), nccl_type(in.dtype), comm_, stream()));
  }
  void reduce_scatter(Span in, Span out, ReduceOp op) override {
    call("reduce_scatter", nccl().ncclReduceScatter(in.data, out.data, size_t(out.count), nccl_type(in.dtype),
                                                    nccl_op(op, in.dtype), comm_, stream()));
  }
  void reduce(Span in, Span out, ReduceOp op, int root) override {
    call("reduce", nccl().ncclReduce(in.data, out.data, size_t(in.count), nccl_type(in.dtype), nccl_op(op, in.dtype),
                                     root, comm_, stream()));
  }
  // Gather and scatter as grouped sends and receives (every NCCL has them; ncclGather is new).
  void gather(Span in, Span out, int root) override {
    size_t chunk = in.bytes();
    grouped("gather", [&] {
      if (rank() == root)
        for (int r = 0; r < size(); ++r)
          check_result("gather", nccl().ncclRecv(static_cast<char*>(out.data) + r * chunk, size_t(in.count),
                                                  nccl_type(in.dtype), r, comm_, stream()));
      check_result("gather", nccl().ncclSend(in.data, size_t(in.count), nccl_type(in.dtype), root, comm_, stream()));
    });
  }
  void scatter(Span in, Span out, int root) override {
    size_t chunk = out.bytes();
    grouped("scatter", [&] {
      if (rank() == root)
        for (int r = 0; r < size(); ++r)
          check_result("scatter", nccl().ncclSend(static_cast<const char*>(in.data) + r * chunk, size_t(out.count),
                                                   nccl_type(out.dtype), r, comm_, stream()));
      check_result("scatter", nccl().ncclRecv(out.data, size_t(out.count), nccl_type(out.dtype), root, comm_, stream()));
    });
  }
  void send(Span in, int peer, uint32_t) override {
    call("send", nccl().ncclSend(in.data, size_t(in.count), nccl_type(in.dtype), peer, comm_, stream()));
  }
  void recv(Span out, int peer, uint32_t) override {
    call("recv", nccl().ncclRecv(out.data, size_t(out.count), nccl_type(out.dtype), peer, comm_, stream()));
  }
  void barrier() override {
    // An all-reduce of one word, waited for: every rank has reached it when it completes.
    int dev = device().index;
    cuda::set_device(dev);
    Array word = empty(Dims{1}, DType::Int32, device());
    fill_(word, Scalar(int64_t{0}));
    call("barrier", nccl().ncclAllReduce(word.data(), word.data(), 1, ncclInt32, ncclSum, comm_, stream()));
    cuda::synchronize(dev);
  }
  void copy(void* dst, const void* src, size_t bytes) override {
    cuda::check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream()), "cudaMemcpyAsync",
                "a copy before an NCCL call");
  }
  std::vector<std::string> exchange(const std::string&, const char*) override { return {}; }

 private:
  cudaStream_t stream() const { return cuda::stream(device().index); }

  void check_result(const char* what, ncclResult_t r) {
    if (r == ncclSuccess) return;
    const char* last = nccl().ncclGetLastError ? nccl().ncclGetLastError(comm_) : "";
    broken(detail::concat(what, " failed on rank ", rank(), " of ", size(), " (nccl): ", nccl().ncclGetErrorString(r),
                          last && *last ? std::string(" [") + last + "]" : std::string()));
  }
  void call(const char* what, ncclResult_t r) { check_result(what, r); }
  template <typename F>
  void grouped(const char* what, F&& f) {
    check_result(what, nccl().ncclGroupStart());
    try {
      f();
    } catch (...) {
      nccl().ncclGroupEnd();
      throw;
    }
    check_result(what, nccl().ncclGroupEnd());
  }

  ncclComm_t comm_;
};

}  // namespace

std::string nccl_unavailable_reason() { return loaded().error; }

std::unique_ptr<Group> make_nccl_group(const Rendezvous& r, int rank, int size, int device,
                                       std::chrono::milliseconds timeout) {
  const Nccl& n = nccl();
  try {
    cuda::require(Device(DeviceType::CUDA, static_cast<int16_t>(device)));
  } catch (const Error& e) {
    LOOM_FAIL(Runtime, "the nccl backend needs a GPU for rank ", rank, " (GPU ", device, "): ", e.what());
  }
  cuda::set_device(device);
  // Everyone present before ncclCommInitRank, which waits for the others without a limit.
  r.store->set(r.prefix + "nccl/joined/" + std::to_string(rank), "1");
  for (int i = 0; i < size; ++i) r.store->get(r.prefix + "nccl/joined/" + std::to_string(i), timeout);
  ncclUniqueId id;
  if (rank == 0) {
    ncclResult_t res = n.ncclGetUniqueId(&id);
    LOOM_CHECK(res == ncclSuccess, Distributed, "ncclGetUniqueId failed: ", n.ncclGetErrorString(res));
    r.store->set(r.prefix + "nccl/id", std::string(reinterpret_cast<const char*>(&id), sizeof id));
  } else {
    std::string v = r.store->get(r.prefix + "nccl/id", timeout);
    LOOM_CHECK(v.size() == sizeof id, Distributed, "the NCCL unique id in the rendezvous store has the wrong size");
    std::memcpy(&id, v.data(), sizeof id);
  }
  ncclComm_t comm = nullptr;
  ncclResult_t res = n.ncclCommInitRank(&comm, size, id, rank);
  LOOM_CHECK(res == ncclSuccess, Distributed, "ncclCommInitRank failed on rank ", rank, " of ", size, " (GPU ", device,
             "): ", n.ncclGetErrorString(res));
  return std::make_unique<NcclGroup>(comm, rank, size, device, timeout);
}

}  // namespace loom::distributed
