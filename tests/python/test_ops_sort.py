"""Sorting and selection agree with PyTorch: sort (stable, descending), argsort, msort, topk,
kthvalue, searchsorted (right, side, sorter, out_int32, numbers), bucketize, unique (sorted,
return_inverse, return_counts, dim) and unique_consecutive.

Every check runs on cpu and lazy (lazy also against eager). Indices are compared exactly where
PyTorch's are defined (stable sorts, distinct values); elsewhere the values are, and the indices
must select them. The last tests run sorts through every executor, including the host emulator of
the CUDA kernels, with rows longer than the kernel's shared memory holds."""

import numpy as np
import pytest

import loom
from _ops_helpers import (LAYOUTS, SubChecks, assert_close, check, device, random_array,  # noqa: F401
                          results_by_name, torch)

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

NAN = float("nan")
INF = float("inf")
DTYPES = ["bool", "uint8", "int32", "int64", "float32", "float64"]
SHAPE = (3, 4, 5)


def ties(dtype, shape, seed):
    """Few distinct values: many ties (bools: True and False)."""
    if dtype == "bool":
        return random_array(shape, "bool", seed=seed)
    return random_array(shape, "int64", seed=seed, low=0, high=4).astype(dtype)


def distinct(dtype, shape, seed):
    """Distinct values (for ops whose indices PyTorch leaves open among ties)."""
    n = int(np.prod(shape))
    v = np.random.default_rng(seed).permutation(n).reshape(shape)
    return (v if dtype != "float32" and dtype != "float64" else v * 0.37 - 2).astype(dtype)


def special_floats(seed):
    """Floats with NaN, infinities, -0.0 / 0.0 and ties."""
    g = np.random.default_rng(seed)
    pool = np.array([NAN, INF, -INF, 0.0, -0.0, 1.5, 1.5, -2.0, 3.0, -0.0])
    return g.choice(pool, size=(4, 9))


# ---- sort / argsort / msort ----

@pytest.mark.parametrize("dtype", DTYPES)
def test_sort_is_stable_in_both_directions(device, dtype):
    sub = SubChecks()
    for label, values in [("ties", ties(dtype, SHAPE, 1)), ("random", random_array(SHAPE, dtype, seed=2))]:
        for layout in LAYOUTS:
            for dim in (-1, 0, 1):
                for descending in (False, True):
                    with sub(f"{label} {layout} dim={dim} descending={descending}"):
                        out, _ = check(device, lambda m, x: m.sort(x, dim, descending), values, layouts=[layout],
                                       torch_fn=lambda m, x: m.sort(x, dim=dim, descending=descending, stable=True))
                        assert out.values is out[0] and out.indices is out[1]
                    with sub(f"argsort {label} {layout} dim={dim} descending={descending}"):
                        check(device, lambda m, x: x.argsort(dim, descending), values, layouts=[layout],
                              torch_fn=lambda m, x: m.sort(x, dim=dim, descending=descending, stable=True)[1])
    sub.finish()


def test_sort_orders_nan_infinities_and_signed_zeros(device):
    values = special_floats(3)
    for descending in (False, True):
        for dim in (0, 1):
            check(device, lambda m, x: m.sort(x, dim, descending=descending), values,
                  torch_fn=lambda m, x: m.sort(x, dim=dim, descending=descending, stable=True))
            check(device, lambda m, x: m.sort(x.float(), dim, descending=descending), values,
                  torch_fn=lambda m, x: m.sort(x.float(), dim=dim, descending=descending, stable=True))


