"""loom.cpu.amp: torch.cpu.amp's autocast (loom.amp's, for device_type "cpu", bfloat16 by default)."""

import loom
from loom.amp import autocast_mode


class autocast(autocast_mode.autocast):
    def __init__(self, enabled=True, dtype=loom.bfloat16, cache_enabled=True):
        super().__init__("cpu", dtype=dtype, enabled=enabled, cache_enabled=cache_enabled)
