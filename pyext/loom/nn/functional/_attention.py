"""Attention of loom.nn.functional: scaled_dot_product_attention, multi_head_attention_forward."""

import math

import loom
from loom import _C
from loom import _argcheck
from loom.nn.functional._dropout import dropout
from loom.nn.functional._linear import linear


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False):
    """softmax(q k^T * scale + mask) v over (..., L, E) queries and (..., S, E) keys, PyTorch 2's
    function: attn_mask is bool (True: may attend) or added to the scores; is_causal masks the
    keys after each query (top-left aligned); dropout_p drops attention weights (always, as
    PyTorch's function does: pass 0.0 in evaluation); enable_gqa lets key and value have fewer
    heads (dim -3) than query, each shared by a group of query heads. One op with its own
    derivative from the saved probabilities: two products and a row kernel each way."""
    _argcheck.tensors("scaled_dot_product_attention", query=query, key=key, value=value)
    if is_causal and attn_mask is not None:
        raise RuntimeError("_scaled_dot_product_attention: Explicit attn_mask should not be set when is_causal=True")
    if enable_gqa and query.dim() >= 3 and key.shape[-3] != query.shape[-3]:
        heads, kv_heads = query.shape[-3], key.shape[-3]
        if heads % kv_heads != 0:
            raise RuntimeError(f"Number of heads in key and value must divide the number of heads in query, got "
                               f"{kv_heads} and {heads}")
        group = heads // kv_heads  # each key / value head repeated for its group (repeat_interleave on dim -3)
        key = key.unsqueeze(-3).expand(*key.shape[:-2], group, *key.shape[-2:]).flatten(-4, -3)
        value = value.unsqueeze(-3).expand(*value.shape[:-2], group, *value.shape[-2:]).flatten(-4, -3)
    if attn_mask is None or not attn_mask.requires_grad:
        # One op with its own derivative from the saved probabilities (lazy/ops_attention.cpp).
        return _C._scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale)
    # A float mask that requires grad: the composition, which differentiates it too.
    scale = 1.0 / math.sqrt(query.shape[-1]) if scale is None else scale
    scores = (query @ key.transpose(-2, -1)) * scale
    if attn_mask.dtype is loom.bool:
        scores = scores.masked_fill(~attn_mask, float("-inf"))
    else:
        scores = scores + attn_mask
    weights = scores.softmax(-1)
    if dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    return weights @ value


# ---- multi-head attention ----

def _pad_last(mask):
    """A mask with one more (unmasked) position on its last dim: for bias_k/v and add_zero_attn."""
    if mask is None:
        return None
    return loom.cat([mask, loom.zeros(*mask.shape[:-1], 1, dtype=mask.dtype, device=mask.device)], -1)


