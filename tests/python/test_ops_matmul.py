"""Matrix products agree with PyTorch: matmul / @ for every rank combination with batch broadcasting,
mm, bmm, addmm (beta, alpha) and linear; float32, float64 and integer dtypes; transposed, strided,
expanded, empty (M, N, K or batch of 0) operands."""

import numpy as np
import pytest
import torch.nn.functional as F

from _ops_helpers import LAYOUTS, SubChecks, check, device, make, random_array, torch  # noqa: F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def tol(dtype, k=8):
    """Products of k terms: float32 error grows with k."""
    if dtype == "float32":
        return {"rtol": 1e-5 * max(1, k / 16), "atol": 1e-5 * max(1, k / 16)}
    if dtype == "float64":
        return {"rtol": 1e-12, "atol": 1e-12}
    return {}


def _operand(shape, dtype, seed):
    if dtype in ("int32", "int64"):
        return random_array(shape, dtype, seed=seed, low=-4, high=5)
    if dtype == "uint8":
        return random_array(shape, dtype, seed=seed, low=0, high=3)
    return random_array(shape, dtype, seed=seed)


RANK_CASES = [
    ((4,), (4,)),              # dot: 0-d
    ((4,), (4, 3)),            # vector @ matrix
    ((3, 4), (4,)),            # matrix @ vector
    ((3, 4), (4, 5)),
    ((2, 3, 4), (4,)),         # batched matrix @ vector
    ((4,), (2, 4, 5)),         # vector @ batched matrix
    ((2, 3, 4), (2, 4, 5)),
    ((2, 3, 4), (4, 5)),       # batch broadcast against a matrix
    ((3, 4), (2, 4, 5)),
    ((2, 1, 3, 4), (5, 4, 2)),  # batch dims broadcast
    ((1, 3, 4), (6, 4, 2)),
    ((2, 2, 1, 3, 4), (2, 1, 4, 1)),
]


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int32"])
@pytest.mark.parametrize("shapes", RANK_CASES, ids=str)
def test_matmul_ranks(device, shapes, dtype):
    a = _operand(shapes[0], dtype, 1)
    b = _operand(shapes[1], dtype, 2)
    sub = SubChecks()
    with sub("loom.matmul"):
        check(device, lambda m, x, y: m.matmul(x, y), a, b, **tol(dtype))
    with sub("@"):
        check(device, lambda m, x, y: x @ y, a, b, **tol(dtype))
    with sub("Tensor.matmul"):
        check(device, lambda m, x, y: x.matmul(y), a, b, **tol(dtype))
    sub.finish()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_matmul_layouts(device, dtype):
    """Transposed (column-major), strided (steps: not BLAS-friendly), expanded (stride 0) operands."""
    a = _operand((2, 5, 6), dtype, 3)
    b = _operand((2, 6, 4), dtype, 4)
    sub = SubChecks()
    for la in LAYOUTS:
        for lb in LAYOUTS:
            with sub(f"{la} @ {lb}"):
                check(device, lambda m, x, y: x @ y, a, b, layouts=[la, lb], **tol(dtype))
    with sub("2-d transposed views"):
        check(device, lambda m, x, y: x.t() @ y.t(), a[0].T.copy(), b[0].T.copy(), **tol(dtype))
        check(device, lambda m, x, y: x.mT @ y, np.ascontiguousarray(np.swapaxes(a, 1, 2)), b, **tol(dtype))
    with sub("row / column slices"):
        check(device, lambda m, x, y: x[:, 1:4, ::2] @ y[:, ::2, 1:], a, b, **tol(dtype))
        check(device, lambda m, x, y: x[:, :1] @ y[:, :, :1], a, b, **tol(dtype))
    with sub("batch broadcast of an expanded matrix"):
        check(device, lambda m, x, y: x[:1].expand(3, 5, 6) @ y[0], a, b, **tol(dtype))
    sub.finish()


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_matmul_larger_sizes(device, dtype):
    """Sizes past any small-matrix fast path, K large enough for float32 error to matter."""
    sub = SubChecks()
    for (m_, k, n) in [(33, 47, 29), (1, 128, 1), (64, 1, 64), (17, 200, 3)]:
        a = _operand((m_, k), dtype, 5)
        b = _operand((k, n), dtype, 6)
        with sub(f"{m_}x{k} @ {k}x{n}"):
            check(device, lambda m, x, y: x @ y, a, b, **tol(dtype, k))
            check(device, lambda m, x, y: x @ y, a, b, layouts=["transposed", "transposed"], **tol(dtype, k))
    sub.finish()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int32"])