def test_sort_forms(device):
    """Each form against PyTorch's stable sort (its default sort may order ties otherwise)."""
    sub = SubChecks()
    values = ties("float32", SHAPE, 4)
    for label, call, torch_call in [
        ("default", lambda m, x: m.sort(x), lambda m, x: m.sort(x, stable=True)),
        ("stable keyword", lambda m, x: m.sort(x, stable=True, dim=1, descending=True), None),
        ("method keywords", lambda m, x: x.sort(dim=0, descending=True),
         lambda m, x: x.sort(dim=0, descending=True, stable=True)),
        ("argsort stable keyword", lambda m, x: m.argsort(x, stable=True, dim=1), None),
        ("msort", lambda m, x: m.msort(x), None),
        ("msort method", lambda m, x: x.msort(), None),
        ("0-d", lambda m, x: m.sort(x[0, 0, 0]), None),
        ("0-d argsort", lambda m, x: x[0, 0, 0].argsort(), None),
        ("empty", lambda m, x: m.sort(x[:, :0], 1), None),
    ]:
        with sub(label):
            check(device, call, values, torch_fn=torch_call)
    sub.finish()


def test_sort_errors(device):
    check(device, lambda m, x: m.sort(x, 3), np.ones((2, 3)))
    check(device, lambda m, x: m.argsort(x, -3), np.ones((2, 3)))


def test_sort_gradient_follows_the_indices(device):
    x = loom.tensor([[3.0, 1.0, 2.0], [0.5, 0.5, -1.0]], dtype=loom.float64, device=device, requires_grad=True)
    w = loom.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], dtype=loom.float64, device=device)
    (x.sort(1, descending=True).values * w).sum().backward()
    tx = torch.tensor([[3.0, 1.0, 2.0], [0.5, 0.5, -1.0]], dtype=torch.float64, requires_grad=True)
    (tx.sort(dim=1, descending=True, stable=True).values * torch.tensor(w.tolist(), dtype=torch.float64)).sum().backward()
    assert_close(x.grad, tx.grad)


# ---- topk / kthvalue ----

@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
def test_topk(device, dtype):
    sub = SubChecks()
    values = distinct(dtype, SHAPE, 5)
    for layout in LAYOUTS[:3]:
        for k in (0, 1, 3):
            for dim in (-1, 1, 0):
                for largest in (True, False):
                    with sub(f"{layout} k={k} dim={dim} largest={largest}"):
                        out, _ = check(device, lambda m, x: m.topk(x, k, dim, largest), values, layouts=[layout])
    with sub("keywords, sorted=False"):
        check(device, lambda m, x: x.topk(2, dim=0, largest=False, sorted=True), values)
    with sub("ties: values, and indices that select them"):
        t = ties(dtype, SHAPE, 6)
        out, ref = check(device, lambda m, x: m.topk(x, 3)[0], t)
        x = loom.tensor(t, device=device)
        v, i = x.topk(3)
        assert_close(x.gather(-1, i), v)
    with sub("nan is the largest (PyTorch orders NaNs among themselves freely: values only)"):
        if dtype.startswith("float"):
            check(device, lambda m, x: m.topk(x, 2).values, np.array([[1.0, NAN, 3.0, -1.0], [NAN, NAN, 0.0, 2.0]]))
    with sub("0-d"):
        check(device, lambda m, x: m.topk(x, 1), np.asarray(np.array(5, dtype=dtype)))
    sub.finish()


@pytest.mark.parametrize("dtype", ["uint8", "int32", "int64", "float32", "float64"])
def test_kthvalue(device, dtype):
    sub = SubChecks()
    values = distinct(dtype, SHAPE, 7)
    for layout in LAYOUTS[:3]:
        for k, dim in [(1, -1), (5, -1), (3, 1), (2, 0)]:
            for keepdim in (False, True):
                with sub(f"{layout} k={k} dim={dim} keepdim={keepdim}"):
                    check(device, lambda m, x: m.kthvalue(x, k, dim, keepdim), values, layouts=[layout])
    with sub("ties (the index of the stable order)"):
        check(device, lambda m, x: x.kthvalue(2), np.array([[3, 1, 2, 1], [2, 2, 2, 0]], dtype=dtype))
    with sub("0-d"):
        check(device, lambda m, x: m.kthvalue(x, 1), np.asarray(np.array(5, dtype=dtype)))
    sub.finish()


