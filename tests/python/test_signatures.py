"""The op table (pyext/op_table.h): every function and method it makes parses its arguments as
PyTorch does, and a bad call raises PyTorch's TypeError.

test_bad_calls_match_torch walks the table (loom._C._signatures()): for each row it takes a valid
call (SAMPLES), checks it runs in loom and in torch, then breaks it in a few ways (an argument of a
type no parameter takes, None where the signature has no `?`, an argument left out, an unknown
keyword, one argument too many) and checks loom raises what torch raises. A row without a sample
fails, so a new row comes with one."""

import re
import types

import numpy as np
import pytest

import loom

torch = pytest.importorskip("torch")


class Inputs:
    """The tensors the samples use, made by one library (loom or torch)."""

    def __init__(self, m):
        self.m = m
        self.x = m.tensor([[1.0, -2.0, 3.0], [0.5, 4.0, -1.0]])        # 2 x 3 float
        self.xt = m.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])        # 3 x 2
        self.sq = m.tensor([[1.0, 2.0], [3.0, 4.0]])                    # 2 x 2
        self.spd = m.tensor([[4.0, 2.0], [2.0, 3.0]])                   # 2 x 2 positive-definite
        self.b3 = m.ones(2, 2, 3)
        self.b3t = m.ones(2, 3, 2)
        self.col = m.tensor([[1.0], [2.0]])                             # 2 x 1
        self.i = m.tensor([[1, 2, 3], [4, 5, 6]])                       # int64
        self.b = m.tensor([[True, False, True], [False, True, True]])  # bool
        self.idx = m.tensor([[0, 1, 0], [1, 0, 1]])                     # int64 index, 2 x 3
        self.idx1 = m.tensor([1, 0])                                    # int64 index, 1-d
        self.cls = m.tensor([0, 2, 1])                                  # class labels
        self.w = m.ones(4, 3)


def X(inp):
    return (inp.x,)


def XX(inp):
    return (inp.x, inp.x)


def X0(inp):
    return (inp.x, 0)


# name -> the positional arguments of a valid call (input first: self for the methods).
SAMPLES = {name: X for name in [
    "abs", "neg", "negative", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos",
    "tan", "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "sign", "reciprocal", "isnan", "isinf",
    "square", "round", "gelu", "softplus", "nan_to_num", "norm", "zero_", "zeros_like", "ones_like",
    "empty_like", "rand_like", "randn_like", "t", "contiguous", "clone", "detach", "cpu", "float", "double",
    "half", "bfloat16", "long", "int", "short", "char", "byte", "bool"]}
SAMPLES.update({name: XX for name in [
    "add", "sub", "subtract", "mul", "multiply", "div", "divide", "true_divide", "floor_divide", "remainder",
    "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "copy_", "view_as",
    "reshape_as", "type_as"]})
SAMPLES.update({name: X0 for name in [
    "sum", "mean", "prod", "amax", "amin", "argmax", "argmin", "max", "min", "var", "std", "logsumexp",
    "softmax", "log_softmax", "cumsum", "unbind", "tril", "triu", "size", "stride", "squeeze", "unsqueeze",
    "flatten"]})
