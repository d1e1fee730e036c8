#include "lazy/node.h"

#include <algorithm>
#include <cmath>

#include "lazy/provenance.h"
#include "runtime/error.h"
#include "runtime/free_list.h"
#include "runtime/hash.h"
#include "runtime/metrics.h"

namespace loom {
namespace {

// Every op hashes its description once, in one serial chain of mixes (each a few cycles of
// latency): op, dtype and both lengths share the first word (op ids are 16 bits, dtypes 8; a rank
// of 255 or more, never seen, is added in full after it).
uint64_t hash_meta(OpId op, DType dtype, IntSpan shape, const Attrs& attrs) {
  uint64_t rank = shape.size();
  uint64_t head = static_cast<uint64_t>(op) | static_cast<uint64_t>(dtype) << 16 | std::min<uint64_t>(rank, 255) << 24 |
                  static_cast<uint64_t>(attrs.size()) << 32;
  uint64_t h = mix64(head + 0x9e3779b97f4a7c15ull);
  if (rank >= 255) h = hash_combine(h, rank);
  for (int64_t s : shape) h = hash_combine(h, static_cast<uint64_t>(s));
  for (int64_t a : attrs) h = hash_combine(h, static_cast<uint64_t>(a));
  return h;
}

}  // namespace

void* Node::operator new(size_t size) { return FreeList<Node>::allocate(size); }
void Node::operator delete(void* p, size_t size) noexcept { FreeList<Node>::release(p, size); }

// A chain of nodes (a loop of 100k `x = x + 1`) is released one node at a time: Node releases
// iteratively (runtime/ref.h), so each input whose last reference goes here is deleted after
// this node, by the loop of the outermost release.
Node::~Node() {
  for (Node* in : inputs_) Ref<Node>::adopt(in).reset();
}

const Array& Node::no_array() noexcept {
  static const Array none{};
  return none;
}

Ref<Node> Node::make(OpId op, OutputMeta meta, Attrs attrs, std::span<Node* const> inputs) {
  Ref<Node> n = Ref<Node>::fresh(new Node());
  n->op_ = op;
  n->dtype_ = meta.dtype;
  n->shape_ = std::move(meta.shape);
  n->attrs_ = std::move(attrs);
  uint64_t h = hash_meta(op, n->dtype_, n->shape_, n->attrs_);
  n->inputs_.reserve(inputs.size());
  for (Node* in : inputs) {
    in->retain();
    n->inputs_.push_back(in);
    h = hash_combine(h, in->hash());
  }
  n->hash_ = h;
  count(metrics().nodes_recorded);
  note_recorded(*n);  // its Python line, while sources are captured (lazy/provenance.h)
  return n;
}

void Node::set_leaf_value(Array array) {
  LOOM_CHECK(op_ == OpId::Input && array.dtype == dtype_ && std::ranges::equal(array.sizes(), shape_), Runtime,
             "internal: a captured input leaf given an array of another description");
  *array_ = std::move(array);
}

void Node::set_leaf_value(Scalar value) {
  LOOM_CHECK(op_ == OpId::Scalar && value.kind() == scalar_.kind(), Runtime,
             "internal: a captured scalar leaf given a number of another kind");
  scalar_ = value;
}

Ref<Node> Node::input(Array array) {
  Ref<Node> n = Ref<Node>::fresh(new Node());
  n->op_ = OpId::Input;
  n->dtype_ = array.dtype;
  n->shape_ = Dims(array.sizes());
  n->hash_ = hash_combine(hash_meta(OpId::Input, n->dtype_, n->shape_, {}), array.is_contiguous());
  n->array_ = std::make_unique<Array>(std::move(array));
  return n;
}

Ref<Node> Node::scalar(Scalar value, bool foldable) {
  Ref<Node> n = Ref<Node>::fresh(new Node());
  double v = value.as_double();
  // A number loom.compile knows the source of stays a parameter whatever its value: a replay
  // gives it that source's value of the call (lazy/capture.h).
  bool folded = foldable && value.source() == 0 && (v == 0.0 || v == 1.0) && !(value.is_float() && std::signbit(v));
  n->op_ = folded ? OpId::Constant : OpId::Scalar;
  n->dtype_ = value.kind() == ScalarKind::Bool ? DType::Bool
              : value.kind() == ScalarKind::Int ? DType::Int64
                                                : DType::Float64;
  n->scalar_ = value;
  uint64_t h = hash_meta(n->op_, n->dtype_, {}, {});
  n->hash_ = folded ? hash_combine(h, hash_double(v)) : h;
  return n;
}

}  // namespace loom
