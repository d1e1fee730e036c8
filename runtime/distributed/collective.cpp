#include "runtime/distributed/collective.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "runtime/distributed/reduce.h"
#include "runtime/distributed/work.h"
#include "runtime/error.h"
#include "runtime/metrics.h"
#include "runtime/profiler.h"

namespace loom::distributed {
namespace {

// A call's description as the agreement check exchanges it: fixed size, so that one all-gather
// carries every rank's. Shapes of more than kDims dims are compared by a hash of their sizes.
constexpr size_t kDims = 6;
struct Descriptor {
  uint8_t kind, op, dtype, ndim;
  int32_t root;
  int64_t dims[kDims];
  uint64_t hash;  // of all sizes, for shapes past kDims dims
};

Descriptor describe(const Call& c) {
  Descriptor d{};
  d.kind = static_cast<uint8_t>(c.kind);
  d.op = c.kind == Kind::AllReduce || c.kind == Kind::ReduceScatter || c.kind == Kind::Reduce ? static_cast<uint8_t>(c.op) : 0;
  d.dtype = static_cast<uint8_t>(c.dtype);
  d.ndim = static_cast<uint8_t>(c.shape.size());
  d.root = c.kind == Kind::Broadcast || c.kind == Kind::Reduce || c.kind == Kind::Gather || c.kind == Kind::Scatter ? c.root : 0;
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < c.shape.size(); ++i) {
    if (i < kDims) d.dims[i] = c.shape[i];
    h = (h ^ static_cast<uint64_t>(c.shape[i])) * 1099511628211ull;
  }
  d.hash = h;
  return d;
}

std::string call_text(const Descriptor& d) {
  std::string s = kind_name(static_cast<Kind>(d.kind));
  auto kind = static_cast<Kind>(d.kind);
  if (kind == Kind::AllReduce || kind == Kind::ReduceScatter || kind == Kind::Reduce)
    s += std::string("(") + reduce_op_name(static_cast<ReduceOp>(d.op)) + ")";
  if (kind == Kind::Broadcast || kind == Kind::Reduce || kind == Kind::Gather || kind == Kind::Scatter)
    s += "(root " + std::to_string(d.root) + ")";
  s += std::string(" on ") + dtype_name(static_cast<DType>(d.dtype)) + "[";
  for (size_t i = 0; i < d.ndim && i < kDims; ++i) s += (i ? ", " : "") + std::to_string(d.dims[i]);
  if (d.ndim > kDims) s += ", ...";
  return s + "]";
}

// Raises, naming each rank's call, when `all` (every rank's description, in rank order, or empty
// where the transport skips the check) differs from `mine`; every rank sees the same `all`, so
// every rank raises the same error.
void check_descriptions(const Group& g, const Call& c, const std::string& mine, const std::vector<std::string>& all) {
  if (all.empty() || std::all_of(all.begin(), all.end(), [&](const std::string& o) { return o == mine; })) return;
  // Group the ranks by what they called, in rank order.
  std::vector<std::pair<std::string, std::vector<int>>> seen;
  for (size_t r = 0; r < all.size(); ++r) {
    Descriptor d;
    std::memcpy(&d, all[r].data(), sizeof d);
    std::string text = call_text(d);
    auto it = std::find_if(seen.begin(), seen.end(), [&](const auto& e) { return e.first == text; });
    if (it == seen.end()) seen.push_back({text, {static_cast<int>(r)}});
    else it->second.push_back(static_cast<int>(r));
  }
  std::string detail;
  for (const auto& [text, ranks] : seen) {
    detail += detail.empty() ? "" : "; ";
    detail += ranks.size() == 1 ? "rank " : "ranks ";
    for (size_t i = 0; i < ranks.size(); ++i) detail += (i ? ", " : "") + std::to_string(ranks[i]);
    detail += " called " + text;
  }
  LOOM_FAIL(Distributed, kind_name(c.kind), ": the ranks of the process group (", g.backend(),
            ") called different collectives or passed tensors of different shapes or dtypes: ", detail);
}

std::string description_bytes(const Call& c) {
  Descriptor d = describe(c);
  return std::string(reinterpret_cast<const char*>(&d), sizeof d);
}

// The agreement check as an exchange of its own, before the data moves.
void check_agreement(Group& g, const Call& c) {
  std::string mine = description_bytes(c);
  check_descriptions(g, c, mine, g.exchange(mine, kind_name(c.kind)));
}

// Every rank's `in`, where the transport put them (Group::gather_parts), for an AllGather or a
// direct all-reduce. With `check` (the call whose agreement is still to be checked), the check
// travels in the gather's own messages: one round of messages, one wait for the other ranks,
// not two.
std::vector<const char*> gather_parts(Group& g, Span in, const Call& c, const Call* check) {
  std::vector<const char*> parts;
  std::string mine = check ? description_bytes(*check) : std::string();
  std::vector<std::string> all = g.gather_parts(check ? &mine : nullptr, in, parts, kind_name(c.kind));
  if (check) check_descriptions(g, *check, mine, all);
  return parts;
}

void gather_all(Group& g, Span in, Span out, const Call& c, const Call* check) {
  if (!g.has_gather_parts()) return g.all_gather(in, out);  // checked apart, before
  std::vector<const char*> parts = gather_parts(g, in, c, check);
  for (size_t r = 0; r < parts.size(); ++r)  // memmove: this rank's part may be `in`, anywhere in out
    std::memmove(static_cast<char*>(out.data) + r * in.bytes(), parts[r], in.bytes());
}

// x /= divisor, elementwise, in host memory (AVG from SUM where the transport has no AVG).
void divide_host(void* data, int64_t n, DType dtype, int divisor) {
  visit_dtype(dtype, [&](auto tag) {
    using T = decltype(tag);
    auto* p = static_cast<T*>(data);
    for (int64_t i = 0; i < n; ++i) p[i] = convert<T>(convert<double>(p[i]) / divisor);
  });
}

// The all-reduce algorithm, chosen here. Host groups (Gloo) reduce latency-bound sizes
// directly: every rank gathers every input (one round of messages, Gloo's gather_parts being a
// mesh) and reduces them itself in rank order, so every rank computes the same bits. For two
// ranks that moves the same bytes as a ring (which takes two rounds), so it is used at every
// size; for more, up to kDirectBytes per rank. Everything else is the transport's own (Gloo's
// ring, NCCL's rings and trees). AVG is SUM divided by the size where the transport lacks it.
constexpr size_t kDirectBytes = size_t{1} << 18;

bool direct(const Group& g, size_t bytes) {
  return g.has_gather_parts() && (g.size() == 2 || bytes * static_cast<size_t>(g.size() - 1) <= kDirectBytes);
}

// `c`, `check`: as gather_parts', for a direct all-reduce (the caller checks the others first).
void all_reduce(Group& g, ReduceOp op, Span in, Span out, const Call& c, const Call* check = nullptr) {
  if (direct(g, in.bytes())) {
    // The parts are the transport's (this rank's its own copy, or `in` itself on one rank), so
    // out may be in.
    std::vector<const char*> parts = gather_parts(g, in, c, check);
    auto part = [&](int r) { return parts[static_cast<size_t>(r)]; };
    auto n = static_cast<size_t>(in.count);
    if (g.size() == 1) {
      if (out.data != in.data) std::memcpy(out.data, part(0), out.bytes());
    } else {
      // In rank order on every rank, so every rank computes the same bits; the first two parts
      // in one pass rather than a copy and a pass.
      combine(out.data, part(0), part(1), n, in.dtype, op);
      for (int r = 2; r < g.size(); ++r) reduce_into(out.data, part(r), n, in.dtype, op);
    }
  } else {
    if (op != ReduceOp::Avg || g.has_avg()) return g.all_reduce(in, out, op);
    LOOM_CHECK(g.device().is_cpu(), Runtime, "internal: AVG composed from SUM on a ", g.backend(), " group");
    g.all_reduce(in, out, ReduceOp::Sum);
  }
  if (op == ReduceOp::Avg) divide_host(out.data, out.count, out.dtype, g.size());
}

}  // namespace

