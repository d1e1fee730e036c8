"""Linear maps of loom.nn.functional: linear, bilinear."""

from loom import _C
from loom import _argcheck

linear = _C.linear


def bilinear(input1, input2, weight, bias=None):
    """y[..., o] = sum_ij input1[..., i] weight[o, i, j] input2[..., j] + bias[o]: one matrix
    product of input1 with the weight, then a product-sum with input2."""
    _argcheck.tensor("bilinear", "input1", input1, 1)
    _argcheck.tensor("bilinear", "input2", input2, 2)
    _argcheck.tensor("bilinear", "weight", weight, 3)
    _argcheck.tensor("bilinear", "bias", bias, 4, optional=True)
    if input1.shape[:-1] != input2.shape[:-1]:
        raise RuntimeError(f"bilinear(): input batch dimensions do not match: got {list(input1.shape[:-1])} and "
                           f"{list(input2.shape[:-1])}")
    out_features, in1, in2 = weight.shape
    if input1.shape[-1] != in1 or input2.shape[-1] != in2:
        raise RuntimeError(f"bilinear(): input sizes {input1.shape[-1]} and {input2.shape[-1]} do not match the "
                           f"weight's {in1} and {in2} (weight of size {list(weight.shape)})")
    # (..., in1) @ (in1, out * in2) -> (..., out, in2), then contract in2 with input2
    mixed = (input1 @ weight.permute(1, 0, 2).reshape(in1, out_features * in2)).unflatten(-1, (out_features, in2))
    out = (mixed * input2.unsqueeze(-2)).sum(-1)
    return out + bias if bias is not None else out
