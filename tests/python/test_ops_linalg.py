"""The linear-algebra family agrees with PyTorch (lazy/ops_linalg.h): tensordot, kron, outer/ger,
inner, dot/vdot, mv, the add* products (beta, alpha), chain_matmul and linalg.multi_dot, the norms
of loom.linalg, cdist (both of its paths), cosine_similarity, pairwise_distance, F.normalize and
linalg.vecdot.

Values, dtypes, shapes and errors on both devices (the lazy results also against eager ones), with
non-contiguous operands; and a program of these ops fused, unfused and on the interpreter."""

import math

import numpy as np
import pytest

import loom
from _ops_helpers import SubChecks, check, device, random_array, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

F64 = {"rtol": 1e-11, "atol": 1e-12}


def _r(shape, dtype="float64", seed=0):
    return random_array(shape, dtype, seed=seed)


@pytest.mark.parametrize("dtype", ["int64", "float32", "float64"])
def test_tensordot(device, dtype):
    sub = SubChecks()
    cases = [((2, 3, 4), (3, 4, 5), 2), ((2, 3, 4), (4, 5), 1), ((2, 3), (4, 5), 0),
             ((2, 3, 4), (3, 4, 5), ([1, 2], [0, 1])), ((2, 3, 4), (4, 3, 5), ([2, 1], [0, 1])),
             ((2, 3), (4, 2), ((0,), (1,))), ((2, 3), (3, 4), [[1], [0]]), ((2, 3), (3, 4), ([1], 0)),
             ((2, 3), (3, 4), -1), ((2, 3), (3, 4), 3), ((2, 3), (3, 4), ([1], [1]))]
    for sa, sb, dims in cases:
        with sub(f"{sa} {sb} dims={dims}"):
            check(device, lambda m, x, y: m.tensordot(x, y, dims), _r(sa, dtype, 1), _r(sb, dtype, 2),
                  layouts=["transposed", "strided"])
    with sub("dims as a tensor"):
        check(device, lambda m, x, y: m.tensordot(x, y, m.tensor(2)), _r((2, 3, 4), dtype), _r((3, 4, 5), dtype))
    with sub("dtype mismatch"):
        check(device, lambda m, x, y: m.tensordot(x, y.double(), 1), _r((2, 3), "float32"), _r((3, 4), "float32"))
    sub.finish()


def test_kron_outer_inner(device):
    sub = SubChecks()
    pairs = [((2, 3), (2, 2)), ((3,), (2,)), ((2, 3), (2, 2, 2)), ((2, 1, 3), (4,)), ((), (3,))]
    for sa, sb in pairs:
        with sub(f"kron {sa} {sb}"):
            check(device, lambda m, x, y: m.kron(x, y), _r(sa, seed=1), _r(sb, "int64", 2),
                  layouts=["transposed", "contiguous"])
    with sub("outer / ger"):
        check(device, lambda m, x, y: m.outer(x, y), _r((3,), "float32"), _r((4,), "float64"))
        check(device, lambda m, x, y: x.ger(y), _r((3,), "int64"), _r((2,), "int64"))
        check(device, lambda m, x, y: m.outer(x, y), _r((3, 1)), _r((4,)))
    for sa, sb in [((2, 3), (4, 3)), ((3,), (3,)), ((), (2, 3)), ((2, 3), (4, 2)), ((2, 2, 3), (3,))]:
        with sub(f"inner {sa} {sb}"):
            check(device, lambda m, x, y: m.inner(x, y), _r(sa, seed=3), _r(sb, seed=4), layouts=["strided", "transposed"])
    sub.finish()


