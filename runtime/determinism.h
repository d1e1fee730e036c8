// loom.use_deterministic_algorithms(mode, warn_only): whether the program asked that every op give
// the same bits on every run. loom's CPU kernels always do (linear loops split at multiples of 64,
// reductions in a fixed order whatever the thread count). On a GPU, scatter_add (and what is built
// on it: index_add, the gradients of gathers and embeddings) accumulates floating values with
// atomics, whose order varies; the CUDA lowering warns once for it while the mode is on (loom has
// no deterministic form of it yet; PyTorch's sorts the indices first).
#pragma once

namespace loom {

struct DeterministicMode {
  bool enabled = false;
  bool warn_only = false;
};

DeterministicMode deterministic_algorithms() noexcept;
void set_deterministic_algorithms(DeterministicMode mode) noexcept;

}  // namespace loom
