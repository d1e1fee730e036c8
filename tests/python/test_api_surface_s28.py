"""The torch 1.13 names added in session 28, each against torch on the same inputs (float64 where
values matter) on cpu and lazy, gradients against torch's: the thread-count functions (which must
really resize loom's pool), the torch.* forms of nn ops (torch.dropout, torch.layer_norm,
torch.kl_div, ...), tensor functions (isin, bincount, histc, cross, gcd, cov, windows, ...), the
*_copy forms of views and the scatter forms, and the type / mode helpers."""

import os
import warnings

import numpy as np
import pytest

import loom
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)

torch = pytest.importorskip("torch")

rng = np.random.default_rng(28)


def _tensors(lib, arrays, device_name, grad):
    out = []
    for a in arrays:
        if not isinstance(a, np.ndarray):
            out.append(a)
            continue
        if lib is torch:
            t = torch.tensor(a)
        else:
            t = loom.tensor(a, device=device_name)
        if grad and a.dtype == np.float64:
            t.requires_grad_(True)
        out.append(t)
    return out


def _numpy(t):
    if isinstance(t, loom.Tensor):
        return t.detach().cpu().numpy()
    return t.detach().numpy()


def check(fn, arrays, device, grad=True, rtol=1e-10, atol=1e-12):
    """fn(lib, *tensors) on torch and on loom (on `device`): the same values and dtypes, and with
    `grad` the same gradients of a weighted sum of the outputs for every float64 input."""
    t_in = _tensors(torch, arrays, "cpu", grad)
    l_in = _tensors(loom, arrays, device, grad)
    t_out, l_out = fn(torch, *t_in), fn(loom, *l_in)
    t_list = list(t_out) if isinstance(t_out, (tuple, list)) else [t_out]
    l_list = list(l_out) if isinstance(l_out, (tuple, list)) else [l_out]
    assert len(t_list) == len(l_list)
    for t, l in zip(t_list, l_list):
        assert str(l.dtype).split(".")[1] == str(t.dtype).split(".")[1], (l.dtype, t.dtype)
        assert tuple(l.shape) == tuple(t.shape)
        if device == "lazy":
            assert l.device.type == "lazy"
        np.testing.assert_allclose(_numpy(l), _numpy(t), rtol=rtol, atol=atol, equal_nan=True)
    if not grad:
        return
    leaves = [(a, b) for a, b in zip(t_in, l_in) if isinstance(a, torch.Tensor) and a.requires_grad]
    pairs = [(t, l) for t, l in zip(t_list, l_list) if t.requires_grad]
    assert leaves and pairs and all(l.requires_grad for _, l in pairs)
    t_total = l_total = 0
    for t, l in pairs:
        w = rng.standard_normal(tuple(t.shape))
        t_total = t_total + (t * torch.tensor(w)).sum()
        l_total = l_total + (l * loom.tensor(w, device=device)).sum()
    t_grads = torch.autograd.grad(t_total, [a for a, _ in leaves], allow_unused=True)
    l_grads = loom.autograd.grad(l_total, [b for _, b in leaves], allow_unused=True)
    for tg, lg in zip(t_grads, l_grads):
        if lg is None:  # loom records no path where torch's gradient is zero (fill's input)
            assert tg is None or not _numpy(tg).any()
            continue
        if tg is None:
            assert lg is None or not _numpy(lg).any()
            continue
        np.testing.assert_allclose(_numpy(lg), _numpy(tg), rtol=1e-9, atol=1e-11)


def r(*shape):
    return rng.standard_normal(shape)


# ---- thread counts ----

def _os_threads():
    return len(os.listdir("/proc/self/task"))


def test_set_num_threads_resizes_the_pool_and_get_reports_it():
    before = loom.get_num_threads()
    try:
        x = loom.randn(256, 4096, dtype=loom.float64)
        expected = (x * 3).sum().item()
        loom.set_num_threads(1)
        assert loom.get_num_threads() == 1
        one = _os_threads()
        assert (x * 3).sum().item() == pytest.approx(expected, rel=1e-12)
        loom.set_num_threads(4)
        assert loom.get_num_threads() == 4
        four = _os_threads()
        assert four >= one + 3  # three workers started beside the caller (OpenBLAS may start its own)
        assert (x * 3).sum().item() == pytest.approx(expected, rel=1e-12)
        loom.set_num_threads(2)
        assert _os_threads() <= four - 2  # two of them stopped and joined
        for bad in (0, -1):
            with pytest.raises(RuntimeError, match="positive integer"):
                loom.set_num_threads(bad)
        for bad in (2.0, "2", True):
            with pytest.raises(RuntimeError, match="expects an int"):
                loom.set_num_threads(bad)
        assert loom.get_num_threads() == 2
    finally:
        loom.set_num_threads(before)
    assert loom.get_num_threads() == before


