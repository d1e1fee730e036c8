"""PyTorch's legacy constructors (loom.Tensor(...), Tensor.new(...), loom.FloatTensor & co) and
the creation functions logspace, range (deprecated, inclusive), scalar_tensor, empty_strided and
Tensor.new_empty_strided: results and errors compared with PyTorch's, on cpu and lazy."""

import warnings

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]


def outcome(lib, expression):
    """(dtype name, shape, values or None) of `expression` with `T` = lib, or (error type, message)."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            r = eval(expression, {"T": lib, "np": np})
    except Exception as e:  # noqa: BLE001  compared with the other library's
        return ("error", type(e).__name__, str(e).split("\n")[0])
    if isinstance(r, bool):
        return r
    return (str(r.dtype).split(".")[-1], tuple(r.shape))


def values(expression, lib):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        r = eval(expression, {"T": lib, "np": np})
    return r.detach().cpu().numpy() if lib is loom else r.detach().numpy()


SHAPES_AND_ERRORS = [
    "T.Tensor()", "T.Tensor(2, 3)", "T.Tensor(0)", "T.Tensor(T.Size([2, 4]))", "T.Tensor(size=(2,))",
    "T.Tensor(np.int64(3))", "T.Tensor(-1)", "T.Tensor(2, [3])", "T.Tensor(3, 2.0)", "T.Tensor(2.5)",
    "T.Tensor('a')", "T.Tensor(None)", "T.Tensor(True)", "T.Tensor(np.float64(2.5))", "T.Tensor([[1], [2, 3]])",
    "T.LongTensor(2)", "T.BoolTensor(3)", "T.DoubleTensor(2, 2)", "T.HalfTensor(1)", "T.ByteTensor(4)",
    "T.FloatTensor(T.ones(2, dtype=T.int64))", "T.Tensor(2, dtype=T.float64)",
    "isinstance(T.ones(2), T.FloatTensor)", "isinstance(T.ones(2), T.DoubleTensor)",
    "isinstance(T.ones(2, dtype=T.int64), T.LongTensor)", "isinstance(T.ones(2), T.Tensor)",
    "issubclass(T.FloatTensor, T.Tensor)", "T.ones(2).type(T.DoubleTensor)", "T.ones(2).type() == 'torch.FloatTensor'",
    "T.ones(2, dtype=T.int64).new(3)", "T.ones(2, dtype=T.float64).new([1, 2])", "T.ones(2).new()",
    "T.ones(2).new(T.ones(2, dtype=T.int64))",
    "T.logspace(0, 3, -1)", "T.logspace(0, 3, 4, dtype=T.bool)", "T.range(1, 4, -1)", "T.range(1, 4, 0)",
    "T.range(1, float('inf'))", "T.empty_strided((2, 3), (1,))", "T.empty_strided((2, 3), (-1, 2))",
    "T.empty_strided((2, -3), (1, 2))", "T.scalar_tensor('a')", "T.scalar_tensor(1e300)",
    "T.empty_strided((2, 3), (1, 2), dtype=T.int32)", "T.empty_strided([], [])",
    "T.ones(2, 3).new_empty_strided((2, 2), (1, 2))",
]


# PyTorch's message prints its C++ TensorOptions; loom's names the two dtypes.
TYPE_ONLY = {"T.FloatTensor(T.ones(2, dtype=T.int64))", "T.ones(2).new(T.ones(2, dtype=T.int64))"}


@pytest.mark.parametrize("expression", SHAPES_AND_ERRORS)
def test_shapes_dtypes_and_errors_as_pytorch(expression):
    mine, theirs = outcome(loom, expression), outcome(torch, expression)
    if expression in TYPE_ONLY:
        mine, theirs = mine[:2], theirs[:2]
    assert mine == theirs


VALUES = [
    "T.Tensor([1, 2])", "T.Tensor((1, 2.5))", "T.Tensor(np.arange(3))", "T.Tensor([True, False])", "T.Tensor([])",
    "T.Tensor([T.tensor(1.), T.tensor(2)])", "T.Tensor(T.arange(3))", "T.LongTensor([1.7, 2])",
    "T.BoolTensor([1, 0])", "T.IntTensor([[1, 2], [3, 4]])", "T.DoubleTensor([0.1])", "T.Tensor(data=[2])",
    "T.logspace(0, 3, 4)", "T.logspace(0, 3, 4, dtype=T.int64)", "T.logspace(0, 3, 5, base=2, dtype=T.int64)",
    "T.logspace(0, 3, 5, 2)", "T.logspace(0, 1, 1)", "T.logspace(0, 1, 0)", "T.logspace(-1, 1, 3, base=-2)",
    "T.logspace(-2, 2, 7, dtype=T.float64)", "T.logspace(T.tensor(0.), 3, 4)",
    "T.range(1, 4)", "T.range(1, 4, 0.5)", "T.range(0, 1, 0.3)", "T.range(1, 4, dtype=T.int64)", "T.range(4, 1, -1)",
    "T.range(start=1, end=3)", "T.range(0, 1, 0.1)", "T.range(1.5, 3)",
    "T.scalar_tensor(3)", "T.scalar_tensor(3.5, dtype=T.int64)", "T.scalar_tensor(True)",
    "T.scalar_tensor(T.tensor(2.))", "T.scalar_tensor(-1, dtype=T.uint8)", "T.scalar_tensor(2.5, dtype=T.float64)",
]


@pytest.mark.parametrize("expression", VALUES)
def test_values_as_pytorch(expression):
    assert outcome(loom, expression) == outcome(torch, expression)
    np.testing.assert_allclose(values(expression, loom), values(expression, torch), rtol=1e-6)


@pytest.mark.parametrize("device", DEVICES)
def test_device_argument_and_lazy_results(device):
    t = loom.Tensor([1, 2], device=device)
    assert t.device.type == loom.device(device).type and t.tolist() == [1.0, 2.0]
    assert loom.FloatTensor(2, 3, device=device).shape == (2, 3)
    assert loom.logspace(0, 2, 3, device=device).tolist() == [1.0, 10.0, 100.0]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert loom.range(0, 2, device=device).tolist() == [0.0, 1.0, 2.0]
    s = loom.scalar_tensor(4, device=device, requires_grad=True)
    assert s.shape == () and s.requires_grad and s.device.type == loom.device(device).type
    e = loom.empty_strided((2, 3), (1, 2), device=device)
    assert e.stride() == (1, 2) and e.device.type == loom.device(device).type
    e.fill_(1.0)
    assert e.sum().item() == 6
    x = loom.ones(2, device=device)
    assert x.new([5]).device == x.device and x.new(3).shape == (3,)


def test_the_alias_form_shares_memory_and_subclasses_construct_themselves():
    a = loom.ones(3)
    b = loom.Tensor(a)
    b[0] = 5
    assert a[0].item() == 5 and b is not a

    class Mine(loom.Tensor):
        pass
    m = Mine([1, 2])
    assert type(m) is Mine and m.tolist() == [1.0, 2.0]


def test_range_warns_as_pytorch():
    with pytest.warns(UserWarning, match="torch.range is deprecated"):
        loom.range(0, 1)


def test_typed_classes_are_pytorchs_names():
    assert repr(loom.FloatTensor) == "<class 'torch.FloatTensor'>" and loom.LongTensor.dtype == loom.int64
    assert loom.cuda.FloatTensor.is_cuda and not loom.FloatTensor.is_cuda
    assert not isinstance(loom.ones(2, device="lazy", dtype=loom.float64), loom.FloatTensor)