SELECTION_ERRORS = [
    lambda m, x: m.topk(x, 6),
    lambda m, x: m.topk(x, -1),
    lambda m, x: m.topk(x, 1, dim=2),
    lambda m, x: m.kthvalue(x, 0),
    lambda m, x: m.kthvalue(x, 6),
    lambda m, x: m.kthvalue(x, 1, 3),
    lambda m, x: m.kthvalue(x[:, :0], 1),
]


@pytest.mark.parametrize("case", range(len(SELECTION_ERRORS)))
def test_selection_errors(device, case):
    check(device, SELECTION_ERRORS[case], random_array((4, 5), "float32"))


# ---- searchsorted / bucketize ----

SORTED_1D = np.array([-2.0, 0.0, 0.0, 1.5, 3.0, 3.0, 7.0])
SORTED_2D = np.sort(random_array((3, 6), "float64", seed=8), axis=1)
VALUES_2D = np.concatenate([random_array((3, 4), "float64", seed=9), SORTED_2D[:, :2]], axis=1)


def test_searchsorted(device):
    sub = SubChecks()
    probes = np.array([[-3.0, 0.0, 1.5, 3.0], [7.0, 8.0, -2.0, 0.1]])
    cases = [
        ("1-d left", lambda m, s, v: m.searchsorted(s, v), SORTED_1D, probes),
        ("1-d right", lambda m, s, v: m.searchsorted(s, v, right=True), SORTED_1D, probes),
        ("side right", lambda m, s, v: m.searchsorted(s, v, side="right"), SORTED_1D, probes),
        ("side left", lambda m, s, v: m.searchsorted(s, v, side="left"), SORTED_1D, probes),
        ("out_int32", lambda m, s, v: m.searchsorted(s, v, out_int32=True), SORTED_1D, probes),
        ("n-d rows", lambda m, s, v: m.searchsorted(s, v), SORTED_2D, VALUES_2D),
        ("n-d rows right", lambda m, s, v: m.searchsorted(s, v, right=True), SORTED_2D, VALUES_2D),
        ("n-d transposed values", lambda m, s, v: m.searchsorted(s, v.T.contiguous().T), SORTED_2D, VALUES_2D),
        ("integers", lambda m, s, v: m.searchsorted(s, v), np.array([1, 3, 3, 5]), np.array([0, 3, 4, 9])),
        ("int sorted, float values", lambda m, s, v: m.searchsorted(s, v), np.array([1, 3, 5]), np.array([3.5, 0.5])),
        ("float sorted, int values", lambda m, s, v: m.searchsorted(s, v, right=True), SORTED_1D, np.array([0, 3, 9])),
        ("nan value", lambda m, s, v: m.searchsorted(s, v), SORTED_1D, np.array([NAN, 1.0])),
        ("0-d value", lambda m, s, v: m.searchsorted(s, v[0]), SORTED_1D, np.array([1.5, 2.0])),
        ("empty values", lambda m, s, v: m.searchsorted(s, v[:0]), SORTED_1D, np.array([1.5, 2.0])),
        ("float32", lambda m, s, v: m.searchsorted(s.float(), v.float()), SORTED_1D, probes),
    ]
    for label, call, s, v in cases:
        with sub(label):
            check(device, call, s, v)
    with sub("number"):
        check(device, lambda m, s: m.searchsorted(s, 3.0), SORTED_1D)
        check(device, lambda m, s: m.searchsorted(s, 3, right=True), SORTED_1D)
        check(device, lambda m, s: m.searchsorted(s, 2.5), np.array([1, 3, 5]))
    sub.finish()


def test_searchsorted_with_sorter(device):
    unsorted = np.array([[5.0, 1.0, 3.0, 1.0], [0.0, -1.0, 2.0, 4.0]])
    sorter = np.argsort(unsorted, axis=1, kind="stable")
    values = np.array([[1.0, 4.0], [3.0, -5.0]])
    for right in (False, True):
        check(device, lambda m, s, v, o: m.searchsorted(s, v, right=right, sorter=o), unsorted, values, sorter)
    check(device, lambda m, s, v, o: m.searchsorted(s[0], v, sorter=o[0]), unsorted, values, sorter)


