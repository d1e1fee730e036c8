"""Gradient clipping (torch.nn.utils.clip_grad). In lazy mode the norm and the scaling of the
gradients are ops of the step's trace: nothing syncs unless error_if_nonfinite asks for the
norm's value (which needs it on the host)."""

import warnings

import loom


def _grads(parameters):
    if isinstance(parameters, loom.Tensor):
        parameters = [parameters]
    return [p.grad for p in parameters if p.grad is not None]


def clip_grad_norm_(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Scales the gradients in place so that their total norm (the norm of the vector of every
    gradient's norm) is at most max_norm; returns the total norm before clipping, a 0-d tensor.
    foreach is accepted: loom records one trace either way."""
    grads = _grads(parameters)
    max_norm, norm_type = float(max_norm), float(norm_type)
    if not grads:
        return loom.tensor(0.0)
    with loom.no_grad():
        if norm_type == float("inf"):
            norms = [g.abs().amax() for g in grads]
            total = norms[0] if len(norms) == 1 else loom.stack(norms).amax()
        else:
            total = loom.stack([g.norm(norm_type) for g in grads]).norm(norm_type)
        if error_if_nonfinite and bool(total.isnan() | total.isinf()):
            raise RuntimeError(f"The total norm of order {norm_type} for gradients from `parameters` is non-finite, "
                               "so it cannot be clipped. To disable this error and scale the gradients by the "
                               "non-finite norm anyway, set `error_if_nonfinite=False`")
        coef = (max_norm / (total + 1e-6)).clamp(max=1.0)
        for g in grads:
            g.mul_(coef.to(g.dtype))
    return total


def clip_grad_norm(parameters, max_norm, norm_type=2.0, error_if_nonfinite=False, foreach=None):
    """Deprecated: clip_grad_norm_."""
    warnings.warn("torch.nn.utils.clip_grad_norm is now deprecated in favor of torch.nn.utils.clip_grad_norm_.",
                  stacklevel=2)
    return clip_grad_norm_(parameters, max_norm, norm_type, error_if_nonfinite, foreach)


def clip_grad_value_(parameters, clip_value, foreach=None):
    """Clamps every gradient to [-clip_value, clip_value] in place."""
    clip_value = float(clip_value)
    with loom.no_grad():
        for g in _grads(parameters):
            g.clamp_(min=-clip_value, max=clip_value)