SAMPLES.update({
    "logical_not": lambda inp: (inp.b,), "bitwise_not": lambda inp: (inp.i,),
    "logical_and": lambda inp: (inp.b, inp.b), "logical_or": lambda inp: (inp.b, inp.b),
    "logical_xor": lambda inp: (inp.b, inp.b), "bitwise_and": lambda inp: (inp.i, inp.i),
    "bitwise_or": lambda inp: (inp.i, inp.i), "bitwise_xor": lambda inp: (inp.i, inp.i),
    "all": lambda inp: (inp.b, 0), "any": lambda inp: (inp.b, 0),
    "where": lambda inp: (inp.b, inp.x, inp.x), "where.method": lambda inp: (inp.x, inp.b, inp.x),
    "addcmul": lambda inp: (inp.x, inp.x, inp.x), "addcdiv": lambda inp: (inp.x, inp.x, inp.x),
    "clamp": lambda inp: (inp.x, 0.0, 1.0), "clip": lambda inp: (inp.x, 0.0, 1.0),
    "lerp": lambda inp: (inp.x, inp.x, 0.5),
    "matmul": lambda inp: (inp.x, inp.xt), "mm": lambda inp: (inp.x, inp.xt),
    "bmm": lambda inp: (inp.b3, inp.b3t), "addmm": lambda inp: (inp.sq, inp.x, inp.xt),
    "linear": lambda inp: (inp.x, inp.w),
    "cat": lambda inp: ([inp.x, inp.x], 0), "concat": lambda inp: ([inp.x, inp.x], 0),
    "stack": lambda inp: ([inp.x, inp.x], 0),
    "split": lambda inp: (inp.x, 1), "chunk": lambda inp: (inp.x, 2),
    "index_select": lambda inp: (inp.x, 0, inp.idx1), "flip": lambda inp: (inp.x, (0,)),
    "gather": lambda inp: (inp.x, 1, inp.idx), "take_along_dim": lambda inp: (inp.x, inp.idx, 1),
    "scatter_add": lambda inp: (inp.x, 1, inp.idx, inp.x),
    "masked_fill": lambda inp: (inp.x, inp.b, 1.0), "one_hot": lambda inp: (inp.cls, 3),
    "pad": lambda inp: (inp.x, (1, 1)), "fill_": lambda inp: (inp.x, 1.0),
    "view": lambda inp: (inp.x, (3, 2)), "reshape": lambda inp: (inp.x, (3, 2)),
    "expand": lambda inp: (inp.col, (2, 3)), "expand_as": lambda inp: (inp.col, inp.x),
    "broadcast_to": lambda inp: (inp.col, (2, 3)), "permute": lambda inp: (inp.x, (1, 0)),
    "transpose": lambda inp: (inp.x, 0, 1), "unflatten": lambda inp: (inp.x, 1, (3, 1)),
    "narrow": lambda inp: (inp.x, 0, 0, 1), "select": lambda inp: (inp.x, 0, 1),
    "repeat": lambda inp: (inp.x, (1, 2)), "to": lambda inp: (inp.x, inp.m.float64),
    "cuda": None,  # needs a GPU
    "tensor": lambda inp: ([1.0, 2.0],), "as_tensor": lambda inp: ([1.0, 2.0],),
    "zeros": lambda inp: ((2, 3),), "ones": lambda inp: ((2, 3),), "empty": lambda inp: ((2, 3),),
    "rand": lambda inp: ((2, 3),), "randn": lambda inp: ((2, 3),), "full": lambda inp: ((2,), 1.5),
    "randint": lambda inp: (5, (2,)), "arange": lambda inp: (5,), "linspace": lambda inp: (0.0, 1.0, 5),
    "eye": lambda inp: (3,), "full_like": lambda inp: (inp.x, 1.5), "randint_like": lambda inp: (inp.x, 5),
})
# convolution and pooling (op_rows_nn.cpp): images made from the 2 x 3 sample, (N, C, spatial...)
SAMPLES.update({
    "conv1d": lambda inp: (inp.b3, inp.m.ones(4, 2, 2)), "conv2d": lambda inp: (inp.b3[None], inp.m.ones(4, 2, 2, 2)),
    "conv3d": lambda inp: (inp.b3[None, None], inp.m.ones(4, 1, 1, 2, 2)),
    "conv_transpose1d": lambda inp: (inp.b3, inp.m.ones(2, 4, 2)),
    "conv_transpose2d": lambda inp: (inp.b3[None], inp.m.ones(2, 4, 2, 2)),
    "conv_transpose3d": lambda inp: (inp.b3[None, None], inp.m.ones(1, 4, 1, 2, 2)),
    "max_pool1d": lambda inp: (inp.b3, 2), "max_pool2d": lambda inp: (inp.b3, 2),
    "max_pool3d": lambda inp: (inp.b3[None], 2), "max_pool1d_with_indices": lambda inp: (inp.b3, 2),
    "max_pool2d_with_indices": lambda inp: (inp.b3, 2), "max_pool3d_with_indices": lambda inp: (inp.b3[None], 2),
    "avg_pool1d": lambda inp: (inp.b3, 2), "avg_pool2d": lambda inp: (inp.b3, 2),
    "avg_pool3d": lambda inp: (inp.b3[None], 2), "adaptive_avg_pool1d": lambda inp: (inp.b3, 2),
    "adaptive_max_pool1d": lambda inp: (inp.b3, 2),
    # loom's own helpers of loom.nn.functional's Python wrappers: no torch counterpart to compare with
    "_adaptive_avg_pool2d": None, "_adaptive_avg_pool3d": None, "_adaptive_max_pool2d": None,
    "_adaptive_max_pool3d": None, "_max_unpool1d": None, "_max_unpool2d": None, "_max_unpool3d": None,
    "_im2col": None, "_col2im": None,
    "_layer_norm": None, "_rms_norm": None, "_cross_entropy": None, "_scaled_dot_product_attention": None,
})
# the data-movement and linear-algebra families
SAMPLES.update({name: X for name in [
    "diagonal", "type", "diag", "diag_embed", "rot90", "fliplr", "flipud", "atleast_1d", "atleast_2d", "atleast_3d",
    "nonzero", "argwhere", "linalg_vector_norm", "linalg_matrix_norm", "linalg_norm"]})
SAMPLES.update({name: XX for name in ["kron", "inner", "cosine_similarity", "pairwise_distance", "linalg_vecdot",
                                      "cdist"]})
