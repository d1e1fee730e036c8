"""Gradients of tensors several of whose views (split, chunk, unbind, narrow, select, slices)
receive gradients: autograd assembles them at once (lazy/region_gradients.h), concatenating the
parts that are disjoint slabs along one dim and adding the others. Every case is compared with
PyTorch in float64 (same inputs, same random output gradients), eager and lazy, and lazy with the
eager result."""

import numpy as np
import pytest

import loom
from _ops_helpers import device, release_pending, torch  # noqa: F401

RTOL, ATOL = 1e-12, 1e-12


def _run(m, dev, fn, arrays, seeds):
    if m is torch:
        xs = [torch.tensor(a, requires_grad=True) for a in arrays]
    else:
        xs = [loom.tensor(a, device=dev, requires_grad=True) for a in arrays]
    outs = fn(m, *xs)
    grads = [m.tensor(g) if m is torch else loom.tensor(g, device=dev) for g in seeds(outs)]
    m.autograd.backward(outs, grads)
    return [x.grad.detach().cpu().numpy() if m is torch else x.grad.numpy() for x in xs]


def check_grads(device, fn, *shapes):
    rng = np.random.default_rng(sum(shapes[0]) + len(shapes))
    arrays = [rng.standard_normal(s) for s in shapes]
    cache = {}

    def seeds(outs):
        if "g" not in cache:
            cache["g"] = [rng.standard_normal(tuple(o.shape)) for o in outs]
        return cache["g"]
    expected = _run(torch, None, fn, arrays, seeds)
    got = _run(loom, device, fn, arrays, seeds)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)
    if device == "lazy":
        for g, e in zip(got, _run(loom, "cpu", fn, arrays, seeds)):
            np.testing.assert_allclose(g, e, rtol=RTOL, atol=ATOL)


CASES = {
    # Views that tile their base: one concatenation.
    "unbind": (lambda m, x: [p * (i + 1) for i, p in enumerate(x.unbind(0))], (3, 4, 5)),
    "unbind last dim": (lambda m, x: list(x.unbind(-1)), (4, 3)),
    "qkv of a permuted view, indexed": (lambda m, x: (lambda p: [p[0] * 2, p[1].exp(), p[2]])(
        x.view(2, 4, 3, 2, 3).permute(2, 0, 3, 1, 4)), (2, 4, 18)),
    "chunk": (lambda m, x: [c.sin() for c in x.chunk(3, dim=1)], (4, 6, 3)),
    "split uneven": (lambda m, x: list(x.split([2, 4, 1])), (7, 5)),
    "split with an empty part": (lambda m, x: list(x.split([0, 3, 0, 2], dim=1)), (2, 5)),
    "narrow out of order": (lambda m, x: [x.narrow(1, 3, 2), x.narrow(1, 0, 3)], (3, 5)),
    "select of 0-d parts": (lambda m, x: list(x.unbind(0)), (4,)),
    # Partly covered: zeros between and after the parts.
    "parts with gaps": (lambda m, x: (lambda s: [s[0], s[2]])(x.split(2, dim=1)), (3, 7)),
    "one part of many": (lambda m, x: [x[1:2] * 3], (4, 3)),
    # Views that must still add: overlapping, along other dims, strided, the same region twice.
    "overlapping": (lambda m, x: [x[:, :4], x[:, 2:]], (3, 6)),
    "slabs along two dims": (lambda m, x: [x[0], x[:, 1], x[1:, 2:]], (3, 4)),
    "strided slices": (lambda m, x: [x[::2], x[1::2] * 2], (5, 3)),
    "the same region twice": (lambda m, x: [x[1], x[1] * 2, x[0]], (3, 4)),
    "base used directly too": (lambda m, x: [x[0], x[1], x * 3], (2, 3)),
    # Views of views: the inner views assemble into the outer ones, which assemble into the base.
    "nested splits": (lambda m, x: [q for p in x.split(2, dim=0) for q in p.unbind(1)], (4, 3, 2)),
    "two bases": (lambda m, x, y: [x[0] * y[1], x[1] * y[0]], (2, 3), (2, 3)),
}


