"""Programs written for these tests after the patterns session 33's ports met (tutorial scripts that
print their model's parameters, ...): each checks one thing a ported program needed, on `cpu` and
`lazy` where a device matters, against PyTorch 1.13."""

import contextlib
import io

import numpy as np
import pytest

import loom
from _programs import DEVICES, load_from

torch = pytest.importorskip("torch")


def printed(*objects):
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        print(*objects)
    return out.getvalue()


# ---- print() of a parameter, and of any tensor subclass with its own __repr__ ----

def test_print_of_a_layers_parameters_names_them_as_torch_does():
    """A tutorial prints `linear.weight` and `linear.bias`: print() calls str(), which PyTorch
    answers with the subclass's repr ("Parameter containing:" and the values)."""
    theirs = torch.nn.Linear(3, 2)
    mine = load_from(theirs, loom.nn.Linear(3, 2))
    for name in ("weight", "bias"):
        expected = printed("w: ", getattr(theirs, name))
        assert printed("w: ", getattr(mine, name)) == expected
        assert expected.startswith("w:  Parameter containing:\n")
    # a plain tensor's str is its repr still
    t = loom.tensor([1.5, 2.0])
    assert str(t) == repr(t) == "tensor([1.5000, 2.0000])"


def test_str_follows_a_subclass_repr_and_a_subclass_str():
    class Tagged(loom.Tensor):
        def __repr__(self):
            return "Tagged:" + super().__repr__()

    class Shown(loom.Tensor):
        def __str__(self):
            return "shown"

    # _make_subclass: how nn.Parameter makes its instances, in both libraries
    x = loom.Tensor._make_subclass(Tagged, loom.tensor([1.0]))
    assert str(x) == "Tagged:" + loom.Tensor.__repr__(x)
    assert f"{x}" == str(x)
    y = loom.Tensor._make_subclass(Shown, loom.tensor([1.0]))
    assert str(y) == "shown" and repr(y) == "tensor([1.])"
