"""The dropout family beyond Dropout: Dropout1d/2d/3d (one draw per sample and channel),
AlphaDropout and FeatureAlphaDropout (dropped units at SELU's saturation, mean and variance
kept), with PyTorch's input checks and warnings, on cpu and lazy."""

import warnings

import numpy as np
import pytest

import loom
import loom.nn.functional as F

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn,shape", [("dropout1d", (4, 8, 50)), ("dropout1d", (8, 50)), ("dropout2d", (4, 8, 5, 6)),
                                      ("dropout3d", (2, 8, 3, 4, 5)), ("dropout3d", (8, 3, 4, 5))])
def test_whole_channels_are_dropped_or_scaled(device, fn, shape):
    loom.manual_seed(0)  # unseeded, a batch of 8 channels kept them all 1.7% of the time
    x = loom.ones(shape, device=device)
    y = getattr(F, fn)(x, p=0.4).cpu().numpy()
    batched = y if len(shape) in (3, 4, 5) and not (fn == "dropout1d" and len(shape) == 2) and \
        not (fn == "dropout3d" and len(shape) == 4) else y[None]
    per_channel = batched.reshape(batched.shape[0], batched.shape[1], -1)
    for row in per_channel.reshape(-1, per_channel.shape[2]):
        assert np.all(row == 0) or np.allclose(row, 1 / 0.6)
    kept = (per_channel[:, :, 0] != 0).mean()
    assert 0.2 < kept < 0.95
    assert np.array_equal(getattr(F, fn)(x, 0.4, training=False).cpu().numpy(), np.ones(shape))


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("fn", ["alpha_dropout", "feature_alpha_dropout"])
def test_alpha_dropout_keeps_mean_and_variance(device, fn):
    loom.manual_seed(0)
    x = loom.randn(400, 50, 20, device=device)
    y = getattr(F, fn)(x, 0.3, training=True).cpu().numpy()
    assert abs(y.mean()) < 0.05 and abs(y.std() - 1) < 0.05
    # dropped units all sit at -alpha a (1 - p): SELU's saturation through the affine map
    a = 1 / np.sqrt((1.7580993408473766 ** 2 * 0.3 + 1) * 0.7)
    at_saturation = np.isclose(y, -1.7580993408473766 * a * 0.7, atol=1e-6).mean()
    assert 0.25 < at_saturation < 0.35


def outcome(lib, expression):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            r = eval(expression, {"T": lib})
            result = tuple(r.shape)
        except Exception as e:  # noqa: BLE001  compared with PyTorch's
            result = (type(e).__name__, str(e))
    return result, [str(w.message)[:60] for w in caught]


@pytest.mark.parametrize("expression", [
    "T.nn.functional.dropout1d(T.ones(2, 3, 4, 5))", "T.nn.functional.dropout2d(T.ones(3, 4))",
    "T.nn.functional.dropout2d(T.ones(2, 3, 4))", "T.nn.functional.dropout3d(T.ones(2, 3))",
    "T.nn.functional.dropout2d(T.ones(2, 3, 4, 4), p=1.5)", "T.nn.Dropout2d(p=-0.1)",
    "T.nn.AlphaDropout(0.2)(T.ones(3, 4))", "T.nn.FeatureAlphaDropout(0.2)(T.ones(3, 4, 5))",
    "T.nn.Dropout3d(0.2)(T.ones(2, 3, 4, 5, 6))",
])
def test_checks_and_warnings_as_pytorch(expression):
    assert outcome(loom, expression) == outcome(torch, expression)


def test_modules_repr_and_eval():
    m = loom.nn.Dropout2d(0.3, inplace=True)
    assert repr(m) == repr(torch.nn.Dropout2d(0.3, inplace=True))
    m.eval()
    x = loom.ones(2, 3, 4, 4)
    assert m(x) is x
