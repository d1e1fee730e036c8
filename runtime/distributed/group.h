// A process group: the processes that run collectives together, and the transport they use.
//
// loom moves no bytes between processes itself (DESIGN decision 17): a Group is an abstract
// transport with one implementation per library, Gloo for host memory (gloo.cpp) and NCCL for
// GPU memory (nccl.cpp), each with a stub for builds without the library (no_gloo.cpp,
// no_nccl.cpp) that says so. What a collective means in loom (which transport call, how AVG
// or reduce_scatter are made of what a transport has, the agreement check) is decided in one
// place, runtime/distributed/collective.h; a Group only carries bytes.
//
// Contract of every transport call:
//   - Spans are contiguous elements in the group's memory (the host for Gloo, the group's GPU
//     for NCCL). An input may alias its output where the call says so.
//   - Every rank of the group makes the same calls in the same order with matching sizes
//     (collective.h checks it first where the transport can afford it).
//   - Gloo calls block until this rank's part is done; NCCL calls are queued on loom's stream of
//     the group's GPU (so a CUDA Graph capturing that stream records them).
//   - A failure (a peer that died, a timeout, a library error) throws loom::Error of kind
//     Distributed naming the call, the rank and the backend. After a failure the group is
//     broken: every later call raises that first error at once, as no rank can tell how far the
//     others got.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "runtime/device.h"
#include "runtime/dtype.h"

namespace loom::distributed {

// PyTorch's numbering (torch.distributed.ReduceOp).
enum class ReduceOp : uint8_t { Sum = 0, Avg = 1, Product = 2, Min = 3, Max = 4 };
const char* reduce_op_name(ReduceOp op) noexcept;

// Contiguous elements in the group's memory.
struct Span {
  void* data = nullptr;
  int64_t count = 0;
  DType dtype = DType::Float32;
  size_t bytes() const noexcept { return static_cast<size_t>(count) * itemsize(dtype); }
};

class Group {
 public:
  Group(int rank, int size, Device device, std::chrono::milliseconds timeout)
      : rank_(rank), size_(size), device_(device), timeout_(timeout) {}
  virtual ~Group() = default;
  Group(const Group&) = delete;
  Group& operator=(const Group&) = delete;

  int rank() const noexcept { return rank_; }
  int size() const noexcept { return size_; }
  Device device() const noexcept { return device_; }  // where its spans live
  std::chrono::milliseconds timeout() const noexcept { return timeout_; }
  virtual const char* backend() const noexcept = 0;  // "gloo", "nccl"

  // out[i] = op over ranks of in[i]; in may be out. Avg only where the transport has it
  // (has_avg); collective.h makes it from Sum elsewhere.
  virtual void all_reduce(Span in, Span out, ReduceOp op) = 0;
  virtual bool has_avg() const noexcept { return false; }
  // buf at `root` is copied into buf everywhere.
  virtual void broadcast(Span buf, int root) = 0;
  // out = the ranks' inputs in rank order (out.count == size * in.count).
  virtual void all_gather(Span in, Span out) = 0;
  // out = rank r's chunk of the reduction of in (in.count == size * out.count). Only where the
  // transport has it (has_reduce_scatter); collective.h makes it from all_reduce elsewhere.
  virtual void reduce_scatter(Span in, Span out, ReduceOp op);
  virtual bool has_reduce_scatter() const noexcept { return false; }
  // out at `root` = op over ranks of in (out is ignored elsewhere; in may be out).
  virtual void reduce(Span in, Span out, ReduceOp op, int root) = 0;
  // out at `root` = the ranks' inputs in rank order (out.count == size * in.count there).
  virtual void gather(Span in, Span out, int root) = 0;
  // out = chunk r of in at `root` (in.count == size * out.count there, ignored elsewhere).
  virtual void scatter(Span in, Span out, int root) = 0;
  // Point to point; `tag` tells apart messages between the same pair.
  virtual void send(Span in, int peer, uint32_t tag) = 0;
  virtual void recv(Span out, int peer, uint32_t tag) = 0;
  virtual void barrier() = 0;
  // Copies bytes within the group's memory (in order with its calls).
  virtual void copy(void* dst, const void* src, size_t bytes) = 0;

  // Every rank's `mine` (all the same length), in rank order: a blocking host exchange of a few
  // bytes, the agreement check of collective.h. Transports that cannot afford one per call
  // (NCCL: calls recorded in a CUDA Graph cannot wait for the host) return empty.
  // `what` names the collective it precedes, in errors.
  virtual std::vector<std::string> exchange(const std::string& mine, const char* what) = 0;
  // Every rank's `in` (the same length on every rank), in one round of messages, into memory the
  // transport owns: parts[r] is rank r's bytes, valid until the next call on the group. With
  // `header` (the same length on every rank), every rank's header travels in the same messages
  // and is returned in rank order; when one differs from this rank's, parts is left empty and
  // the transport is ready for the next call, so that the caller can raise the disagreement.
  // Lengths that differ with no header to tell why raise. `what` names the collective, in
  // errors. Only where has_gather_parts (Gloo): collective.h's all_gather and direct all-reduce
  // use it, with their agreement check as the header.
  virtual std::vector<std::string> gather_parts(const std::string* header, Span in, std::vector<const char*>& parts,
                                                const char* what);
  virtual bool has_gather_parts() const noexcept { return false; }

  // Raises the error that broke the group, if one did (see above).
  void check_usable() const;
  // Records `error` as the one that broke the group and throws it.
  [[noreturn]] void broken(const std::string& error);
  const std::string& broken_by() const noexcept { return broken_by_; }

 private:
  int rank_, size_;
  Device device_;
  std::chrono::milliseconds timeout_;
  std::string broken_by_;
};

// ---- rendezvous ----

class Store;  // runtime/distributed/store.h

// How a group's processes find each other: the store (shared by every group of the job), the
// key prefix of this group in it, and the host name Gloo binds its sockets to ("" for the
// address of this machine's host name).
struct Rendezvous {
  std::shared_ptr<Store> store;
  std::string prefix;
  std::string hostname;
};

// Builds a group of `size` processes of which this one is `rank`, connecting to the others
// through `r` (each waits at most `timeout` for the others to join). NCCL groups use GPU
// `device`. Without the library these raise a RuntimeError saying the build lacks it.
std::unique_ptr<Group> make_gloo_group(const Rendezvous& r, int rank, int size, std::chrono::milliseconds timeout);
std::unique_ptr<Group> make_nccl_group(const Rendezvous& r, int rank, int size, int device,
                                       std::chrono::milliseconds timeout);
// Whether this build has the backend ("" when it has; else why not). NCCL is loaded when first
// used, so a build with it may still fail then, on a machine without libnccl.
std::string gloo_unavailable_reason();
std::string nccl_unavailable_reason();

// ---- the process's groups, by id (IR nodes name their group by id: lazy/collectives.h) ----

int add_group(std::shared_ptr<Group> group);
// The group `id`; raises a RuntimeError when it was destroyed or never existed.
std::shared_ptr<Group> group(int64_t id);
void remove_group(int64_t id);

}  // namespace loom::distributed