def test_dot_vdot_mv(device):
    sub = SubChecks()
    with sub("dot"):
        for dtype in ("int64", "float32", "float64"):
            check(device, lambda m, x, y: m.dot(x, y), _r((5,), dtype, 1), _r((5,), dtype, 2), layouts=["strided"] * 2)
            check(device, lambda m, x, y: x.vdot(y), _r((5,), dtype, 1), _r((5,), dtype, 2))
        with pytest.raises(RuntimeError, match="1D tensors expected, but got 2D and 1D tensors"):
            loom.dot(loom.ones(2, 3, device=device), loom.ones(3, device=device))
        check(device, lambda m, x, y: m.dot(x, y), _r((3,)), _r((4,)))
        check(device, lambda m, x, y: m.dot(x, y), _r((3,), "float32"), _r((3,)))
    with sub("mv"):
        check(device, lambda m, x, y: m.mv(x, y), _r((3, 4)), _r((4,)), layouts=["transposed", "strided"])
        check(device, lambda m, x, y: x.mv(y), _r((3, 4), "int64"), _r((4,), "int64"))
        check(device, lambda m, x, y: m.mv(x, y), _r((3, 4)), _r((3,)))
        check(device, lambda m, x, y: m.mv(x, y), _r((4,)), _r((4,)))
        check(device, lambda m, x, y: m.mv(x, y), _r((3, 4), "float32"), _r((4,)))
    sub.finish()


@pytest.mark.parametrize("name", ["addbmm", "baddbmm", "addmv", "addr", "addmm"])
def test_add_products(device, name):
    shapes = {"addbmm": [(3, 5), (2, 3, 4), (2, 4, 5)], "baddbmm": [(2, 3, 5), (2, 3, 4), (2, 4, 5)],
              "addmv": [(3,), (3, 4), (4,)], "addr": [(3, 4), (3,), (4,)], "addmm": [(3, 5), (3, 4), (4, 5)]}[name]
    sub = SubChecks()

    def reference(beta, alpha, nan=False):
        # torch 1.13's baddbmm with beta=0 scales uninitialized memory by 0: it returns NaN whenever
        # that memory last held a NaN (3797 of 4000 calls right after freeing a NaN tensor of the same
        # size), so its reference, in every form (function, method, in place), is alpha * bmm, which
        # is what beta=0 means.
        if name == "baddbmm" and beta == 0:
            return lambda m, i, a, b: m.bmm(a, b) * alpha
        return lambda m, i, a, b: getattr(m, name)(i * math.nan if nan else i, a, b, beta=beta, alpha=alpha)

    for beta, alpha in [(1, 1), (0.5, -2.0), (0, 1.5), (2, 0)]:
        with sub(f"beta={beta} alpha={alpha}"):
            check(device, lambda m, i, a, b: getattr(m, name)(i, a, b, beta=beta, alpha=alpha), _r(shapes[0], seed=1),
                  _r(shapes[1], seed=2), _r(shapes[2], seed=3), layouts=["contiguous", "transposed", "strided"],
                  torch_fn=reference(beta, alpha))
            check(device, lambda m, i, a, b: getattr(i, name)(a, b, beta=beta, alpha=alpha), _r(shapes[0], seed=1),
                  _r(shapes[1], seed=2), _r(shapes[2], seed=3), torch_fn=reference(beta, alpha))
            check(device, lambda m, i, a, b: getattr(i.clone(), name + "_")(a, b, beta=beta, alpha=alpha),
                  _r(shapes[0], seed=1), _r(shapes[1], seed=2), _r(shapes[2], seed=3), torch_fn=reference(beta, alpha))
    with sub("beta 0 ignores NaN"):
        check(device, lambda m, i, a, b: getattr(m, name)(i * math.nan, a, b, beta=0), _r(shapes[0], seed=1),
              _r(shapes[1], seed=2), _r(shapes[2], seed=3), torch_fn=reference(0, 1, nan=True))
    with sub("broadcast input"):
        check(device, lambda m, i, a, b: getattr(m, name)(i, a, b), _r(shapes[0][-1:], seed=1), _r(shapes[1], seed=2),
              _r(shapes[2], seed=3))
    with sub("integers"):
        check(device, lambda m, i, a, b: getattr(m, name)(i, a, b, beta=2, alpha=3), _r(shapes[0], "int64", 1),
              _r(shapes[1], "int64", 2), _r(shapes[2], "int64", 3))
        check(device, lambda m, i, a, b: getattr(m, name)(i, a, b, beta=0.5), _r(shapes[0], "int64", 1),
              _r(shapes[1], "int64", 2), _r(shapes[2], "int64", 3))
    sub.finish()