def test_interop_threads_are_set_once_and_init_num_threads_runs():
    from loom import _threads
    saved = _threads._interop_threads
    try:
        _threads._interop_threads = None
        loom.set_num_interop_threads(3)
        assert loom.get_num_interop_threads() == 3
        with pytest.raises(RuntimeError, match="cannot set number of interop threads"):
            loom.set_num_interop_threads(2)
        _threads._interop_threads = None
        with pytest.raises(RuntimeError):
            loom.set_num_interop_threads(0)
        assert loom.get_num_interop_threads() >= 1
    finally:
        _threads._interop_threads = saved
    assert loom.init_num_threads() is None


# ---- torch.* forms of nn ops ----

REDUCTIONS = [0, 1, 2]


@pytest.mark.parametrize("call", [
    lambda m, x, w, b: m.layer_norm(x, [4], w, b, 1e-5, True),
    lambda m, x, w, b: m.layer_norm(x, (4,)),
    lambda m, x, w, b: m.group_norm(x.reshape(3, 4, 1), 2, w, b, 1e-5, True),
    lambda m, x, w, b: m.instance_norm(x.reshape(3, 4, 1).expand(3, 4, 2), w, b, None, None, True, 0.1, 1e-5, True),
    lambda m, x, w, b: m.batch_norm(x, w, b, None, None, True, 0.1, 1e-5, True),
    lambda m, x, w, b: m.batch_norm(x, w, b, (w * 0).detach(), (w * 0 + 2).detach(), False, 0.1, 1e-5, True),
    lambda m, x, w, b: m.bilinear(x, x * 2, w.reshape(1, 4, 1).expand(2, 4, 4) * 1, b[:2]),
    lambda m, x, w, b: m.rsub(x, w),
    lambda m, x, w, b: m.rsub(x, w, alpha=3),
    lambda m, x, w, b: m.rsub(x, 2.5),
    lambda m, x, w, b: m.constant_pad_nd(x, [1, 2, 0, 1], 3.0),
    lambda m, x, w, b: m.constant_pad_nd(x, [-1, 1]),
    lambda m, x, w, b: m.pdist(x),
    lambda m, x, w, b: m.pdist(x, 1.5),
], ids=["layer_norm", "layer_norm_defaults", "group_norm", "instance_norm", "batch_norm_train", "batch_norm_eval",
        "bilinear", "rsub", "rsub_alpha", "rsub_scalar", "pad", "pad_crop", "pdist", "pdist_p"])
def test_nn_function_forms_match_torch(device, call):
    check(call, [r(3, 4), r(4) + 1.5, r(4)], device)


@pytest.mark.parametrize("reduction", REDUCTIONS)
@pytest.mark.parametrize("call", [
    lambda m, a, b, y, red: m.kl_div(a.log_softmax(-1), b.softmax(-1), red),
    lambda m, a, b, y, red: m.kl_div(a.log_softmax(-1), b.log_softmax(-1), red, log_target=True),
    lambda m, a, b, y, red: m.binary_cross_entropy_with_logits(a, b.sigmoid(), None, None, red),
    lambda m, a, b, y, red: m.binary_cross_entropy_with_logits(a, b.sigmoid(), b.abs().detach(),
                                                               (b * 0 + 2).detach(), red),
    lambda m, a, b, y, red: m.cosine_embedding_loss(a, b, y[:, 0], 0.1, red),
    lambda m, a, b, y, red: m.hinge_embedding_loss(a, y, 1.0, red),
    lambda m, a, b, y, red: m.margin_ranking_loss(a, b, y, 0.2, red),
    lambda m, a, b, y, red: m.triplet_margin_loss(a, b, a.flip(0), 1.0, 2.0, 1e-6, True, red),
    lambda m, a, b, y, red: m.poisson_nll_loss(a, b.abs(), True, True, 1e-8, red),
    lambda m, a, b, y, red: m.poisson_nll_loss(a.abs() + 0.1, b.abs(), False, False, 1e-8, red),
], ids=["kl_div", "kl_div_log_target", "bce_logits", "bce_logits_weights", "cosine_embedding", "hinge_embedding",
        "margin_ranking", "triplet_margin", "poisson_nll_log", "poisson_nll"])
def test_loss_forms_with_the_reduction_enum_match_torch(device, call, reduction):
    y = np.sign(r(3, 4))
    check(lambda m, a, b, yt: call(m, a, b, yt, reduction), [r(3, 4), r(3, 4), y], device)


def test_reduction_enum_out_of_range_is_refused():
    with pytest.raises(ValueError, match="reduction must be 0"):
        loom.kl_div(loom.randn(2), loom.randn(2), 3)


@pytest.mark.parametrize("name", ["dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"])
def test_dropout_forms(device, name):
    x = loom.ones(64, 8, 16, dtype=loom.float64, device=device)
    assert loom.equal(getattr(loom, name)(x, 0.5, False), x)
    out = getattr(loom, name)(x, 0.5, True)
    kept = out.cpu().numpy()
    assert out.device.type == device and out.shape == x.shape
    if name in ("dropout", "feature_dropout"):
        assert set(np.unique(kept)) <= {0.0, 2.0} and 0.35 < (kept == 2).mean() < 0.65
    if name.startswith("feature"):  # one draw per (sample, channel)
        assert (kept == kept[:, :, :1]).all()
    y = loom.ones(64, 8, 16, dtype=loom.float64, device=device)
    assert getattr(loom, name + "_")(y, 0.5, True) is y
    assert not loom.equal(y, x)
    with pytest.raises(RuntimeError, match="between 0 and 1, but got 1.5"):
        getattr(loom, name)(x, 1.5, True)
    if name.startswith("feature"):
        with pytest.raises(RuntimeError, match="at least 2 dimensions"):
            getattr(loom, name)(loom.ones(3), 0.5, True)


