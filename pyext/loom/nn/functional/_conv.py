"""Convolution of loom.nn.functional: conv1d-3d, conv_transpose1d-3d, unfold (im2col), fold (col2im).

Written in loom ops (lazy/ops_conv.cpp, lazy/ops_windows.cpp): a strided window view of the
padded input feeds one matrix product, so fusion, OpenBLAS and cuBLAS serve them and autograd
derives their gradients.
"""

from loom import _C
from loom import _argcheck

conv1d = _C.conv1d
conv2d = _C.conv2d
conv3d = _C.conv3d
conv_transpose1d = _C.conv_transpose1d
conv_transpose2d = _C.conv_transpose2d
conv_transpose3d = _C.conv_transpose3d


def unfold(input, kernel_size, dilation=1, padding=0, stride=1):
    """The sliding blocks of a (N, C, H, W) input as columns: (N, C * kh * kw, L), L the number
    of blocks (im2col). Unbatched (C, H, W) input gives (C * kh * kw, L)."""
    _argcheck.tensor("unfold", "input", input, 1)
    return _C._im2col(input, kernel_size, dilation, padding, stride)


def fold(input, output_size, kernel_size, dilation=1, padding=0, stride=1):
    """The inverse direction of unfold (col2im): columns (N, C * kh * kw, L) summed into an
    (N, C, *output_size) tensor, overlapping blocks added."""
    _argcheck.tensor("fold", "input", input, 1)
    return _C._col2im(input, output_size, kernel_size, dilation, padding, stride)
