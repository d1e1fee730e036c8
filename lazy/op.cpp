#include "lazy/op.h"

#include <array>

namespace loom {
namespace {

std::array<OpDef, kNumOps>& table() {
  static std::array<OpDef, kNumOps> t = [] {
    std::array<OpDef, kNumOps> init{};
    const char* names[] = {
#define LOOM_OP_NAME(name) #name,
        LOOM_FOR_EACH_OP(LOOM_OP_NAME)
#undef LOOM_OP_NAME
    };
    for (int i = 0; i < kNumOps; ++i) init[i].name = names[i];
    return init;
  }();
  return t;
}

}  // namespace

const OpDef& op_def(OpId op) noexcept { return table()[static_cast<int>(op)]; }

void define_op(OpId op, const OpDef& def) {
  OpDef& slot = table()[static_cast<int>(op)];
  auto backward = slot.backward;  // registrations may come in any order
  SavedValues saves = slot.saves;
  slot = def;
  if (!def.backward) {
    slot.backward = backward;
    slot.saves = saves;
  }
}

void define_backward(OpId op, void (*backward)(const BackwardContext&, std::vector<Ref<TensorImpl>>&),
                     SavedValues saves) {
  table()[static_cast<int>(op)].backward = backward;
  table()[static_cast<int>(op)].saves = saves;
}

}  // namespace loom
