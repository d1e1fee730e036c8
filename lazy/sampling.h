// The op library, continued (lazy/ops.h): random sampling. Every distribution is composed of the
// random creation primitives (uniform, normal and integers from Philox: runtime/random.h) and
// loom's other ops, except Poisson's, a primitive of its own (lazy/ops_random.cpp). So a value
// depends only on the seed, the number of random ops before it and its shape: eager, lazy and
// CUDA results are equal, and a replayed graph draws new numbers every step.
//
// As PyTorch's, the samples have a zero gradient with respect to the distributions' parameters
// (normal's mean and std, bernoulli's and poisson's inputs), and the in-place fills replace the
// old value (its gradient is zero). Checks that need the values of an argument (a probability
// outside [0, 1], a negative std or rate in a tensor, an invalid multinomial distribution) are
// made when the argument is not pending; on a pending argument only Poisson's rates are checked
// (when its kernel runs).
#pragma once

#include <optional>

#include "lazy/ops.h"

namespace loom::ops {

// 1 with probability p, else 0: p's elements (in p's dtype), or the number p (in like's dtype
// and shape).
Tensor bernoulli(const Tensor& p);
Tensor bernoulli(const Tensor& like, double p);
// The normal distributions of torch.normal: mean and std tensors broadcast together, or a tensor
// and a number; the numbers-only form is randn.
Tensor normal(const Arg& mean, const Arg& std);
Tensor poisson(const Tensor& rates);
// num_samples indices of categories per row of probs (1-d or 2-d, unnormalized weights), with
// or without replacement.
Tensor multinomial(const Tensor& probs, int64_t num_samples, bool replacement = false);
// A random permutation of 0, ..., n - 1.
Tensor randperm(int64_t n, DType dtype, Placement where);

// In-place fills of self with samples (Tensor.uniform_, ...). random_: integers in [from, to),
// by default from 0 to the largest value the dtype holds exactly (2^digits for floats).
void uniform_(TensorImpl& self, double from = 0, double to = 1);
void normal_(TensorImpl& self, double mean = 0, double std = 1);
void exponential_(TensorImpl& self, double lambd = 1);
void geometric_(TensorImpl& self, double p);
void log_normal_(TensorImpl& self, double mean = 1, double std = 2);
void cauchy_(TensorImpl& self, double median = 0, double sigma = 1);
void random_(TensorImpl& self, std::optional<int64_t> from, std::optional<int64_t> to);
void bernoulli_(TensorImpl& self, const Arg& p);

}  // namespace loom::ops
