"""nn.AdaptiveLogSoftmaxWithLoss against torch 1.13 (same weights, float64): forward's output and
loss, gradients of every parameter and of the input, log_prob, predict, unbatched input, errors.
On cpu and lazy."""

import numpy as np
import pytest

import loom
from _nn_helpers import assert_close, copy_weights, to_loom
from _ops_helpers import device  # noqa: F401  (the cpu / lazy fixture)

torch = pytest.importorskip("torch")


def pair(device, cutoffs=(4, 9, 14), head_bias=True, div_value=2.0):
    torch.manual_seed(0)
    t = torch.nn.AdaptiveLogSoftmaxWithLoss(16, 20, list(cutoffs), div_value=div_value, head_bias=head_bias).double()
    m = loom.nn.AdaptiveLogSoftmaxWithLoss(16, 20, list(cutoffs), div_value=div_value,
                                           head_bias=head_bias).double().to(device)
    copy_weights(t, m, device)
    return t, m


@pytest.mark.parametrize("cutoffs, head_bias", [((4, 9, 14), True), ((10,), False), ((1, 2), True)])
def test_forward_and_gradients(device, cutoffs, head_bias):
    t, m = pair(device, cutoffs, head_bias)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(12, 16, dtype=torch.float64, generator=g)
    y = torch.randint(0, 20, (12,), generator=g)
    y[0], y[1] = 0, 19  # both ends of the range
    tx = x.clone().requires_grad_(True)
    lx = to_loom(x, device).requires_grad_(True)
    tout, tloss = t(tx, y)
    lout, lloss = m(lx, to_loom(y, device))
    assert_close(lout, tout, what="output")
    assert_close(lloss, tloss, what="loss")
    tloss.backward()
    lloss.backward()
    assert_close(lx.grad, tx.grad, what="input grad")
    for (name, tp), (_, lp) in zip(t.named_parameters(), m.named_parameters()):
        assert_close(lp.grad, tp.grad, atol=1e-12, what=name)
    assert_close(m.log_prob(to_loom(x, device)), t.log_prob(x), what="log_prob")
    np.testing.assert_array_equal(m.predict(to_loom(x, device)).cpu().numpy(), t.predict(x).numpy())


def test_unbatched_and_result_fields(device):
    t, m = pair(device)
    x = torch.randn(16, dtype=torch.float64)
    for target in (2, 12):
        tr = t(x, torch.tensor(target))
        lr = m(to_loom(x, device), loom.tensor(target, device=device))
        assert lr.output.dim() == 0 and lr._fields == ("output", "loss")
        assert_close(lr.output, tr.output)
        assert_close(lr.loss, tr.loss)
    # log_prob is a distribution over all classes
    np.testing.assert_allclose(m.log_prob(to_loom(x, device)[None]).exp().sum().item(), 1.0, rtol=1e-12)


def test_predict_mixed_rows(device):
    """Rows whose head picks a shortlist class and rows that need the tails, in one batch."""
    t, m = pair(device, cutoffs=(2, 10))
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 16, dtype=torch.float64, generator=g) * 3
    want = t.predict(x)
    assert (want < 2).any() and (want >= 2).any()
    np.testing.assert_array_equal(m.predict(to_loom(x, device)).cpu().numpy(), want.numpy())


def test_training_matches_torch(device):
    t, m = pair(device)
    topt = torch.optim.Adam(t.parameters(), lr=0.01)
    lopt = loom.optim.Adam(m.parameters(), lr=0.01)
    g = torch.Generator().manual_seed(4)
    for _ in range(3):
        x = torch.randn(8, 16, dtype=torch.float64, generator=g)
        y = torch.randint(0, 20, (8,), generator=g)
        tloss = t(x, y).loss
        lloss = m(to_loom(x, device), to_loom(y, device)).loss
        assert_close(lloss, tloss)
        for opt, loss in ((topt, tloss), (lopt, lloss)):
            opt.zero_grad()
            loss.backward()
            opt.step()
    assert_close(m.head.weight, t.head.weight)


@pytest.mark.parametrize("cutoffs", [[], [5, 3], [0, 4], [4, 20], [4, 4], [2.5]])
def test_bad_cutoffs(cutoffs):
    with pytest.raises(ValueError):  # torch 1.13: "min() arg is an empty sequence" for []
        torch.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs)
    with pytest.raises(ValueError, match="cutoffs"):
        loom.nn.AdaptiveLogSoftmaxWithLoss(8, 20, cutoffs)


@pytest.mark.parametrize("x_shape, y", [((3, 16), [1, 2]), ((16,), [1]), ((3, 16), [[1]]), ((3, 16), [1, 2, 25])])
def test_bad_inputs(x_shape, y):
    t, m = pair("cpu")
    with pytest.raises(RuntimeError) as te:
        t(torch.zeros(x_shape, dtype=torch.float64), torch.tensor(y))
    with pytest.raises(RuntimeError) as le:
        m(loom.zeros(x_shape, dtype=loom.float64), loom.tensor(y))
    assert str(le.value).split(",")[0] == str(te.value).split(",")[0]