SAMPLES.update({
    "unfold": lambda inp: (inp.x, 1, 2, 1), "movedim": lambda inp: (inp.x, 0, 1), "moveaxis": lambda inp: (inp.x, 0, 1),
    "swapaxes": lambda inp: (inp.x, 0, 1), "swapdims": lambda inp: (inp.x, 0, 1),
    "narrow_copy": lambda inp: (inp.x, 0, 0, 1), "trace": lambda inp: (inp.sq,), "roll": lambda inp: (inp.x, 1),
    "repeat_interleave": lambda inp: (inp.x, 2), "meshgrid": lambda inp: ([inp.x[0], inp.x[1]],),
    "cartesian_prod": lambda inp: ([inp.x[0], inp.x[1]],), "combinations": lambda inp: (inp.x[0],),
    "block_diag": lambda inp: ([inp.x, inp.sq],), "tensor_split": lambda inp: (inp.x, 2),
    "hsplit": lambda inp: (inp.x, 3), "vsplit": lambda inp: (inp.x, 2), "dsplit": lambda inp: (inp.b3, 3),
    "hstack": lambda inp: ([inp.x, inp.x],), "vstack": lambda inp: ([inp.x, inp.x],),
    "row_stack": lambda inp: ([inp.x, inp.x],), "dstack": lambda inp: ([inp.x, inp.x],),
    "column_stack": lambda inp: ([inp.x, inp.x],),
    "scatter": lambda inp: (inp.x, 1, inp.idx, inp.x * 2),
    "scatter_reduce": lambda inp: (inp.x, 1, inp.idx, inp.x * 2, "sum"),
    "scatter_add.inplace": lambda inp: (inp.x, 1, inp.idx, inp.x * 2),
    "index_add": lambda inp: (inp.x, 0, inp.idx1, inp.x * 2), "index_copy": lambda inp: (inp.x, 0, inp.idx1, inp.x * 2),
    "index_fill": lambda inp: (inp.x, 1, inp.idx1, 1.0), "index_put": lambda inp: (inp.x, (inp.idx1,), inp.x[0] * 2),
    "take": lambda inp: (inp.x, inp.idx), "put": lambda inp: (inp.x, inp.idx1, inp.x[0, :2] * 2),
    "masked_select": lambda inp: (inp.x, inp.b),
    "new_zeros": lambda inp: (inp.x, (2, 3)), "new_ones": lambda inp: (inp.x, (2, 3)),
    "new_empty": lambda inp: (inp.x, (2, 3)), "new_full": lambda inp: (inp.x, (2,), 1.5),
    "new_tensor": lambda inp: (inp.x, [1.0, 2.0]), "tril_indices": lambda inp: (3, 3),
    "triu_indices": lambda inp: (3, 3),
    "einsum": lambda inp: ("ij,jk", [inp.x, inp.xt]), "tensordot": lambda inp: (inp.x, inp.xt, [1], [0]),
    "outer": lambda inp: (inp.x[0], inp.x[1]), "ger": lambda inp: (inp.x[0], inp.x[1]),
    "dot": lambda inp: (inp.x[0], inp.x[1]), "vdot": lambda inp: (inp.x[0], inp.x[1]),
    "mv": lambda inp: (inp.x, inp.x[0]), "addbmm": lambda inp: (inp.sq, inp.b3, inp.b3t),
    "baddbmm": lambda inp: (inp.b3[:, :, :2] * 1, inp.b3, inp.b3t),
    "addmv": lambda inp: (inp.x[:, 0] * 1, inp.x, inp.x[0] * 1),
    "addr": lambda inp: (inp.x, inp.x[:, 0] * 1, inp.x[0] * 1), "chain_matmul": lambda inp: ([inp.x, inp.xt],),
    "linalg_multi_dot": lambda inp: ([inp.x, inp.xt],),
})
# statistics, sorting and sampling (pyext/op_rows_reduce.cpp)
SAMPLES.update({name: X for name in [
    "aminmax", "sort", "argsort", "msort", "unique", "unique_consecutive", "uniform_", "normal_", "log_normal_",
    "cauchy_", "exponential_", "random_"]})
SAMPLES.update({name: X0 for name in [
    "var_mean", "std_mean", "nansum", "nanmean", "count_nonzero", "median", "nanmedian", "mode", "cumprod",
    "cumprod_", "logcumsumexp", "cummax", "cummin"]})
SAMPLES.update({
    "quantile": lambda inp: (inp.x, 0.5), "nanquantile": lambda inp: (inp.x, 0.5),
    "topk": lambda inp: (inp.x, 1), "kthvalue": lambda inp: (inp.x, 1),
    "searchsorted": lambda inp: (inp.m.tensor([0.0, 1.0, 2.0]), inp.x),
    "bucketize": lambda inp: (inp.x, inp.m.tensor([0.0, 1.0, 2.0])),
    "bernoulli": lambda inp: (inp.m.full((2, 3), 0.5),), "bernoulli_": lambda inp: (inp.x, 0.5),
    "normal": lambda inp: (inp.x, inp.x.abs()), "poisson": lambda inp: (inp.x.abs(),),
    "multinomial": lambda inp: (inp.x.abs(), 2), "randperm": lambda inp: (5,), "geometric_": lambda inp: (inp.x, 0.5),
})

