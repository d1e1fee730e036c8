"""DataParallel: torch.nn.DataParallel's interface, on one device.

PyTorch's DataParallel splits each batch over the GPUs of one process and replicates the module
on each. loom runs a step on one device (a lazy step is one trace and one cached plan), so
DataParallel here calls the wrapped module on the whole batch: the results, gradients and the
state dict (keys prefixed "module.") are those PyTorch's gives, and a script written for it runs
unchanged. For several GPUs or processes, use DistributedDataParallel."""

from loom.nn.modules.module import Module


class DataParallel(Module):
    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        self.device_ids = list(device_ids) if device_ids is not None else []
        self.output_device = output_device
        self.dim = dim

    def forward(self, *inputs, **kwargs):
        return self.module(*inputs, **kwargs)
