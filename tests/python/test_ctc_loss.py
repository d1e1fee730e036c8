"""ctc_loss and nn.CTCLoss against PyTorch's, in float64: values of every reduction, target
layout (padded rows, one concatenation, unbatched), lengths that vary within a batch, repeated
labels (which need a blank between them), empty and impossible targets, zero_infinity, and the
gradient with respect to the logits through log_softmax, on the eager and the lazy device."""

import numpy as np
import pytest

import loom
import loom.nn.functional as F

torch = pytest.importorskip("torch")
DEVICES = ["cpu", "lazy"]


def _case(seed, steps, batch, classes, labels, blank=0, repeats=False):
    rng = np.random.default_rng(seed)
    logits = rng.standard_normal((steps, batch, classes))
    choices = [c for c in range(classes) if c != blank]
    targets = rng.choice(choices, size=(batch, labels))
    if repeats and labels > 1:
        targets[:, 1] = targets[:, 0]  # a repeat: its path must pass a blank between the two
    return logits, targets


def _both(logits, device):
    ours = loom.tensor(logits, dtype=loom.float64, device=device, requires_grad=True)
    theirs = torch.tensor(logits, dtype=torch.float64, requires_grad=True)
    return ours, theirs


def _check(ours_x, theirs_x, ours_loss, theirs_loss):
    np.testing.assert_allclose(ours_loss.detach().cpu().numpy(), theirs_loss.detach().numpy(), rtol=1e-10,
                               atol=1e-10)
    finite = np.isfinite(theirs_loss.detach().numpy()).all()
    if finite:
        ours_loss.sum().backward()
        theirs_loss.sum().backward()
        np.testing.assert_allclose(ours_x.grad.cpu().numpy(), theirs_x.grad.numpy(), rtol=1e-9, atol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("reduction", ["none", "mean", "sum"])
@pytest.mark.parametrize("repeats", [False, True])
def test_padded_targets_with_lengths_that_vary(device, reduction, repeats):
    logits, targets = _case(1, steps=12, batch=4, classes=6, labels=4, repeats=repeats)
    input_lengths, target_lengths = [12, 9, 12, 5], [4, 3, 0, 2]
    x, tx = _both(logits, device)
    ours = F.ctc_loss(x.log_softmax(2), loom.tensor(targets, device=device), input_lengths, target_lengths,
                      reduction=reduction)
    theirs = torch.nn.functional.ctc_loss(tx.log_softmax(2), torch.tensor(targets), input_lengths,
                                          target_lengths, reduction=reduction)
    _check(x, tx, ours, theirs)


@pytest.mark.parametrize("device", DEVICES)
def test_concatenated_targets_and_tensor_lengths(device):
    logits, targets = _case(2, steps=10, batch=3, classes=5, labels=3, blank=4)
    target_lengths = [3, 1, 2]
    flat = np.concatenate([targets[n, :length] for n, length in enumerate(target_lengths)])
    x, tx = _both(logits, device)
    ours = F.ctc_loss(x.log_softmax(2), loom.tensor(flat, device=device), loom.tensor([10, 7, 8], device=device),
                      loom.tensor(target_lengths, device=device), blank=4)
    theirs = torch.nn.functional.ctc_loss(tx.log_softmax(2), torch.tensor(flat), torch.tensor([10, 7, 8]),
                                          torch.tensor(target_lengths), blank=4)
    _check(x, tx, ours, theirs)


@pytest.mark.parametrize("device", DEVICES)
def test_unbatched_input(device):
    logits, targets = _case(3, steps=8, batch=1, classes=4, labels=3)
    x, tx = _both(logits[:, 0], device)
    for reduction in ("none", "mean"):
        ours = F.ctc_loss(x.log_softmax(1), loom.tensor(targets[0], device=device), [8], [3], reduction=reduction)
        theirs = torch.nn.functional.ctc_loss(tx.log_softmax(1), torch.tensor(targets[0]), [8], [3],
                                              reduction=reduction)
        assert tuple(ours.shape) == tuple(theirs.shape)
        np.testing.assert_allclose(ours.detach().cpu().numpy(), theirs.detach().numpy(), rtol=1e-10)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("zero_infinity", [False, True])
def test_impossible_targets_are_infinite_or_zeroed(device, zero_infinity):
    # Four labels with two repeats need at least six steps; three are given to the first sequence.
    logits = np.random.default_rng(4).standard_normal((6, 2, 3))
    targets = np.array([[1, 1, 2, 2], [1, 2, 1, 2]])
    x, tx = _both(logits, device)
    args = ([3, 6], [4, 4])
    ours = F.ctc_loss(x.log_softmax(2), loom.tensor(targets, device=device), *args, reduction="none",
                      zero_infinity=zero_infinity)
    theirs = torch.nn.functional.ctc_loss(tx.log_softmax(2), torch.tensor(targets), *args, reduction="none",
                                          zero_infinity=zero_infinity)
    assert np.isinf(ours.detach().cpu().numpy()[0]) != zero_infinity
    _check(x, tx, ours, theirs) if zero_infinity else np.testing.assert_allclose(
        ours.detach().cpu().numpy(), theirs.detach().numpy(), rtol=1e-10)
    if not zero_infinity:
        # The finite sequence's gradient is untouched by the other's infinity; the impossible
        # sequence gets none (PyTorch's kernel writes NaN there, times a zero incoming gradient).
        ours[1].backward()
        theirs[1].backward()
        np.testing.assert_allclose(x.grad.cpu().numpy()[:, 1], tx.grad.numpy()[:, 1], rtol=1e-9, atol=1e-10)
        assert (x.grad.cpu().numpy()[:, 0] == 0).all()


def test_module_and_float32():
    logits, targets = _case(5, steps=7, batch=2, classes=5, labels=2)
    criterion = loom.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)
    ours = criterion(loom.tensor(logits, dtype=loom.float32).log_softmax(2), loom.tensor(targets), [7, 6], [2, 1])
    theirs = torch.nn.CTCLoss(blank=0, reduction="sum", zero_infinity=True)(
        torch.tensor(logits, dtype=torch.float32).log_softmax(2), torch.tensor(targets), [7, 6], [2, 1])
    assert ours.dtype is loom.float32
    np.testing.assert_allclose(ours.item(), theirs.item(), rtol=1e-5)