def test_add_product_errors(device):
    check(device, lambda m, i, a, b: m.addbmm(i, a, b), _r((3, 5)), _r((2, 3, 4)), _r((3, 4, 5)))
    check(device, lambda m, i, a, b: m.addbmm(i, a, b), _r((2, 5)), _r((2, 3, 4)), _r((2, 4, 5)))
    check(device, lambda m, i, a, b: m.addmv(i, a, b), _r((3,)), _r((3, 4)), _r((5,)))
    check(device, lambda m, i, a, b: m.addr(i, a, b), _r((3, 4)), _r((3, 1)), _r((4,)))


def test_multi_dot_and_chain_matmul(device):
    sub = SubChecks()
    chains = [[(2, 3), (3, 4)], [(2, 3), (3, 10), (10, 1), (1, 5)], [(3,), (3, 4), (4,)], [(2, 3), (3, 4), (4,)],
              [(3,), (3, 4)], [(40, 2), (2, 30), (30, 5), (5, 50)]]
    for shapes in chains:
        with sub(f"multi_dot {shapes}"):
            arrays = [_r(s, seed=k) for k, s in enumerate(shapes)]
            check(device, lambda m, *xs: m.linalg.multi_dot(list(xs)), *arrays, **F64)
            if all(len(s) == 2 for s in shapes):
                check(device, lambda m, *xs: m.chain_matmul(*xs), *arrays, **F64)
    with sub("errors"):
        check(device, lambda m, x: m.linalg.multi_dot([x]), _r((2, 3)))
        check(device, lambda m, x, y: m.linalg.multi_dot([x, y]), _r((2, 2, 2)), _r((2, 3)))
        check(device, lambda m, x, y: m.linalg.multi_dot([x, y]), _r((2, 3)), _r((4, 4)))
        check(device, lambda m, x, y: m.linalg.multi_dot([x, y]), _r((2, 3), "float32"), _r((3, 4)))
        with pytest.raises(RuntimeError, match="Tensor dimension is 1, expected 2 instead."):
            loom.chain_matmul(loom.ones(3, device=device), loom.ones(3, 4, device=device))
    with sub("chain_matmul of one"):
        check(device, lambda m, x: m.chain_matmul(x), _r((2, 3)))
    sub.finish()


def test_vector_and_matrix_norms(device):
    sub = SubChecks()
    x = _r((3, 4, 5), seed=1)
    x[0, 0, 0] = 0.0
    for ord_ in (2, 1, 0, 3, 0.5, -1, math.inf, -math.inf):
        for dim in (None, 1, (0, 2), -1):
            for keepdim in (False, True):
                with sub(f"vector_norm ord={ord_} dim={dim} keepdim={keepdim}"):
                    check(device, lambda m, t: m.linalg.vector_norm(t, ord_, dim, keepdim), x, layouts=["strided"], **F64)
    with sub("vector_norm dtype"):
        check(device, lambda m, t: m.linalg.vector_norm(t, dtype=m.float64), x.astype(np.float32))
        check(device, lambda m, t: m.linalg.vector_norm(t, dtype=m.int64), x)
        check(device, lambda m, t: m.linalg.vector_norm(t), x.astype(np.int64))
        check(device, lambda m, t: m.linalg.vector_norm(t, math.inf), np.zeros(0))
        check(device, lambda m, t: m.linalg.vector_norm(t), np.zeros(0))
    for ord_ in ("fro", 1, -1, math.inf, -math.inf):
        for dim in ((-2, -1), (0, 2), (2, 0)):
            with sub(f"matrix_norm ord={ord_} dim={dim}"):
                check(device, lambda m, t: m.linalg.matrix_norm(t, ord_, dim), x, layouts=["transposed"], **F64)
                check(device, lambda m, t: m.linalg.matrix_norm(t, ord_, dim, keepdim=True), x, **F64)
    with sub("matrix_norm errors"):
        check(device, lambda m, t: m.linalg.matrix_norm(t), _r((3,)))
        check(device, lambda m, t: m.linalg.matrix_norm(t, 3), _r((3, 3)))
        check(device, lambda m, t: m.linalg.matrix_norm(t, "abc"), _r((3, 3)))
        check(device, lambda m, t: m.linalg.matrix_norm(t, dim=(0, 0)), _r((3, 3)))
    for ord_, dim in [(None, None), (None, 1), (None, (0, 1)), (2, 1), (3, -1), ("fro", None), ("fro", (0, 1)),
                      (1, None), (math.inf, (1, 0)), (-math.inf, None), (1, (0, 1, 1)), ("fro", 1)]:
        for shape in [(4,), (3, 4), (2, 3, 4)]:
            with sub(f"norm ord={ord_} dim={dim} {shape}"):
                check(device, lambda m, t: m.linalg.norm(t, ord_, dim), _r(shape, seed=2), **F64)
    with sub("norm of integers"):
        check(device, lambda m, t: m.linalg.norm(t), _r((3,), "int64"))
    sub.finish()