# the second elementwise family and the activations (pyext/op_rows_elementwise.cpp)
SAMPLES.update({name: X for name in [
    "trunc", "fix", "frac", "log10", "asin", "arcsin", "acos", "arccos", "atan", "arctan", "sinh", "cosh", "asinh",
    "arcsinh", "acosh", "arccosh", "atanh", "arctanh", "erfc", "erfinv", "absolute", "sgn", "positive", "deg2rad",
    "rad2deg", "sinc", "logit", "isfinite", "isposinf", "isneginf", "isreal", "signbit", "relu_", "elu", "elu_",
    "celu", "celu_", "selu", "selu_", "leaky_relu", "leaky_relu_", "hardtanh", "hardtanh_", "relu6", "relu6_",
    "hardsigmoid", "hardsigmoid_", "hardswish", "hardswish_", "log_sigmoid", "mish", "mish_", "hardshrink",
    "softshrink", "rrelu", "rrelu_"]})
SAMPLES.update({name: XX for name in [
    "fmod", "copysign", "atan2", "arctan2", "hypot", "logaddexp", "logaddexp2", "xlogy", "ldexp", "float_power",
    "fmax", "fmin", "heaviside", "isclose", "allclose"]})
SAMPLES.update({
    "clamp_min": lambda inp: (inp.x, 0.0), "clamp_max": lambda inp: (inp.x, 0.0),
    "bitwise_left_shift": lambda inp: (inp.i, inp.i), "bitwise_right_shift": lambda inp: (inp.i, inp.i),
    "promote_types": lambda inp: (inp.m.int32, inp.m.float32),
    "float_power_": lambda inp: (inp.x.double(), 2.0),
    "threshold": lambda inp: (inp.x, 0.5, -1.0), "threshold_": lambda inp: (inp.x, 0.5, -1.0),
    "prelu": lambda inp: (inp.x, inp.m.tensor([0.25])),
})

# The queries, aliases and composites added with the function forms of the methods.
SAMPLES.update({name: X for name in [
    "numel", "is_floating_point", "is_complex", "is_conj", "is_neg", "is_signed", "is_inference", "get_device",
    "conj", "resolve_conj", "resolve_neg", "adjoint", "ravel", "diff", "lgamma", "digamma"]})
SAMPLES.update({name: XX for name in [
    "not_equal", "less", "less_equal", "greater", "greater_equal", "equal", "dist", "is_same_size"]})
# The special functions: torch.i0 and torch.polygamma; loom.special's primitives (loom._C._special_*)
# are named by loom.special, with no torch function of that name to compare with.
SAMPLES.update({"i0": X, "polygamma": lambda inp: (2, inp.x)})
SAMPLES.update({name: None for name in [
    "_special_i1", "_special_i0e", "_special_i1e", "_special_modified_bessel_i0", "_special_modified_bessel_i1",
    "_special_modified_bessel_k0", "_special_modified_bessel_k1", "_special_scaled_modified_bessel_k0",
    "_special_scaled_modified_bessel_k1", "_special_spherical_bessel_j0", "_special_erfcx", "_special_zeta"]})
SAMPLES.update({"is_nonzero": lambda inp: (inp.m.tensor([2.0]),), "tile": lambda inp: (inp.x, (2,)),
                "t_": X, "detach_": X, "squeeze_": X, "unsqueeze_": X0, "transpose_": lambda inp: (inp.x, 0, 1),
                "swapaxes_": lambda inp: (inp.x, 0, 1), "swapdims_": lambda inp: (inp.x, 0, 1)})

# The names added for other programs' op suites (session 28).
SAMPLES.update({name: X for name in ["angle", "conj_physical", "corrcoef", "cov", "diagflat", "frexp", "histc"]})
SAMPLES.update({name: XX for name in ["nextafter"]})
SAMPLES.update({
    "bincount": lambda inp: (inp.idx1,), "gcd": lambda inp: (inp.i, inp.i), "lcm": lambda inp: (inp.i, inp.i),
    "cross": lambda inp: (inp.xt.t(), inp.xt.t(), 1), "linalg_cross": lambda inp: (inp.x, inp.x),
    "renorm": lambda inp: (inp.x, 2, 0, 1.0),
    "select_scatter": lambda inp: (inp.x, inp.x[0], 0, 1), "slice_scatter": lambda inp: (inp.x, inp.x[:1], 0, 0, 1, 1),
    "diagonal_scatter": lambda inp: (inp.sq, inp.sq[0]),
    "split_with_sizes": lambda inp: (inp.x, [1, 2], 1), "unsafe_split_with_sizes": lambda inp: (inp.x, [1, 2], 1),
    "unsafe_split": lambda inp: (inp.x, 1), "unsafe_chunk": lambda inp: (inp.x, 2),
    "masked_scatter": lambda inp: (inp.x, inp.b, inp.x * 2), "as_strided": lambda inp: (inp.x, (2, 2), (1, 1), 1),
    "as_strided_": lambda inp: (inp.x, (2, 2), (1, 1), 1),
})

