"""Folding an eval-mode batch norm into the convolution or linear layer before it
(torch.nn.utils.fusion): inference then runs one layer instead of two.

With running statistics m, v and affine w, b, batch norm maps y to (y - m) / sqrt(v + eps) * w + b,
which is linear in y; composed with y = W x + c it is (W * s) x + (c - m) * s + b, s = w / sqrt(v + eps),
applied per output channel (dimension 0 of a convolution's or linear layer's weight, dimension 1 of a
transposed convolution's)."""

import copy

import loom

__all__ = ["fuse_conv_bn_eval", "fuse_conv_bn_weights", "fuse_linear_bn_eval", "fuse_linear_bn_weights"]


def _folded(weight, bias, running_mean, running_var, eps, bn_weight, bn_bias, channel_dim):
    """(weight * s, (bias - mean) * s + bn_bias) with s broadcast along channel_dim of weight."""
    bias = loom.zeros_like(running_mean) if bias is None else bias
    bn_weight = loom.ones_like(running_mean) if bn_weight is None else bn_weight
    bn_bias = loom.zeros_like(running_mean) if bn_bias is None else bn_bias
    scale = bn_weight * loom.rsqrt(running_var + eps)
    if channel_dim == 1 and weight.shape[1] != scale.numel():
        # A grouped transposed convolution: weight (in, out / groups, k...), output channel
        # g * out / groups + j in column j of group g's rows (PyTorch 1.13 raises here).
        groups = scale.numel() // weight.shape[1]
        grouped = weight.reshape(groups, weight.shape[0] // groups, *weight.shape[1:])
        scaled = (grouped * scale.reshape(groups, 1, -1, *[1] * (weight.dim() - 2))).reshape(weight.shape)
    else:
        shape = [1] * weight.dim()
        shape[channel_dim] = -1
        scaled = weight * scale.reshape(shape)
    return (loom.nn.Parameter(scaled, weight.requires_grad),
            loom.nn.Parameter((bias - running_mean) * scale + bn_bias, weight.requires_grad))


def _check_eval(layer, bn):
    if layer.training or bn.training:
        raise AssertionError("Fusion only for eval!")


def fuse_conv_bn_weights(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, transpose=False):
    """The weight and bias (Parameters) of a convolution that computes bn(conv(x))."""
    return _folded(conv_w, conv_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, 1 if transpose else 0)


def fuse_conv_bn_eval(conv, bn, transpose=False):
    """A copy of conv (eval mode) that computes bn(conv(x)); conv and bn are unchanged."""
    _check_eval(conv, bn)
    fused = copy.deepcopy(conv)
    fused.weight, fused.bias = fuse_conv_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                    bn.eps, bn.weight, bn.bias, transpose)
    return fused


def fuse_linear_bn_weights(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b):
    """The weight and bias (Parameters) of a linear layer that computes bn(linear(x))."""
    return _folded(linear_w, linear_b, bn_rm, bn_rv, bn_eps, bn_w, bn_b, 0)


def fuse_linear_bn_eval(linear, bn):
    """A copy of linear (eval mode) that computes bn(linear(x)); linear and bn are unchanged."""
    _check_eval(linear, bn)
    if linear.out_features != bn.num_features:
        raise AssertionError("To fuse, linear.out_features must equal bn.num_features")
    fused = copy.deepcopy(linear)
    fused.weight, fused.bias = fuse_linear_bn_weights(fused.weight, fused.bias, bn.running_mean, bn.running_var,
                                                      bn.eps, bn.weight, bn.bias)
    return fused
