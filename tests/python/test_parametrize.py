"""loom.nn.utils.parametrize and .parametrizations against torch's: the parametrized tensor, its
gradient reaching the original, state-dict keys, assignment through right_inverse, chains,
cached(), removal both ways and the shape checks; spectral_norm (power iteration in training,
fixed in eval) and weight_norm in float64; and a lazy training step with a spectral-normed layer
that compiles nothing after warm-up."""

import copy

import numpy as np
import pytest

import loom
from _nn_helpers import counters_after_warm_up
from _ops_helpers import torch  # noqa: F401

tparam = pytest.importorskip("torch.nn.utils.parametrize")
tparams = pytest.importorskip("torch.nn.utils.parametrizations")
P = loom.nn.utils.parametrize


def symmetric(lib):
    class Symmetric(lib.nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    return Symmetric()


def scaled(lib):
    class Scale(lib.nn.Module):
        def forward(self, X):
            return 2 * X

        def right_inverse(self, A):
            return A / 2

    return Scale()


def pair(seed=0, n=4):
    w = np.random.default_rng(seed).standard_normal((n, n))
    ours, theirs = loom.nn.Linear(n, n).double(), torch.nn.Linear(n, n).double()
    with loom.no_grad(), torch.no_grad():
        ours.weight.copy_(loom.tensor(w))
        theirs.weight.copy_(torch.tensor(w))
        ours.bias.zero_()
        theirs.bias.zero_()
    return ours, theirs


def test_register_matches_torch_values_gradients_and_keys():
    ours, theirs = pair()
    P.register_parametrization(ours, "weight", symmetric(loom))
    P.register_parametrization(ours, "weight", scaled(loom))  # a chain of two
    tparam.register_parametrization(theirs, "weight", symmetric(torch))
    tparam.register_parametrization(theirs, "weight", scaled(torch))
    assert list(ours.state_dict()) == list(theirs.state_dict())
    assert type(ours).__name__ == type(theirs).__name__ == "ParametrizedLinear"
    assert P.type_before_parametrizations(ours) is loom.nn.Linear
    assert P.is_parametrized(ours) and P.is_parametrized(ours, "weight") and not P.is_parametrized(ours, "bias")
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy())
    x = np.random.default_rng(1).standard_normal((3, 4))
    ours(loom.tensor(x)).square().sum().backward()
    theirs(torch.tensor(x)).square().sum().backward()
    np.testing.assert_allclose(ours.parametrizations.weight.original.grad.numpy(),
                               theirs.parametrizations.weight.original.grad.numpy(), rtol=1e-12)
    # Assignment stores the right inverse of the value in the original.
    target = np.random.default_rng(2).standard_normal((4, 4))
    target = target + target.T
    ours.weight = loom.tensor(target)
    theirs.weight = torch.tensor(target)
    np.testing.assert_allclose(ours.weight.detach().numpy(), target)
    np.testing.assert_allclose(ours.parametrizations.weight.original.detach().numpy(),
                               theirs.parametrizations.weight.original.detach().numpy())


@pytest.mark.parametrize("leave", [True, False])
def test_remove_parametrizations_matches_torch(leave):
    ours, theirs = pair(3)
    P.register_parametrization(ours, "weight", symmetric(loom))
    tparam.register_parametrization(theirs, "weight", symmetric(torch))
    P.remove_parametrizations(ours, "weight", leave_parametrized=leave)
    tparam.remove_parametrizations(theirs, "weight", leave_parametrized=leave)
    assert type(ours) is loom.nn.Linear and not P.is_parametrized(ours)
    assert isinstance(ours.weight, loom.nn.Parameter) and list(ours.state_dict()) == list(theirs.state_dict())
    np.testing.assert_allclose(ours.weight.detach().numpy(), theirs.weight.detach().numpy())


def test_cached_computes_a_parametrization_once():
    calls = []

    class Count(loom.nn.Module):
        def forward(self, X):
            calls.append(1)
            return X

    m = loom.nn.Linear(2, 2)
    P.register_parametrization(m, "weight", Count())
    calls.clear()
    with P.cached():
        m.weight, m.weight, m.weight  # noqa: B018
    assert len(calls) == 1
    m.weight  # noqa: B018
    assert len(calls) == 2