# the factorizations and solvers (LAPACK steps)
SAMPLES.update({name: (lambda inp: (inp.spd,)) for name in [
    "linalg_cholesky", "linalg_cholesky_ex", "cholesky", "linalg_inv", "linalg_inv_ex", "inverse", "linalg_det",
    "det", "linalg_slogdet", "slogdet", "logdet", "cholesky_inverse", "linalg_eigh", "linalg_eigvalsh"]})
SAMPLES.update({name: (lambda inp: (inp.spd, inp.col)) for name in ["linalg_solve", "linalg_solve_triangular"]})
SAMPLES.update({name: (lambda inp: (inp.col, inp.spd)) for name in ["triangular_solve", "cholesky_solve"]})
# SVD, QR, LU, least squares (test_linalg_s31.py)
SAMPLES.update({name: (lambda inp: (inp.spd,)) for name in [
    "linalg_svd", "linalg_svdvals", "svd", "linalg_qr", "qr", "linalg_pinv", "pinverse", "linalg_matrix_rank",
    "linalg_cond", "linalg_lu_factor", "linalg_lu_factor_ex", "linalg_lu", "lu", "symeig"]})
SAMPLES.update({
    "linalg_lstsq": lambda inp: (inp.spd, inp.col),
    "linalg_lu_solve": lambda inp: (inp.spd, inp.m.tensor([1, 2], dtype=inp.m.int32), inp.col),
    "lu_solve": lambda inp: (inp.col, inp.spd, inp.m.tensor([1, 2], dtype=inp.m.int32)),
})
# keyword arguments a valid call needs (a required keyword-only parameter), given to every call of the row
KEYWORDS = {"linalg_solve_triangular": {"upper": False}}

# torch's C++-parsed function behind a row whose Python-level torch function (torch.functional,
# torch.linalg) takes its arguments in another shape: compared with loom._C's row.
TORCH_FUNCTIONS = {name: getattr(torch._VF, name) for name in [
    "einsum", "tensordot", "chain_matmul", "meshgrid", "cartesian_prod", "block_diag", "atleast_1d", "atleast_2d",
    "atleast_3d"]}
TORCH_FUNCTIONS.update({name: getattr(torch._C._nn, name) for name in [
    "elu", "elu_", "leaky_relu", "leaky_relu_", "hardtanh", "hardtanh_", "relu6", "relu6_", "hardsigmoid",
    "hardsigmoid_", "hardswish", "hardswish_", "log_sigmoid", "mish", "mish_", "softshrink"]})
TORCH_FUNCTIONS.update({name: getattr(torch._C._linalg, name) for name in [
    "linalg_vector_norm", "linalg_matrix_norm", "linalg_norm", "linalg_multi_dot", "linalg_vecdot", "linalg_cross",
    "linalg_cholesky", "linalg_cholesky_ex", "linalg_inv", "linalg_inv_ex", "linalg_det", "linalg_slogdet",
    "linalg_solve", "linalg_solve_triangular", "linalg_eigh", "linalg_eigvalsh", "linalg_svd", "linalg_svdvals",
    "linalg_qr", "linalg_pinv", "linalg_matrix_rank", "linalg_cond", "linalg_lu_factor", "linalg_lu_factor_ex",
    "linalg_lu", "linalg_lu_solve", "linalg_lstsq"]})

# A name may have two rows (a function whose overloads the method lacks: where(cond),
# repeat_interleave(repeats)): the second is keyed "name.forms".
ROWS = {}
for _name, _forms, _signatures in loom._C._signatures():
    ROWS[_name if _name not in ROWS else f"{_name}.{'+'.join(_forms)}"] = (_forms, _signatures)

# Forms loom has and torch 1.13 does not (kept from before the table).
LOOM_ONLY = {("method", "gelu"), ("method", "softplus"), ("method", "silu"), ("inplace", "silu"),
             ("inplace", "isnan"), ("inplace", "isinf")}


# torch 1.13's binding leaves a SymInt default unset (any value: its result then varies from run to
# run), so leaving that argument out has no torch behaviour to compare with.
DEFAULT_READ_UNSET_IN_TORCH = {"slice_scatter"}


def test_every_row_has_a_sample():
    assert sorted({key.split(".")[0] for key in ROWS} - set(SAMPLES)) == []


def sample_of(name, form):
    return SAMPLES.get(f"{name}.{form}", SAMPLES[name])


def torch_callable(name, form):
    """torch's function (torch.<name>, else torch.nn.functional.<name>) or method name."""
    if form == "inplace_function":
        return getattr(torch, name + "_")
    if form != "function":
        return name
    if name in TORCH_FUNCTIONS:
        return TORCH_FUNCTIONS[name]
    for where in (torch, torch.nn.functional):
        if hasattr(where, name):
            return getattr(where, name)
    raise AssertionError(f"torch has no function {name}")