def test_bucketize(device):
    boundaries = np.array([1.0, 3.0, 5.0, 7.0])
    x = np.array([[0.0, 1.0, 2.0], [3.0, 7.0, 9.0]])
    for right in (False, True):
        check(device, lambda m, v, b: m.bucketize(v, b, right=right), x, boundaries)
        check(device, lambda m, v, b: m.bucketize(v, b, out_int32=True, right=right), x, boundaries)
    check(device, lambda m, b: m.bucketize(3.0, b), boundaries)
    check(device, lambda m, b: m.bucketize(4, b, right=True), boundaries)


SEARCH_ERRORS = [
    lambda m, s, v: m.searchsorted(s[0, 0], v),
    lambda m, s, v: m.searchsorted(s, v[0]),
    lambda m, s, v: m.searchsorted(s, v[:, :1].T),
    lambda m, s, v: m.searchsorted(s, 2.0),
    lambda m, s, v: m.searchsorted(s, v, side="middle"),
    lambda m, s, v: m.searchsorted(s, v, side="left", right=True),
    lambda m, s, v: m.searchsorted(s, v, sorter=m.zeros(2, 3, dtype=m.int32, device=s.device)),
    lambda m, s, v: m.searchsorted(s, v, sorter=m.zeros(2, 2, dtype=m.int64, device=s.device)),
    lambda m, s, v: m.searchsorted(s > 0, v > 0),
    lambda m, s, v: m.bucketize(v, s),
]


@pytest.mark.parametrize("case", range(len(SEARCH_ERRORS)))
def test_search_errors(device, case):
    check(device, SEARCH_ERRORS[case], np.array([[1.0, 2.0, 3.0], [0.0, 1.0, 2.0]]), np.array([[0.5, 2.5], [1.0, 3.0]]))


def test_sorter_out_of_range_raises(device):
    """PyTorch 1.13 reads past the sorted row for a sorter index out of range; loom raises (at the
    sync, in lazy mode: the kernel finds it)."""
    s = loom.tensor([1.0, 2.0, 3.0], device=device)
    for bad in ([0, 5, 1], [0, -1, 2]):
        with pytest.raises(RuntimeError, match="sorter index out of range"):
            loom.searchsorted(s, loom.tensor([2.0], device=device), sorter=loom.tensor(bad, device=device)).tolist()


# ---- unique / unique_consecutive ----

UNIQUE_FLAGS = [(False, False), (True, False), (False, True), (True, True)]


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique(device, dtype):
    sub = SubChecks()
    values = ties(dtype, (4, 6), 10)
    for inverse, counts in UNIQUE_FLAGS:
        for layout in LAYOUTS[:3]:
            with sub(f"flat inverse={inverse} counts={counts} {layout}"):
                check(device, lambda m, x: m.unique(x, return_inverse=inverse, return_counts=counts), values,
                      layouts=[layout])
            with sub(f"consecutive inverse={inverse} counts={counts} {layout}"):
                check(device, lambda m, x: m.unique_consecutive(x, return_inverse=inverse, return_counts=counts),
                      values, layouts=[layout])
        rows = np.concatenate([values[:2], values[:2], values[2:]])  # repeated rows
        for dim in (0, 1, -1):
            with sub(f"dim={dim} inverse={inverse} counts={counts}"):
                check(device, lambda m, x: m.unique(x, dim=dim, return_inverse=inverse, return_counts=counts), rows)
            with sub(f"consecutive dim={dim} inverse={inverse} counts={counts}"):
                check(device, lambda m, x: x.unique_consecutive(return_inverse=inverse, return_counts=counts, dim=dim),
                      rows)
    with sub("method, sorted=True"):
        check(device, lambda m, x: x.unique(sorted=True), values)
    with sub("0-d"):
        check(device, lambda m, x: m.unique(x, return_counts=True), np.asarray(values[0, 0]))
    with sub("empty"):
        check(device, lambda m, x: m.unique(x, return_inverse=True, return_counts=True), values[:0])
    sub.finish()