const char* kind_name(Kind kind) noexcept {
  switch (kind) {
    case Kind::AllReduce: return "all_reduce";
    case Kind::Broadcast: return "broadcast";
    case Kind::AllGather: return "all_gather";
    case Kind::ReduceScatter: return "reduce_scatter";
    case Kind::Reduce: return "reduce";
    case Kind::Gather: return "gather";
    case Kind::Scatter: return "scatter";
  }
  return "?";
}

bool agreement_checks() noexcept {
  static const bool on = [] {
    const char* v = std::getenv("LOOM_DIST_CHECK");
    return !(v && std::string(v) == "0");
  }();
  return on;
}

int64_t input_count(const Call& c, const Group& g) {
  int64_t n = numel_of(c.shape);
  if (c.kind == Kind::Scatter) return g.rank() == c.root ? n * g.size() : 0;
  return n;
}

int64_t output_count(const Call& c, const Group& g) {
  int64_t n = numel_of(c.shape);
  switch (c.kind) {
    case Kind::AllGather: return n * g.size();
    case Kind::ReduceScatter: return n / g.size();
    case Kind::Gather: return g.rank() == c.root ? n * g.size() : 0;
    default: return n;
  }
}

void send(Group& g, Span in, int peer, uint32_t tag) {
  wait_for_queued(g);
  LOOM_CHECK(peer >= 0 && peer < g.size() && peer != g.rank(), Value, "send: invalid destination rank ", peer,
             " (this is rank ", g.rank(), " of ", g.size(), ")");
  g.send(in, peer, tag);
}