def call(m, name, form, args, kwargs):
    """Calls loom's or torch's form of `name` on args (args[0] is self for methods)."""
    if form in ("function", "inplace_function"):
        attr = name + "_" if form == "inplace_function" else name
        fn = getattr(loom._C, attr) if m is loom else torch_callable(name, form)
        return fn(*args, **kwargs)
    attr = name + "_" if form == "inplace" else name
    return getattr(args[0], attr)(*args[1:], **kwargs)


def is_parsed_in_c(name, form):
    """Python-level torch functions (F.silu, torch.norm, Tensor.split, ...) word their own errors."""
    if form in ("function", "inplace_function"):
        return isinstance(torch_callable(name, form), types.BuiltinFunctionType)
    return isinstance(getattr(torch.Tensor, name if form == "method" else name + "_"),
                      (types.MethodDescriptorType, types.BuiltinFunctionType))


def param_types(signature):
    """The types of a signature's parameters, in order ('*' skipped)."""
    inner = signature[signature.index("(") + 1:signature.rindex(")")]
    return [p.split(" ")[0] for p in re.split(r",\s*(?![^\[]*\])", inner) if p.strip() != "*"]


class Junk:
    """A value no parameter type takes."""


def bad_calls(form, signatures, args):
    """(kind, args, kwargs) of calls that break the valid call `args` in one way each."""
    first = 0 if form in ("function", "inplace_function") else 1  # args[0] is self for methods
    n_positions = max(len(param_types(s)) for s in signatures)
    out = []
    for k in range(first, len(args)):
        types_at_k = {param_types(s)[k] for s in signatures if len(param_types(s)) > k}
        if any(t.startswith("PyObject") for t in types_at_k):
            continue  # takes anything
        out.append((f"junk at {k}", args[:k] + (Junk(),) + args[k + 1:], {}))
        if len(signatures) == 1 and not any(t.endswith("?") for t in types_at_k):
            out.append((f"None at {k}", args[:k] + (None,) + args[k + 1:], {}))
    if len(args) > first + 1:
        out.append(("last left out", args[:-1], {}))
    out.append(("unknown keyword", args, {"bogus": 1}))
    # torch takes view((3, 2), junk) (its varargs check reads only the first element): not compared.
    positional = [t for t in param_types(signatures[0])[first:]]
    if not (positional[:1] in (["int[]"], ["SymInt[]"]) and len(args) == first + 1):
        out.append(("one too many", args + (Junk(),) * (n_positions + 1 - len(args)), {}))
    return out


def check_same_error(where, torch_error, loom_error, parsed_in_c):
    """loom's error for a bad call is torch's: the same type and, where torch's C++ parser words it,
    the same message, or (where torch lists overloads loom has not) one naming the same thing."""
    t, lm = str(torch_error), str(loom_error).replace("loom.", "torch.")
    if not parsed_in_c:  # a Python-level torch function: its own words, even its own exception types
        assert isinstance(loom_error, (TypeError, type(torch_error))), (where, torch_error, loom_error)
        return
    if isinstance(torch_error, RuntimeError) and ("look up dimensions by name" in t or "dimname" in t):
        # None taken by torch's named-dims overload (loom has no dim names): loom's TypeError names it.
        assert isinstance(loom_error, TypeError) and "NoneType" in lm, (where, t, lm)
        return
    if "must be name, not" in t:  # torch words the bad call as one of its named-dims overload's
        assert isinstance(loom_error, TypeError), (where, t, lm)
        return
    assert type(loom_error) is type(torch_error), (where, torch_error, loom_error)
    if not isinstance(torch_error, TypeError) or t == lm:
        return
    if re.fullmatch(r"Tensor\.\w+\(\) takes no (keyword )?arguments( \(\d+ given\))?", lm):
        return  # a method of self alone is METH_NOARGS: CPython words it (torch's takes memory_format=)
    function = t.split("(")[0]
    assert lm.split("(")[0] == function, (where, t, lm)
    combination = "received an invalid combination of arguments - got "
    got = t[t.index(combination):].split(", but expected")[0] if combination in t else None
    if combination in lm and got:
        assert got == lm[lm.index(combination):].split(", but expected")[0], (where, t, lm)
        return
    if "got an unexpected keyword argument" in t and combination in lm:
        # torch's out= overload makes its signature the one plausible for one argument more;
        # loom's signatures leave out= out (loom/_out.py takes it off before the parse): loom
        # lists its overloads with the keyword it got.
        assert t.split("argument ")[-1].strip("'") + "=" in lm, (where, t, lm)
        return
    if where.endswith("one too many"):  # names no parameter: loom says how many, or what it got
        assert combination in lm or re.search(r"\(\) takes (from \d+ to )?\d+ positional arguments? but \d+ w(as|ere) "
                                              r"given$", lm), (where, t, lm)
        return
    if got:
        # torch lists overloads loom has not (out=, dim names): loom's precise error must name a
        # parameter of torch's listing (or the unknown keyword).
        names = set(re.findall(r"(?:\(|, )(?:\*, )?[\w. ]+ (\w+)(?=[,)])", t)) | {"bogus"}
        named = {a or b for a, b in re.findall(r"'(\w+)'|\"(\w+)\"", lm)}
        assert named & names, (where, t, lm)
        return
    assert lm == t, (where, t, lm)  # torch's wording for one signature: loom's is the same


