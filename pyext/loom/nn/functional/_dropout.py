"""Dropout of loom.nn.functional."""

import loom


def dropout(input, p=0.5, training=True, inplace=False):
    """Zeroes elements with probability p and scales the rest by 1 / (1 - p). In lazy mode the
    mask is a random op of the trace: a replayed graph draws a new mask every step."""
    if p < 0.0 or p > 1.0:
        raise ValueError(f"dropout probability has to be between 0 and 1, but got {p}")
    if not training or p == 0.0:
        return input
    if p == 1.0:
        out = input * 0.0
    else:
        keep = loom.rand_like(input) >= p
        out = input * keep * (1.0 / (1.0 - p))
    if inplace:
        input.copy_(out)
        return input
    return out