def test_embedding_form_takes_the_weight_first(device):
    idx = np.array([[0, 3, 1], [2, 2, 0]])
    check(lambda m, w, i: m.embedding(w, i), [r(4, 3), idx], device)
    check(lambda m, w, i: m.embedding(w, i, 2), [r(4, 3), idx], device)
    check(lambda m, w, i: m.embedding(w, i, -1, True), [r(4, 3), idx], device)  # scale_grad_by_freq


def test_pdist_errors():
    with pytest.raises(RuntimeError, match="only supports 2D tensors, got: 3D"):
        loom.pdist(loom.randn(2, 3, 4))
    with pytest.raises(RuntimeError, match="non-negative p"):
        loom.pdist(loom.randn(2, 3), -1)


# ---- tensor functions ----

@pytest.mark.parametrize("call", [
    lambda m, x, y: m.cross(x, y, dim=1),
    lambda m, x, y: m.cross(x[:, :, None].expand(3, 3, 2), y[:, :, None], dim=1),
    lambda m, x, y: m.linalg.cross(x.t(), y.t()),
    lambda m, x, y: m.diagflat(x),
    lambda m, x, y: m.diagflat(x[0], -1),
    lambda m, x, y: m.trapezoid(x),
    lambda m, x, y: m.trapezoid(x, dx=0.5, dim=0),
    lambda m, x, y: m.trapezoid(x, y[0].cumsum(0)),
    lambda m, x, y: m.trapezoid(x, y, dim=0),
    lambda m, x, y: m.trapz(x, y[1].cumsum(0)),
    lambda m, x, y: m.trapz(x, dx=2.0),
    lambda m, x, y: m.cumulative_trapezoid(x),
    lambda m, x, y: m.cumulative_trapezoid(x, y, dim=0),
    lambda m, x, y: m.cov(x),
    lambda m, x, y: m.cov(x, correction=0),
    lambda m, x, y: m.cov(x[0]),
    lambda m, x, y: m.cov(x, fweights=(x[0] * 0 + 2).long(), aweights=y[0].abs()),
    lambda m, x, y: m.corrcoef(x),
    lambda m, x, y: m.renorm(x, 2, 0, 1.0),
    lambda m, x, y: m.renorm(x, 1, 1, 0.5),
    lambda m, x, y: m.frexp(x * 1000),
    lambda m, x, y: m.select_scatter(x, y[1], 0, 1),
    lambda m, x, y: m.slice_scatter(x, y[:, :2], 1, 0, 3, 2),
    lambda m, x, y: m.slice_scatter(x, y[1:], 0, 1, 3, 1),
    lambda m, x, y: m.diagonal_scatter(x, y[0], 0),
    lambda m, x, y: m.diagonal_scatter(x, y[0, :2], 1),
    lambda m, x, y: m.concatenate([x, y], 1),
    lambda m, x, y: m.split_with_sizes(x, [1, 2], 1),
    lambda m, x, y: m.unsafe_split(x, 2),
    lambda m, x, y: m.unsafe_chunk(x, 2, 1),
    lambda m, x, y: m.fill(x, 2.5),
    lambda m, x, y: m.fill(x, y[0, 0]),
    lambda m, x, y: m.real(x),
    lambda m, x, y: m.view_copy(x, [9]),
    lambda m, x, y: m.permute_copy(x, [1, 0]),
    lambda m, x, y: m.transpose_copy(x, 0, 1),
    lambda m, x, y: m.t_copy(x),
    lambda m, x, y: m.expand_copy(x[:1], [2, 3]),
    lambda m, x, y: m.select_copy(x, 1, 2),
    lambda m, x, y: m.slice_copy(x, 1, 1, 3, 1),
    lambda m, x, y: m.diagonal_copy(x, 1),
    lambda m, x, y: m.squeeze_copy(x[:1]),
    lambda m, x, y: m.unsqueeze_copy(x, 1),
    lambda m, x, y: m.unbind_copy(x, 1),
    lambda m, x, y: m.unfold_copy(x, 1, 2, 1),
    lambda m, x, y: m.split_copy(x, 2),
    lambda m, x, y: m.split_with_sizes_copy(x, [2, 1]),
    lambda m, x, y: m.alias_copy(x),
    lambda m, x, y: m.as_strided_copy(x, (2, 2), (1, 3), 1),
], ids=lambda c: None)
def test_tensor_functions_match_torch(device, call):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        check(call, [r(3, 3), r(3, 3)], device)


def test_cross_without_dim_takes_the_first_dim_of_size_3(device):
    with pytest.warns(UserWarning, match="without specifying the dim"):
        check(lambda m, x, y: m.cross(x, y), [r(4, 3, 3), r(4, 3, 3)], device)
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match="no dimension of size 3"):
        loom.cross(loom.ones(2, 4), loom.ones(2, 4))
    with pytest.raises(RuntimeError, match="dimension 1 must have length 3. Got 2 and 2"):
        loom.cross(loom.ones(3, 2), loom.ones(3, 2), dim=1)


