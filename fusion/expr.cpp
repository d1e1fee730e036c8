#include "fusion/expr.h"

#include <algorithm>

#include "runtime/error.h"
#include "runtime/hash.h"

namespace loom::fusion {
namespace {

thread_local ExprBuilder* current_builder = nullptr;

}  // namespace

size_t ExprBuilder::Hash::operator()(const Expr& e) const noexcept {
  uint64_t h = hash_combine(static_cast<uint64_t>(e.op), static_cast<uint64_t>(e.type));
  h = hash_combine(h, static_cast<uint64_t>(e.fn) * 4 + static_cast<uint64_t>(e.space));
  h = hash_combine(h, static_cast<uint64_t>(static_cast<uint32_t>(e.a)));
  h = hash_combine(h, static_cast<uint64_t>(static_cast<uint32_t>(e.b)));
  h = hash_combine(h, static_cast<uint64_t>(static_cast<uint32_t>(e.c)));
  h = hash_combine(h, static_cast<uint64_t>(static_cast<uint32_t>(e.index)));
  return hash_combine(h, hash_double(e.literal));
}

int32_t ExprBuilder::add(Expr e) {
  if (auto it = index_.find(e); it != index_.end()) return it->second;
  auto id = static_cast<int32_t>(exprs_.size());
  exprs_.push_back(e);
  index_.emplace(e, id);
  return id;
}

void ExprBuilder::truncate(size_t size) {
  for (size_t e = size; e < exprs_.size(); ++e) index_.erase(exprs_[e]);
  exprs_.resize(std::min(size, exprs_.size()));
}

Space ExprBuilder::space_of(std::initializer_list<int32_t> operands) const {
  for (int32_t o : operands)
    if (o >= 0 && exprs_[o].space == Space::Inner) return Space::Inner;
  return Space::Outer;
}

int32_t ExprBuilder::cast(int32_t e, DType to) {
  if (exprs_[e].type == to) return e;
  Expr c{ExprOp::Cast, to, exprs_[e].space};
  c.a = e;
  return add(c);
}

ExprBuilder& ExprBuilder::current() {
  LOOM_CHECK(current_builder, Runtime, "internal: symbolic expression built outside a BuilderScope");
  return *current_builder;
}

BuilderScope::BuilderScope(ExprBuilder& b) : previous_(current_builder) { current_builder = &b; }
BuilderScope::~BuilderScope() { current_builder = previous_; }

DType compute_type(DType storage) noexcept {
  return storage == DType::Float16 || storage == DType::BFloat16 ? DType::Float32 : storage;
}

}  // namespace loom::fusion