def test_norms_needing_singular_values_match_torch():
    # ord 'nuc', 2 and -2 through the SVD (lazy/ops_lapack.cpp; more in test_linalg_s31.py)
    x = np.arange(24, dtype=np.float64).reshape(2, 3, 4) % 7 + np.eye(3, 4)
    for ord_ in ("nuc", 2, -2):
        for dim in [(-2, -1), (0, 2)]:
            got = loom.linalg.matrix_norm(loom.tensor(x), ord_, dim=dim, keepdim=True)
            want = torch.linalg.matrix_norm(torch.tensor(x), ord_, dim=dim, keepdim=True)
            np.testing.assert_allclose(got.numpy(), want.numpy(), rtol=1e-10)
    np.testing.assert_allclose(loom.linalg.norm(loom.tensor(x[0]), 2).item(), torch.linalg.norm(torch.tensor(x[0]), 2).item())


@pytest.mark.parametrize("p", [2.0, 1.0, 0.0, 3.0, 0.5, math.inf])
def test_cdist(device, p):
    sub = SubChecks()
    for sa, sb in [((4, 3), (5, 3)), ((2, 4, 3), (2, 6, 3)), ((2, 4, 3), (6, 3)), ((30, 3), (5, 3)), ((3, 0), (2, 0))]:
        for mode in (None, "use_mm_for_euclid_dist", "donot_use_mm_for_euclid_dist"):
            with sub(f"{sa} {sb} {mode}"):
                kw = {} if mode is None else {"compute_mode": mode}
                check(device, lambda m, a, b: m.cdist(a, b, p, **kw), _r(sa, seed=1), _r(sb, seed=2),
                      layouts=["transposed", "strided"], rtol=1e-9, atol=1e-9)
    with sub("float32"):
        check(device, lambda m, a, b: m.cdist(a, b, p), _r((4, 3), "float32"), _r((30, 3), "float32", 3), rtol=1e-4,
              atol=1e-4)
    sub.finish()


def test_cdist_errors(device):
    check(device, lambda m, a, b: m.cdist(a, b), _r((3,)), _r((3,)))
    check(device, lambda m, a, b: m.cdist(a, b), _r((2, 3)), _r((2, 4)))
    check(device, lambda m, a, b: m.cdist(a, b), _r((2, 3), "int64"), _r((2, 3), "int64"))
    check(device, lambda m, a, b: m.cdist(a, b, p=-1), _r((2, 3)), _r((2, 3)))
    check(device, lambda m, a, b: m.cdist(a, b), _r((2, 3), "float32"), _r((2, 3)))
    check(device, lambda m, a, b: m.cdist(a, b, compute_mode="abc"), _r((2, 3)), _r((2, 3)))
    check(device, lambda m, a, b: m.cdist(a, b), _r((2, 3, 4)), _r((3, 5, 4)))


