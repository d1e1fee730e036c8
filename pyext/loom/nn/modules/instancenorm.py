"""InstanceNorm1d/2d/3d (torch.nn.modules.instancenorm): each (sample, channel) normalized over
its own spatial dims; without affine parameters or running statistics by default."""

import warnings

from loom.nn import functional as F
from loom.nn.modules.batchnorm import _NormBase


class _InstanceNorm(_NormBase):
    _spatial_dims = None  # set by each subclass: 1, 2 or 3

    def __init__(self, num_features, eps=1e-5, momentum=0.1, affine=False, track_running_stats=False, device=None,
                 dtype=None):
        super().__init__(num_features, eps, momentum, affine, track_running_stats, device, dtype)

    def _check_input_dim(self, input):
        d = self._spatial_dims
        if input.dim() not in (d + 1, d + 2):
            raise ValueError(f"expected {d + 1}D or {d + 2}D input (got {input.dim()}D input)")

    def forward(self, input):
        self._check_input_dim(input)
        unbatched = input.dim() == self._spatial_dims + 1
        if unbatched:
            input = input.unsqueeze(0)
        if input.shape[1] != self.num_features:
            if self.affine:
                raise ValueError(f"expected input's size at dim=1 to match num_features ({self.num_features}), "
                                 f"but got: {input.shape[1]}.")
            warnings.warn(f"input's size at dim=1 does not match num_features. You can silence this warning by "
                          f"not passing in num_features, which is not used because affine=False")
        out = F.instance_norm(input, self.running_mean, self.running_var, self.weight, self.bias,
                              self.training or not self.track_running_stats, self.momentum, self.eps)
        return out.squeeze(0) if unbatched else out


class InstanceNorm1d(_InstanceNorm):
    _spatial_dims = 1


class InstanceNorm2d(_InstanceNorm):
    _spatial_dims = 2


class InstanceNorm3d(_InstanceNorm):
    _spatial_dims = 3
