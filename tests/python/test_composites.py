"""Composite ops with derivatives of their own (record_composite: lazy/ops_norm.cpp, ops_loss.cpp,
ops_attention.cpp; exact GELU keeps Phi(x) for its derivative, lazy/ops.cpp): values and gradients against PyTorch in
float64 and float32, finite differences, double backward, grad_fn names, the kernels each runs
in lazy mode, saved inputs' version checks, and PyTorch's errors for bad input.

torch 1.13 has neither rms_norm nor scaled_dot_product_attention: their references are float64
compositions of torch ops."""

import math

import numpy as np
import pytest

import loom
from _ops_helpers import assert_raises_like, device, torch  # noqa: F401
from test_autograd_ops import C, Case, N, U, check_case, gradcheck_case

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")


def F(m):
    return m.nn.functional


# ---- references for what torch 1.13 lacks ----

def _rms_norm_reference(m, x, normalized_shape, w=None, eps=None):
    dims = tuple(range(-len(normalized_shape), 0))
    eps = torch.finfo(x.dtype).eps if eps is None else eps
    out = x * (x * x).mean(dims, keepdim=True).add(eps).rsqrt()
    return out * w if w is not None else out


def _sdpa_reference(m, q, k, v, mask=None, is_causal=False, scale=None, keep=None, p=0.0):
    """softmax(q k^T * scale + mask) v, the probabilities dropped out by `keep` (a bool tensor)."""
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    s = q @ k.transpose(-2, -1) * scale
    if is_causal:
        s = s.masked_fill(~torch.ones(q.shape[-2], k.shape[-2], dtype=torch.bool).tril(), float("-inf"))
    if mask is not None:
        s = s.masked_fill(~mask, float("-inf")) if mask.dtype == torch.bool else s + mask
    probs = s.softmax(-1)
    if keep is not None:
        probs = probs * keep / (1 - p)
    return probs @ v


def _rms(shape, weighted=True, eps=None):
    def run(m, x, *w):
        if m is torch:
            return _rms_norm_reference(m, x, shape, *w, eps=eps)
        return F(m).rms_norm(x, shape, *w, eps=eps)
    return run


def _sdpa(**kw):
    def run(m, q, k, v, *mask):
        if m is torch:
            return _sdpa_reference(m, q, k, v, *mask, **kw)
        return F(m).scaled_dot_product_attention(q, k, v, *mask, **kw)
    return run


_T5 = C([1, 0, 3, 3, 2])
_W4 = C([0.5, 1.0, 2.0, 1.5])
_CAUSAL_BOOL = C(np.array([[1, 0, 1, 1], [1, 1, 0, 1], [0, 1, 1, 1]], dtype=bool))

