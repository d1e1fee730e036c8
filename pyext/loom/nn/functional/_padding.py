"""Padding of loom.nn.functional."""

from loom import _C

pad = _C.pad
