"""Programs that exercise every part of the CUDA executor's lowering (fused kernels, each kind
of library step, matrix products in every operand layout, in-place results), shared by the
host emulation (test_cuda_lowering.py) and the GPU suites (tests/gpu/test_cuda_execution.py).
Each entry is (program, *numpy inputs); a program takes lazy tensors and returns tensors."""

import os
import sys

import numpy as np

import loom

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "perf"))
import workloads as W  # noqa: E402

RNG = np.random.default_rng(7)

F = lambda *shape: RNG.standard_normal(shape).astype(np.float32)  # noqa: E731
I = lambda high, *shape: RNG.integers(0, high, shape).astype(np.int64)  # noqa: E731
# Distinct integers below `high` along the last dim (rows of permutations).
U = lambda high, rows, n: np.argsort(RNG.random((rows, high)), axis=1)[:, :n].astype(np.int64)  # noqa: E731

def index_grad(x, i, v):
    """The gradient of x[i] (an accumulating IndexPut: repeated rows add up)."""
    x.requires_grad_()
    (x[i] * v).sum().backward()
    return x.grad


def copy_then_update(a, x):
    """Two in-place results on storages the other reads: a gets x's old values."""
    a.copy_(x)
    x.add_(1)
    return [a, x]


def set_rows(x, i, value):
    y = x * 1
    y[i] = value
    return y


PROGRAMS = {
    "matmul": (lambda a, b: a @ b, F(5, 7), F(7, 3)),
    "matmul_transposed_operands": (lambda a, b: a.T @ b.T, F(7, 5), F(3, 7)),
    "matmul_strided_operand": (lambda a, b: a[:, ::2] @ b, F(5, 14), F(7, 3)),
    "matmul_column_vector": (lambda a, b: a @ b[:, :1], F(5, 7), F(7, 3)),
    "bmm_broadcast_batches": (lambda a, b: a.reshape(2, 1, 3, 4) @ b.reshape(1, 5, 4, 2), F(6, 4), F(20, 2)),
    "bmm_shared_right": (lambda a, b: a.exp() @ b, F(4, 3, 5), F(5, 6)),
    "matmul_empty_sum": (lambda a, b: a[:, :0] @ b[:0], F(3, 4), F(4, 2)),
    "matmul_float64": (lambda a, b: a.double() @ b.double().T, F(4, 6), F(5, 6)),
    "matmul_int64": (lambda a, b: a @ b, I(9, 4, 6), I(9, 6, 3)),
    "linear_backward": (lambda x, w: (x @ w.T).relu().sum(0) @ w, F(8, 5), F(6, 5)),
    "gather": (lambda x, i: x.gather(1, i), F(4, 6), I(6, 4, 3)),
    "scatter_add": (lambda x, i, s: x.scatter_add(1, i, s), F(4, 6), I(6, 4, 3), F(4, 5)),
    "index_rows": (lambda x, i: x[i], F(7, 3), I(7, 5)),
    "index_columns_broadcast": (lambda x, i, j: x[:, i, j[:, None]], F(2, 5, 6), I(5, 4), I(6, 3)),
    "index_negative": (lambda x, i: x[i - 3], F(5, 2), I(3, 4)),
    "index_select": (lambda x, i: x.index_select(0, i), F(6, 3), I(6, 8)),
    "embedding_backward": (lambda w, i: w[i].sum() * 0 + (w[i] * 2).sum(), F(9, 4), I(9, 7)),
    "index_put_accumulate": (lambda x, i, v: index_grad(x, i, v), F(6, 3), I(6, 10), F(10, 3)),
    "index_put_scalar": (lambda x, i: set_rows(x, i, 2.5), F(6, 3), I(6, 4)),
    "index_put_values": (lambda x, i, v: set_rows(x, i, v.double()), F(6, 3), I(6, 4), F(4, 3)),
    "cat_promotes": (lambda a, b: loom.cat([a.exp(), b.double()], 1), F(3, 2), F(3, 4)),
    "cumsum": (lambda a: (a.cumsum(0), a.cumsum(1), (a > 0).cumsum(1)), F(4, 5)),
    "int_floor_divide": (lambda a, b: (a // (b + 1), a % (b + 1), (a - 9) // 4, (a - 9) % -4), I(20, 6), I(5, 6)),
    "view_copy": (lambda a: a.T.reshape(-1) * 2, F(3, 4)),
    "copy_then_update": (copy_then_update, F(5), F(5)),
    "arange_and_random": (lambda a: (a + loom.arange(4, device=a.device), loom.rand(3, 4, device=a.device),
                                     loom.randn(5, device=a.device, dtype=loom.float64),
                                     loom.randint(0, 7, (6,), device=a.device)), F(4)),
    "softmax_layernorm": (lambda x, w, b: W.softmax_layer_norm(loom, x, w, b), F(6, 16), F(16), F(16)),
    "cross_entropy": (lambda x, y: loom.nn.functional.cross_entropy(x, y), F(8, 5), I(5, 8)),
    # scatters by replacement (distinct targets: on a GPU any one duplicate wins) and by reduction,
    # with and without x's values; an IndexPut with index_select's rule; bytes as another dtype
    "scatter_replace": (lambda x, i, s: x.scatter(1, i, s), F(4, 6), U(6, 4, 3), F(4, 5)),
    "scatter_reduce": (lambda x, i, s: (x.scatter_reduce(1, i, s, "prod"),
                                        x.scatter_reduce(1, i, s, "amax", include_self=False),
                                        x.double().scatter_reduce(0, i[:2] % 4, s[:2].double(), "amin"),
                                        (x * 4).int().scatter_reduce(1, i, (s * 4).int(), "amax", include_self=False)),
                       F(4, 6), I(6, 4, 3), F(4, 5)),
    "index_add": (lambda x, i, s: x.index_add(0, i, s, alpha=2), F(6, 3), I(6, 8), F(8, 3)),
    "view_dtype": (lambda x: ((x * 2).view(loom.int32) + 1, (x + 1).view(loom.float16)), F(3, 4)),
}

# Programs whose results depend on random numbers: equal on every backend (runtime/random.h).
RANDOM = {"arange_and_random"}
