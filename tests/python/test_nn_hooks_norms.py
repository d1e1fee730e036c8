"""Module backward hooks, weight_norm / spectral_norm, packed sequences and memory formats,
against PyTorch 1.13, in eager and lazy mode."""

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]
rng = np.random.default_rng(0)


def arr(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def copy_module(tm, lm, device):
    lm.load_state_dict({k: loom.tensor(v.detach().numpy()) for k, v in tm.state_dict().items()})
    return lm.to(device)


def close(lt, tt, tol=1e-5):
    np.testing.assert_allclose(lt.detach().to("cpu").numpy(), tt.detach().numpy(), rtol=tol, atol=tol)


class Two(object):
    """A module of two tensor arguments and a number: (x * w) + y * scale."""

    @staticmethod
    def make(lib):
        class M(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.w = lib.nn.Parameter(lib.ones(3) * 2)

            def forward(self, x, scale, y):
                return x * self.w + y * scale, (x * y).sum()

        return M()


@pytest.mark.parametrize("device", DEVICES)
def test_full_backward_hook_sees_and_replaces_gradients(device):
    x0, y0 = arr(4, 3), arr(4, 3)
    results = {}
    for lib, dev in ((torch, "cpu"), (loom, device)):
        m = Two.make(lib).to(dev)
        seen = []

        def hook(module, grad_input, grad_output):
            seen.append(([None if g is None else g.detach().to("cpu").numpy().copy() for g in grad_input],
                         [None if g is None else g.detach().to("cpu").numpy().copy() for g in grad_output]))
            return (grad_input[0] * 10, None, grad_input[2])

        def pre_hook(module, grad_output):
            return (grad_output[0] * 2, grad_output[1])

        if lib is loom:  # torch 1.13 has no pre-hooks: its loss doubles the output's gradient instead
            m.register_full_backward_pre_hook(pre_hook)
        handle = m.register_full_backward_hook(hook)
        x = lib.tensor(x0, requires_grad=True) if lib is torch else loom.tensor(x0, device=dev, requires_grad=True)
        y = lib.tensor(y0, requires_grad=True) if lib is torch else loom.tensor(y0, device=dev, requires_grad=True)
        out, total = m(x, 0.5, y)
        (out.sum() * (2 if lib is torch else 1) + total * 3).backward()
        results[lib] = (seen, *(t.grad.to("cpu").numpy().copy() for t in (x, y, m.w)))
        handle.remove()
        x.grad = None
        out, total = m(x, 0.5, y)
        (out.sum() + total).backward()
        assert len(seen) == 1  # removed
    (tseen, tx, ty, tw), (lseen, lx, ly, lw) = results[torch], results[loom]
    assert len(lseen) == len(tseen) == 1
    for t_list, l_list in zip(tseen[0], lseen[0]):
        assert [g is None for g in t_list] == [g is None for g in l_list]
        for tg, lg in zip(t_list, l_list):
            if tg is not None:
                np.testing.assert_allclose(lg, tg, rtol=1e-6)
    for a, b in ((lx, tx), (ly, ty), (lw, tw)):
        np.testing.assert_allclose(a, b, rtol=1e-6)


def test_backward_hook_when_inputs_need_no_gradient():
    for lib in (torch, loom):
        lin = lib.nn.Linear(3, 2)
        calls = []
        lin.register_full_backward_hook(lambda m, gi, go: calls.append((gi, go[0].shape)))
        lin(lib.ones(4, 3)).sum().backward()
        assert len(calls) == 1 and calls[0][0] == (None,) and tuple(calls[0][1]) == (4, 2)


def test_backward_hook_wrong_count_raises():
    lin = loom.nn.Linear(3, 2)
    lin.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    with pytest.raises(RuntimeError, match="invalid number of grad_input, got 2, but expected 1"):
        lin(loom.ones(4, 3, requires_grad=True)).sum().backward()


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dim", [0, 1, None])
def test_weight_norm_matches_torch(dim, device):
    torch.manual_seed(0)
    tm = torch.nn.utils.weight_norm(torch.nn.Linear(5, 4), dim=dim)
    lm = loom.nn.utils.weight_norm(loom.nn.Linear(5, 4), dim=dim)
    assert sorted(k for k, _ in lm.named_parameters()) == sorted(k for k, _ in tm.named_parameters())
    copy_module(tm, lm, device)
    x = arr(3, 5)
    tout = tm(torch.tensor(x))
    lout = lm(loom.tensor(x, device=device))
    close(lout, tout)
    tout.pow(2).sum().backward()
    (lout * lout).sum().backward()
    close(lm.weight_g.grad, tm.weight_g.grad, 1e-4)
    close(lm.weight_v.grad, tm.weight_v.grad, 1e-4)
    loom.nn.utils.remove_weight_norm(lm)
    torch.nn.utils.remove_weight_norm(tm)
    close(lm.weight, tm.weight)
    assert sorted(k for k, _ in lm.named_parameters()) == ["bias", "weight"]
    with pytest.raises(RuntimeError, match="Cannot register two weight_norm"):
        loom.nn.utils.weight_norm(loom.nn.utils.weight_norm(loom.nn.Linear(2, 2)))


@pytest.mark.parametrize("device", DEVICES)
def test_spectral_norm_matches_torch(device):
    torch.manual_seed(0)
    tm = torch.nn.utils.spectral_norm(torch.nn.Linear(6, 4), n_power_iterations=2)
    lm = loom.nn.utils.spectral_norm(loom.nn.Linear(6, 4), n_power_iterations=2)
    assert sorted(lm.state_dict()) == sorted(tm.state_dict())
    copy_module(tm, lm, device)
    x = arr(3, 6)
    for _ in range(3):  # training: each forward runs the power iteration on the buffers
        tout = tm(torch.tensor(x))
        lout = lm(loom.tensor(x, device=device))
        close(lout, tout, 1e-4)
    close(lm.weight_u, tm.weight_u, 1e-4)
    tout.sum().backward()
    lout.sum().backward()
    close(lm.weight_orig.grad, tm.weight_orig.grad, 1e-4)
    tm.eval(), lm.eval()
    close(lm(loom.tensor(x, device=device)), tm(torch.tensor(x)), 1e-4)
    with pytest.raises(ValueError, match="n_power_iterations"):
        loom.nn.utils.spectral_norm(loom.nn.Linear(2, 2), n_power_iterations=0)


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_pack_pad_round_trip_matches_torch(batch_first, enforce_sorted, device):
    lengths = [5, 3, 3, 1] if enforce_sorted else [3, 5, 1, 3]
    padded = arr(4, 5, 2) if batch_first else arr(5, 4, 2)
    tp = torch.nn.utils.rnn.pack_padded_sequence(torch.tensor(padded, requires_grad=True), lengths,
                                                 batch_first=batch_first, enforce_sorted=enforce_sorted)
    source = loom.tensor(padded, device=device, requires_grad=True)
    lp = loom.nn.utils.rnn.pack_padded_sequence(source, lengths, batch_first=batch_first,
                                                enforce_sorted=enforce_sorted)
    close(lp.data, tp.data)
    assert lp.batch_sizes.tolist() == tp.batch_sizes.tolist()
    for a, b in ((lp.sorted_indices, tp.sorted_indices), (lp.unsorted_indices, tp.unsorted_indices)):
        assert (a is None) == (b is None) and (a is None or a.tolist() == b.tolist())
    tout, tlen = torch.nn.utils.rnn.pad_packed_sequence(tp, batch_first=batch_first, total_length=6)
    lout, llen = loom.nn.utils.rnn.pad_packed_sequence(lp, batch_first=batch_first, total_length=6)
    close(lout, tout)
    assert llen.tolist() == tlen.tolist()
    lout.sum().backward()
    mask = np.zeros_like(padded)
    for b, n in enumerate(lengths):
        if batch_first:
            mask[b, :n] = 1
        else:
            mask[:n, b] = 1
    np.testing.assert_array_equal(source.grad.to("cpu").numpy(), mask)
    seqs = [loom.tensor(arr(n, 2)) for n in lengths]
    unpacked = loom.nn.utils.rnn.unpack_sequence(loom.nn.utils.rnn.pack_sequence(seqs, enforce_sorted=False))
    for a, b in zip(unpacked, seqs):
        np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_pack_errors():
    with pytest.raises(RuntimeError, match="sorted in decreasing order"):
        loom.nn.utils.rnn.pack_padded_sequence(loom.zeros(3, 2), [1, 3])
    with pytest.raises(ValueError, match="total_length"):
        loom.nn.utils.rnn.pad_packed_sequence(loom.nn.utils.rnn.pack_padded_sequence(loom.zeros(3, 2), [3, 1]),
                                              total_length=2)


def test_memory_formats_accepted():
    x = loom.randn(2, 3, 4, 5)
    assert repr(loom.channels_last) == "torch.channels_last"
    assert x.to(memory_format=loom.channels_last).shape == x.shape
    assert x.contiguous(memory_format=loom.contiguous_format).shape == x.shape
    assert x.clone(memory_format=loom.preserve_format).shape == x.shape
    model = loom.nn.Linear(5, 2).to(memory_format=loom.channels_last)
    assert model(x).shape == (2, 3, 4, 2)
    with pytest.raises(TypeError, match="memory_format"):
        x.to(memory_format="channels_last")
    with pytest.raises(TypeError, match="memory_format"):
        model.to(memory_format="channels_last")


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("kind", ["LSTM", "GRU", "RNN"])
@pytest.mark.parametrize("enforce_sorted", [True, False])
def test_rnn_on_packed_sequences_matches_torch(kind, enforce_sorted, device):
    """Packed input to RNN / LSTM / GRU (2 layers, bidirectional, given hx): the packed output,
    the final states per sequence and the gradients, against PyTorch."""
    torch.manual_seed(0)
    tm = getattr(torch.nn, kind)(3, 4, num_layers=2, bidirectional=True)
    lm = copy_module(tm, getattr(loom.nn, kind)(3, 4, num_layers=2, bidirectional=True), device)
    lengths = [5, 4, 2, 1] if enforce_sorted else [2, 5, 1, 4]
    x = arr(5, 4, 3)
    h0 = arr(4, 4, 4)
    tx = torch.tensor(x, requires_grad=True)
    lx = loom.tensor(x, device=device, requires_grad=True)
    tpacked = torch.nn.utils.rnn.pack_padded_sequence(tx, lengths, enforce_sorted=enforce_sorted)
    lpacked = loom.nn.utils.rnn.pack_padded_sequence(lx, lengths, enforce_sorted=enforce_sorted)
    thx = (torch.tensor(h0), torch.tensor(h0)) if kind == "LSTM" else torch.tensor(h0)
    lhx = (loom.tensor(h0, device=device),) * 2 if kind == "LSTM" else loom.tensor(h0, device=device)
    tout, tfinal = tm(tpacked, thx)
    lout, lfinal = lm(lpacked, lhx)
    assert isinstance(lout, loom.nn.utils.rnn.PackedSequence)
    close(lout.data, tout.data, 1e-5)
    assert lout.batch_sizes.tolist() == tout.batch_sizes.tolist()
    for a, b in zip(lfinal if kind == "LSTM" else (lfinal,), tfinal if kind == "LSTM" else (tfinal,)):
        close(a, b, 1e-5)
    (tout.data.sum() + (tfinal[0] if kind == "LSTM" else tfinal).pow(2).sum()).backward()
    (lout.data.sum() + ((lfinal[0] if kind == "LSTM" else lfinal) ** 2).sum()).backward()
    close(lx.grad, tx.grad, 1e-4)
    for (name, tp), lp in zip(tm.named_parameters(), lm.parameters()):
        close(lp.grad, tp.grad, 1e-4)