@pytest.mark.parametrize("key", sorted(ROWS))
def test_bad_calls_match_torch(key):
    forms, signatures = ROWS[key]
    name = key.split(".")[0]
    if SAMPLES[name] is None:
        pytest.skip("loom's own helper" if name.startswith("_") else "needs a GPU")
    for form in forms:
        if (form, name) in LOOM_ONLY:
            continue
        sample = sample_of(name, form)
        loom_args, torch_args = sample(Inputs(loom)), sample(Inputs(torch))
        keywords = KEYWORDS.get(name, {})
        call(loom, name, form, loom_args, keywords)  # the valid call runs in both
        call(torch, name, form, torch_args, keywords)
        parsed_in_c = is_parsed_in_c(name, form)
        for (kind, l_args, l_kw), (_, t_args, t_kw) in zip(bad_calls(form, signatures, loom_args),
                                                          bad_calls(form, signatures, torch_args)):
            if kind == "last left out" and name in DEFAULT_READ_UNSET_IN_TORCH:
                continue
            l_args = tuple(a.clone() if isinstance(a, loom.Tensor) else a for a in l_args)
            t_args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in t_args)
            l_kw, t_kw = {**keywords, **l_kw}, {**keywords, **t_kw}
            try:
                call(torch, name, form, t_args, t_kw)
                torch_error = None
            except Exception as e:  # noqa: BLE001
                torch_error = e
            try:
                call(loom, name, form, l_args, l_kw)
                loom_error = None
            except Exception as e:  # noqa: BLE001
                loom_error = e
            where = f"{form} {name}: {kind}"
            if torch_error is None:
                # torch's Python-level functions take extra arguments (F.silu's inplace): not compared.
                assert loom_error is None or not parsed_in_c, (where, loom_error)
                continue
            assert loom_error is not None, (where, "torch raised", torch_error)
            check_same_error(where, torch_error, loom_error, parsed_in_c)


# ---- the parser's rules, one by one ----

def test_numpy_keyword_names():
    x = loom.tensor([[1.0, 2.0], [3.0, 4.0]])
    assert loom.sum(x, axis=0).tolist() == [4.0, 6.0]
    assert x.sum(axis=1, keepdims=True).tolist() == [[3.0], [7.0]]
    assert loom.add(x=x, other=x).tolist() == [[2.0, 4.0], [6.0, 8.0]]
    assert loom.mul(x, x2=x).tolist() == [[1.0, 4.0], [9.0, 16.0]]
    with pytest.raises(TypeError, match="unexpected keyword argument 'axis'"):
        loom.sum(x, dim=0, axis=1)


def test_varargs_only_for_a_lone_int_list():
    x = loom.zeros(6)
    assert x.view(2, 3).shape == (2, 3) and x.view((2, 3)).shape == (2, 3) and x.view([3, 2]).shape == (3, 2)
    assert x.view(size=(3, 2)).shape == (3, 2)
    assert loom.zeros(2, 3).shape == (2, 3) and loom.zeros(size=[2, 3]).shape == (2, 3)
    assert x.view(-1).shape == (6,)
    with pytest.raises(TypeError, match=r"^view\(\): argument 'size' must be tuple of SymInts, but found element "
                                         r"of type str at pos 2$"):
        x.view(2, "a")
    with pytest.raises(TypeError, match=r"^zeros\(\) takes 1 positional argument but 2 were given$"):
        loom.zeros((2, 3), 4)
    # A list with a size (int[1] dim) takes one int too.
    assert loom.sum(loom.ones(2, 3), 1).tolist() == [3.0, 3.0]


def test_none_only_where_the_signature_has_a_question_mark():
    x = loom.ones(2, 2)
    with pytest.raises(TypeError, match=r"^tril\(\): argument 'diagonal' \(position 2\) must be int, not NoneType$"):
        loom.tril(x, None)
    with pytest.raises(TypeError, match=r"^unsqueeze\(\): argument 'dim' \(position 1\) must be int, not NoneType$"):
        x.unsqueeze(None)
    with pytest.raises(TypeError, match=r"^add\(\): argument 'alpha' must be Number, not NoneType$"):
        loom.add(x, x, alpha=None)
    assert loom.sum(x, None).item() == 4.0  # int[1]? dim
    assert loom.clamp(x, None, 0.5).tolist() == [[0.5, 0.5], [0.5, 0.5]]  # Arg? min


