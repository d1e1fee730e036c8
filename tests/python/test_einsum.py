"""einsum agrees with PyTorch (lazy/einsum.cpp): every kind of equation (contractions, outer
products, batch dims, ellipsis, implicit outputs, repeated labels for traces and diagonals, size-1
broadcasting, three or more operands), integer and float dtypes, non-contiguous operands,
PyTorch's errors, and random equations checked against numpy.einsum.

Also: the contractions go to matrix products (few nodes, no dense intermediates), and the greedy
order of several operands picks the cheap pair first."""

import numpy as np
import pytest

import loom
from _ops_helpers import SubChecks, check, device, random_array, torch  # noqa: F401

F64 = {"rtol": 1e-10, "atol": 1e-10}


def _shapes(equation, sizes):
    """The operand shapes of an equation (letters only), each label's size from `sizes`."""
    inputs = equation.split("->")[0].split(",")
    return [tuple(sizes[c] for c in term) for term in inputs]


LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
SIZES = {c: 2 + k % 3 for k, c in enumerate(LETTERS)}

EQUATIONS = [
    "ij,jk->ik", "ij,jk", "ij,kj->ik", "bij,bjk->bik", "bij,bkj->bki", "i,i->", "i,i", "i,j->ij", "i,j", "ij->ji",
    "ij", "ji", "ij->", "ij->j", "ii->i", "ii", "iij->ij", "iji->j", "ijk,jil->kl", "ij,ij->ij", "ij,ij->i",
    "abc,cd,de->abe", "ab,bc,cd,de->ae", "i,i,i->", "ij,jk,ki->", "abcd,dcba->", "ab,ab,ab->b", "ba,Ab", "Ab,ba",
    "iJ->Ji", "bn,anm,bm->ba", "ij,kl->ijkl", "ijk->kji", "aab,bc->ac", "ab,cd,ef->abcdef", "ij,jk,kl,lm,mn->in",
]


@pytest.mark.parametrize("equation", EQUATIONS)
def test_equations(device, equation):
    shapes = _shapes(equation, SIZES)
    # repeated labels need equal sizes, which SIZES gives; operands come non-contiguous too
    arrays = [random_array(s, "float64", seed=k) for k, s in enumerate(shapes)]
    layouts = ["transposed" if k % 2 else "strided" for k in range(len(arrays))]
    check(device, lambda m, *xs: m.einsum(equation, *xs), *arrays, layouts=layouts, **F64)
    check(device, lambda m, *xs: m.einsum(equation, list(xs)), *arrays, **F64)