@pytest.mark.parametrize("call", [
    lambda m, a, b: m.isin(a, b),
    lambda m, a, b: m.isin(a, b, invert=True),
    lambda m, a, b: m.isin(a, 3),
    lambda m, a, b: m.isin(3, b),
    lambda m, a, b: m.isin(a.double() / 2, b),
    lambda m, a, b: m.bincount(a.flatten()),
    lambda m, a, b: m.bincount(a.flatten(), minlength=20),
    lambda m, a, b: m.bincount(a.flatten(), a.flatten().float() / 3),
    lambda m, a, b: m.bincount(a.flatten(), a.flatten().double() / 3),
    lambda m, a, b: m.bincount(a.flatten(), a.flatten() * 2),
    lambda m, a, b: m.gcd(a, b),
    lambda m, a, b: m.gcd(-a, b[0].int()),
    lambda m, a, b: m.lcm(a, b),
    lambda m, a, b: m.lcm(a * 0, b),
    lambda m, a, b: m.vander(a[0]),
    lambda m, a, b: m.vander(a[0].int() > 2),
    lambda m, a, b: m.histc(a.double(), bins=7),
    lambda m, a, b: m.histc(a.float() * 1.37, bins=5, min=1, max=9),
    lambda m, a, b: m.histc(a.float()[0, :1], bins=4),
    lambda m, a, b: m.trapezoid(a),
    lambda m, a, b: m.cov(a),
], ids=lambda c: None)
def test_integer_functions_match_torch(device, call):
    a, b = rng.integers(0, 12, (3, 5)), rng.integers(-30, 30, (3, 5))
    check(call, [a, b], device, grad=False)


def test_vander_of_floats_matches_torch(device):
    check(lambda m, x: m.vander(x), [r(4)], device, grad=False)
    check(lambda m, x: m.vander(x, N=5, increasing=True), [r(3)], device, grad=False)
    check(lambda m, x: m.vander(x, N=0), [r(3)], device, grad=False)


def test_gcd_lcm_in_place_and_on_floats(device):
    a = loom.tensor([12, 18, 0, 7], device=device)
    assert loom.gcd_(a, loom.tensor([8, 27, 5, 0], device=device)) is a
    assert a.tolist() == [4, 9, 5, 7]
    assert loom.lcm_(a, loom.tensor([6, 6, 3, 0], device=device)).tolist() == [12, 18, 15, 0]
    with pytest.raises(RuntimeError, match="gcd is only implemented for integer tensors"):
        loom.gcd(loom.ones(2), loom.ones(2))


def test_frexp_edges_match_torch():
    values = [0.0, -0.0, float("inf"), -float("inf"), float("nan"), -3.0, 1e-40, 1.0, 0.5, 2.0 ** 100, 7.25]
    for dtype in ("float32", "float64"):
        m, e = loom.frexp(loom.tensor(values, dtype=getattr(loom, dtype)))
        tm, te = torch.frexp(torch.tensor(values, dtype=getattr(torch, dtype)))
        np.testing.assert_array_equal(m.numpy(), tm.numpy())
        finite = np.isfinite(values)
        np.testing.assert_array_equal(e.numpy()[finite], te.numpy()[finite])
        assert e.dtype == loom.int32 and type(loom.frexp(loom.ones(1))).__name__ == "frexp"
    sub = [5e-324, 1e-310, -2.2e-308]
    m, e = loom.frexp(loom.tensor(sub, dtype=loom.float64))
    tm, te = torch.frexp(torch.tensor(sub, dtype=torch.float64))
    np.testing.assert_array_equal(m.numpy(), tm.numpy())
    np.testing.assert_array_equal(e.numpy(), te.numpy())
    with pytest.raises(RuntimeError, match="floating-point"):
        loom.frexp(loom.ones(2, dtype=loom.int64))


@pytest.mark.parametrize("name", ["hann_window", "hamming_window", "blackman_window", "bartlett_window",
                                  "kaiser_window"])
@pytest.mark.parametrize("length", [0, 1, 2, 7, 16])
@pytest.mark.parametrize("periodic", [True, False])
def test_windows_match_torch(device, name, length, periodic):
    for dtype in ("float32", "float64"):
        got = getattr(loom, name)(length, periodic, dtype=getattr(loom, dtype), device=device)
        want = getattr(torch, name)(length, periodic, dtype=getattr(torch, dtype))
        assert got.dtype == getattr(loom, dtype) and got.device.type == device
        tol = 1e-6 if dtype == "float32" else 1e-12
        np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=tol, atol=tol)
    assert getattr(loom, name)(length).dtype == loom.get_default_dtype()
    with pytest.raises(RuntimeError, match="floating point dtypes"):
        getattr(loom, name)(length, dtype=loom.int64)