CASES = [
    # layer_norm: every combination of the affine parameters, 1 and 2 normalized dims
    Case("layer_norm", lambda m, x, w, b: F(m).layer_norm(x, (4,), w, b), [N(3, 4), N(4), N(4)]),
    Case("layer_norm_weight_only", lambda m, x, w: F(m).layer_norm(x, (4,), w), [N(2, 3, 4), N(4)]),
    Case("layer_norm_bias_only", lambda m, x, b: F(m).layer_norm(x, (4,), None, b), [N(3, 4), N(4)]),
    Case("layer_norm_no_affine", lambda m, x: F(m).layer_norm(x, (4,)), [N(2, 3, 4)]),
    Case("layer_norm_two_dims", lambda m, x, w, b: F(m).layer_norm(x, (3, 4), w, b, eps=1e-3),
         [N(2, 3, 4), N(3, 4), N(3, 4)]),
    Case("layer_norm_constant_weight", lambda m, x, w: F(m).layer_norm(x, (5,), w), [N(4, 5), C(U(0.5, 2, 5))]),
    # rms_norm
    Case("rms_norm", _rms((4,)), [N(3, 4), N(4)]),
    Case("rms_norm_no_weight_eps", _rms((3, 4), eps=1e-2), [N(2, 3, 4)]),
    # cross_entropy with class indices
    Case("cross_entropy", lambda m, x, t: F(m).cross_entropy(x, t), [N(5, 4), _T5]),
    Case("cross_entropy_sum", lambda m, x, t: F(m).cross_entropy(x, t, reduction="sum"), [N(5, 4), _T5]),
    Case("cross_entropy_none", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"), [N(5, 4), _T5]),
    Case("cross_entropy_weight", lambda m, x, t, w: F(m).cross_entropy(x, t, weight=w), [N(5, 4), _T5, _W4]),
    Case("cross_entropy_ignore_index", lambda m, x, t: F(m).cross_entropy(x, t, ignore_index=3), [N(5, 4), _T5]),
    Case("cross_entropy_smoothing", lambda m, x, t: F(m).cross_entropy(x, t, label_smoothing=0.2), [N(5, 4), _T5]),
    Case("cross_entropy_weight_ignore_smoothing", lambda m, x, t, w: F(m).cross_entropy(
        x, t, weight=w, ignore_index=0, label_smoothing=0.3), [N(5, 4), C([1, 0, 3, 0, 2]), _W4]),
    Case("cross_entropy_weight_smoothing_none", lambda m, x, t, w: F(m).cross_entropy(
        x, t, weight=w, label_smoothing=0.1, reduction="none"), [N(5, 4), _T5, _W4]),
    Case("cross_entropy_weight_smoothing_sum", lambda m, x, t, w: F(m).cross_entropy(
        x, t, weight=w, label_smoothing=0.1, reduction="sum"), [N(5, 4), _T5, _W4]),
    Case("cross_entropy_unbatched", lambda m, x, t: F(m).cross_entropy(x, t), [N(4), C(2)]),
    Case("cross_entropy_unbatched_none", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none"), [N(4), C(2)]),
    Case("cross_entropy_3d", lambda m, x, t: F(m).cross_entropy(x, t), [N(2, 4, 3), C([[0, 3, 1], [2, 2, 0]])],
         layouts=("contiguous", "strided")),
    Case("cross_entropy_3d_none_weight", lambda m, x, t, w: F(m).cross_entropy(x, t, weight=w, reduction="none"),
         [N(2, 4, 3), C([[0, 3, 1], [2, 2, 0]]), _W4], layouts=("contiguous", "strided")),
    Case("cross_entropy_3d_none_smoothing", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none",
                                                                              label_smoothing=0.2),
         [N(2, 4, 3), C([[0, 3, 1], [2, 2, 0]])], layouts=("contiguous", "strided")),
    Case("cross_entropy_4d_none_ignore", lambda m, x, t: F(m).cross_entropy(x, t, reduction="none", ignore_index=1),
         [N(2, 3, 2, 2), C([[[0, 1], [2, 2]], [[1, 0], [0, 2]]])], layouts=("contiguous", "strided")),
    # GELU: exact as a composite keeping Phi(x), the tanh form one primitive each way
    Case("gelu", lambda m, x: F(m).gelu(x), [N(3, 4, scale=2)]),
    Case("gelu_wide", lambda m, x: F(m).gelu(x), [N(2, 3, 40, scale=5)]),
    Case("gelu_tanh", lambda m, x: F(m).gelu(x, approximate="tanh"), [N(3, 4, scale=2)]),
    # scaled_dot_product_attention
    Case("sdpa", _sdpa(), [N(2, 3, 4), N(2, 5, 4), N(2, 5, 3)]),
    Case("sdpa_causal_scale", _sdpa(is_causal=True, scale=0.3), [N(2, 2, 4, 3), N(2, 2, 4, 3), N(2, 2, 4, 2)]),
    Case("sdpa_bool_mask", _sdpa(), [N(2, 3, 4), N(2, 4, 4), N(2, 4, 2), _CAUSAL_BOOL]),
    Case("sdpa_float_mask", _sdpa(), [N(2, 3, 4), N(2, 4, 4), N(2, 4, 2), C(N(3, 4))]),
    # key and value broadcast over the query's batch: their gradients are summed back
    Case("sdpa_broadcast_kv", _sdpa(), [N(2, 3, 3, 4), N(1, 3, 5, 4), N(1, 3, 5, 2)],
         layouts=("contiguous", "transposed")),
]
CASE_BY_NAME = {c.name: c for c in CASES}
assert len(CASE_BY_NAME) == len(CASES)

_PARAMS = [pytest.param(c, id=c.name) for c in CASES]


@pytest.mark.parametrize("c", _PARAMS)
def test_float64_matches_torch(device, c):
    """Values, gradients of every input, each input layout; lazy equals eager."""
    check_case(c, device)


@pytest.mark.parametrize("c", _PARAMS)
def test_gradcheck(device, c):
    gradcheck_case(c, device)


def _inputs(c, lib, device, dtype):
    args, leaves = [], []
    for x in c.inputs:
        a = np.asarray(x.array if isinstance(x, C) else x)
        if a.dtype == np.float64:
            a = a.astype(dtype)
        t = loom.tensor(a, device=device) if lib is loom else torch.from_numpy(a.copy())
        if not isinstance(x, C):
            t.requires_grad_()
            leaves.append(t)
        args.append(t)
    return args, leaves


def _grads(c, lib, device, dtype, order=1):
    """The output, and the gradients of sum(out * w) (order 1) or of sum(grads * v) (order 2)."""
    args, leaves = _inputs(c, lib, device, dtype)
    out = c.run(lib, *args)
    w = np.random.default_rng(5).standard_normal(tuple(out.shape)).astype(dtype)
    w = loom.tensor(w, device=device) if lib is loom else torch.from_numpy(w)
    grads = lib.autograd.grad([out], leaves, [w], create_graph=order == 2)
    if order == 2:
        vs = [np.random.default_rng(6 + i).standard_normal(tuple(g.shape)).astype(dtype) for i, g in enumerate(grads)]
        total = sum((g * (loom.tensor(v, device=device) if lib is loom else torch.from_numpy(v))).sum()
                    for g, v in zip(grads, vs))
        grads = lib.autograd.grad([total], leaves, allow_unused=True)
    return out, grads


def _np(t):
    return None if t is None else (t.detach().numpy() if isinstance(t, torch.Tensor) else t.numpy())


@pytest.mark.parametrize("c", _PARAMS)
def test_float32_matches_torch(device, c):
    out, grads = _grads(c, loom, device, np.float32)
    t_out, t_grads = _grads(c, torch, "cpu", np.float32)
    assert out.dtype is loom.float32
    np.testing.assert_allclose(_np(out), _np(t_out), rtol=2e-5, atol=2e-6)
    for g, tg in zip(grads, t_grads):
        assert g.dtype is loom.float32
        np.testing.assert_allclose(_np(g), _np(tg), rtol=2e-4, atol=2e-6)


# The derivative under create_graph is itself differentiable (the references of rms_norm and sdpa
# are compositions). torch 1.13 cannot differentiate layer_norm with a bias and no weight twice
# ("Expected a proper Tensor but got None").
_NO_DOUBLE_BACKWARD_IN_TORCH = {"layer_norm_bias_only"}


@pytest.mark.parametrize("c", [p for p in _PARAMS if p.values[0].name not in _NO_DOUBLE_BACKWARD_IN_TORCH])
def test_double_backward_matches_torch(device, c):
    _, grads = _grads(c, loom, device, np.float64, order=2)
    _, t_grads = _grads(c, torch, "cpu", np.float64, order=2)
    for g, tg in zip(grads, t_grads):
        if tg is None:
            assert g is None or not np.any(_np(g))
            continue
        np.testing.assert_allclose(_np(g), _np(tg), rtol=1e-8, atol=1e-10)


# ---- grad_fn names: PyTorch's for the same call (PyTorch 2's CPU names where 1.13 lacks the op) ----

_NAMES_WITHOUT_TORCH = {"rms_norm": "MulBackward0", "rms_norm_no_weight_eps": "MulBackward0"}
_SDPA_NAME = "ScaledDotProductFlashAttentionForCpuBackward0"


@pytest.mark.parametrize("c", _PARAMS)
def test_grad_fn_name(device, c):
    args, _ = _inputs(c, loom, device, np.float64)
    got = c.run(loom, *args).grad_fn.name()
    if c.name.startswith("sdpa"):
        assert got == _SDPA_NAME
    elif c.name in _NAMES_WITHOUT_TORCH:
        assert got == _NAMES_WITHOUT_TORCH[c.name]
    else:
        t_args, _ = _inputs(c, torch, "cpu", np.float64)
        assert got == c.run(torch, *t_args).grad_fn.name()


# ---- kernels per composite in lazy mode (the compiled executor) ----

def _kernels(fn):
    loom.metrics_reset()
    fn()
    return loom.metrics()["kernel_launches"]


# (forward, backward) kernel launches at most, counted when written. The backward's include the
# .sum() of the output that seeds it. The chains of primitives these replace took (4, 6) for
# layer_norm, (7, 3) for cross_entropy, (6, 3) with weight and smoothing, (4, 8) for sdpa, (5, 8)
# for sdpa with a bool mask; GELU was one op each way already. Matrix products are one kernel each.
_KERNEL_BOUNDS = {
    "layer_norm": (2, 4),
    "layer_norm_no_affine": (2, 2),
    "rms_norm": (2, 4),
    "rms_norm_no_weight_eps": (2, 2),
    "cross_entropy": (3, 2),
    "cross_entropy_weight_ignore_smoothing": (4, 3),
    "gelu": (1, 1),
    "gelu_tanh": (1, 1),
    "sdpa": (4, 7),
    "sdpa_bool_mask": (4, 7),
}


@pytest.mark.parametrize("name", list(_KERNEL_BOUNDS))
def test_kernels_per_composite(name):
    c = CASE_BY_NAME[name]
    args, leaves = _inputs(c, loom, "lazy", np.float32)
    for a in args:
        a.numpy()  # the inputs' own uploads are not the composite's
    holder = {}

    def forward():
        holder["out"] = c.run(loom, *args)
        holder["out"].detach().numpy()

    def backward():
        for g in loom.autograd.grad([holder["out"].sum()], leaves):
            g.numpy()

    forward()  # compiles; the counts below are a steady state
    backward()
    counts = _kernels(forward), _kernels(backward)
    most = _KERNEL_BOUNDS[name]
    assert counts[0] <= most[0] and counts[1] <= most[1], f"(forward, backward) kernels {counts}, at most {most}"


# ---- saved inputs are version-checked ----

@pytest.mark.parametrize("op", ["layer_norm", "rms_norm", "cross_entropy", "sdpa"])
def test_input_modified_in_place_after_forward_raises(device, op):
    x = loom.tensor(N(3, 4), device=device, dtype=loom.float64).requires_grad_()
    h = x * 1.0
    if op == "layer_norm":
        out = F(loom).layer_norm(h, (4,))
    elif op == "rms_norm":
        out = F(loom).rms_norm(h, (4,))
    elif op == "cross_entropy":
        out = F(loom).cross_entropy(h, loom.tensor([0, 3, 1], device=device))
    else:
        out = F(loom).scaled_dot_product_attention(h, h, h)
    h.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        out.sum().backward()


def test_retain_graph_frees_saved_values():
    x = loom.tensor(N(3, 4)).requires_grad_()
    y = F(loom).layer_norm(x, (4,)).sum()
    y.backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.backward()


def test_no_grad_records_nothing(device):
    x = loom.tensor(N(3, 4), device=device).requires_grad_()
    with loom.no_grad():
        assert F(loom).layer_norm(x, (4,)).grad_fn is None
        assert F(loom).cross_entropy(x, loom.tensor([0, 1, 2], device=device)).grad_fn is None
        assert F(loom).scaled_dot_product_attention(x, x, x).grad_fn is None


# ---- dropout in attention ----

def test_sdpa_dropout_matches_reference_with_the_same_mask(device):
    """The probabilities are dropped by rand(P.shape) >= p drawn once: reseeding and drawing it
    again gives the mask, with which the float64 reference agrees in value and gradients."""
    p = 0.4
    q, k, v = N(2, 3, 4), N(2, 5, 4), N(2, 5, 3)
    lq, lk, lv = (loom.tensor(a, device=device).requires_grad_() for a in (q, k, v))
    loom.manual_seed(7)
    out = F(loom).scaled_dot_product_attention(lq, lk, lv, dropout_p=p)
    loom.manual_seed(7)
    keep = (loom.rand(2, 3, 5, dtype=loom.float64, device=device) >= p).numpy()
    assert 0 < keep.sum() < keep.size
    g = N(2, 3, 3)
    out.backward(loom.tensor(g, device=device))
    tq, tk, tv = (torch.tensor(a, requires_grad=True) for a in (q, k, v))
    ref = _sdpa_reference(torch, tq, tk, tv, keep=torch.from_numpy(keep), p=p)
    ref.backward(torch.from_numpy(g))
    np.testing.assert_allclose(out.detach().numpy(), ref.detach().numpy(), rtol=1e-10, atol=1e-12)
    for a, b in ((lq, tq), (lk, tk), (lv, tv)):
        np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_sdpa_dropout_one_drops_everything(device):
    q = loom.tensor(N(2, 3, 4), device=device).requires_grad_()
    out = F(loom).scaled_dot_product_attention(q, q, q, dropout_p=1.0)
    out.sum().backward()
    assert not np.any(out.detach().numpy()) and not np.any(q.grad.numpy())


# ---- bad input: PyTorch's errors ----

def _bad_calls(m, device="cpu"):
    f = F(m)
    d = {} if m is torch else {"device": device}

    def ones(*shape, dtype=None):
        return m.ones(*shape, dtype=dtype or m.float32, **d)

    x = ones(2, 3)
    return {
        "layer_norm weight shape": lambda: f.layer_norm(x, (3,), ones(4)),
        "layer_norm bias shape": lambda: f.layer_norm(x, (3,), None, ones(2)),
        "layer_norm weight dtype": lambda: f.layer_norm(x, (3,), ones(3, dtype=m.float64)),
        "layer_norm normalized_shape": lambda: f.layer_norm(x, (4,)),
        "layer_norm integer input": lambda: f.layer_norm(ones(2, 3, dtype=m.int64), (3,)),
        "cross_entropy int32 target": lambda: f.cross_entropy(x, ones(2, dtype=m.int32)),
        "cross_entropy integer input": lambda: f.cross_entropy(ones(2, 3, dtype=m.int64), ones(2, dtype=m.int64)),
        "cross_entropy batch mismatch": lambda: f.cross_entropy(x, ones(3, dtype=m.int64)),
        "cross_entropy weight size": lambda: f.cross_entropy(x, ones(2, dtype=m.int64), weight=ones(4)),
        "cross_entropy reduction": lambda: f.cross_entropy(x, ones(2, dtype=m.int64), reduction="avg"),
        "gelu integer input": lambda: f.gelu(ones(2, 3, dtype=m.int64)),
        "gelu approximate": lambda: f.gelu(x, approximate="foo"),
    }


@pytest.mark.parametrize("what", list(_bad_calls(torch)))
def test_bad_input_raises_as_torch(device, what):
    try:
        _bad_calls(torch)[what]()
    except Exception as e:
        torch_error = e
    else:
        pytest.fail("torch raised nothing")
    assert_raises_like(torch_error, _bad_calls(loom, device)[what])


def test_sdpa_bad_shapes_raise():
    q, k = loom.ones(2, 3, 4), loom.ones(2, 5, 3)
    with pytest.raises(RuntimeError, match=r"\[2, 3, 4\]|\(2, 3, 4\)|3x4|4"):
        F(loom).scaled_dot_product_attention(q, k, k)
    with pytest.raises(RuntimeError, match="attn_mask should not be set when is_causal"):
        F(loom).scaled_dot_product_attention(q, q, q, attn_mask=loom.ones(3, 3), is_causal=True)
    with pytest.raises(RuntimeError):
        F(loom).scaled_dot_product_attention(q, q, q, attn_mask=loom.ones(4, 4, dtype=loom.bool))


# ---- exact GELU: Phi(x) computed once for the forward and the derivative ----

def _gelu_step(x, b):
    """A pre-activation from a bias add, GELU, and its gradient, in one lazy step."""
    h = x + b
    y = F(loom).gelu(h)
    (g,) = loom.autograd.grad([(y * y).sum()], [x])
    return y, g


def test_gelu_step_evaluates_erf_once(tmp_path):
    """In a step holding GELU's forward and backward, the partitioner stores Phi(x) from the
    forward kernel (an erf costs more to recompute than a load: fusion/partition.cpp), so the
    backward kernel evaluates no erf of its own; fused equals unfused and float64 PyTorch."""
    from _fusion_helpers import dumping_to, run_lazy

    rng = np.random.default_rng(11)
    xv = (rng.standard_normal((64, 96)) * 3).astype(np.float32)
    bv = rng.standard_normal(96).astype(np.float32)

    def program(x, b):
        x.requires_grad_()
        return _gelu_step(x, b)

    with dumping_to(tmp_path):
        fused = run_lazy(program, [xv, bv], "fused")
    sources = "".join(f.read_text() for f in tmp_path.glob("*.cpp"))
    bodies = sources[sources.index("extern \"C\" __attribute__"):]  # kernels, after the prelude's definition
    assert bodies.count("loom_erff(") == 1, bodies.count("loom_erff(")
    unfused = run_lazy(program, [xv, bv], "unfused")
    tx = torch.tensor(xv.astype(np.float64), requires_grad=True)
    th = tx + torch.tensor(bv.astype(np.float64))
    ty = torch.nn.functional.gelu(th)
    (tg,) = torch.autograd.grad([(ty * ty).sum()], [tx])
    for got, other, want in zip(fused, unfused, (ty.detach().numpy(), tg.numpy())):
        np.testing.assert_allclose(got, other, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-5)


def test_gelu_without_grad_is_one_primitive(device):
    """No autograd (inference, float16): the Gelu primitive, nothing kept."""
    a = np.random.default_rng(12).standard_normal((3, 4)) * 2
    x = loom.tensor(a, device=device, dtype=loom.float32)
    assert F(loom).gelu(x).grad_fn is None
    h = loom.tensor(a, device=device, dtype=loom.float16).requires_grad_()
    y = F(loom).gelu(h)
    assert y.dtype is loom.float16 and y.grad_fn.name() == "GeluBackward0"
    y.float().sum().backward()
    assert h.grad.dtype is loom.float16
    want = torch.nn.functional.gelu(torch.tensor(a, dtype=torch.float32))
    np.testing.assert_allclose(y.float().detach().numpy(), want.numpy(), rtol=2e-3, atol=2e-3)
