"""Embedding and EmbeddingBag (torch.nn.modules.sparse): rows of a weight picked by index."""

import loom
from loom.nn import functional as F
from loom.nn import init
from loom.nn.modules.linear import _factory
from loom.nn.modules.module import Module
from loom.nn.parameter import Parameter


def _padding_row(padding_idx, num_embeddings):
    """padding_idx as the row it names (PyTorch keeps a negative index as that row)."""
    if padding_idx is None:
        return None
    if padding_idx > 0:
        assert padding_idx < num_embeddings, "Padding_idx must be within num_embeddings"
    elif padding_idx < 0:
        assert padding_idx >= -num_embeddings, "Padding_idx must be within num_embeddings"
        padding_idx = num_embeddings + padding_idx
    return padding_idx


def _make_weight(num_embeddings, embedding_dim, _weight, device, dtype):
    if _weight is None:
        return Parameter(loom.empty(num_embeddings, embedding_dim, **_factory(device, dtype))), True
    if list(_weight.shape) != [num_embeddings, embedding_dim]:
        raise AssertionError("Shape of weight does not match num_embeddings and embedding_dim")
    return Parameter(_weight), False


def _dense_only(sparse):
    # A module asked for sparse gradients would feed an optimizer that expects them (SparseAdam).
    if sparse:
        raise NotImplementedError("loom has no sparse gradients: use sparse=False (the default)")


class Embedding(Module):
    """A lookup table: input indices (any shape) pick rows of weight (num_embeddings,
    embedding_dim), initialized N(0, 1) with the padding_idx row zero."""

    def __init__(self, num_embeddings, embedding_dim, padding_idx=None, max_norm=None, norm_type=2.0,
                 scale_grad_by_freq=False, sparse=False, _weight=None, device=None, dtype=None):
        super().__init__()
        _dense_only(sparse)
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.padding_idx = _padding_row(padding_idx, num_embeddings)
        self.max_norm, self.norm_type, self.sparse = max_norm, norm_type, False
        self.scale_grad_by_freq = scale_grad_by_freq
        self.weight, fresh = _make_weight(num_embeddings, embedding_dim, _weight, device, dtype)
        if fresh:
            self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)
        self._fill_padding_idx_with_zero()

    def _fill_padding_idx_with_zero(self):
        if self.padding_idx is not None:
            with loom.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input):
        return F.embedding(input, self.weight, self.padding_idx, self.max_norm, self.norm_type, self.scale_grad_by_freq)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        if self.max_norm is not None:
            s += f", max_norm={self.max_norm}"
        if self.norm_type != 2:
            s += f", norm_type={self.norm_type}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, padding_idx=None, max_norm=None, norm_type=2.0,
                        scale_grad_by_freq=False, sparse=False):
        """An Embedding whose weight is `embeddings` (2-D), frozen unless freeze=False."""
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        m = cls(rows, cols, _weight=embeddings, padding_idx=padding_idx, max_norm=max_norm, norm_type=norm_type,
                scale_grad_by_freq=scale_grad_by_freq, sparse=sparse)
        m.weight.requires_grad_(not freeze)
        return m


class EmbeddingBag(Module):
    """The sum, mean or max of bags of embeddings (F.embedding_bag): input (B, N) is B bags of N
    indices; 1-D input with `offsets` is bags starting at those offsets. Indices equal to
    padding_idx are left out of their bag."""

    def __init__(self, num_embeddings, embedding_dim, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                 mode="mean", sparse=False, _weight=None, include_last_offset=False, padding_idx=None, device=None,
                 dtype=None):
        super().__init__()
        _dense_only(sparse)
        if mode not in ("sum", "mean", "max"):
            raise ValueError("mode has to be one of sum, mean or max")
        self.num_embeddings, self.embedding_dim = num_embeddings, embedding_dim
        self.max_norm, self.norm_type, self.sparse = max_norm, norm_type, False
        self.scale_grad_by_freq = scale_grad_by_freq
        self.mode, self.include_last_offset = mode, include_last_offset
        self.padding_idx = _padding_row(padding_idx, num_embeddings)
        self.weight, fresh = _make_weight(num_embeddings, embedding_dim, _weight, device, dtype)
        if fresh:
            self.reset_parameters()

    def reset_parameters(self):
        init.normal_(self.weight)
        if self.padding_idx is not None:
            with loom.no_grad():
                self.weight[self.padding_idx] = 0.0

    def forward(self, input, offsets=None, per_sample_weights=None):
        return F.embedding_bag(input, self.weight, offsets, self.max_norm, self.norm_type, self.scale_grad_by_freq,
                               self.mode, per_sample_weights=per_sample_weights,
                               include_last_offset=self.include_last_offset, padding_idx=self.padding_idx)

    def extra_repr(self):
        s = f"{self.num_embeddings}, {self.embedding_dim}"
        if self.mode is not None:
            s += f", mode={self.mode}"
        if self.padding_idx is not None:
            s += f", padding_idx={self.padding_idx}"
        return s

    @classmethod
    def from_pretrained(cls, embeddings, freeze=True, max_norm=None, norm_type=2.0, scale_grad_by_freq=False,
                        mode="mean", sparse=False, include_last_offset=False, padding_idx=None):
        if embeddings.dim() != 2:
            raise AssertionError("Embeddings parameter is expected to be 2-dimensional")
        rows, cols = embeddings.shape
        m = cls(rows, cols, _weight=embeddings, max_norm=max_norm, norm_type=norm_type,
                scale_grad_by_freq=scale_grad_by_freq, mode=mode, sparse=sparse,
                include_last_offset=include_last_offset, padding_idx=padding_idx)
        m.weight.requires_grad_(not freeze)
        return m