@pytest.mark.parametrize("call", [lambda m, x: m.eye(3, None), lambda m, x: m.prod(x, None),
                                  lambda m, x: m.all(x > 0, None), lambda m, x: x.squeeze(None),
                                  lambda m, x: x.size(None), lambda m, x: x.stride(None)],
                         ids=["eye", "prod", "all", "squeeze", "size", "stride"])
def test_none_is_no_dim_only_where_torch_says_so(call):
    # torch refuses these Nones (some through its named-dims overloads, a RuntimeError): loom's
    # overloads have a dim that is not `?`, so its parser refuses them with a TypeError.
    with pytest.raises((TypeError, RuntimeError)):
        call(torch, torch.ones(2, 1))
    with pytest.raises(TypeError, match="NoneType"):
        call(loom, loom.ones(2, 1))


def test_missing_arguments_name_the_function_and_the_argument():
    x = loom.ones(2, 2)
    with pytest.raises(TypeError, match=r'^unfold\(\) missing 2 required positional argument: "size", "step"$'):
        x.unfold(0)
    # With several overloads (narrow's start: int or Tensor) the message lists them, as torch's does.
    with pytest.raises(TypeError, match=r"^narrow\(\) received an invalid combination of arguments - got \(int\)"):
        x.narrow(0)
    with pytest.raises(TypeError, match=r'^zeros_like\(\) missing 1 required positional arguments: "input"$'):
        loom.zeros_like()
    with pytest.raises(TypeError, match=r'^softmax\(\) missing 1 required positional arguments: "dim"$'):
        loom.softmax(x)


def test_overloads_pick_by_type_and_list_all_signatures_when_none_fits():
    x = loom.tensor([[1.0, 5.0], [3.0, 2.0]])
    assert x.max().item() == 5.0
    assert x.max(loom.zeros(2, 2)).tolist() == x.tolist()
    values, indices = x.max(1)
    assert values.tolist() == [5.0, 3.0] and indices.tolist() == [1, 0]
    assert loom.var(x, True).item() == pytest.approx(np.var([1, 5, 3, 2], ddof=1))
    assert loom.var(x, 0, False).tolist() == pytest.approx([1.0, 2.25])
    assert loom.var(x, correction=0).item() == pytest.approx(np.var([1, 5, 3, 2]))
    assert loom.randint(3, 5, (4,)).shape == (4,) and loom.randint(5, (3,)).shape == (3,)
    assert loom.arange(5).tolist() == [0, 1, 2, 3, 4] and loom.arange(1, 7, 2).tolist() == [1, 3, 5]
    with pytest.raises(TypeError) as info:
        x.max("a")
    assert str(info.value) == (
        "max() received an invalid combination of arguments - got (str), but expected one of:\n"
        " * ()\n"
        " * (Tensor other)\n"
        "      didn't match because some of the arguments have invalid types: (!str!)\n"
        " * (int dim, bool keepdim)\n")
    # One plausible overload (by the count of arguments) raises its own error, as in PyTorch.
    with pytest.raises(TypeError, match=r"^max\(\) got an unexpected keyword argument 'other'$"):
        x.max(dim=0, other=x)


def test_in_place_forms_are_named_with_their_underscore():
    x = loom.ones(2)
    with pytest.raises(TypeError, match=r"^add_\(\): argument 'other' \(position 1\) must be Tensor, not str$"):
        x.add_("a")
    with pytest.raises(TypeError, match=r"^clamp_\(\) got an unexpected keyword argument 'bogus'$"):
        x.clamp_(bogus=1)


def test_docstrings_come_from_the_row():
    assert loom.add.__doc__ == "add(Arg input, Arg other, *, Scalar alpha=1)"
    assert loom.Tensor.add.__doc__ == "add(Arg other, *, Scalar alpha=1)"
    assert loom.Tensor.add_.__doc__.startswith("add_(Arg other, *, Scalar alpha=1)\n\nIn place")
    assert loom.max.__doc__.splitlines()[:3] == [
        "max(Tensor input)", "max(Tensor input, Tensor other)", "max(Tensor input, int dim, bool keepdim=False)"]
    assert loom.Tensor.view.__doc__.startswith("view(SymInt[] size)")


def test_methods_of_self_alone_take_no_arguments():
    with pytest.raises(TypeError, match=r"exp\(\) takes no arguments \(1 given\)"):
        loom.ones(2).exp(1)


# ---- what the creation rows refuse, as torch does ----

@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("call", [lambda m, d: m.arange(3, dtype=m.bool, device=d),
                                  lambda m, d: m.arange(0.0, 1.0, 0.5, dtype=m.bool, device=d),
                                  lambda m, d: m.linspace(0, 1, 3, dtype=m.bool, device=d)],
                         ids=["arange", "arange_float", "linspace"])
def test_no_bool_ranges(call, device):
    with pytest.raises(RuntimeError, match="not implemented for 'Bool'") as torch_error:
        call(torch, "cpu")
    with pytest.raises(RuntimeError) as loom_error:
        call(loom, device)
    assert str(loom_error.value) == str(torch_error.value)
