"""The default device of creation ops (loom.set_default_device, loom.get_default_device, `with
loom.device(...)`), as PyTorch 2's: a script written for one device runs on another by setting it
once. Creation ops given no device use it; ops that take their device from an input (*_like,
Tensor.new_*, from_numpy) and loom's host-side bookkeeping (checkpoints, samplers, packed
sequences' sizes) do not."""

import threading

import numpy as np
import pytest

import loom

LAZY = loom.device("lazy:cpu")
CPU = loom.device("cpu")

CREATION = {
    "zeros": lambda: loom.zeros(2, 3),
    "ones": lambda: loom.ones(2),
    "empty": lambda: loom.empty(4),
    "full": lambda: loom.full((2,), 1.5),
    "tensor": lambda: loom.tensor([1.0, 2.0]),
    "as_tensor list": lambda: loom.as_tensor([1, 2]),
    "as_tensor numpy": lambda: loom.as_tensor(np.arange(3.0)),
    "arange": lambda: loom.arange(5),
    "linspace": lambda: loom.linspace(0, 1, 4),
    "eye": lambda: loom.eye(3),
    "rand": lambda: loom.rand(2),
    "randn": lambda: loom.randn(2),
    "randint": lambda: loom.randint(0, 5, (3,)),
    "randperm": lambda: loom.randperm(4),
    "tril_indices": lambda: loom.tril_indices(3, 3),
    "normal": lambda: loom.normal(0.0, 1.0, (2,)),
}


@pytest.fixture
def lazy_default():
    loom.set_default_device("lazy:cpu")
    try:
        yield
    finally:
        loom.set_default_device(None)


def test_the_default_is_the_cpu():
    assert loom.get_default_device() == CPU
    assert all(make().device == CPU for make in CREATION.values())


@pytest.mark.parametrize("name", sorted(CREATION))
def test_creation_ops_use_the_default_device(name, lazy_default):
    t = CREATION[name]()
    assert t.device == LAZY
    loom.set_default_device(None)
    np.testing.assert_array_equal(t.shape, CREATION[name]().shape)


def test_values_equal_the_cpu_ones(lazy_default):
    lazy = [loom.arange(6).reshape(2, 3) * 2, loom.linspace(-1, 1, 7), loom.tensor([[1.0, 2.0]]).exp()]
    loom.set_default_device(None)
    cpu = [loom.arange(6).reshape(2, 3) * 2, loom.linspace(-1, 1, 7), loom.tensor([[1.0, 2.0]]).exp()]
    for a, b in zip(lazy, cpu):
        np.testing.assert_array_equal(a.cpu().numpy(), b.numpy())


def test_an_explicit_device_wins(lazy_default):
    assert loom.zeros(2, device="cpu").device == CPU
    assert loom.tensor([1], device="cpu").device == CPU
    assert loom.zeros(2, device=None).device == LAZY  # None means the default, as in PyTorch


def test_ops_that_follow_their_input_ignore_it(lazy_default):
    c = loom.ones(3, device="cpu")
    assert loom.zeros_like(c).device == CPU
    assert loom.randn_like(c).device == CPU
    assert c.new_zeros(2).device == CPU
    assert loom.from_numpy(np.ones(2)).device == CPU
    assert (c + 1).device == CPU


def test_modules_built_under_the_default_have_their_parameters_there():
    loom.manual_seed(3)
    cpu_model = loom.nn.Sequential(loom.nn.Linear(4, 3), loom.nn.LayerNorm(3), loom.nn.Conv1d(1, 2, 3))
    loom.manual_seed(3)
    with loom.device("lazy:cpu"):
        lazy_model = loom.nn.Sequential(loom.nn.Linear(4, 3), loom.nn.LayerNorm(3), loom.nn.Conv1d(1, 2, 3))
    for (name, a), (_, b) in zip(cpu_model.state_dict().items(), lazy_model.state_dict().items()):
        assert b.device == LAZY, name
        np.testing.assert_array_equal(b.cpu().numpy(), a.numpy(), err_msg=name)  # the same initial weights


def test_with_blocks_nest_and_restore_even_on_error():
    with loom.device("lazy:cpu") as d:
        assert d == LAZY and loom.get_default_device() == LAZY
        with loom.device("cpu"):
            assert loom.zeros(1).device == CPU
        assert loom.zeros(1).device == LAZY
        with pytest.raises(ZeroDivisionError):
            with loom.device("cpu"):
                1 / 0
        assert loom.get_default_device() == LAZY
    assert loom.get_default_device() == CPU and loom.zeros(1).device == CPU


def test_it_is_per_thread(lazy_default):
    seen = []
    thread = threading.Thread(target=lambda: seen.append((loom.get_default_device(), loom.zeros(1).device)))
    thread.start()
    thread.join()
    assert seen == [(CPU, CPU)]
    assert loom.zeros(1).device == LAZY


def test_bad_devices_raise_where_set_and_change_nothing():
    with pytest.raises(RuntimeError, match="nope"):
        loom.set_default_device("nope")
    with pytest.raises(TypeError):
        loom.set_default_device(1.5)
    if not loom.cuda.is_available():
        with pytest.raises(RuntimeError, match="CUDA"):
            loom.set_default_device("cuda")
        with pytest.raises(RuntimeError, match="CUDA"):
            with loom.device("cuda"):
                pass
    assert loom.get_default_device() == CPU


def test_a_training_loop_written_for_the_cpu_runs_lazily(lazy_default):
    """A script with no device in it: set the default once, and it records, fuses and replays."""
    def run():
        loom.manual_seed(0)
        model = loom.nn.Sequential(loom.nn.Linear(8, 16), loom.nn.Tanh(), loom.nn.Linear(16, 1))
        opt = loom.optim.SGD(model.parameters(), lr=0.1)
        x, y = loom.linspace(-1, 1, 32).reshape(4, 8), loom.arange(4.0).reshape(4, 1) / 4
        losses = []
        for _ in range(5):
            opt.zero_grad()
            loss = loom.nn.functional.mse_loss(model(x), y)
            loss.backward()
            opt.step()
            losses.append(loss.item())
        return losses, model[0].weight.device
    before = loom.metrics()["traces"]
    lazy_losses, where = run()
    assert where == LAZY and loom.metrics()["traces"] > before
    loom.set_default_device(None)
    cpu_losses, where = run()
    assert where == CPU
    np.testing.assert_allclose(lazy_losses, cpu_losses, rtol=1e-5)


def test_host_side_helpers_stay_on_the_cpu(lazy_default, tmp_path):
    # checkpoints load where they were saved (map_location moves them), as torch.load does
    loom.save({"w": loom.ones(2, device="cpu")}, tmp_path / "c.pt")
    assert loom.load(tmp_path / "c.pt")["w"].device == CPU
    # a packed sequence's batch sizes are a CPU tensor, as PyTorch's
    seqs = [loom.ones(3, 2), loom.ones(2, 2)]
    packed = loom.nn.utils.rnn.pack_sequence(seqs)
    assert packed.data.device == LAZY and packed.batch_sizes.device == CPU
    _, lengths = loom.nn.utils.rnn.pad_packed_sequence(packed)
    assert lengths.device == CPU
    # a DataLoader's sampler draws on the CPU: the same order as without the default
    data = loom.utils.data.TensorDataset(loom.arange(10))
    loom.manual_seed(5)
    order = [int(b) for (b,) in loom.utils.data.DataLoader(data, shuffle=True)]
    loom.set_default_device(None)
    loom.manual_seed(5)
    assert order == [int(b) for (b,) in loom.utils.data.DataLoader(data, shuffle=True)]
