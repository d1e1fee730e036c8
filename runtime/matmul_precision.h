// Whether float32 matrix products on a GPU may use tensor-float-32 (10-bit mantissa inputs, fp32
// accumulation): loom.backends.cuda.matmul.allow_tf32, False by default as in PyTorch. The CUDA
// executor reads it when it lowers a trace and keys its plans by it, so flipping it takes effect
// at the next sync without disturbing cached graphs of the other setting.
#pragma once

namespace loom {

bool matmul_allow_tf32() noexcept;
void set_matmul_allow_tf32(bool allow) noexcept;

}  // namespace loom