def test_lazy_training_step_is_one_trace_after_warm_up():
    logits, targets = _case(6, steps=9, batch=3, classes=5, labels=3)
    w = loom.tensor(np.eye(5), dtype=loom.float32, device="lazy", requires_grad=True)
    x = loom.tensor(logits, dtype=loom.float32, device="lazy")
    t = loom.tensor(targets, device="lazy")
    for step in range(3):
        if step == 2:
            before = loom.metrics()
        loss = F.ctc_loss((x @ w).log_softmax(2), t, [9, 9, 7], [3, 2, 3])
        loss.backward()
        with loom.no_grad():
            w -= 0.1 * w.grad
            w.grad = None
        loss.item()
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]


@pytest.mark.parametrize("call, message", [
    (lambda lp, t: F.ctc_loss(lp, t, [5, 5], [2, 2], blank=7), "blank must be in label range"),
    (lambda lp, t: F.ctc_loss(lp, t, [5], [2, 2]), "input_lengths must be of size batch_size"),
    (lambda lp, t: F.ctc_loss(lp, t, [5, 5], [2]), "target_lengths must be of size batch_size"),
    (lambda lp, t: F.ctc_loss(lp, t, [6, 5], [2, 2]), "input_lengths to have value at most 5"),
    (lambda lp, t: F.ctc_loss(lp, t, [5, 5], [3, 2]), "size at least 3 at dimension 1, but got size 2"),
    (lambda lp, t: F.ctc_loss(lp[0, 0], t, [5, 5], [2, 2]), "log_probs must be 2-D"),
])
def test_errors_name_the_argument(call, message):
    lp = loom.zeros(5, 2, 4).log_softmax(2)
    t = loom.ones(2, 2, dtype=loom.int64)
    with pytest.raises(RuntimeError, match=message):
        call(lp, t)
