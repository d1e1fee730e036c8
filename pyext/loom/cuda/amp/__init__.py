"""loom.cuda.amp: torch.cuda.amp's autocast and GradScaler (loom.amp's, for device_type "cuda")."""

import functools

import loom
from loom.amp import autocast_mode, grad_scaler


class autocast(autocast_mode.autocast):
    """autocast("cuda", ...): float16 by default. Without a GPU it warns and is disabled, as PyTorch's."""

    def __init__(self, enabled=True, dtype=loom.float16, cache_enabled=True):
        super().__init__("cuda", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)


class GradScaler(grad_scaler.GradScaler):
    """GradScaler("cuda", ...). Without a GPU it warns and is disabled, as PyTorch's."""

    def __init__(self, init_scale=2.0 ** 16, growth_factor=2.0, backoff_factor=0.5, growth_interval=2000,
                 enabled=True):
        super().__init__("cuda", init_scale, growth_factor, backoff_factor, growth_interval, enabled)


custom_fwd = functools.partial(autocast_mode.custom_fwd, device_type="cuda")
custom_bwd = functools.partial(autocast_mode.custom_bwd, device_type="cuda")