def test_window_parameters_match_torch():
    np.testing.assert_allclose(loom.hamming_window(9, False, 0.6, 0.4, dtype=loom.float64).numpy(),
                               torch.hamming_window(9, False, 0.6, 0.4, dtype=torch.float64).numpy(), rtol=1e-12)
    np.testing.assert_allclose(loom.kaiser_window(12, True, 5.0, dtype=loom.float64).numpy(),
                               torch.kaiser_window(12, True, 5.0, dtype=torch.float64).numpy(), rtol=1e-12)


@pytest.mark.parametrize("call, message", [
    (lambda: loom.bincount(loom.tensor([-1])), "non-negative"),
    (lambda: loom.bincount(loom.tensor([1.0])), "integral"),
    (lambda: loom.bincount(loom.tensor([[1]])), r"shape \[1, 1\]"),
    (lambda: loom.bincount(loom.tensor([1]), minlength=-1), "minlength should be >= 0"),
    (lambda: loom.bincount(loom.tensor([1, 2]), loom.ones(3)), r"same length as input: input \[2\], weights \[3\]"),
    (lambda: loom.histc(loom.tensor([1, 2])), "floating-point"),
    (lambda: loom.histc(loom.ones(3), bins=0), "bins must be > 0"),
    (lambda: loom.histc(loom.ones(3), min=2, max=1), "max must be larger than min"),
    (lambda: loom.vander(loom.ones(2, 2)), "one-dimensional"),
    (lambda: loom.renorm(loom.ones(2, 2), 0, 0, 1), "non-positive-norm"),
    (lambda: loom.renorm(loom.ones(2, 2), 2, 0, -1), "maxnorm to be >= 0"),
    (lambda: loom.fill(loom.ones(2), loom.ones(2)), "0-dimension value tensor"),
    (lambda: loom.cov(loom.ones(2, 2, 2)), "two or fewer dimensions"),
    (lambda: loom.select_scatter(loom.ones(2, 3), loom.ones(2), 0, 0),
     r"src size = \[2\], slice size = \[3\]"),
    (lambda: loom.trapezoid(loom.ones(3), loom.ones(2)), "one `x` value for each sample point"),
    (lambda: loom.imag(loom.ones(2)), "non-complex dtypes"),
    (lambda: loom.split_with_sizes(loom.ones(5), [2, 2]), "sum exactly to 5"),
])
def test_bad_input_raises_clearly(call, message):
    with pytest.raises(RuntimeError, match=message):
        call()


def test_histc_has_no_gradient_and_ignores_values_outside():
    x = loom.tensor([-5.0, 0.0, 0.5, 1.0, 9.0], requires_grad=True)
    h = loom.histc(x, bins=2, min=0, max=1)
    assert h.tolist() == [1.0, 2.0] and not h.requires_grad


# ---- modes, types ----

def test_inference_mode_and_anomaly_flags():
    assert not loom.is_inference_mode_enabled()
    with loom.inference_mode():
        assert loom.is_inference_mode_enabled()
        with loom.inference_mode(False):
            assert not loom.is_inference_mode_enabled()
        assert loom.is_inference_mode_enabled()
    assert not loom.is_inference_mode_enabled()

    @loom.inference_mode()
    def inside():
        return loom.is_inference_mode_enabled()
    assert inside() and not loom.is_inference_mode_enabled()
    assert not loom.is_anomaly_enabled()
    loom.set_anomaly_enabled(True, check_nan=False)
    try:
        assert loom.is_anomaly_enabled() and not loom.is_anomaly_check_nan_enabled()
    finally:
        loom.set_anomaly_enabled(False)
    assert not loom.is_anomaly_enabled() and loom.is_anomaly_check_nan_enabled()


def test_typename_and_is_storage():
    assert loom.typename(loom.ones(2)) == torch.typename(torch.ones(2)) == "torch.FloatTensor"
    assert loom.typename(loom.ones(2, dtype=loom.int64)) == "torch.LongTensor"
    assert loom.typename(3) == torch.typename(3) == "int"
    assert loom.typename(loom.nn.Linear(2, 2)) == "loom.nn.modules.linear.Linear"
    assert loom.typename(loom.nn.Linear) == "loom.nn.modules.linear.Linear"
    assert loom.is_storage(loom.ones(2)) is False and loom.is_storage(3) is False


def test_set_default_tensor_type():
    before = loom.get_default_dtype()
    try:
        loom.set_default_tensor_type(loom.DoubleTensor)
        assert loom.get_default_dtype() == loom.float64 and loom.ones(1).dtype == loom.float64
        loom.set_default_tensor_type("torch.FloatTensor")
        assert loom.get_default_dtype() == loom.float32
        with pytest.raises(TypeError, match="only floating-point types"):
            loom.set_default_tensor_type(loom.LongTensor)
        with pytest.raises(AttributeError, match="has no attribute 'Foo'"):
            loom.set_default_tensor_type("torch.Foo")
    finally:
        loom.set_default_dtype(before)