def test_ellipsis_and_broadcasting(device):
    sub = SubChecks()
    cases = [("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("...ij,...jk->...ik", [(2, 1, 3, 4), (5, 4, 2)]),
             ("...ij->...", [(2, 3, 4)]), ("...i->i", [(2, 3)]), ("i...->...", [(2, 3)]), ("i...", [(2, 3)]),
             ("i->...", [(3,)]), ("i...,i...->...", [(3, 2), (3, 1, 2)]), ("...,...", [(2, 3), (3,)]),
             ("...i,i", [(2, 3), (3,)]), ("i,i", [(3,), (1,)]), ("bij,bjk->bik", [(2, 3, 4), (1, 4, 5)]),
             ("ij,jk->ik", [(2, 1), (3, 4)]), ("i...j,j...k->...ik", [(2, 3, 4), (4, 3, 5)]), ("->", [()]),
             ("", [()]), ("i j->j i", [(2, 3)]), ("...ii->...i", [(2, 3, 3)]), ("a...,a...->a", [(2, 3), (2, 1)])]
    for equation, shapes in cases:
        with sub(f"{equation} {shapes}"):
            arrays = [random_array(s, "float64", seed=k) for k, s in enumerate(shapes)]
            check(device, lambda m, *xs: m.einsum(equation, *xs), *arrays, **F64)
    sub.finish()


@pytest.mark.parametrize("dtype", ["int32", "int64", "float32"])
def test_dtypes(device, dtype):
    for equation in ("ij,jk->ik", "i,i", "i,j", "bij,bjk->bik", "ii->", "ij,jk,kl->il"):
        arrays = [random_array(s, dtype, seed=k) for k, s in enumerate(_shapes(equation, SIZES))]
        check(device, lambda m, *xs: m.einsum(equation, *xs), *arrays, rtol=1e-5, atol=1e-5)


def test_errors(device):
    sub = SubChecks()
    a, b, v = random_array((2, 3), "float32"), random_array((3, 4), "float32"), random_array((3,), "float32")
    cases = [("ij,jk", [a]), ("ij", [a, b]), ("i1", [a]), ("i.j", [a]), ("...i...", [a]), ("ijk", [a]),
             ("ij->ii", [a]), ("ij->k", [a]), ("ii", [a]), ("i,i", [v, random_array((4,), "float32")]),
             ("...,...", [a, random_array((4,), "float32")]), ("ij..->", [a]), ("ij->...i.", [a]),
             ("i,j->ij->", [v, v]), ("ij,", [a, v]), ("i", [np.array(2.0, np.float32)]),
             (" i j - > j i", [a]), ("i,i", [v, v.astype(np.float64)])]
    for equation, arrays in cases:
        with sub(f"{equation!r}"):
            check(device, lambda m, *xs: m.einsum(equation, *xs), *arrays)
    with sub("no operands"):
        check(device, lambda m: m.einsum("i"))
    sub.finish()


def test_random_equations_against_numpy(device):
    """Random equations of 1 to 4 operands over a few labels (some repeated, some summed, some
    kept), as numpy.einsum computes them in float64."""
    rng = np.random.default_rng(7)
    labels = "abcde"
    sizes = {"a": 2, "b": 3, "c": 1, "d": 4, "e": 2}
    for trial in range(40):
        n = int(rng.integers(1, 5))
        terms = ["".join(rng.choice(list(labels), int(rng.integers(0, 4)))) for _ in range(n)]
        used = sorted(set("".join(terms)))
        out = "".join(c for c in used if rng.random() < 0.5)
        equation = ",".join(terms) + "->" + out
        arrays = [rng.standard_normal([sizes[c] for c in t]) for t in terms]
        want = np.einsum(equation, *arrays)
        got = loom.einsum(equation, *[loom.tensor(x, device=device) for x in arrays])
        assert tuple(got.shape) == want.shape, equation
        np.testing.assert_allclose(np.array(got.numpy()), want, rtol=1e-10, atol=1e-10, err_msg=equation)


def test_contractions_are_matrix_products():
    """A contraction of two operands records one MatMul, not a broadcast product of every pair
    followed by a sum; operands already in order need no views."""
    a = loom.randn(64, 32, device="lazy")
    b = loom.randn(32, 48, device="lazy")
    before = loom.metrics()["nodes_recorded"]
    out = loom.einsum("ij,jk->ik", a, b)
    assert loom.metrics()["nodes_recorded"] - before == 1
    np.testing.assert_allclose(out.numpy(), a.numpy() @ b.numpy(), rtol=1e-4, atol=1e-4)


def test_greedy_order_contracts_the_small_pair_first():
    """ij,jk,kl with a large i and k: contracting (ij,jk) first would make an i x k intermediate of
    a million elements; the greedy order contracts (jk,kl) first, into a j x l one (2 elements).
    Eager mode allocates each intermediate, so the allocator's peak tells the order."""
    x = loom.randn(1000, 2)
    y = loom.randn(2, 1000)
    z = loom.randn(1000, 1)
    loom.reset_peak_memory_stats()
    base = loom.memory_stats()["allocated_bytes"]
    out = loom.einsum("ij,jk,kl->il", x, y, z)
    assert loom.memory_stats()["peak_allocated_bytes"] - base < 1000 * 1000 * 4 // 10
    np.testing.assert_allclose(out.numpy(), x.numpy() @ (y.numpy() @ z.numpy()), rtol=1e-4, atol=1e-3)


def test_fused_equals_unfused_equals_eager():
    rng = np.random.default_rng(3)
    arrays = [rng.standard_normal(s).astype(np.float32) for s in [(2, 3, 4), (4, 5), (2, 5), (3, 3)]]

    def program(m, a, b, c, d):
        return (m.einsum("bij,jk->bik", a, b), m.einsum("bij,jk,bk->bi", a, b, c), m.einsum("ii->i", d).exp(),
                m.einsum("bij,ij->b", a[:, :, :3], d) * 2)

    eager = [np.array(t.numpy()) for t in program(loom, *(loom.tensor(x) for x in arrays))]
    ref = program(torch, *(torch.from_numpy(x) for x in arrays))
    for got, want in zip(eager, ref):
        np.testing.assert_allclose(got, want.numpy(), rtol=1e-5, atol=1e-5)
    try:
        for executor in ["fused", "unfused", "interpreter"]:
            loom._C._set_executor(executor)
            out = program(loom, *(loom.tensor(x, device="lazy") for x in arrays))
            for got, want in zip(out, eager):
                np.testing.assert_allclose(np.array(got.numpy()), want, rtol=1e-5, atol=1e-5, err_msg=executor)
    finally:
        loom._C._set_executor("compiled")