def test_shape_changes_and_missing_names_raise():
    class Shrink(loom.nn.Module):
        def forward(self, X):
            return X[:1]

    with pytest.raises(ValueError, match="may not change the shape"):
        P.register_parametrization(loom.nn.Linear(2, 2), "weight", Shrink())
    P.register_parametrization(loom.nn.Linear(2, 2), "weight", Shrink(), unsafe=True)
    with pytest.raises(ValueError, match="does not have a parameter"):
        P.register_parametrization(loom.nn.Linear(2, 2), "nothing", Shrink())
    with pytest.raises(ValueError, match="does not have a parametrization"):
        P.remove_parametrizations(loom.nn.Linear(2, 2), "weight")


@pytest.mark.parametrize("module", ["linear", "conv_transpose"])
def test_spectral_norm_matches_torch(module):
    rng = np.random.default_rng(4)
    if module == "linear":
        ours, theirs = loom.nn.Linear(5, 3).double(), torch.nn.Linear(5, 3).double()
        x = rng.standard_normal((2, 5))
    else:
        ours, theirs = loom.nn.ConvTranspose1d(3, 4, 3).double(), torch.nn.ConvTranspose1d(3, 4, 3).double()
        x = rng.standard_normal((2, 3, 6))
    ours.load_state_dict({k: loom.tensor(v.numpy()) for k, v in theirs.state_dict().items()})
    loom.nn.utils.parametrizations.spectral_norm(ours)
    tparams.spectral_norm(theirs)
    assert list(ours.state_dict()) == list(theirs.state_dict())
    with loom.no_grad():  # the same random start for the power iteration
        for name in ("_u", "_v"):
            getattr(ours.parametrizations.weight[0], name).copy_(
                loom.tensor(getattr(theirs.parametrizations.weight[0], name).numpy()))
    for training in (True, True, False):
        ours.train(training), theirs.train(training)
        a, b = ours(loom.tensor(x)), theirs(torch.tensor(x))
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-10)
    a.sum().backward()
    b.sum().backward()
    np.testing.assert_allclose(ours.parametrizations.weight.original.grad.numpy(),
                               theirs.parametrizations.weight.original.grad.numpy(), rtol=1e-9)


def test_weight_norm_matches_the_hook_form():
    ours, theirs = pair(5)
    loom.nn.utils.parametrizations.weight_norm(ours)
    torch.nn.utils.weight_norm(theirs)
    g, v = ours.parametrizations.weight.original0, ours.parametrizations.weight.original1
    np.testing.assert_allclose(g.detach().numpy(), theirs.weight_g.detach().numpy(), rtol=1e-12)
    x = np.random.default_rng(6).standard_normal((3, 4))
    ours(loom.tensor(x)).square().sum().backward()
    theirs(torch.tensor(x)).square().sum().backward()
    np.testing.assert_allclose(g.grad.numpy(), theirs.weight_g.grad.numpy(), rtol=1e-10)
    np.testing.assert_allclose(v.grad.numpy(), theirs.weight_v.grad.numpy(), rtol=1e-10)


def test_parametrized_modules_deep_copy():
    m = loom.nn.utils.parametrizations.spectral_norm(loom.nn.Linear(3, 3))
    c = copy.deepcopy(m)
    assert type(c) is not loom.nn.Linear and P.is_parametrized(c, "weight")
    m.eval(), c.eval()
    x = loom.randn(2, 3)
    np.testing.assert_allclose(c(x).detach().numpy(), m(x).detach().numpy())


def test_a_lazy_step_with_spectral_norm_compiles_nothing_after_warm_up():
    loom.manual_seed(0)
    net = loom.nn.Sequential(loom.nn.utils.parametrizations.spectral_norm(loom.nn.Linear(6, 6)), loom.nn.ReLU(),
                             loom.nn.Linear(6, 1)).to("lazy")
    opt = loom.optim.Adam(net.parameters(), lr=1e-3)
    x = loom.randn(5, 6, device="lazy")

    def step():
        loss = net(x).square().mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        float(loss)

    moved = counters_after_warm_up(step)
    assert moved["kernels_compiled"] == 0 and moved["graph_cache_misses"] == 0