def test_missing_torch_names_went_down():
    missing = [n for n in dir(torch) if not n.startswith("_") and not hasattr(loom, n)]
    for name in ("set_num_threads", "dropout", "layer_norm", "kl_div", "isin", "bincount", "hann_window", "cov",
                 "view_copy", "select_scatter", "typename", "set_default_tensor_type", "is_inference_mode_enabled"):
        assert name not in missing
    assert len(missing) <= 339  # test_linalg_s31: svd, qr, lu, lstsq, pinverse, symeig and the removed names; lu_unpack


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_nextafter_matches_torch(device, dtype):
    special = [0.0, -0.0, 1.0, -1.0, float("inf"), -float("inf"), float("nan"), 1e-45, -3.5, 2.0 ** 60, 1e-310]
    a = np.array(special + list(rng.standard_normal(20)), dtype=dtype)
    b = np.array([1.0, -1.0, 0.0, -2.0, 0.0, 5.0, 1.0, 0.0, -3.5, float("inf"), 0.0] + list(rng.standard_normal(20)),
                 dtype=dtype)
    got = loom.nextafter(loom.tensor(a, device=device), loom.tensor(b, device=device))
    want = torch.nextafter(torch.tensor(a), torch.tensor(b))
    np.testing.assert_array_equal(got.cpu().numpy(), want.numpy())
    x = loom.tensor(a, device=device)
    assert x.nextafter_(loom.tensor(b, device=device)) is x
    np.testing.assert_array_equal(x.cpu().numpy(), want.numpy())
    with pytest.raises(RuntimeError, match="floating-point"):
        loom.nextafter(loom.ones(2, dtype=loom.int64), loom.ones(2, dtype=loom.int64))


@pytest.mark.parametrize("call", [
    lambda x, y, i: x.cross(y, dim=1),
    lambda x, y, i: x.diagflat(1),
    lambda x, y, i: x.renorm(2, 1, 0.7),
    lambda x, y, i: x.clone().renorm_(2, 1, 0.7),
    lambda x, y, i: x.frexp()[0],
    lambda x, y, i: x.frexp().exponent,
    lambda x, y, i: x.select_scatter(y[0], 1, 2),
    lambda x, y, i: x.slice_scatter(y[:, 1:], 1, 1, 3, 1),
    lambda x, y, i: x.diagonal_scatter(y[0], 0),
    lambda x, y, i: x.split_with_sizes([2, 1])[1],
    lambda x, y, i: x.unsafe_chunk(3, 1)[2],
    lambda x, y, i: x.unsafe_split(2)[0],
    lambda x, y, i: x.cov(),
    lambda x, y, i: x.corrcoef(),
    lambda x, y, i: x.nextafter(y),
    lambda x, y, i: i.bincount(),
    lambda x, y, i: i.gcd(i + 4),
    lambda x, y, i: i.clone().gcd_(i + 4),
    lambda x, y, i: i.lcm(i + 4),
    lambda x, y, i: x.histc(5),
], ids=lambda c: None)
def test_tensor_methods_match_torch(device, call):
    x, y, i = r(3, 3), r(3, 3), rng.integers(0, 9, 6)
    want = call(torch.tensor(x), torch.tensor(y), torch.tensor(i))
    got = call(loom.tensor(x, device=device), loom.tensor(y, device=device), loom.tensor(i, device=device))
    assert str(got.dtype).split(".")[1] == str(want.dtype).split(".")[1]
    np.testing.assert_allclose(got.cpu().numpy(), want.numpy(), rtol=1e-12, atol=1e-14)


def test_lazy_results_record_without_a_sync_where_sizes_do_not_depend_on_values():
    x = loom.randn(4, 3, dtype=loom.float64, device="lazy")
    loom.sync()
    before = loom.metrics()["syncs"]
    outs = [loom.cross(x, x.flip(0), dim=1), loom.renorm(x, 2, 0, 1.0), loom.cov(x.t()), loom.corrcoef(x),
            loom.frexp(x)[0], loom.select_scatter(x, x[0], 0, 1), loom.nextafter(x, x * 2), loom.pdist(x),
            loom.hann_window(8, device="lazy"), loom.trapezoid(x), loom.isin(x, x[0]), loom.vander(x[0]),
            loom.layer_norm(x, [3]), loom.view_copy(x, [12]), loom.kl_div(x, x.exp(), 2)]
    assert loom.metrics()["syncs"] == before
    assert all(out.device.type == "lazy" for out in outs)


@pytest.mark.parametrize("call", [
    lambda m, x, s: m.masked_scatter(x, x > 0, s),
    lambda m, x, s: m.masked_scatter(x, (x[0] > 0), s),
    lambda m, x, s: x.masked_scatter(x < 10, s),
    lambda m, x, s: x.clone().masked_scatter_(x > 0.5, s),
    lambda m, x, s: m.angle(x),
    lambda m, x, s: x.angle(),
    lambda m, x, s: m.conj_physical(x),
], ids=lambda c: None)
def test_masked_scatter_angle_conj_physical_match_torch(device, call):
    check(call, [r(3, 4), r(12)], device)