def test_unique_unsorted_has_the_same_elements(device):
    values = ties("int64", (5, 5), 11)
    out = loom.unique(loom.tensor(values, device=device), sorted=False)
    assert sorted(out.tolist()) == sorted(set(values.ravel().tolist()))


def test_unique_errors(device):
    check(device, lambda m, x: m.unique(x, dim=2), np.ones((2, 3)))
    check(device, lambda m, x: m.unique_consecutive(x, dim=-3), np.ones((2, 3)))


def test_unique_of_a_pending_tensor_is_a_data_dependent_sync():
    x = loom.tensor([3, 1, 3, 2], device="lazy")
    before = loom.metrics()["syncs_data_dependent_shape"]
    values, counts = loom.unique(x * 2, return_counts=True)
    assert loom.metrics()["syncs_data_dependent_shape"] == before + 1
    assert values.is_lazy and values.tolist() == [2, 4, 6] and counts.tolist() == [1, 1, 2]
    loom.unique(values)  # materialized: no sync
    assert loom.metrics()["syncs_data_dependent_shape"] == before + 1


# ---- every executor, and rows longer than the CUDA kernel's shared memory ----

def sort_program(m, x, s, v):
    return {
        "sort": tuple(m.sort(x, 1, descending=True)),
        "argsort0": m.argsort(x, 0),
        "topk": tuple(m.topk(x * 2, 3, dim=-1)),
        "kthvalue": tuple(m.kthvalue(x, 2, 0, True)),
        "msort": m.msort(x.exp()),
        "searchsorted": m.searchsorted(s, v),
        "searchsorted_right": m.searchsorted(s, v, right=True),
        "sort_then": m.sort(x, 1).values.cumsum(1) + 1,
    }


@pytest.mark.parametrize("executor", ["fused", "unfused", "interpreter", "cuda-emulated", "cuda-emulated-unfused"])
@pytest.mark.parametrize("columns", [7, 3000])
def test_sorts_through_every_executor(executor, columns):
    x = np.round(random_array((5, columns), "float32", seed=12) * 4) / 4  # ties
    x[1, ::3] = NAN
    s = np.sort(random_array((5, 40), "float64", seed=13), axis=1)
    v = np.concatenate([random_array((5, 9), "float64", seed=14), s[:, 3:7]], axis=1)  # equal elements too
    eager = results_by_name(sort_program(loom, loom.tensor(x), loom.tensor(s), loom.tensor(v)))
    loom._C._set_executor(executor)
    try:
        lazy = results_by_name(sort_program(loom, loom.tensor(x, device="lazy"), loom.tensor(s, device="lazy"),
                                 loom.tensor(v, device="lazy")))
    finally:
        loom._C._set_executor("compiled")
    assert lazy.keys() == eager.keys()
    for k in eager:
        # exp() may round differently in fused kernels (vector math); everything else is exact
        np.testing.assert_allclose(lazy[k], eager[k], rtol=1e-6 if k.startswith("msort") else 0, err_msg=k)
    ref = torch.sort(torch.from_numpy(x), dim=1, descending=True, stable=True)
    np.testing.assert_array_equal(eager["sort.1"], ref.indices.numpy())
    np.testing.assert_array_equal(eager["sort.0"], ref.values.numpy())


def test_emulated_sorter_out_of_range_fails_the_sync():
    loom._C._set_executor("cuda-emulated")
    try:
        s = loom.tensor([1.0, 2.0, 3.0], device="lazy")
        bad = loom.tensor([0, 5, 1], device="lazy")
        with pytest.raises(RuntimeError, match="sorter index out of range"):
            loom.searchsorted(s, loom.tensor([2.0], device="lazy"), sorter=bad).tolist()
    finally:
        loom._C._set_executor("compiled")
