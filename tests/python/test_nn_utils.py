"""loom.nn.utils against torch.nn.utils: clip_grad_norm_ (norm types 2, 1, inf, 3, clipping and
not, error_if_nonfinite, foreach accepted, the returned total norm), clip_grad_value_,
parameters_to_vector / vector_to_parameters, rnn.pad_sequence; in lazy mode clipping records
into the step's trace and syncs nothing."""

import numpy as np
import pytest

import loom
from _nn_helpers import assert_close, np_, to_loom
from _ops_helpers import device, torch  # noqa: F401

U = loom.nn.utils


def params_with_grads(lib, device="cpu", scale=1.0):
    g = np.random.default_rng(0)
    shapes = [(3, 4), (4,), (2, 2, 2)]
    out = []
    for i, s in enumerate(shapes):
        value, grad = g.standard_normal(s), g.standard_normal(s) * scale * (i + 1)
        if lib is torch:
            p = torch.tensor(value, requires_grad=True)
            p.grad = torch.tensor(grad)
        else:
            p = loom.tensor(value, device=device).requires_grad_()
            p.grad = loom.tensor(grad, device=device)
        out.append(p)
    return out


@pytest.mark.parametrize("norm_type", [2.0, 1, float("inf"), 3.0])
@pytest.mark.parametrize("max_norm", [0.5, 1e4])
def test_clip_grad_norm_matches_pytorch(device, norm_type, max_norm):
    tp, lp = params_with_grads(torch), params_with_grads(loom, device)
    want = torch.nn.utils.clip_grad_norm_(tp, max_norm, norm_type)
    got = U.clip_grad_norm_(lp, max_norm, norm_type, foreach=True)
    assert_close(got, want)
    for t, lt in zip(tp, lp):
        assert_close(lt.grad, t.grad)


def test_clip_grad_norm_single_tensor_and_no_grads():
    tp, lp = params_with_grads(torch)[0], params_with_grads(loom)[0]
    assert_close(U.clip_grad_norm_(lp, 0.1), torch.nn.utils.clip_grad_norm_(tp, 0.1))
    assert_close(lp.grad, tp.grad)
    assert float(U.clip_grad_norm_([loom.zeros(2).requires_grad_()], 1.0)) == 0.0


def test_clip_grad_norm_nonfinite():
    lp = params_with_grads(loom)
    lp[1].grad = loom.tensor([float("nan"), 1.0, 2.0, 3.0], dtype=loom.float64)
    with pytest.raises(RuntimeError, match="The total norm of order 2.0 for gradients from `parameters` is non-finite"):
        U.clip_grad_norm_(lp, 1.0, error_if_nonfinite=True)
    assert np.isnan(float(U.clip_grad_norm_(lp, 1.0)))  # scaled by the nan norm, as PyTorch


def test_clip_grad_value(device):
    tp, lp = params_with_grads(torch), params_with_grads(loom, device)
    torch.nn.utils.clip_grad_value_(tp, 0.7)
    assert U.clip_grad_value_(lp, 0.7) is None
    for t, lt in zip(tp, lp):
        assert_close(lt.grad, t.grad)


def test_clipping_in_lazy_mode_records_and_does_not_sync():
    lp = params_with_grads(loom, "lazy")
    loom.sync()
    before = loom.metrics()["traces"]
    total = U.clip_grad_norm_(lp, 0.5)
    U.clip_grad_value_(lp, 0.1)
    assert loom.metrics()["traces"] == before and total.is_lazy
    tp = params_with_grads(torch)
    want = torch.nn.utils.clip_grad_norm_(tp, 0.5)
    torch.nn.utils.clip_grad_value_(tp, 0.1)
    assert_close(total, want)
    for t, lt in zip(tp, lp):
        assert_close(lt.grad, t.grad)


def test_parameters_to_vector_and_back(device):
    tm, lm = torch.nn.Linear(3, 2).double(), loom.nn.Linear(3, 2).double().to(device)
    lm.load_state_dict({k: to_loom(v, device) for k, v in tm.state_dict().items()})
    tv, lv = torch.nn.utils.parameters_to_vector(tm.parameters()), U.parameters_to_vector(lm.parameters())
    assert_close(lv, tv)
    (lv * lv).sum().backward()  # the vector carries the parameters' history
    assert_close(lm.weight.grad, 2 * tm.weight.detach())
    ptrs = [p.data_ptr() for p in lm.parameters()] if device == "cpu" else None
    new = torch.arange(8, dtype=torch.float64)
    torch.nn.utils.vector_to_parameters(new, tm.parameters())
    U.vector_to_parameters(to_loom(new, device), lm.parameters())
    for (n, t), lt in zip(tm.named_parameters(), lm.parameters()):
        assert_close(lt, t, what=n)
        assert lt.is_leaf and lt.requires_grad
    if ptrs is not None:
        assert [p.data_ptr() for p in lm.parameters()] == ptrs  # written where they are
    with pytest.raises(TypeError, match="expected torch.Tensor, but got: list"):
        U.vector_to_parameters([1.0], lm.parameters())


@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("padding_value", [0.0, -1.5])
def test_pad_sequence_matches_pytorch(device, batch_first, padding_value):
    g = np.random.default_rng(0)
    seqs = [torch.tensor(g.standard_normal((n, 2, 3)), requires_grad=True) for n in (3, 5, 1)]
    lseqs = [to_loom(s, device).requires_grad_() for s in seqs]
    want = torch.nn.utils.rnn.pad_sequence(seqs, batch_first, padding_value)
    got = U.rnn.pad_sequence(lseqs, batch_first, padding_value)
    assert_close(got, want)
    w = g.standard_normal(tuple(want.shape))
    (want * torch.tensor(w)).sum().backward()
    (got * loom.tensor(w, device=device)).sum().backward()
    for s, ls in zip(seqs, lseqs):
        assert_close(ls.grad, s.grad)
    ints = [torch.tensor([1, 2]), torch.tensor([3])]
    assert np_(U.rnn.pad_sequence([to_loom(t, device) for t in ints], True)).tolist() == \
        torch.nn.utils.rnn.pad_sequence(ints, True).tolist()


def test_pad_sequence_left_and_errors():
    out = U.rnn.pad_sequence([loom.tensor([1, 2, 3]), loom.tensor([4])], batch_first=True, padding_side="left")
    assert out.tolist() == [[1, 2, 3], [0, 0, 4]]
    with pytest.raises(RuntimeError, match="every sequence must have the trailing shape"):
        U.rnn.pad_sequence([loom.zeros(2, 3), loom.zeros(2, 4)])