def test_masked_scatter_checks():
    x = loom.zeros(3)
    with pytest.raises(RuntimeError, match=r"source < number of ones in mask \(source has 2, mask 3\)"):
        loom.masked_scatter(x, loom.ones(3, dtype=loom.bool), loom.ones(2))
    with pytest.raises(RuntimeError, match="only supports boolean masks"):
        loom.masked_scatter(x, loom.ones(3), loom.ones(3))
    assert loom.angle(loom.tensor([-1, 2])).tolist() == pytest.approx([np.pi, 0.0])
    assert loom.angle(loom.tensor([-float("inf"), float("inf")])).tolist() == pytest.approx([np.pi, 0.0])


def test_ctc_loss_form_matches_torch(device):
    log_probs = np.log(rng.dirichlet(np.ones(5), size=(6, 2)))
    targets = np.array([[1, 2, 2], [3, 1, 4]])
    for reduction in REDUCTIONS:
        # torch's ctc_loss gradient assumes log_probs come from log_softmax: compared through one.
        check(lambda m, lp, t: m.ctc_loss(lp.log_softmax(2), t, [6, 5], [3, 2], 0, reduction, False),
              [log_probs, targets], device)


def test_asarray_shares_or_converts_as_torch():
    x = loom.ones(3)
    assert loom.asarray(x) is x and loom.asarray(x, copy=True) is not x
    assert loom.asarray(x, dtype=loom.float64).dtype == loom.float64
    with pytest.raises(ValueError, match="without copying"):
        loom.asarray(x, dtype=loom.float64, copy=False)
    a = np.ones(2)
    shared = loom.asarray(a)
    a[0] = 5
    assert shared.tolist() == [5.0, 1.0] and loom.asarray([1, 2]).dtype == loom.int64
    assert loom.asarray([1.0], requires_grad=True).requires_grad


@pytest.mark.parametrize("call", [
    lambda m, x, w, wh, b: m.rnn_tanh_cell(x, x[:, :4] * 0.5, w, wh, b, b * 2),
    lambda m, x, w, wh, b: m.rnn_relu_cell(x, x[:, :4], w, wh),
    lambda m, x, w, wh, b: m.gru_cell(x, x[:, :4], w.repeat(3, 1), wh.repeat(3, 1), b.repeat(3), None),
    lambda m, x, w, wh, b: m.lstm_cell(x, [x[:, :4], x[:, 1:5]], w.repeat(4, 1), wh.repeat(4, 1), b.repeat(4),
                                       b.repeat(4)),
    lambda m, x, w, wh, b: m.convolution(x[None], w[:, None, :].expand(4, 3, 6) * 1, None, [1], [1], [1], False,
                                         [0], 1),
    lambda m, x, w, wh, b: m.convolution(x[None, None], w[:, None, None, :3], b, [1, 2], [0, 1], [1, 1], False,
                                         [0, 0], 1),
    lambda m, x, w, wh, b: m.convolution(x[None], w[None, :, :2].expand(3, 4, 2), None, [2], [0], [1], True, [1],
                                         1),
], ids=["rnn_tanh_cell", "rnn_relu_cell", "gru_cell", "lstm_cell", "conv1d", "conv2d", "conv_transpose1d"])
def test_cells_and_convolution_match_torch(device, call):
    check(call, [r(3, 6), r(4, 6), r(4, 4), r(4)], device)


def test_frombuffer_shares_memory_and_to_dlpack_round_trips():
    buf = bytearray(np.arange(4, dtype=np.float32).tobytes())
    t = loom.frombuffer(buf, dtype=loom.float32)
    assert t.tolist() == [0.0, 1.0, 2.0, 3.0]
    t[1] = 7.0
    assert np.frombuffer(buf, dtype=np.float32)[1] == 7.0
    assert loom.frombuffer(buf, dtype=loom.int32, count=2, offset=4).shape == (2,)
    with pytest.raises(ValueError, match=r"buffer length \(7 bytes\) after offset \(0 bytes\) must be a multiple"):
        loom.frombuffer(bytearray(7), dtype=loom.float32)
    with pytest.raises(ValueError, match="must not be 0"):
        loom.frombuffer(bytearray(0), dtype=loom.float32)
    back = torch.from_dlpack(loom.to_dlpack(t))
    assert back.tolist() == t.tolist()


@pytest.mark.parametrize("call", [
    lambda m, x, c: m.gradient(x),
    lambda m, x, c: m.gradient(x, spacing=2.0),
    lambda m, x, c: m.gradient(x, spacing=[1.0, 0.5], edge_order=2),
    lambda m, x, c: m.gradient(x, dim=1),
    lambda m, x, c: m.gradient(x, spacing=(c,), dim=1),
    lambda m, x, c: m.gradient(x, spacing=(c[:4], c), edge_order=1),
], ids=lambda c: None)
def test_gradient_matches_torch(device, call):
    coordinates = np.cumsum(rng.uniform(0.5, 2.0, 5))
    check(call, [r(4, 5), coordinates], device)


def test_gradient_errors():
    with pytest.raises(RuntimeError, match="at least edge_order\\+1"):
        loom.gradient(loom.ones(1))
    with pytest.raises(RuntimeError, match="edge_order=1 and edge_order=2"):
        loom.gradient(loom.ones(4), edge_order=3)
    assert loom.gradient(loom.tensor([1, 4, 9, 16, 25]))[0].tolist() == [3.0, 4.0, 6.0, 8.0, 9.0]