def test_matmul_many_small_products(device, dtype):
    """Batches of many small products (attention's per-head ones), which are spread over the
    thread pool: every product of the batch lands in its place, for each operand layout, batch
    dims broadcast from either side, and views of one base as attention takes them."""
    a = _operand((4, 8, 32, 16), dtype, 11)
    b = _operand((4, 8, 16, 32), dtype, 12)
    t = tol(dtype, 32)
    sub = SubChecks()
    for la in LAYOUTS:
        for lb in LAYOUTS:
            with sub(f"{la} @ {lb}"):
                check(device, lambda m, x, y: x @ y, a, b, layouts=[la, lb], **t)
    with sub("batch dims broadcast"):
        check(device, lambda m, x, y: x[:, :1] @ y, a, b, **t)
        check(device, lambda m, x, y: x @ y[:1], a, b, **t)
        check(device, lambda m, x, y: x[:1, :, None] @ y[:, None, :1], a, b, **t)
        check(device, lambda m, x, y: x @ y[0, 0], a, b, **t)
    with sub("heads sliced from one base"):
        # q, k, v as gpt takes them: views of one [batch, time, 3, heads, dim] tensor.
        qkv = _operand((4, 32, 3, 8, 16), dtype, 13)

        def attention(m, x):
            p = x.permute(2, 0, 3, 1, 4)
            return (p[0] @ p[1].transpose(-2, -1)) @ p[2]
        check(device, attention, qkv, **tol(dtype, 512))
    sub.finish()


@pytest.mark.parametrize("shapes", [((0, 4), (4, 3)), ((3, 0), (0, 5)), ((3, 4), (4, 0)), ((0,), (0,)),
                                    ((0, 3, 4), (4, 2)), ((2, 0, 4), (2, 4, 3)), ((2, 3, 0), (0, 2)),
                                    ((0,), (0, 3)), ((3, 0), (0,))], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "int64"])
def test_matmul_empty(device, shapes, dtype):
    """An empty inner dim gives zeros (an empty sum), other empty dims an empty result."""
    check(device, lambda m, x, y: x @ y, np.zeros(shapes[0], dtype), np.zeros(shapes[1], dtype))
    a = _operand(shapes[0], dtype, 7)
    b = _operand(shapes[1], dtype, 8)
    check(device, lambda m, x, y: m.matmul(x, y), a, b)


def test_matmul_inner_empty_ignores_garbage(device):
    """K = 0 with a result buffer that BLAS must not read: all zeros, also for float64."""
    for dtype in ("float32", "float64"):
        check(device, lambda m, x, y: x @ y, np.ones((5, 0), dtype), np.ones((0, 7), dtype))


def test_matmul_special_values(device):
    a = np.array([[np.inf, 1.0], [np.nan, 0.0], [1.0, 2.0]])
    b = np.array([[0.0, 1.0], [1.0, -np.inf]])
    check(device, lambda m, x, y: x @ y, a, b)
    # float32 products this small run loom's own kernel: the same IEEE results.
    check(device, lambda m, x, y: x @ y, a.astype(np.float32), b.astype(np.float32))
    check(device, lambda m, x, y: x @ y, a.astype(np.float32), b.astype(np.float32), layouts=["transposed", "transposed"])


def test_matmul_uint8(device):
    a = _operand((3, 4), "uint8", 1)
    b = _operand((4, 2), "uint8", 2)
    check(device, lambda m, x, y: x @ y, a, b)


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_mm(device, dtype):
    a = _operand((3, 4), dtype, 1)
    b = _operand((4, 5), dtype, 2)
    sub = SubChecks()
    for la, lb in [("contiguous", "contiguous"), ("transposed", "strided"), ("expanded", "transposed")]:
        with sub(f"{la} {lb}"):
            check(device, lambda m, x, y: m.mm(x, y), a, b, layouts=[la, lb], **tol(dtype))
            check(device, lambda m, x, y: x.mm(y), a, b, layouts=[la, lb], **tol(dtype))
    sub.finish()


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64"])
def test_bmm(device, dtype):
    a = _operand((3, 2, 4), dtype, 1)
    b = _operand((3, 4, 5), dtype, 2)
    sub = SubChecks()
    for la, lb in [("contiguous", "contiguous"), ("transposed", "strided"), ("strided", "expanded")]:
        with sub(f"{la} {lb}"):
            check(device, lambda m, x, y: m.bmm(x, y), a, b, layouts=[la, lb], **tol(dtype))
            check(device, lambda m, x, y: x.bmm(y), a, b, layouts=[la, lb], **tol(dtype))
    with sub("empty batch"):
        check(device, lambda m, x, y: m.bmm(x, y), np.zeros((0, 2, 4), dtype), np.zeros((0, 4, 5), dtype))
    sub.finish()


