"""loom.nn.attention, as torch.nn.attention: SDPBackend and sdpa_kernel, which choose among
PyTorch's attention implementations. loom has one scaled_dot_product_attention (a composite with
its own derivative, lazy/ops_attention.cpp), which serves every choice; the choice is kept in
loom.backends.cuda's flags, where PyTorch keeps it, so code that reads them back sees it."""

from loom.backends.cuda import SDPBackend, _sdp_enabled, _sdp_flags


def sdpa_kernel(backends, set_priority=False):
    """A `with` block in which only `backends` (one SDPBackend or a list) are enabled."""
    chosen = [backends] if isinstance(backends, SDPBackend) else list(backends)
    for b in chosen:
        if not isinstance(b, SDPBackend):
            raise AssertionError("Backend must be an instance of SDPBackend")
    return _sdp_flags({b: b in chosen for b in _sdp_enabled})


__all__ = ["SDPBackend", "sdpa_kernel"]