@pytest.mark.parametrize("call", [
    lambda m, x, w: m.histogram(x, 4),
    lambda m, x, w: m.histogram(x, 7, range=(-1.0, 1.0)),
    lambda m, x, w: m.histogram(x, 5, weight=w.abs(), density=True),
    lambda m, x, w: m.histogram(x, m.tensor([-2.0, -0.5, 0.0, 0.3, 2.0], dtype=m.float64).to(x.device)),
    lambda m, x, w: m.histogram(x[:1] * 0 + 1, 2),
], ids=lambda c: None)
def test_histogram_matches_torch(device, call):
    x, w = np.round(r(40), 1), r(40)  # values on the edges too
    want = call(torch, torch.tensor(x), torch.tensor(w))
    got = call(loom, loom.tensor(x, device=device), loom.tensor(w, device=device))
    assert type(got).__name__ == "histogram" and got._fields == ("hist", "bin_edges")
    np.testing.assert_allclose(got.bin_edges.cpu().numpy(), want.bin_edges.numpy(), rtol=1e-12)
    np.testing.assert_allclose(got.hist.cpu().numpy(), want.hist.numpy(), rtol=1e-12)


@pytest.mark.parametrize("norm_type", [2.0, 1.0])
def test_embedding_max_norm_renormalizes_the_rows_looked_up_as_torch(device, norm_type):
    w = r(6, 3) * 2
    idx = np.array([[0, 2, 2], [5, 0, 1]])
    tw, lw = torch.tensor(w, requires_grad=True), loom.tensor(w, device=device, requires_grad=True)
    tout = torch.nn.functional.embedding(torch.tensor(idx), tw, max_norm=1.5, norm_type=norm_type)
    lout = loom.nn.functional.embedding(loom.tensor(idx, device=device), lw, max_norm=1.5, norm_type=norm_type)
    np.testing.assert_allclose(lout.detach().cpu().numpy(), tout.detach().numpy(), rtol=1e-12)
    np.testing.assert_allclose(lw.detach().cpu().numpy(), tw.detach().numpy(), rtol=1e-12)  # rows 3, 4 untouched
    g = r(2, 3, 3)
    (tout * torch.tensor(g)).sum().backward()
    (lout * loom.tensor(g, device=device)).sum().backward()
    np.testing.assert_allclose(lw.grad.cpu().numpy(), tw.grad.numpy(), rtol=1e-12)
    emb = loom.nn.Embedding(6, 3, max_norm=1.0).to(device)
    emb(loom.tensor([1, 4], device=device))
    norms = emb.weight.detach().norm(dim=1).cpu().numpy()
    assert (norms[[1, 4]] <= 1.0 + 1e-6).all()
    tw2, lw2 = torch.tensor(w), loom.tensor(w, device=device)
    torch.embedding_renorm_(tw2, torch.tensor(idx), 1.0, norm_type)
    assert loom.embedding_renorm_(lw2, loom.tensor(idx, device=device), 1.0, norm_type) is lw2
    np.testing.assert_allclose(lw2.cpu().numpy(), tw2.numpy(), rtol=1e-12)


@pytest.mark.parametrize("call", [
    lambda m, x: m.as_strided(x, (2, 2), (1, 2)),
    lambda m, x: m.as_strided(x, (3, 4), (2, 1)),  # overlapping windows: gradients add up
    lambda m, x: x.as_strided((2, 3), (3, 1), 3),
    lambda m, x: m.as_strided(x[1:], (4,), (2,)),  # a view with an offset: relative to its storage
    lambda m, x: m.as_strided(x, (2, 0), (1, 1)),
    lambda m, x: m.as_strided(x, (), ()),
], ids=lambda c: None)
def test_as_strided_matches_torch(device, call):
    check(call, [r(12)], device)


def test_as_strided_is_a_view_and_refuses_what_loom_cannot_read(device):
    x = loom.zeros(6, device=device)
    v = loom.as_strided(x, (2, 2), (3, 1))
    v.fill_(1.0)
    assert x.tolist() == [1.0, 1.0, 0.0, 1.0, 1.0, 0.0]
    with pytest.raises(RuntimeError, match="reads only the input's own 6 elements"):
        loom.as_strided(x, (3, 3), (3, 1))
    with pytest.raises(RuntimeError, match="Negative strides"):
        loom.as_strided(x, (2,), (-1,))
    with pytest.raises(RuntimeError, match="mismatch in length of strides and shape"):
        loom.as_strided(x, (2, 2), (1,))
    with pytest.raises(RuntimeError, match="takes a contiguous input"):
        loom.as_strided(loom.zeros(2, 3).t(), (2,), (1,))


def test_as_strided_in_place_makes_self_the_view():
    x = loom.arange(6.0)
    assert x.as_strided_((2, 2), (1, 2), 1) is x
    np.testing.assert_array_equal(x.numpy(), torch.arange(6.0).as_strided((2, 2), (1, 2), 1).numpy())
    with pytest.raises(RuntimeError, match="use the out-of-place as_strided"):
        loom.ones(4, requires_grad=True).as_strided_((2,), (1,))
