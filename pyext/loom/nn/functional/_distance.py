"""Distances and normalization of loom.nn.functional: cosine_similarity, pairwise_distance, normalize."""

import loom
from loom import _C

cosine_similarity = _C.cosine_similarity
pairwise_distance = _C.pairwise_distance


def normalize(input, p=2.0, dim=1, eps=1e-12, out=None):
    """input divided by its p-norm along dim, the norm at least eps."""
    if out is not None:
        raise NotImplementedError("loom's normalize has no out= argument")
    denom = loom.linalg.vector_norm(input, p, dim, keepdim=True).clamp(min=eps)
    return input / denom.expand_as(input)
