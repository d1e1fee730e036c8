"""Weight reparametrizations by forward pre-hooks, as torch.nn.utils' (1.13): weight_norm and
spectral_norm. The module's weight becomes a value computed before each forward from new
parameters (weight_g and weight_v; weight_orig), so it differentiates and records lazily like
any other op."""

import loom
import loom.nn.functional as F
from loom.nn.parameter import Parameter


def norm_except_dim(v, pow=2, dim=0):
    """The p-norm of v over every dim but `dim`, shaped to broadcast against v (dim=-1: the norm of all of v)."""
    if dim == -1:
        return v.norm(pow)
    if dim == 0:
        return v.reshape(v.shape[0], -1).norm(pow, dim=1).reshape((v.shape[0],) + (1,) * (v.dim() - 1))
    if dim == v.dim() - 1:
        return v.reshape(-1, v.shape[-1]).norm(pow, dim=0).reshape((1,) * (v.dim() - 1) + (v.shape[-1],))
    return norm_except_dim(v.transpose(0, dim), pow, 0).transpose(0, dim)


def _weight_norm(v, g, dim=0):
    return v * (g / norm_except_dim(v, 2, dim))


class WeightNorm:
    def __init__(self, name, dim):
        self.name = name
        self.dim = -1 if dim is None else dim

    def compute_weight(self, module):
        return _weight_norm(getattr(module, self.name + "_v"), getattr(module, self.name + "_g"), self.dim)

    @staticmethod
    def apply(module, name, dim):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, WeightNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two weight_norm hooks on the same parameter {name}")
        fn = WeightNorm(name, dim)
        weight = getattr(module, name)
        del module._parameters[name]
        module.register_parameter(name + "_g", Parameter(norm_except_dim(weight, 2, fn.dim).detach()))
        module.register_parameter(name + "_v", Parameter(weight.detach()))
        object.__setattr__(module, name, fn.compute_weight(module))
        module.register_forward_pre_hook(fn)
        return fn

    def remove(self, module):
        with loom.no_grad():
            weight = self.compute_weight(module)
        object.__delattr__(module, self.name)
        del module._parameters[self.name + "_g"]
        del module._parameters[self.name + "_v"]
        setattr(module, self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module))


def weight_norm(module, name="weight", dim=0):
    """weight = g * v / ||v||, the norm over every dim but `dim` (dim=None: over all of v), with
    g (`name`_g) and v (`name`_v) the module's parameters in weight's place."""
    WeightNorm.apply(module, name, dim)
    return module


def _remove(module, name, kind, what):
    """Undoes the reparametrization of kind `kind` of module.`name`: the weight is a parameter again."""
    for key, hook in list(module._forward_pre_hooks.items()):
        if isinstance(hook, kind) and hook.name == name:
            hook.remove(module)
            del module._forward_pre_hooks[key]
            return module
    raise ValueError(f"{what} of '{name}' not found in {module}")


def remove_weight_norm(module, name="weight"):
    return _remove(module, name, WeightNorm, "weight_norm")


class SpectralNorm:
    _version = 1

    def __init__(self, name="weight", n_power_iterations=1, dim=0, eps=1e-12):
        if n_power_iterations <= 0:
            raise ValueError("Expected n_power_iterations to be positive, but got "
                             f"n_power_iterations={n_power_iterations}")
        self.name, self.dim, self.n_power_iterations, self.eps = name, dim, n_power_iterations, eps

    def _reshape_weight_to_matrix(self, weight):
        if self.dim != 0:
            weight = weight.permute(self.dim, *[d for d in range(weight.dim()) if d != self.dim])
        return weight.reshape(weight.shape[0], -1)

    def compute_weight(self, module, do_power_iteration):
        """weight / sigma, sigma the largest singular value estimated by power iteration (u and v
        are buffers updated in place, in training mode only, as PyTorch's)."""
        weight = getattr(module, self.name + "_orig")
        u = getattr(module, self.name + "_u")
        v = getattr(module, self.name + "_v")
        weight_mat = self._reshape_weight_to_matrix(weight)
        if do_power_iteration:
            with loom.no_grad():
                for _ in range(self.n_power_iterations):
                    v.copy_(F.normalize(loom.mv(weight_mat.t(), u), dim=0, eps=self.eps))
                    u.copy_(F.normalize(loom.mv(weight_mat, v), dim=0, eps=self.eps))
                u, v = u.clone(), v.clone()
        sigma = loom.dot(u, loom.mv(weight_mat, v))
        return weight / sigma

    def remove(self, module):
        with loom.no_grad():
            weight = self.compute_weight(module, do_power_iteration=False)
        object.__delattr__(module, self.name)
        for suffix in ("_u", "_v"):
            del module._buffers[self.name + suffix]
        del module._parameters[self.name + "_orig"]
        module.register_parameter(self.name, Parameter(weight.detach()))

    def __call__(self, module, inputs):
        object.__setattr__(module, self.name, self.compute_weight(module, do_power_iteration=module.training))

    @staticmethod
    def apply(module, name, n_power_iterations, dim, eps):
        for hook in module._forward_pre_hooks.values():
            if isinstance(hook, SpectralNorm) and hook.name == name:
                raise RuntimeError(f"Cannot register two spectral_norm hooks on the same parameter {name}")
        fn = SpectralNorm(name, n_power_iterations, dim, eps)
        weight = module._parameters[name]
        with loom.no_grad():
            h, w = fn._reshape_weight_to_matrix(weight).shape
            u = F.normalize(loom.randn(h, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
            v = F.normalize(loom.randn(w, dtype=weight.dtype, device=weight.device), dim=0, eps=fn.eps)
        del module._parameters[name]
        module.register_parameter(name + "_orig", weight)
        object.__setattr__(module, name, weight.detach())
        module.register_buffer(name + "_u", u)
        module.register_buffer(name + "_v", v)
        module.register_forward_pre_hook(fn)
        return fn


def spectral_norm(module, name="weight", n_power_iterations=1, eps=1e-12, dim=None):
    """weight / sigma(weight): `name`_orig is the parameter, `name`_u and `name`_v the power
    iteration's buffers (one iteration per forward in training mode)."""
    if dim is None:
        transposed = type(module).__name__ in ("ConvTranspose1d", "ConvTranspose2d", "ConvTranspose3d")
        dim = 1 if transposed else 0
    SpectralNorm.apply(module, name, n_power_iterations, dim, eps)
    return module


def remove_spectral_norm(module, name="weight"):
    return _remove(module, name, SpectralNorm, "spectral_norm")
