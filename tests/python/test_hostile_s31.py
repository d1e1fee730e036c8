"""Regressions of the hostile-call fuzzer's open findings (test_hostile_calls.py's KNOWN_OPEN) fixed
in session 31, each a class: Python-written functions that met a wrong-typed argument deep inside
(an AttributeError or a bare StopIteration naming neither the function nor the argument), numbers
given as 0-d tensors taking part in type promotion, and values that differed from torch 1.13's.
Each test failed on main 4f84d55."""

import math

import numpy as np
import pytest

import loom
import loom.nn.functional as F

torch = pytest.importorskip("torch")
TF = torch.nn.functional

DEVICES = ["cpu", "lazy"]


# ---- wrong-typed arguments of Python-written functions: a TypeError naming the argument ----

@pytest.mark.parametrize("call, fn, arg", [
    (lambda: loom.trapezoid(None), "trapezoid", "y"),
    (lambda: loom.cumulative_trapezoid("abc"), "cumulative_trapezoid", "y"),
    (lambda: loom.trapezoid(loom.ones(3), [1.0, 2.0, 3.0]), "trapezoid", "x"),
    (lambda: loom.vander([1, 2]), "vander", "x"),
    (lambda: loom.gradient(1.5), "gradient", "input"),
    (lambda: loom.unbind_copy(1.5), "unbind_copy", "input"),
    (lambda: loom.unfold_copy([1.0], 0, 1, 1), "unfold_copy", "input"),
    (lambda: loom.select_copy(3, 0, 0), "select_copy", "input"),
    (lambda: loom.fill([1.0], 2.0), "fill", "input"),
    (lambda: F.batch_norm(loom.ones(2, 3), [0.0] * 3, None), "batch_norm", "running_mean"),
    (lambda: F.instance_norm(loom.ones(2, 3, 2), weight="w"), "instance_norm", "weight"),
    (lambda: F.layer_norm(loom.ones(2, 3), [3], [1.0, 1.0, 1.0]), "layer_norm", "weight"),
    (lambda: F.cross_entropy(loom.ones(2, 3), True), "cross_entropy", "target"),
    (lambda: F.mse_loss(1.5, loom.ones(2)), "mse_loss", "input"),
    (lambda: F.triplet_margin_loss(loom.ones(2, 3), object(), loom.ones(2, 3)), "triplet_margin_loss", "positive"),
    (lambda: F.ctc_loss("x", loom.ones(2, 3), [1], [1]), "ctc_loss", "log_probs"),
    (lambda: F.pixel_unshuffle(None, 2), "pixel_unshuffle", "input"),
    (lambda: F.embedding([0, 1], loom.ones(3, 2)), "embedding", "input"),
    (lambda: loom.channel_shuffle([1.0], 2), "channel_shuffle", "input"),
    (lambda: loom.convolution([1.0], loom.ones(1, 1, 1), None, [1], [0], [1], False, [0], 1), "convolution",
     "input"),
    (lambda: loom.binary_cross_entropy_with_logits(loom.ones(2), [1.0, 0.0]), "binary_cross_entropy_with_logits",
     "target"),
    (lambda: loom.rsub(2 ** 70, loom.ones(2)), "rsub", "input"),
    (lambda: F.scaled_dot_product_attention(1.0, loom.ones(2, 2), loom.ones(2, 2)), "scaled_dot_product_attention",
     "query"),
    (lambda: loom.kaiser_window(2, True, 1.0, dtype=[[1, 2], [3]]), "kaiser_window", "dtype"),
], ids=lambda v: v if isinstance(v, str) else "")
def test_a_wrong_typed_argument_is_a_type_error_naming_it(call, fn, arg):
    with pytest.raises(TypeError, match=rf"{fn}\(\): argument '{arg}'"):
        call()


