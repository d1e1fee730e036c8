"""BatchNorm1d/2d/3d (torch.nn.modules.batchnorm) and _NormBase, which InstanceNorm shares.

Training updates the running statistics in place (`running_mean`, `running_var`,
`num_batches_tracked` keep their storage), so in lazy mode the updates are part of the step's
trace and a replayed graph writes them where they are. momentum=None is the cumulative average
1 / num_batches_tracked, computed as a tensor from the counter: reading the counter as a Python
number would sync every step.
"""

import loom
from loom.nn import functional as F
from loom.nn import init
from loom.nn.modules.linear import _factory
from loom.nn.modules.module import Module
from loom.nn.parameter import Parameter


class _NormBase(Module):
    """The parameters (weight, bias) and running statistics of batch and instance norm."""

    _version = 2  # state dicts of version 2 have num_batches_tracked

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=True, track_running_stats=True, device=None,
                 dtype=None):
        super().__init__()
        self.num_features, self.eps, self.momentum = num_features, eps, momentum
        self.affine, self.track_running_stats = affine, track_running_stats
        kw = _factory(device, dtype)
        if affine:
            self.weight = Parameter(loom.empty(num_features, **kw))
            self.bias = Parameter(loom.empty(num_features, **kw))
        else:
            self.register_parameter("weight", None)
            self.register_parameter("bias", None)
        if track_running_stats:
            self.register_buffer("running_mean", loom.zeros(num_features, **kw))
            self.register_buffer("running_var", loom.ones(num_features, **kw))
            self.register_buffer("num_batches_tracked", loom.tensor(0, dtype=loom.int64, device=device))
        else:
            self.register_buffer("running_mean", None)
            self.register_buffer("running_var", None)
            self.register_buffer("num_batches_tracked", None)
        self.reset_parameters()

    def reset_running_stats(self):
        if self.track_running_stats:
            with loom.no_grad():
                self.running_mean.zero_()
                self.running_var.fill_(1)
                self.num_batches_tracked.zero_()

    def reset_parameters(self):
        self.reset_running_stats()
        if self.affine:
            init.ones_(self.weight)
            init.zeros_(self.bias)

    def _check_input_dim(self, input):
        raise NotImplementedError

    def extra_repr(self):
        return (f"{self.num_features}, eps={self.eps}, momentum={self.momentum}, affine={self.affine}, "
                f"track_running_stats={self.track_running_stats}")

    def _load_from_state_dict(self, state_dict, prefix, local_metadata, strict, missing, unexpected, errors):
        # State dicts older than version 2 (or without metadata) have no num_batches_tracked: it
        # starts at 0, as in PyTorch.
        version = local_metadata.get("version", None)
        key = prefix + "num_batches_tracked"
        if (version is None or version < 2) and self.track_running_stats and key not in state_dict:
            state_dict[key] = loom.tensor(0, dtype=loom.int64)
        super()._load_from_state_dict(state_dict, prefix, local_metadata, strict, missing, unexpected, errors)


class _BatchNorm(_NormBase):
    def forward(self, input):
        self._check_input_dim(input)
        factor = 0.0 if self.momentum is None else self.momentum
        if self.training and self.track_running_stats and self.num_batches_tracked is not None:
            with loom.no_grad():
                self.num_batches_tracked.add_(1)
            if self.momentum is None:  # the cumulative average
                factor = self.num_batches_tracked.to(self.running_mean.dtype).reciprocal()
        # batch statistics in training, and in eval when there are no running statistics
        use_batch = self.training or (self.running_mean is None and self.running_var is None)
        keep = not self.training or self.track_running_stats
        return F.batch_norm(input, self.running_mean if keep else None, self.running_var if keep else None,
                            self.weight, self.bias, use_batch, factor, self.eps)


class BatchNorm1d(_BatchNorm):
    """Batch norm of (N, C) or (N, C, L) input."""

    def _check_input_dim(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"expected 2D or 3D input (got {input.dim()}D input)")


class BatchNorm2d(_BatchNorm):
    """Batch norm of (N, C, H, W) input."""

    def _check_input_dim(self, input):
        if input.dim() != 4:
            raise ValueError(f"expected 4D input (got {input.dim()}D input)")


class BatchNorm3d(_BatchNorm):
    """Batch norm of (N, C, D, H, W) input."""

    def _check_input_dim(self, input):
        if input.dim() != 5:
            raise ValueError(f"expected 5D input (got {input.dim()}D input)")