def test_similarities_and_normalize(device):
    sub = SubChecks()
    F = lambda m: m.nn.functional  # noqa: E731
    for sa, sb, dim in [((3, 4), (3, 4), 1), ((4,), (2, 4), -1), ((2, 3, 4), (3, 1), 1), ((3, 4), (3, 4), 0)]:
        with sub(f"cosine_similarity {sa} {sb} {dim}"):
            check(device, lambda m, a, b: F(m).cosine_similarity(a, b, dim), _r(sa, seed=1), _r(sb, seed=2), **F64)
            check(device, lambda m, a, b: m.cosine_similarity(a, b, dim=dim, eps=0.5), _r(sa, seed=1), _r(sb, seed=2),
                  **F64)
    with sub("cosine_similarity of tiny vectors and mixed dtypes"):
        check(device, lambda m, a, b: m.cosine_similarity(a, b), np.array([[1e-5, 0.0]]), np.array([[1e-5, 0.0]]))
        check(device, lambda m, a, b: m.cosine_similarity(a, b), np.array([[1e-9, 0.0]]), np.array([[2.0, 0.0]]))
        check(device, lambda m, a, b: m.cosine_similarity(a, b, 0), _r((3,), "float32"), _r((3,)))
        check(device, lambda m, a, b: m.cosine_similarity(a, b, 0), _r((3,), "int64"), _r((3,), "int64"))
    for p in (2.0, 1.0, 3.0, math.inf):
        for keepdim in (False, True):
            with sub(f"pairwise_distance p={p} keepdim={keepdim}"):
                check(device, lambda m, a, b: F(m).pairwise_distance(a, b, p, keepdim=keepdim), _r((3, 4), seed=1),
                      _r((4,), seed=2), **F64)
                check(device, lambda m, a, b: m.pairwise_distance(a, b, p, 1e-3, keepdim), _r((2, 3, 4), seed=1),
                      _r((2, 3, 4), seed=2), **F64)
    for p, dim in [(2.0, 1), (1.0, 0), (3.0, -1), (math.inf, 1)]:
        with sub(f"normalize p={p} dim={dim}"):
            check(device, lambda m, a: F(m).normalize(a, p, dim), _r((3, 4), seed=3), layouts=["transposed"], **F64)
    with sub("normalize of zeros"):
        check(device, lambda m, a: F(m).normalize(a), np.zeros((2, 3)))
    with sub("vecdot"):
        check(device, lambda m, a, b: m.linalg.vecdot(a, b), _r((3, 4), seed=1), _r((4,), seed=2), **F64)
        check(device, lambda m, a, b: m.linalg.vecdot(a, b, dim=0), _r((3, 4), seed=1), _r((3, 1), seed=2), **F64)
    sub.finish()


def test_distance_modules(device):
    """nn.CosineSimilarity and nn.PairwiseDistance: the functions with their arguments stored."""
    check(device, lambda m, a, b: m.nn.CosineSimilarity(dim=0, eps=0.1)(a, b), _r((3, 4), seed=1), _r((3, 4), seed=2),
          **F64)
    check(device, lambda m, a, b: m.nn.PairwiseDistance(p=1.0, keepdim=True)(a, b), _r((3, 4), seed=1),
          _r((4,), seed=2), **F64)
    assert repr(loom.nn.CosineSimilarity()) == repr(torch.nn.CosineSimilarity())


def _program(m, a, b, v):
    F = m.nn.functional
    return (m.tensordot(a, b, 1), m.kron(a, b[:2, :2]), m.outer(v, v) + m.addr(a[:, :3], v, v, beta=0.5),
            m.addbmm(a[:, :2], a.reshape(1, 3, 4), b.reshape(1, 4, 3)[..., :2], alpha=2),
            m.linalg.multi_dot([a, b, b.t()]), m.linalg.vector_norm(a, 3, 1), m.linalg.matrix_norm(a, 1),
            m.cdist(a, b.t(), compute_mode="use_mm_for_euclid_dist"), m.cdist(a, b.t(), 1.0),
            F.cosine_similarity(a, b.t()), F.normalize(a), m.mv(a, b[:, 0]))


def test_fused_equals_unfused_equals_eager():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 3)).astype(np.float32)
    v = rng.standard_normal(3).astype(np.float32)
    eager = [np.array(t.numpy()) for t in _program(loom, *(loom.tensor(x) for x in (a, b, v)))]
    ref = _program(torch, *(torch.from_numpy(x) for x in (a, b, v)))
    for got, want in zip(eager, ref):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-4, atol=1e-5)
    try:
        for executor in ["fused", "unfused", "interpreter"]:
            loom._C._set_executor(executor)
            out = _program(loom, *(loom.tensor(x, device="lazy") for x in (a, b, v)))
            for got, want in zip(out, eager):
                np.testing.assert_allclose(np.array(got.numpy()), want, rtol=1e-5, atol=1e-5, err_msg=executor)
    finally:
        loom._C._set_executor("compiled")