@pytest.mark.parametrize("training", [loom.ones(2), "yes", 1, None])
def test_batch_norm_training_must_be_a_bool(training):
    with pytest.raises(TypeError, match="argument 'training' must be bool"):
        F.batch_norm(loom.ones(2, 3), None, None, training=training)


@pytest.mark.parametrize("values", [(None, -1), (0.0, [-1, 2 ** 63]), (1.0, 2.0), ("a", loom.ones(2))])
def test_xlog1py_without_a_tensor_is_a_type_error(values):
    with pytest.raises(TypeError, match="xlog1py"):
        loom.special.xlog1py(*values)


# ---- dtypes: numbers given as tensors, and the promoted dtype of a computation ----

@pytest.mark.parametrize("device", DEVICES)
def test_xlog1py_computes_in_the_promoted_dtype(device):
    # log1p of the float16 argument was float16's where PyTorch computes float32's.
    a = [[1.0, 2.0, 0.0], [3.3, -0.7, 5.0]]
    b = [[1.3, -1.0, 2.0], [0.37, 7.1, -0.5]]
    got = loom.special.xlog1py(loom.tensor(a, device=device), loom.tensor(b, dtype=loom.float16, device=device))
    want = torch.special.xlog1py(torch.tensor(a), torch.tensor(b, dtype=torch.float16))
    assert got.dtype is loom.float32
    np.testing.assert_allclose(got.tolist(), want.tolist(), rtol=1e-6)
    r = loom.special.xlog1py(2, loom.tensor([1, 2], device=device))
    assert r.dtype is loom.float32
    np.testing.assert_allclose(r.tolist(), torch.special.xlog1py(2, torch.tensor([1, 2])).tolist(), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_rsub_alpha_is_a_number_even_as_a_tensor(device):
    i16 = loom.tensor([3], dtype=loom.int16, device=device)
    r = loom.rsub(i16, -1e-320, loom.tensor(2.0, dtype=loom.float16, device=device))
    t = torch.rsub(torch.tensor([3], dtype=torch.int16), -1e-320, torch.tensor(2.0, dtype=torch.float16))
    assert (str(r.dtype), r.tolist()) == (str(t.dtype).replace("torch", "loom"), t.tolist())
    # The float alpha is checked against the result's dtype (float32 here), not input's.
    assert loom.rsub(i16, 2.5, 1.5).tolist() == torch.rsub(torch.tensor([3], dtype=torch.int16), 2.5, 1.5).tolist()
    with pytest.raises(RuntimeError, match="alpha must not be a floating point"):
        loom.rsub(i16, 2, loom.tensor(2.0, device=device))
    with pytest.raises(RuntimeError, match="Boolean alpha"):
        loom.rsub(i16, 3, True)


@pytest.mark.parametrize("device", DEVICES)
def test_rsub_with_alpha_by_position_reads_a_0d_other_as_a_number(device):
    # torch.rsub(Tensor, Tensor, *, alpha): a positional alpha selects rsub(Tensor, Scalar, Scalar),
    # where a 0-d float64 other is a number (float32 result), not a float64 tensor.
    i16 = loom.tensor([3], dtype=loom.int16, device=device)
    other = loom.tensor(2.0, dtype=loom.float64, device=device)
    r = loom.rsub(i16, other, 2)
    t = torch.rsub(torch.tensor([3], dtype=torch.int16), torch.tensor(2.0, dtype=torch.float64), 2)
    assert r.dtype is loom.float32 and t.dtype is torch.float32 and r.tolist() == t.tolist()
    assert loom.rsub(i16, other, alpha=2).dtype is loom.float64  # by keyword: a tensor, as PyTorch's


def test_embedding_form_takes_any_padding_idx():
    # torch.embedding (aten) marks no lookup with a padding_idx out of range; F.embedding asserts.
    w, i = loom.arange(6.0).reshape(3, 2), loom.tensor([0, 2])
    for p in (7, -2, 3):
        assert loom.embedding(w, i, p).tolist() == torch.embedding(torch.arange(6.0).reshape(3, 2),
                                                                    torch.tensor([0, 2]), p).tolist()
    with pytest.raises(AssertionError, match="Padding_idx"):
        F.embedding(i, w, padding_idx=7)


# ---- values that differed from torch's ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("eps", [0.8594, 0.5, float("nan"), 0.2, -0.1])
def test_logit_clamps_as_pytorch_logit(device, eps):
    # clamp(x, eps, 1 - eps) gave 1 - eps everywhere when the bounds cross, and NaN for a NaN eps.
    v = [5.0, 2.0, -1.0, 0.0, 0.3, 1.0, 0.9]
    got = loom.logit(loom.tensor(v, device=device), eps).tolist()
    want = torch.logit(torch.tensor(v), eps).tolist()
    np.testing.assert_allclose(got, want, rtol=1e-5)
    x = loom.tensor([0.0, 0.3, 1.0], requires_grad=True)
    loom.special.logit(x, 0.2).sum().backward()
    tx = torch.tensor([0.0, 0.3, 1.0], requires_grad=True)
    torch.special.logit(tx, 0.2).sum().backward()
    np.testing.assert_allclose(x.grad.tolist(), tx.grad.tolist(), rtol=1e-5)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.filterwarnings("ignore:cov")
@pytest.mark.parametrize("shape", [(1, 4), (4,), (2, 4), (1, 1)])
def test_cov_and_corrcoef_of_one_variable_are_0d(device, shape):
    a = np.arange(float(np.prod(shape))).reshape(shape) ** 1.5
    for name in ("cov", "corrcoef"):
        with np.errstate(all="ignore"):
            got = getattr(loom, name)(loom.tensor(a, device=device))
            want = getattr(torch, name)(torch.tensor(a))
        assert tuple(got.shape) == tuple(want.shape)
        np.testing.assert_allclose(np.array(got.tolist()), want.numpy(), rtol=1e-6)


# ---- a crash: sizes past int64 in fold / unfold ----

@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("call", [
    lambda d: F.fold(loom.ones(2, 3, device=d), [-2], [2 ** 62]),  # kernel product wrapped to 0: SIGFPE
    lambda d: F.fold(loom.ones(1, 4, 1, device=d), [2 ** 62, 2 ** 62], [2, 2]),
    lambda d: F.unfold(loom.ones(1, 1, 3, 3, device=d), [2 ** 62, 3], dilation=4),
    lambda d: F.unfold(loom.ones(1, 1, 3, 3, device=d), [2, 2], padding=2 ** 62),
], ids=["fold_kernel", "fold_output_size", "unfold_dilation", "unfold_padding"])
def test_fold_and_unfold_sizes_past_int64_raise(device, call):
    with pytest.raises(RuntimeError):
        call(device)
    assert tuple(F.fold(loom.ones(1, 4, 4, device=device), [3, 3], [2, 2]).shape) == (1, 1, 3, 3)


# ---- a hang: tril_indices / triu_indices visited every (row, col) pair ----

def test_tri_indices_visit_only_the_rows_with_indices():
    for args in [(5, 2 ** 62, -2 ** 63), (2 ** 62, 2 ** 62, 0), (2 ** 62, 3, -2 ** 63)]:
        with pytest.raises(RuntimeError, match="more than 2\\^31 indices"):
            loom.triu_indices(*args)
    assert tuple(loom.tril_indices(5, 2 ** 62, -2 ** 63).shape) == (2, 0)
    assert tuple(loom.triu_indices(3, 3, 2 ** 63 - 1).shape) == (2, 0)
    for r, c, o in [(0, 4, 0), (3, 4, -2), (5, 1, 3), (4, 4, -9), (3, 4, 1), (5, 4, -1)]:
        for name in ("tril_indices", "triu_indices"):
            assert getattr(loom, name)(r, c, o).tolist() == getattr(torch, name)(r, c, o).tolist()
