"""Distances and normalization of loom.nn.functional: cosine_similarity, pairwise_distance, pdist,
normalize."""

import loom
from loom import _C
from loom import _argcheck

cosine_similarity = _C.cosine_similarity
pairwise_distance = _C.pairwise_distance


def normalize(input, p=2.0, dim=1, eps=1e-12):
    """input divided by its p-norm along dim, the norm at least eps (out= is added at import by
    loom/_out.py)."""
    _argcheck.tensor("normalize", "input", input, 1)
    denom = loom.linalg.vector_norm(input, p, dim, keepdim=True).clamp(min=eps)
    return input / denom.expand_as(input)


def pdist(input, p=2.0):
    """The p-norm distances between the rows of a 2-d input, pair (i, j) for i < j in row-major
    order: n * (n - 1) / 2 values."""
    _argcheck.tensor("pdist", "input", input, 1)
    if input.dim() != 2:
        raise RuntimeError(f"pdist only supports 2D tensors, got: {input.dim()}D")
    if not input.is_floating_point():
        raise RuntimeError(f"pdist only supports floating-point dtypes, got {input.dtype}")
    if p < 0:
        raise RuntimeError("pdist only supports non-negative p values")
    n = input.shape[0]
    pairs = loom.triu_indices(n, n, 1, device=input.device)
    return loom.linalg.vector_norm(input[pairs[0]] - input[pairs[1]], p, dim=-1)