@pytest.mark.parametrize("beta,alpha", [(1, 1), (0.5, 2), (0, 1), (2, 0), (-1, 0.25)])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_addmm(device, dtype, beta, alpha):
    inp = _operand((3, 5), dtype, 1)
    a = _operand((3, 4), dtype, 2)
    b = _operand((4, 5), dtype, 3)
    sub = SubChecks()
    with sub("full input"):
        check(device, lambda m, i, x, y: m.addmm(i, x, y, beta=beta, alpha=alpha), inp, a, b, **tol(dtype))
    with sub("broadcast input row"):
        check(device, lambda m, i, x, y: m.addmm(i, x, y, beta=beta, alpha=alpha), inp[0], a, b, **tol(dtype))
    with sub("0-d input"):
        check(device, lambda m, i, x, y: m.addmm(i, x, y, beta=beta, alpha=alpha), np.array(1.5, dtype), a, b,
              **tol(dtype))
    with sub("method, transposed mats"):
        check(device, lambda m, i, x, y: i.addmm(x, y, beta=beta, alpha=alpha), inp, a, b,
              layouts=["strided", "transposed", "transposed"], **tol(dtype))
    sub.finish()


def test_addmm_beta_zero_ignores_nan(device):
    """beta=0: input is not read, so NaN / inf in it do not propagate (PyTorch's documented rule)."""
    inp = np.full((2, 2), np.nan)
    inp[0, 0] = np.inf
    check(device, lambda m, i, x, y: m.addmm(i, x, y, beta=0), inp, _operand((2, 3), "float64", 1),
          _operand((3, 2), "float64", 2))


def test_addmm_integer(device):
    check(device, lambda m, i, x, y: m.addmm(i, x, y, beta=2, alpha=3), _operand((2,), "int64", 1),
          _operand((2, 3), "int64", 2), _operand((3, 2), "int64", 3))


@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("x_shape", [(3, 4), (4,), (2, 3, 4), (0, 4)], ids=str)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_linear(device, dtype, x_shape, bias):
    x = _operand(x_shape, dtype, 1)
    w = _operand((5, 4), dtype, 2)
    b = _operand((5,), dtype, 3)
    lin = lambda m: F.linear if m is torch else m.linear  # noqa: E731
    if bias:
        check(device, lambda m, xx, ww, bb: lin(m)(xx, ww, bb), x, w, b, **tol(dtype))
        check(device, lambda m, xx, ww, bb: lin(m)(xx, ww, bias=bb), x, w, b, layouts=["strided", "transposed",
                                                                                       "contiguous"], **tol(dtype))
    else:
        check(device, lambda m, xx, ww: lin(m)(xx, ww), x, w, **tol(dtype))
        check(device, lambda m, xx, ww: lin(m)(xx, ww), x, w, layouts=["transposed", "expanded"], **tol(dtype))


def test_linear_vector_weight(device):
    """A 1-d weight: a dot product over the last dim."""
    lin = lambda m: F.linear if m is torch else m.linear  # noqa: E731
    check(device, lambda m, xx, ww: lin(m)(xx, ww), _operand((3, 4), "float64", 1), _operand((4,), "float64", 2))
    check(device, lambda m, xx, ww: lin(m)(xx, ww), _operand((2, 3, 4), "float32", 1), _operand((4,), "float32", 2))


def test_matmul_result_is_new_memory(device):
    """The product does not alias its operands, and later writes to an operand do not change it."""
    a, _ = make(np.eye(3), device)
    b, _ = make(np.arange(9.0).reshape(3, 3), device)
    c = a @ b
    expected = c.tolist()
    a.fill_(0.0)
    assert c.tolist() == expected
