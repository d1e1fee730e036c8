"""loom imported under PyTorch's name (`sys.modules["torch"] = loom`, as harnesses run unmodified
scripts): `import torch.nn`, `from torch.utils.data import ...` give loom's own modules, not
second copies whose classes would differ from loom's. Run in a child process: the alias would
hide the real torch from the other tests."""

import subprocess
import sys
import textwrap

SCRIPT = textwrap.dedent("""
    import sys
    import loom
    import loom.nn, loom.nn.functional, loom.optim, loom.utils.data, loom.nn.parallel
    originals = {name: sys.modules[name] for name in ("loom.nn", "loom.nn.functional", "loom.optim",
                                                      "loom.utils.data", "loom.nn.parallel")}
    sys.modules["torch"] = loom
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torch.optim as optim
    from torch.utils.data import DataLoader, TensorDataset
    from torch.nn.parallel import DistributedDataParallel
    # the modules loom imported first, not copies (a copy would also have replaced loom.nn etc.)
    assert nn is originals["loom.nn"] is loom.nn and F is originals["loom.nn.functional"]
    assert optim is originals["loom.optim"] is loom.optim
    assert DataLoader is originals["loom.utils.data"].DataLoader
    assert DistributedDataParallel is originals["loom.nn.parallel"].DistributedDataParallel
    assert sys.modules["torch.nn"] is originals["loom.nn"]

    class Net(nn.Module):  # a script's model: its parameters are loom's Parameters
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(3, 1)

        def forward(self, x):
            return F.relu(self.fc(x))

    net = Net().to("lazy")
    opt = optim.SGD(net.parameters(), lr=0.1)
    data = DataLoader(TensorDataset(torch.randn(8, 3), torch.randn(8, 1)), batch_size=4)
    for x, y in data:
        opt.zero_grad()
        F.mse_loss(net(x.to("lazy")), y.to("lazy")).backward()
        opt.step()
    assert isinstance(net.fc.weight, loom.nn.Parameter) and len(list(net.parameters())) == 2
    try:
        import torch.no_such_module
    except ModuleNotFoundError as e:
        assert "no_such_module" in str(e)
    else:
        raise AssertionError("a missing submodule imported")
    import json  # other packages are untouched
    print("ok")
""")


def test_submodules_of_an_alias_are_loom_modules():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr
