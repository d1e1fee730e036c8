// A fused program: what a trace becomes after partitioning, before any code is generated.
//
// Every value that must exist in memory (a trace output, a reduction result, an input of a
// library call, a value used by several kernels whose recomputation would cost 16 ops or 3
// full-size loads in each: partition.cpp, initial_materialization) is "materialized" and gets a buffer.
// Everything else is computed inside the kernels that need it, reading materialized values
// through affine index maps: views and broadcasts cost index arithmetic, not memory traffic
// (DESIGN decision 6).
//
// Steps run in order. A kernel step computes one or more materialized values over a common
// domain: pointwise kernels over a shape, row kernels over (outer = kept dims) x (inner =
// reduced dims), evaluating one or more reductions per row and the elementwise work on their
// results; when the reduced dims are the trailing ones, also elementwise work over the rows'
// elements that reads those results (an element epilogue: its stores are Space::Inner, written in
// one more pass over the row after every stage). A library step runs an op's own implementation
// (matmul, gather, ...) on buffers.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "fusion/expr.h"
#include "lazy/executor.h"

namespace loom::fusion {

// How a kernel reads or writes a buffer: element offset = offset + sum(strides[d] * index[d])
// over the kernel's domain dims (outer dims, then inner dims).
struct Access {
  int32_t value;     // trace node index of the buffer's value
  Space space;       // Outer: no inner-dim strides (read once per row)
  Dims strides;      // one per domain dim (outer, then inner)
  int64_t offset = 0;
  bool linear = false;  // strides are the domain's row-major strides and offset is 0

  friend bool operator==(const Access&, const Access&) = default;
};

enum class ReduceKind : uint8_t { Sum, Prod, Max, Min, ArgMax, ArgMin };

struct Stage {
  ReduceKind kind;
  DType input_type;  // compute type of the reduced values
  int32_t input;     // inner-space expression reduced
  int32_t node;      // trace node of the reduction
};

// `in_place`: the load and the store of an in-place update computed straight into its
// destination (graph/compiled.cpp), which share memory element for element. Only pointwise
// kernels have them; their renderings read every element before writing it.
struct Store {
  Access access;
  DType storage;  // buffer dtype
  int32_t expr;
  bool in_place = false;
};

struct Load {
  Access access;
  DType storage;
  bool in_place = false;
};

struct Kernel {
  std::string name;
  bool row = false;
  // A split reduction (pointwise kernels only): its stages reduce the whole domain, which is
  // walked in blocks of `split_block` elements (in row-major order of the domain). Pass 1 is the
  // pointwise kernel, run in parallel over blocks: it writes its element stores and, per block
  // and stage, one partial (the block's reduction in the stage's accumulator type) to the
  // kernel's scratch (split_scratch_bytes); pass 2 (the combine function, RenderedModule::
  // combine_symbols) reduces each stage's partials in block order and writes the stores that
  // read the stages' results: those whose access has no nonzero stride (the reductions' results,
  // shaped like one element, and what is computed from them, such as a mean's division). Blocks
  // are fixed by the domain's size, so results do not depend on the thread count or the grid.
  int64_t split_block = 0;
  Dims outer;  // domain sizes (pointwise: all of it)
  Dims inner;  // row kernels: the reduced sizes
  std::vector<Load> loads;
  std::vector<Store> stores;
  std::vector<Stage> stages;
  std::vector<Expr> exprs;
  std::vector<int32_t> params;  // trace node index of each Param expr's Scalar leaf
};

// Whether a row kernel walks its rows across vector lanes (C++) or threads (CUDA) instead of
// reducing each row on its own: true when its last kept dim is contiguous in memory for some
// value it reduces and no reduced value that varies along the columns is contiguous along its
// last reduced dim (a column reduction, such as a bias gradient: a sum over 512 rows for each of
// 64 channels; or a layer norm's weight gradient, whose per-row rstd is one value for every
// channel). Read along a row, such a kernel would stride through memory one element per row;
// walked by columns, every step of the reduction reads consecutive channels (a vector on the
// CPU, one coalesced load per warp in CUDA), and each channel is still reduced in its own order,
// so the results do not depend on how channels are grouped. The renderer and the CUDA launch
// geometry both read it.
bool reduces_columns(const Kernel& k);

// Split reductions (Kernel::split_block): a store written by the combine pass, and the bytes of
// scratch a kernel's passes share (8 per block and stage; 0 for other kernels). Every executor
// gives a split kernel this much scratch after its loads' and stores' pointers (render.h).
bool written_after_reduction(const Store& s);
int64_t split_scratch_bytes(const Kernel& k);

// Where a materialized value lives.
enum class BufferKind : uint8_t {
  Input,         // an Input leaf's array, bound at every run
  Output,        // a trace output: fresh storage at every run
  Destination,   // a trace output written straight into its in-place destination
  Intermediate,  // scratch, in the program's arena
};

struct Buffer {
  int32_t value;  // trace node index
  BufferKind kind;
  Layout layout;  // element layout from the buffer's base pointer (offset 0)
  DType dtype;
  int32_t output = -1;  // index into the trace's outputs (Output, Destination)
};

// How a library step reads one input of its op: a scalar leaf, a stored value, or a view of a
// stored value that was not stored itself (`view`: its layout over the value's buffer, offset
// included), which the library reads in place (a transposed operand of a matrix product costs
// no copy).
struct Operand {
  int32_t value;                // trace node: the scalar leaf or the stored value
  std::optional<Layout> view;
};

struct Step {
  enum Kind : uint8_t { RunKernel, RunOp, CopyToDestination } kind;
  int32_t kernel = -1;  // RunKernel
  int32_t node = -1;    // RunOp: the node whose op runs; CopyToDestination: the value copied
  int32_t output = -1;  // CopyToDestination: the trace output
  std::vector<Operand> operands;  // RunOp: one per input of the op, in order
};

struct Program {
  std::vector<Kernel> kernels;
  std::vector<Buffer> buffers;           // one per materialized non-scalar value
  std::vector<int32_t> buffer_of;        // per trace node: index into buffers, or -1
  std::vector<Step> steps;
};

struct PartitionOptions {
  bool fuse = true;  // false: one kernel per op (LOOM_FUSION=0)
};

// Partitions a trace into steps. Input leaves must carry their arrays (their layouts shape the
// kernels' index maps).
Program partition(const Trace& trace, const PartitionOptions& options);

// A human-readable listing of a program (LOOM_DUMP_DIR).
std::string describe(const Program& program, const Trace& trace);

}  // namespace loom::fusion