void recv(Group& g, Span out, int peer, uint32_t tag) {
  wait_for_queued(g);
  LOOM_CHECK(peer >= 0 && peer < g.size() && peer != g.rank(), Value, "recv: invalid source rank ", peer,
             " (this is rank ", g.rank(), " of ", g.size(), ")");
  g.recv(out, peer, tag);
}

void barrier(Group& g) {
  wait_for_queued(g);
  g.barrier();
}

void run(Group& g, const Call& c, const void* in_data, void* out_data) {
  // loom.profiler shows the transport's part of each collective (its bytes; a lazy plan's
  // collective step, category "collective", holds it), with an "agreement check" span of its
  // own where the check is not folded into the data's messages: the waits for the other ranks
  // are in them.
  profiler::Span span("transport", kind_name(c.kind));
  wait_for_queued(g);  // asynchronous calls started before this one go first (work.h)
  g.check_usable();
  Span in{const_cast<void*>(in_data), input_count(c, g), c.dtype};
  Span out{out_data, output_count(c, g), c.dtype};
  // The check rides in the data's messages where they are one all-gather; else it goes first.
  bool folded = agreement_checks() && g.has_gather_parts() &&
                ((c.kind == Kind::AllGather && in.count > 0) ||
                 (c.kind == Kind::AllReduce && out.count > 0 && direct(g, in.bytes())));
  if (agreement_checks() && !folded) {
    profiler::Span check("transport", "agreement check");
    check_agreement(g, c);
  }
  const Call* check = folded ? &c : nullptr;
  if (profiler::Event* e = span.event()) e->bytes_read = static_cast<int64_t>(in.bytes());
  bool alias = in.data == out.data;
  count(metrics().collectives);
  count(metrics().collective_bytes, static_cast<int64_t>(in.bytes()));
  switch (c.kind) {
    case Kind::AllReduce:
      if (out.count > 0) all_reduce(g, c.op, in, out, c, check);
      return;
    case Kind::Broadcast:
      if (!alias && g.rank() == c.root) g.copy(out.data, in.data, in.bytes());
      if (out.count > 0) g.broadcast(out, c.root);
      return;
    case Kind::AllGather:
      if (in.count > 0) gather_all(g, in, out, c, check);
      return;
    case Kind::ReduceScatter: {
      if (out.count == 0) return;
      if (g.has_reduce_scatter()) return g.reduce_scatter(in, out, c.op);
      // Gloo: all-reduce the whole input, keep this rank's chunk.
      LOOM_CHECK(g.device().is_cpu(), Runtime, "internal: reduce_scatter composed on a ", g.backend(), " group");
      std::vector<char> whole(in.bytes());
      all_reduce(g, c.op, in, Span{whole.data(), in.count, in.dtype}, c);
      std::memcpy(out.data, whole.data() + static_cast<size_t>(g.rank()) * out.bytes(), out.bytes());
      return;
    }
    case Kind::Reduce: {
      if (out.count == 0) return;
      if (!alias) g.copy(out.data, in.data, in.bytes());  // what non-roots keep
      ReduceOp op = c.op == ReduceOp::Avg && !g.has_avg() ? ReduceOp::Sum : c.op;
      if (g.rank() == c.root || !g.device().is_cpu()) {
        g.reduce(out, out, op, c.root);
      } else {
        // Gloo reduces in the output buffer on every rank: a non-root lends a scratch copy.
        std::vector<char> scratch(out.bytes());
        std::memcpy(scratch.data(), out.data, out.bytes());
        g.reduce(Span{scratch.data(), out.count, out.dtype}, Span{scratch.data(), out.count, out.dtype}, op, c.root);
      }
      if (op != c.op && g.rank() == c.root) divide_host(out.data, out.count, out.dtype, g.size());
      return;
    }
    case Kind::Gather:
      if (in.count > 0) g.gather(in, out, c.root);
      return;
    case Kind::Scatter:
      if (out.count > 0) g.scatter(in, out, c.root);
      return;
  }
}

}  // namespace loom::distributed