def multi_head_attention_forward(query, key, value, embed_dim_to_check, num_heads, in_proj_weight, in_proj_bias,
                                 bias_k, bias_v, add_zero_attn, dropout_p, out_proj_weight, out_proj_bias,
                                 training=True, key_padding_mask=None, need_weights=True, attn_mask=None,
                                 use_separate_proj_weight=False, q_proj_weight=None, k_proj_weight=None,
                                 v_proj_weight=None, static_k=None, static_v=None, average_attn_weights=True,
                                 is_causal=False):
    """PyTorch's multi-head attention on (L, N, E) query and (S, N, E_k), (S, N, E_v) key and
    value (or unbatched (L, E), (S, E_k), (S, E_v)). Masks: attn_mask (L, S) or (N * heads, L,
    S), key_padding_mask (N, S); a bool mask marks positions NOT to attend to, a float mask is
    added to the scores. Returns (output, weights): weights (N, L, S) averaged over heads, or
    (N, heads, L, S), or None without need_weights."""
    _argcheck.tensors("multi_head_attention_forward", query=query, key=key, value=value)
    if query.dim() not in (2, 3) or key.dim() != query.dim() or value.dim() != query.dim():
        raise AssertionError(f"query, key and value should be all 2-D (unbatched) or all 3-D (batched), but got "
                             f"{query.dim()}-D, {key.dim()}-D and {value.dim()}-D tensors")
    batched = query.dim() == 3
    if not batched:
        query, key, value = query.unsqueeze(1), key.unsqueeze(1), value.unsqueeze(1)
        if key_padding_mask is not None:
            if key_padding_mask.dim() != 1:
                raise AssertionError(f"For unbatched (2-D) `query`, expected `key_padding_mask` to be `None` or 1-D "
                                     f"but found {key_padding_mask.dim()}-D tensor instead")
            key_padding_mask = key_padding_mask.unsqueeze(0)
    tgt_len, bsz, embed_dim = query.shape
    if embed_dim != embed_dim_to_check:
        raise AssertionError(f"was expecting embedding dimension of {embed_dim_to_check}, but got {embed_dim}")
    head_dim = embed_dim // num_heads
    if head_dim * num_heads != embed_dim:
        raise AssertionError(f"embed_dim {embed_dim} not divisible by num_heads {num_heads}")
    if key_padding_mask is not None and key_padding_mask.dtype is not loom.bool \
            and not key_padding_mask.is_floating_point():
        raise AssertionError("only bool and floating types of key_padding_mask are supported")

    # the input projections
    if not use_separate_proj_weight:
        if key.shape != value.shape:
            raise AssertionError(f"key shape {key.shape} does not match value shape {value.shape}")
        if query is key and key is value:  # self-attention: one product
            q, k, v = linear(query, in_proj_weight, in_proj_bias).chunk(3, -1)
        else:
            w_q, w_k, w_v = in_proj_weight.chunk(3)
            b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
            q = linear(query, w_q, b_q)
            if key is value:
                k, v = linear(key, loom.cat([w_k, w_v]),
                              loom.cat([b_k, b_v]) if b_k is not None else None).chunk(2, -1)
            else:
                k, v = linear(key, w_k, b_k), linear(value, w_v, b_v)
    else:
        if key.shape[:2] != value.shape[:2]:
            raise AssertionError(f"key's sequence and batch dims {key.shape[:2]} do not match value's "
                                 f"{value.shape[:2]}")
        b_q, b_k, b_v = in_proj_bias.chunk(3) if in_proj_bias is not None else (None, None, None)
        q, k, v = linear(query, q_proj_weight, b_q), linear(key, k_proj_weight, b_k), linear(value, v_proj_weight, b_v)

    if is_causal and attn_mask is None:
        attn_mask = ~loom.ones(tgt_len, key.shape[0], dtype=loom.bool, device=query.device).tril()
    if attn_mask is not None:
        if attn_mask.dtype is loom.uint8:
            attn_mask = attn_mask.to(loom.bool)
        elif not (attn_mask.is_floating_point() or attn_mask.dtype is loom.bool):
            raise AssertionError(f"Only float, byte, and bool types are supported for attn_mask, not {attn_mask.dtype}")
        if attn_mask.dim() == 2:
            if tuple(attn_mask.shape) != (tgt_len, key.shape[0]):
                raise RuntimeError(f"The shape of the 2D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(tgt_len, key.shape[0])}.")
            attn_mask = attn_mask.unsqueeze(0)
        elif attn_mask.dim() == 3:
            if tuple(attn_mask.shape) != (bsz * num_heads, tgt_len, key.shape[0]):
                raise RuntimeError(f"The shape of the 3D attn_mask is {attn_mask.shape}, but should be "
                                   f"{(bsz * num_heads, tgt_len, key.shape[0])}.")
        else:
            raise RuntimeError(f"attn_mask's dimension {attn_mask.dim()} is not supported")

    if bias_k is not None and bias_v is not None:
        if static_k is not None or static_v is not None:
            raise AssertionError("bias cannot be added to static key.")
        k = loom.cat([k, bias_k.expand(1, bsz, embed_dim)])
        v = loom.cat([v, bias_v.expand(1, bsz, embed_dim)])
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    elif bias_k is not None or bias_v is not None:
        raise AssertionError("bias_k and bias_v must be given together")

    # heads: (L, N, E) -> (N * heads, L, head_dim)
    q = q.reshape(tgt_len, bsz * num_heads, head_dim).transpose(0, 1)
    k = k.reshape(k.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_k is None else static_k
    v = v.reshape(v.shape[0], bsz * num_heads, head_dim).transpose(0, 1) if static_v is None else static_v
    for name, s in (("static_k", static_k), ("static_v", static_v)):
        if s is not None and (s.shape[0] != bsz * num_heads or s.shape[2] != head_dim):
            raise AssertionError(f"expecting {name} of size ({bsz * num_heads}, *, {head_dim}), but got "
                                 f"{list(s.shape)}")
    if add_zero_attn:
        zeros = loom.zeros(bsz * num_heads, 1, head_dim, dtype=k.dtype, device=k.device)
        k, v = loom.cat([k, zeros], 1), loom.cat([v, zeros], 1)
        attn_mask, key_padding_mask = _pad_last(attn_mask), _pad_last(key_padding_mask)
    src_len = k.shape[1]

    if key_padding_mask is not None:
        if tuple(key_padding_mask.shape) != (bsz, src_len):
            raise AssertionError(f"expecting key_padding_mask shape of {(bsz, src_len)}, but got "
                                 f"{key_padding_mask.shape}")
        kpm = key_padding_mask.reshape(bsz, 1, 1, src_len).expand(bsz, num_heads, 1, src_len)
        kpm = kpm.reshape(bsz * num_heads, 1, src_len)
        if attn_mask is None:
            attn_mask = kpm
        elif attn_mask.dtype is loom.bool:
            attn_mask = attn_mask | kpm
        else:
            # where(), not masked_fill: the result broadcasts (1, L, S) against (N * heads, 1, S)
            attn_mask = loom.where(kpm, float("-inf"), attn_mask) if kpm.dtype is loom.bool else attn_mask + kpm
    if attn_mask is not None and attn_mask.dtype is loom.bool:
        attn_mask = loom.zeros(attn_mask.shape, dtype=q.dtype, device=q.device).masked_fill(attn_mask, float("-inf"))

    scores = (q / math.sqrt(head_dim)) @ k.transpose(-2, -1)
    if attn_mask is not None:
        scores = scores + attn_mask
    weights = scores.softmax(-1)
    if training and dropout_p > 0.0:
        weights = dropout(weights, dropout_p)
    out = (weights @ v).transpose(0, 1).reshape(tgt_len * bsz, embed_dim)
    out = linear(out, out_proj_weight, out_proj_bias).reshape(tgt_len, bsz, -1)
    if not need_weights:
        return (out if batched else out.squeeze(1)), None
    weights = weights.reshape(bsz, num_heads, tgt_len, src_len)
    if average_attn_weights:
        weights = weights.sum(1) / num_heads
    if not batched:
        return out.squeeze(1), weights.squeeze(0)
    return out, weights