@pytest.mark.parametrize("case", list(CASES), ids=str)
def test_region_gradients(device, case):
    fn, *shapes = CASES[case]
    check_grads(device, fn, *shapes)


def test_region_gradients_keep_their_dtype(device):
    """float32 parts assemble into a float32 gradient."""
    x = loom.tensor(np.arange(12, dtype=np.float32).reshape(3, 4), device=device, requires_grad=True)
    a, b, c = x.unbind(0)
    (a * 1 + b * 2 + c * 3).sum().backward()
    assert x.grad.dtype == loom.float32
    np.testing.assert_array_equal(x.grad.numpy(), np.repeat(np.array([[1.0], [2.0], [3.0]], np.float32), 4, axis=1))


def test_region_gradients_create_graph(device):
    """A gradient assembled from parts has a history: the second derivative through it."""
    rng = np.random.default_rng(5)
    xv, wv = rng.standard_normal((3, 4)), rng.standard_normal(4)

    def second(m, x, w):
        parts = x.unbind(0)
        y = sum((p ** 3 * w).sum() * (i + 1) for i, p in enumerate(parts))
        (g,) = m.autograd.grad(y, [x], create_graph=True)
        (g * g).sum().backward()
        return g.detach(), x.grad, w.grad

    tx = torch.tensor(xv, requires_grad=True)
    tw = torch.tensor(wv, requires_grad=True)
    expected = [t.detach().numpy() for t in second(torch, tx, tw)]
    lx = loom.tensor(xv, device=device, requires_grad=True)
    lw = loom.tensor(wv, device=device, requires_grad=True)
    for g, e in zip(second(loom, lx, lw), expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=RTOL, atol=ATOL)


def test_region_gradients_retain_grad(device):
    """A non-leaf base whose views get gradients keeps the assembled gradient with retain_grad."""
    xv = np.random.default_rng(6).standard_normal((2, 6))

    def run(m, x):
        base = x * 2
        base.retain_grad()
        a, b = base.chunk(2, dim=1)
        (a.exp().sum() + (b * b).sum()).backward()
        return base.grad, x.grad

    tx = torch.tensor(xv, requires_grad=True)
    expected = [t.detach().numpy() for t in run(torch, tx)]
    lx = loom.tensor(xv, device=device, requires_grad=True)
    for g, e in zip(run(loom, lx), expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=RTOL, atol=ATOL)


def test_tiling_views_assemble_with_one_concatenation():
    """What the engine records for q, k, v = the parts of one tensor (gpt's attention): one
    concatenation of the three gradients, neither zero-filled scatters nor adds of whole tensors;
    parts with a gap between them get one zero piece, and overlapping parts still add."""
    from loom import profiler

    def recorded(fn, shape):
        x = loom.tensor(np.ones(shape, np.float32), device="lazy", requires_grad=True)
        outs = fn(x)
        with profiler.profile() as prof:
            loom.autograd.backward(outs, [loom.ones(o.shape, device="lazy") for o in outs])
        names = [e.name for e in prof.events() if e.category == "record" and e.name != "record"]
        x.grad.numpy()
        return names

    for parts in (lambda p: list(p.unbind(0)), lambda p: [p[0], p[1], p[2]]):
        qkv = recorded(lambda x: parts(x.view(2, 4, 3, 2, 3).permute(2, 0, 3, 1, 4)), (2, 4, 18))
        assert qkv.count("record Cat") == 1 and "record ViewScatter" not in qkv and "record Add" not in qkv, qkv
    gaps = recorded(lambda x: (lambda s: [s[0], s[2]])(x.split(2, dim=1)), (3, 7))
    assert gaps.count("record Cat") == 1 and "record ViewScatter" not in gaps, gaps
    overlapping = recorded(lambda x: [x[:, :4], x[:, 2:]], (3, 6))
    assert overlapping.count("record ViewScatter") == 2 and overlapping.count("record Add") == 1, overlapping
