"""loom.amp: automatic mixed precision, as torch.amp: autocast regions (autocast_mode.py) and loss
scaling (grad_scaler.py)."""

from loom.amp.autocast_mode import autocast, custom_bwd, custom_fwd  # noqa: F401
from loom.amp.grad_scaler import GradScaler, OptState  # noqa: F401
