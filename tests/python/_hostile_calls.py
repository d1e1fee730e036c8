"""A crash fuzzer over loom's whole public surface (tests/python/test_hostile_calls.py runs it).

Every public function of loom, loom.nn.functional, loom.linalg, loom.special (and loom.fft where it
exists) and every Tensor method that torch also has is called with arguments drawn from a hostile
pool: 0-d and empty tensors, expanded views of 2**62 elements, negative and huge sizes, transposed,
strided and expanded layouts, every dtype, NaN and inf, out-of-range dims and indices, None, wrong
Python types, Python ints past int64, tensors of both devices mixed, leaves that require grad
written in place, and out= aliasing an input. Argument types come from torch 1.13's schema of the
same name where it has one (`torch._C._jit_get_all_schemas`), else from the Python signature of
torch's function (defaults and parameter names), so most calls get past argument parsing and reach
the shape rules, where crashes hide; a tenth of the arguments are replaced by a value of a wrong
type regardless.

A call is a (target, device, seed) triple: its arguments are a pure function of it, so a worker
process rebuilds any call from those three values, and so does a rerun. Calls run in batches in
worker processes; a worker announces each call before it runs it, so when one dies (a signal, an
abort, a C++ exception escaping) or stops answering (a hang), the call it last announced is the
culprit; the call is then rerun alone to tell a call that crashes by itself from one that needed
the calls before it (the batch's start is reported for those).

Each call runs on loom, then the same arguments on torch (the "lazy" device becomes torch's cpu),
and the two outcomes are classified:

  crash / hang      the worker died or stopped answering during loom's call (the top priority)
  bad_exception     loom raised something no clear error is (SystemError, AttributeError,
                    KeyError, AssertionError, ... or a C++ library message such as vector::_M_...)
  corrupted         loom raised, and a tensor argument's values changed; or the lazy device
                    no longer computed 2 * ones(2) right after the error
  mismatch          both returned, with different values, shapes or dtypes (tensor arguments
                    written in place are compared too)
  gap               torch returned, loom raised a clear error: a surface gap, noted only
  lenient           loom returned where torch raised (noted only: often loom accepts more)
  ok / both_raise   agreement

Run it by hand for more calls:
    .venv/bin/python tests/python/_hostile_calls.py --calls 20000 --seed 1 [--targets add,F.conv2d]
"""

import argparse
import inspect
import json
import math
import os
import random
import resource
import select
import subprocess
import sys
import time
from collections import Counter

HERE = os.path.dirname(os.path.abspath(__file__))

# ----------------------------------------------------------------------------------------------
# The surface
# ----------------------------------------------------------------------------------------------

# Names never called: they change the process or the file system in ways a later call would see
# (threads, files, global modes), or wait on purpose, or need another process.
DENY = {
    "loom": {"save", "load", "from_file", "compile", "set_num_threads", "set_num_interop_threads",
             "use_deterministic_algorithms", "set_deterministic_debug_mode", "set_printoptions",
             "set_default_tensor_type", "set_anomaly_enabled", "set_flush_denormal", "set_warn_always",
             "explain_syncs", "set_float32_matmul_precision", "seed", "initial_seed",
             "set_rng_state", "get_rng_state", "manual_seed", "fork_rng", "export", "vmap",
             "set_default_device", "set_default_dtype", "set_grad_enabled", "enable_grad", "no_grad",
             "inference_mode", "autocast", "cond", "while_loop", "import_ir_module",
             "import_ir_module_from_buffer", "_assert", "sync", "wait", "memory_stats"},
    "F": set(),
    "linalg": set(),
    "special": set(),
    "fft": set(),
    "Tensor": {"register_hook", "backward", "retain_grad", "share_memory_", "pin_memory",
               "record_stream", "cuda", "set_", "storage", "untyped_storage", "data_ptr",
               "register_post_accumulate_grad_hook", "__reduce_ex__", "apply_", "map_", "map2_",
               "tolist", "numpy", "item", "new", "resize_", "resize_as_", "dim_order"},
}

# Results drawn at random (or uninitialized): only their shapes and dtypes are compared.
RANDOM_WORDS = ("rand", "dropout", "bernoulli", "multinomial", "normal", "poisson", "empty", "exponential",
                "geometric", "cauchy", "uniform", "random", "rrelu", "gumbel", "new_empty")


# Where torch 1.13's value is wrong, so only shapes and dtypes are compared: slice_copy(x) with its
# defaults keeps one row (x[0:] keeps them all).
# unique(sorted=False) returns the values in an unspecified order (torch's is its hash order).
TORCH_DIFFERS = {"slice_copy", "unique", "Tensor.unique"}


def _torch_value_unreliable(target, seed, call):
    """Why torch 1.13's value of this call is no reference, or None. (1) The torch.* forms of the
    losses (torch.kl_div, torch.hinge_embedding_loss, ...) declare `int reduction=Mean`, but 1.13's
    Python binding reads that default as 0 (none): called without reduction they return the
    unreduced loss, where loom applies the declared mean. (2) The strides of a tensor of no
    elements are whatever built it (torch keeps numpy's zeros from torch.tensor(ndarray)); they
    address nothing, so they are no value to compare."""
    self_desc, args, kwargs = call
    if "." not in target and target.endswith("_loss") or target in ("kl_div", "binary_cross_entropy_with_logits"):
        params = random.Random(f"{target}/{seed}").choice(param_lists(target))
        names = [p[0] for p in params]
        if "reduction" in names and "reduction" not in kwargs and len(args) <= names.index("reduction"):
            return "torch 1.13 reads the declared default reduction=Mean as none"
    if target == "Tensor.stride" and self_desc is not None and 0 in self_desc["shape"]:
        return "strides of an empty tensor"
    # (3) torch 1.13's float32 pow by a nonzero exponent below float32's range (-1e-320) differs by
    # lane: its vectorized body rounds the exponent to 0 (x ** 0 = 1), its scalar tail does not
    # (0 ** -1e-320 = inf), so zeros(24) ** -1e-320 is 16 ones then 8 infs. loom gives the
    # tail's value everywhere (test_hostile_s32.py).
    if "pow" in target and any(d.get("kind") == "py" and isinstance(d.get("value"), float)
                               and 0 < abs(d["value"]) < 1.5e-45 for d in list(args) + list(kwargs.values())):
        return "torch 1.13's pow by a sub-float32 exponent depends on the lane"
    # (4) torch 1.13's tril / triu by a diagonal near int64's limits overflow in its index
    # arithmetic (triu(x, 2**63 - 1) keeps a row, tril(x, 2**63 - 1) keeps nothing); loom keeps
    # what the mathematical rule keeps (test_hostile_s33.py).
    if target.split(".")[-1] in ("tril", "triu", "tril_", "triu_"):
        if any(d.get("kind") == "py" and isinstance(d.get("value"), int) and not isinstance(d.get("value"), bool)
               and abs(d["value"]) >= 2 ** 62 for d in list(args) + list(kwargs.values())):
            return "torch 1.13's tril/triu index arithmetic overflows for a diagonal near int64's limits"
    return None


def _shift_count_undefined(loom, target, self_v, args, kwargs):
    """Why torch 1.13's value of a shift is no reference, or None: a count outside [0, bits) is
    undefined behaviour in its kernel (C++ `a << 64`; x86 takes the count modulo the width, so
    1 << 64 gives 1 and 1 << 65 gives 2). loom shifts every bit out (0; a right shift leaves the
    sign), as PyTorch 2.1 defined it; tests/python/test_hostile_s32.py checks loom's values."""
    if "shift" not in target:
        return None
    reverse = target.startswith("Tensor.__r")
    if target.startswith("Tensor."):
        count = self_v if reverse else (args[0] if args else kwargs.get("other"))
    else:
        count = args[1] if len(args) > 1 else kwargs.get("other")
    if isinstance(count, loom.Tensor):
        if count.numel() == 0 or count.dtype.is_floating_point or count.numel() > 1 << 20:
            return None
        try:
            values = [int(v) for v in count.detach().to("cpu").reshape(-1).tolist()]
        except Exception:  # noqa: BLE001 (the call reports its own error)
            return None
    elif isinstance(count, int) and not isinstance(count, bool):
        values = [count]
    else:
        return None
    # torch shifts int8..int32 in 32 bits (then narrows), int64 in 64.
    other = args[0] if target.startswith("Tensor.") and reverse and args else (self_v if target.startswith("Tensor.") else (args[0] if args else None))
    wide = any(isinstance(t, loom.Tensor) and t.dtype is loom.int64 for t in (count, other)) or \
        (not isinstance(other, loom.Tensor) and isinstance(count, loom.Tensor) and count.dtype is loom.int64)
    bits = 64 if wide else 32
    if any(v < 0 or v >= bits for v in values):
        return "torch 1.13: a shift by a count outside [0, bits) is undefined behaviour"
    return None


def modules(m):
    """(prefix, module) pairs of library m (loom or torch) whose functions are fuzzed."""
    import importlib

    out = [("", m), ("F.", importlib.import_module(m.__name__ + ".nn.functional"))]
    for sub in ("linalg", "special", "fft"):
        try:
            out.append((sub + ".", importlib.import_module(m.__name__ + "." + sub)))
        except ImportError:
            pass
    return out


def _public_callables(mod, deny):
    names = []
    for name in dir(mod):
        if name.startswith("_") or name in deny:
            continue
        obj = getattr(mod, name, None)
        if obj is None or not callable(obj) or inspect.isclass(obj) or inspect.ismodule(obj):
            continue
        names.append(name)
    return names


def surface():
    """The targets: "add", "F.conv2d", "linalg.norm", "Tensor.index_add_", ... that both loom and
    torch 1.13 have (a name only loom has could not be compared, and its arguments not typed)."""
    import loom
    import torch

    targets = []
    tmods = dict(modules(torch))
    for prefix, lmod in modules(loom):
        tmod = tmods.get(prefix)
        if tmod is None:
            continue
        deny = DENY["loom" if prefix == "" else prefix.rstrip(".")]
        for name in _public_callables(lmod, deny):
            if hasattr(tmod, name):
                targets.append(prefix + name)
    for name in dir(loom.Tensor):
        if (name.startswith("_") and name not in DUNDER_OPS) or name in DENY["Tensor"]:
            continue
        if not hasattr(torch.Tensor, name):
            continue
        obj = getattr(loom.Tensor, name, None)
        if callable(obj) and not isinstance(inspect.getattr_static(loom.Tensor, name), property):
            targets.append("Tensor." + name)
    return sorted(set(targets))


DUNDER_OPS = {"__add__", "__sub__", "__mul__", "__truediv__", "__floordiv__", "__mod__", "__pow__",
              "__matmul__", "__and__", "__or__", "__xor__", "__lshift__", "__rshift__", "__iadd__",
              "__isub__", "__imul__", "__itruediv__", "__getitem__", "__setitem__", "__neg__",
              "__invert__", "__abs__", "__eq__", "__lt__", "__rsub__", "__rtruediv__", "__rpow__",
              "__rmatmul__", "__rfloordiv__", "__radd__", "__ipow__", "__imod__"}


def resolve(lib, target):
    """The callable of library lib (loom or torch) named by target, and whether it is a method."""
    if target.startswith("Tensor."):
        return None, True
    for prefix, mod in modules(lib):
        if prefix and target.startswith(prefix):
            return getattr(mod, target[len(prefix):]), False
    return getattr(lib, target), False


# ----------------------------------------------------------------------------------------------
# Argument types
# ----------------------------------------------------------------------------------------------

_SCHEMAS = None


def _schemas():
    """torch's schemas by op name (aten:: only): lists of [(name, type, has_default, kwarg_only)]."""
    global _SCHEMAS
    if _SCHEMAS is None:
        import torch

        _SCHEMAS = {}
        for s in torch._C._jit_get_all_schemas():
            if not s.name.startswith("aten::"):
                continue
            args = [(a.name, str(a.type), a.default_value is not None or str(a.type).startswith("Optional"),
                     a.kwarg_only) for a in s.arguments]
            if any(t in ("Dimname", "List[Dimname]", "Optional[List[Dimname]]", "Storage", "Stream")
                   or t.startswith("__torch__") or t.startswith("Dict") for _, t, _, _ in args):
                continue
            if "Dimname" in s.overload_name or "dimname" in s.overload_name:
                continue
            _SCHEMAS.setdefault(s.name[len("aten::"):], []).append(args)
    return _SCHEMAS


def _schema_names(target):
    short = target.split(".", 1)[1] if "." in target else target
    if target.startswith("linalg."):
        return ["linalg_" + short]
    if target.startswith("special."):
        return ["special_" + short]
    if target.startswith("fft."):
        return ["fft_" + short]
    if target.startswith("Tensor.__") and short.endswith("__"):
        core = short.strip("_")
        if core.startswith("r") and core[1:] in ("sub", "truediv", "pow", "matmul", "floordiv", "add"):
            core = core[1:]
        if core.startswith("i") and core[1:] in ("add", "sub", "mul", "truediv", "pow", "mod"):
            core = core[1:] + "_"
        core = {"truediv": "div", "truediv_": "div_", "floordiv": "floor_divide", "mod": "remainder",
                "and": "bitwise_and", "or": "bitwise_or", "xor": "bitwise_xor", "lshift": "__lshift__",
                "rshift": "__rshift__", "invert": "bitwise_not", "getitem": "index", "setitem": "index_put_",
                "mod_": "remainder_"}.get(core, core)
        return [core]
    return [short, short.rstrip("_")]


def _python_params(target):
    """[(name, type guess, has_default, kwarg_only)] from the Python signature of torch's function."""
    import torch

    fn, is_method = resolve(torch, target)
    if is_method:
        fn = getattr(torch.Tensor, target.split(".", 1)[1])
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return None
    out = []
    for p in sig.parameters.values():
        if p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD):
            continue
        d = p.default
        if d is inspect.Parameter.empty:
            t = _guess_type(p.name)
        elif isinstance(d, bool):
            t = "bool"
        elif isinstance(d, int):
            t = "int"
        elif isinstance(d, float):
            t = "float"
        elif isinstance(d, str):
            t = "str"
        elif isinstance(d, (tuple, list)):
            t = "List[int]"
        else:
            t = "Optional[" + _guess_type(p.name) + "]"
        out.append((p.name, t, d is not inspect.Parameter.empty, p.kind == p.KEYWORD_ONLY))
    if is_method and out and out[0][0] == "self":
        out = out[1:]
    return out


def _guess_type(name):
    if name in ("dim", "dim0", "dim1", "groups", "num_classes", "diagonal", "k", "n", "start_dim", "end_dim",
                "ndim", "output_size_int", "upscale_factor", "downscale_factor", "blank"):
        return "int"
    if name in ("kernel_size", "stride", "padding", "dilation", "output_size", "size", "pad", "shape",
                "normalized_shape", "output_padding", "dims", "scale_factor"):
        return "List[int]"
    if name in ("p", "eps", "momentum", "negative_slope", "alpha", "beta", "value", "margin", "lambd",
                "min_val", "max_val", "threshold", "tau", "delta", "label_smoothing", "max_norm", "norm_type"):
        return "float"
    if name in ("reduction", "mode", "padding_mode", "approximate", "ord_str"):
        return "str"
    if name in ("dtype",):
        return "ScalarType"
    return "Tensor"


def param_lists(target):
    """The candidate parameter lists of a target (one per overload), self left out of methods."""
    is_method = target.startswith("Tensor.")
    cands = []
    for n in _schema_names(target):
        for args in _schemas().get(n, []):
            if is_method:
                if not args or args[0][0] != "self" or args[0][1] != "Tensor":
                    continue
                args = args[1:]
            cands.append(args)
        if cands:
            break
    if not cands:
        py = _python_params(target)
        if py is not None:
            cands.append(py)
    return cands or [[("x", "Tensor", False, False), ("y", "Tensor", True, False)]]


# ----------------------------------------------------------------------------------------------
# The hostile pool: values are described as plain data first, then built for each library, so that
# loom and torch get the same values.
# ----------------------------------------------------------------------------------------------

DTYPES = ["bool", "uint8", "int8", "int16", "int32", "int64", "float16", "bfloat16", "float32", "float64"]
SHAPES = [(), (0,), (1,), (3,), (2, 3), (3, 3), (2, 0, 3), (1, 4), (2, 3, 4), (2, 1, 3, 2), (0, 0), (4, 3, 2, 2)]
HUGE_SHAPES = [(2 ** 62,), (2 ** 31, 2 ** 31), (2 ** 40, 1, 2 ** 23), (3, 2 ** 61)]
INTS = [0, 1, 2, -1, -2, 3, 4, 5, -5, 7, 2 ** 31, 2 ** 62, 2 ** 63 - 1, -2 ** 63, 2 ** 64 + 3, -2 ** 70]
FLOATS = [0.0, 0.5, 1.5, -1.0, 2.0, float("nan"), float("inf"), -float("inf"), 1e308, -1e-320, 2.0 ** 70]
SIZES = [(), (0,), (2, 3), (3,), (-1,), (2, -1), (-2,), (2 ** 62, 2 ** 62), (2 ** 62,), (1, -3), (2 ** 64,),
         (3, 0, 2), (2, 2, 2, 2, 2, 2)]
STRS = ["mean", "sum", "none", "bogus", "", "reflect", "constant", "circular", "replicate", "linear", "nearest",
        "fro", "nuc", "tanh", "batchmean", "ij", "L", "U", "reduced"]
WRONG = [("str", "abc"), ("list_of_tensors",), ("nested",), ("float", 1.5), ("int", 2 ** 70), ("none",),
         ("object",), ("dtype", "float32"), ("bool", True), ("neg_size",)]


def tensor_desc(r, like=None):
    if like is not None and r.random() < 0.6:
        d = dict(like)
        d["seed"] = r.randrange(1 << 30)
        if r.random() < 0.3 and d["layout"] != "huge":
            d["layout"] = r.choice(["contiguous", "transposed", "strided", "expanded"])
        if r.random() < 0.2:
            d["dtype"] = r.choice(DTYPES)
        d["requires_grad"] = d["requires_grad"] and d["dtype"].startswith("float") and d["dtype"] != "float16"
        return d
    if r.random() < 0.07:
        shape = r.choice(HUGE_SHAPES)
        layout = "huge"
    else:
        shape = r.choice(SHAPES)
        layout = r.choice(["contiguous", "contiguous", "transposed", "strided", "expanded"])
    dtype = r.choice(DTYPES + ["float32", "float32", "int64"])
    d = dict(kind="tensor", shape=list(shape), dtype=dtype, layout=layout, seed=r.randrange(1 << 30),
             fill=r.choice(["normal", "normal", "small_ints", "nan_inf", "zeros"]),
             requires_grad=dtype.startswith("float") and dtype != "float16" and r.random() < 0.2,
             other_device=r.random() < 0.04)
    return d


def value_desc(r, typ, name, first_tensor):
    """A description of a value for a parameter of type typ (a torch schema type string)."""
    if r.random() < 0.08:
        w = r.choice(WRONG)
        if w[0] == "list_of_tensors":
            return dict(kind="list", items=[tensor_desc(r, first_tensor), tensor_desc(r, first_tensor)])
        if w[0] == "nested":
            return dict(kind="py", value=[[1, 2], [3]])
        if w[0] == "none":
            return dict(kind="py", value=None)
        if w[0] == "object":
            return dict(kind="object")
        if w[0] == "dtype":
            return dict(kind="dtype", name=r.choice(DTYPES))
        if w[0] == "neg_size":
            return dict(kind="py", value=[-1, 2 ** 63])
        return dict(kind="py", value=w[1])
    optional = typ.startswith("Optional[")
    if optional:
        if r.random() < 0.3:
            return dict(kind="py", value=None)
        typ = typ[len("Optional["):-1]
    if name in ("dtype", "out_dtype") or typ == "ScalarType":
        return dict(kind="dtype", name=r.choice(DTYPES))
    if name in ("layout", "memory_format", "pin_memory", "generator") or typ in ("Generator", "Layout"):
        return dict(kind="py", value=None)
    if name == "device" or typ == "Device":
        return dict(kind="device", which=r.choice(["self", "cpu", "other", "bogus"]))
    if typ == "Tensor":
        return tensor_desc(r, first_tensor)
    if typ in ("List[Tensor]", "List[Optional[Tensor]]"):
        n = r.choice([0, 1, 2, 2, 3])
        return dict(kind="list", items=[tensor_desc(r, first_tensor) for _ in range(n)])
    if typ == "int" or typ == "SymInt":
        if name in ("dim", "dim0", "dim1", "start_dim", "end_dim") and r.random() < 0.7:
            return dict(kind="py", value=r.randint(-5, 4))
        return dict(kind="py", value=r.choice(INTS))
    if typ in ("List[int]", "List[SymInt]") or typ.startswith("List[int]") or typ == "int[]":
        if r.random() < 0.2:
            return dict(kind="py", value=r.choice(INTS))
        return dict(kind="py", value=list(r.choice(SIZES)))
    if typ in ("float", "number", "Scalar"):
        if r.random() < 0.3:
            return dict(kind="py", value=r.choice(INTS[:10]))
        if r.random() < 0.2 and first_tensor is not None:
            return dict(kind="tensor", shape=[], dtype=r.choice(DTYPES), layout="contiguous",
                        seed=r.randrange(1 << 30), fill="normal", requires_grad=False, other_device=False)
        return dict(kind="py", value=r.choice(FLOATS))
    if typ == "List[float]":
        return dict(kind="py", value=[r.choice(FLOATS) for _ in range(r.randint(0, 3))])
    if typ == "bool":
        return dict(kind="py", value=r.random() < 0.5)
    if typ == "str":
        return dict(kind="py", value=r.choice(STRS))
    if typ == "List[bool]":
        return dict(kind="py", value=[r.random() < 0.5 for _ in range(r.randint(0, 3))])
    if typ == "complex":
        return dict(kind="py", value=r.choice(FLOATS))
    return tensor_desc(r, first_tensor)


def make_call(target, seed):
    """(self description or None, positional descriptions, keyword descriptions) of one call."""
    r = random.Random(f"{target}/{seed}")
    params = r.choice(param_lists(target))
    is_method = target.startswith("Tensor.")
    first = tensor_desc(r) if is_method else None
    self_desc = first
    args, kwargs = [], {}
    cut = len(params)
    # Leave out a random tail of the parameters that have defaults (most calls use a few).
    optional_from = next((i for i, p in enumerate(params) if p[2]), len(params))
    if r.random() < 0.6 and optional_from < len(params):
        cut = r.randint(optional_from, len(params))
    for i, (name, typ, has_default, kw_only) in enumerate(params):
        if i >= cut and has_default:
            continue
        if name == "out" and not (r.random() < 0.5):
            continue
        if name == "out" and first is not None and r.random() < 0.6:
            v = dict(kind="alias_first")  # out= the first tensor argument (aliasing)
        else:
            v = value_desc(r, typ, name, first)
        if v.get("kind") == "tensor" and first is None:
            first = v
        if kw_only or name == "out":
            kwargs[name] = v
        else:
            args.append(v)
    return self_desc, args, kwargs


# ----------------------------------------------------------------------------------------------
# Building values for a library
# ----------------------------------------------------------------------------------------------

def _array(desc):
    import numpy as np

    g = np.random.default_rng(desc["seed"])
    shape = tuple(desc["shape"])
    fill = desc["fill"]
    if fill == "zeros":
        a = np.zeros(shape)
    elif fill == "small_ints":
        a = g.integers(-3, 4, size=shape).astype(np.float64)
    elif fill == "nan_inf":
        a = g.choice(np.array([np.nan, np.inf, -np.inf, 0.0, 1.0, -2.5]), size=shape)
    else:
        a = g.standard_normal(shape) * 3
    dt = desc["dtype"]
    if dt == "bool":
        return a != 0
    if dt in ("uint8", "int8", "int16", "int32", "int64"):
        a = np.nan_to_num(a, nan=0.0, posinf=7, neginf=-7)
        if dt == "uint8":
            a = np.abs(a)
        return np.trunc(a).astype(dt)
    return a


def build(lib, desc, device, ctx):
    """The value of library lib for a description; device is the device under test ("cpu" or
    "lazy"; torch always builds on its cpu). ctx collects the tensors built (for aliasing)."""
    import numpy as np

    is_loom = lib.__name__ == "loom"
    kind = desc["kind"]
    if kind == "py":
        return desc["value"]
    if kind == "object":
        return object()
    if kind == "dtype":
        return getattr(lib, desc["name"])
    if kind == "device":
        which = desc["which"]
        if which == "bogus":
            return "tpu:3"
        if not is_loom:
            return "cpu"
        return {"self": device, "cpu": "cpu", "other": "cpu" if device == "lazy" else "lazy"}[which]
    if kind == "list":
        return [build(lib, d, device, ctx) for d in desc["items"]]
    if kind == "alias_first":
        return ctx["first"] if ctx.get("first") is not None else None
    assert kind == "tensor", kind
    dev = device
    if is_loom and desc.get("other_device"):
        dev = "cpu" if device == "lazy" else "lazy"
    dt = getattr(lib, desc["dtype"])
    shape = tuple(desc["shape"])
    layout = desc["layout"]
    if layout == "huge":
        base = np.ones((1,) * len(shape)) if desc["dtype"] != "bool" else np.ones((1,) * len(shape), bool)
        base_t = _to_lib(lib, base, dt, dev)
        # The base is kept alive: a lazy view whose pending base died is materialized as a copy at
        # the next sync, and one of 2^62 elements fails that whole sync (perf/RESULTS.md, unfixed;
        # test_hostile_calls.py's xfail test). The fuzzer looks past it to find the rest.
        ctx.setdefault("keep", []).append(base_t)
        t = base_t.expand(*shape)
    elif layout == "transposed" and len(shape) >= 2:
        a = np.ascontiguousarray(np.swapaxes(_array(desc), -1, -2))
        t = _to_lib(lib, a, dt, dev).transpose(-1, -2)
    elif layout == "strided" and len(shape) >= 1:
        a = _array(desc)
        big = np.zeros(tuple(2 * s + 1 for s in shape), dtype=a.dtype)
        idx = (slice(1, None, 2),) * len(shape)
        big[idx] = a
        t = _to_lib(lib, big, dt, dev)[idx]
    elif layout == "expanded" and len(shape) >= 1 and shape[0] > 0:
        a = np.ascontiguousarray(_array(desc)[:1])
        t = _to_lib(lib, a, dt, dev).expand(*shape)
    else:
        t = _to_lib(lib, _array(desc), dt, dev)
    if desc.get("requires_grad"):
        # A leaf that requires grad (a view's base is not a leaf: make the leaf first).
        t = t.detach().requires_grad_(True) if layout in ("contiguous", "huge") else t.clone().detach().requires_grad_(True)
    if ctx.get("first") is None:
        ctx["first"] = t
    ctx.setdefault("tensors", []).append(t)
    return t


def _to_lib(lib, a, dt, dev):
    if lib.__name__ == "loom":
        return lib.tensor(a, device=dev).to(dt)
    return lib.tensor(a).to(dt)


def build_call(lib, call, device):
    self_desc, args, kwargs = call
    ctx = {}
    self_v = build(lib, self_desc, device, ctx) if self_desc is not None else None
    a = [build(lib, d, device, ctx) for d in args]
    k = {n: build(lib, d, device, ctx) for n, d in kwargs.items()}
    _KEEP[:] = ctx.get("keep", [])  # until the next call's values are built
    return self_v, a, k, ctx.get("tensors", [])


_KEEP = []


# ----------------------------------------------------------------------------------------------
# Running one call, in a worker
# ----------------------------------------------------------------------------------------------

CLEAR_EXCEPTIONS = (RuntimeError, TypeError, ValueError, IndexError, NotImplementedError, MemoryError,
                    OverflowError, ZeroDivisionError)
# Texts of C++ library exceptions that escaped as a RuntimeError: not a message naming the problem.
CXX_WORDS = ("std::", "vector::", "basic_string", "bad_alloc", "_M_", "stoi", "stol", "out_of_range",
             "bad_array_new_length", "bad_optional", "bad_variant", "unordered_map::at", "map::at")


def _host(lib, v):
    """A plain-data form of a result for comparison (materializes lazy tensors)."""
    import numpy as np

    if isinstance(v, (lib.Tensor,)):
        t = v.detach()
        if lib.__name__ == "loom":
            t = t.cpu()
        dt = str(t.dtype).split(".")[-1]
        if dt == "bfloat16":
            t = t.float()
        if t.numel() > 10 ** 6 or t.numel() * 0 != 0:
            return ("tensor", tuple(v.shape), dt, None)
        try:
            arr = np.array(t.numpy(), copy=True) if t.numel() > 0 else np.zeros(tuple(t.shape))
        except (RuntimeError, TypeError):
            arr = None
        return ("tensor", tuple(v.shape), dt, arr)
    if isinstance(v, (tuple, list)):
        return ("seq", [_host(lib, x) for x in v])
    if isinstance(v, (bool, int, float, str)) or v is None:
        return ("py", v)
    if type(v).__name__ == "dtype":
        return ("py", str(v).split(".")[-1])
    if type(v).__name__ == "Size":
        return ("py", tuple(v))
    if type(v).__name__ == "device":
        return ("py", None)
    if hasattr(v, "_fields") or type(v).__name__.startswith(("return_types", "torch.return_types")):
        return ("seq", [_host(lib, x) for x in tuple(v)])
    return ("other", type(v).__name__)


def _differs(a, b, random_result):
    """A description of how host forms a (loom) and b (torch) differ, or None."""
    import numpy as np

    if a[0] != b[0]:
        if a[0] == "py" and b[0] == "tensor" or a[0] == "tensor" and b[0] == "py":
            return None  # a number where torch gives a 0-d tensor (or the reverse): a form, not a value
        return f"kinds {a[0]} vs {b[0]}"
    if a[0] == "seq":
        if len(a[1]) != len(b[1]):
            return f"lengths {len(a[1])} vs {len(b[1])}"
        for i, (x, y) in enumerate(zip(a[1], b[1])):
            d = _differs(x, y, random_result)
            if d:
                return f"[{i}] {d}"
        return None
    if a[0] == "tensor":
        if a[1] != b[1]:
            return f"shapes {a[1]} vs {b[1]}"
        if a[2] != b[2]:
            return f"dtypes {a[2]} vs {b[2]}"
        if random_result or a[3] is None or b[3] is None:
            return None
        x, y = np.asarray(a[3]), np.asarray(b[3])
        if x.shape != y.shape:
            return f"value shapes {x.shape} vs {y.shape}"
        if x.dtype.kind in "fc" or y.dtype.kind in "fc":
            x64, y64 = x.astype(np.float64), y.astype(np.float64)
            tol = {"float16": 2e-2, "bfloat16": 5e-2, "float32": 1e-4}.get(a[2], 1e-9)
            ok = np.isclose(x64, y64, rtol=tol, atol=tol, equal_nan=True)
            # Huge magnitudes from hostile values: compare only what is finite in both.
            ok |= ~np.isfinite(x64) & ~np.isfinite(y64) & ~(np.isnan(x64) ^ np.isnan(y64))
            ok |= (np.abs(y64) > 1e30) & (np.abs(x64) > 1e30)
            if not ok.all():
                i = np.argwhere(~ok)[0]
                return f"values differ at {tuple(i)}: {x64[tuple(i)]} vs {y64[tuple(i)]}"
            return None
        if not np.array_equal(x, y):
            i = np.argwhere(x != y)[0] if x.shape else ()
            return f"values differ at {tuple(i)}: {x[tuple(i)]} vs {y[tuple(i)]}"
        return None
    if a[0] == "py":
        x, y = a[1], b[1]
        if isinstance(x, float) and isinstance(y, float) and (x != x and y != y or math.isclose(x, y, rel_tol=1e-4)):
            return None
        if random_result and type(x) == type(y):
            return None
        return None if x == y else f"{x!r} vs {y!r}"
    return None


def _call(lib, target, self_v, args, kwargs):
    fn, is_method = resolve(lib, target)
    if is_method:
        return getattr(self_v, target.split(".", 1)[1])(*args, **kwargs)
    return fn(*args, **kwargs)


def _snapshot(loom, tensors):
    import numpy as np

    out = []
    for t in tensors:
        try:
            if t.numel() > 10 ** 5:
                out.append(None)
                continue
            c = t.detach().cpu()
            if c.dtype is loom.bfloat16:
                c = c.float()
            out.append(np.array(c.numpy(), copy=True))
        except Exception:  # noqa: BLE001 (an errored tensor from an earlier failure)
            out.append(None)
    return out


def _same_arrays(a, b):
    import numpy as np

    if a is None or b is None:
        return True
    return a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")


def run_one(target, device, seed, report):
    """Runs one call on loom then torch; report(phase) announces a phase to the parent."""
    import loom
    import torch

    call = make_call(target, seed)
    rec = {"target": target, "device": device, "seed": seed}
    random_result = any(w in target for w in RANDOM_WORDS) or target in TORCH_DIFFERS
    if target.endswith("_") and call[0] is not None and call[0]["layout"] in ("expanded", "huge"):
        # A write into a tensor whose elements share memory: PyTorch's own result depends on the
        # order it visits them, so only shapes and dtypes are compared.
        random_result = True
    mixed = _mixes_devices(call)
    unreliable = _torch_value_unreliable(target, seed, call)
    try:
        self_v, args, kwargs, tensors = build_call(loom, call, device)
    except Exception as e:  # noqa: BLE001 (the values themselves: not the call under test)
        rec.update(outcome="skip", why=f"build: {type(e).__name__}: {e}"[:200])
        return rec
    unreliable = unreliable or _shift_count_undefined(loom, target, self_v, args, kwargs)
    before = _snapshot(loom, tensors)
    report("L")
    loom_err = None
    loom_host = None
    assertion = None
    try:
        res = _call(loom, target, self_v, args, kwargs)
        loom_host = _host(loom, res)
        arg_host = [_host(loom, t) for t in tensors]
    except BaseException as e:  # noqa: BLE001
        if isinstance(e, KeyboardInterrupt):
            raise
        loom_err = e
    report("C")
    if loom_err is not None:
        msg = f"{type(loom_err).__name__}: {loom_err}"[:300]
        rec["loom_error"] = msg
        unclear = not isinstance(loom_err, CLEAR_EXCEPTIONS) or any(w in str(loom_err) for w in CXX_WORDS) \
            or str(loom_err).strip() == ""
        if isinstance(loom_err, (RecursionError, NotImplementedError)) and "has no" not in str(loom_err):
            unclear = isinstance(loom_err, RecursionError)
        if unclear and not isinstance(loom_err, (AssertionError, AttributeError)):
            rec["outcome"] = "bad_exception"
            return rec
        # AssertionError and AttributeError are PyTorch's own errors in its Python-written forms
        # (embedding's padding_idx, F.tanh(1.5)), and loom's suites require torch's exception
        # types: agreement where torch raises the same type, unclear where it raises another.
        assertion = type(loom_err).__name__ if unclear else None
        after = _snapshot(loom, tensors)
        changed = [i for i, (x, y) in enumerate(zip(before, after)) if not _same_arrays(x, y)]
        if changed and target.endswith("_") or changed and "out" in call[2]:
            rec["outcome"] = "corrupted"
            rec["why"] = f"tensor arguments {changed} changed though the call raised"
            return rec
        if device == "lazy":
            try:
                ok = (loom.ones(2, device="lazy") * 2).tolist() == [2.0, 2.0]
            except Exception as e:  # noqa: BLE001
                ok = False
                rec["why"] = f"lazy device after the error: {type(e).__name__}: {e}"[:300]
            if not ok:
                rec["outcome"] = "corrupted"
                return rec
    # torch, with the same values, in a process of its own (TorchServer).
    if not _TORCH.running():
        # Starting torch's process (importing torch) takes seconds on a loaded machine: its own
        # phase with a long allowance, so that the start does not read as the call's hang.
        report("W")
        _TORCH.start()
    report("T")
    torch_err, torch_host, t_arg_host = _TORCH.call(target, seed)
    report("D")
    if loom_err is not None:
        if assertion and not (torch_err or "").startswith(assertion):
            rec["outcome"] = "bad_exception"
            return rec
        if torch_err is None:
            rec["outcome"] = "both_raise" if mixed else "gap"
        else:
            rec["outcome"] = "both_raise"
        return rec
    if torch_err is not None:
        rec["outcome"] = "lenient"
        rec["torch_error"] = torch_err[:200]
        return rec
    if unreliable:
        rec["outcome"] = "ok"
        rec["why"] = f"not compared: {unreliable}"
        return rec
    d = _differs(loom_host, torch_host, random_result)
    if d is None and not random_result and len(arg_host) == len(t_arg_host):
        for i, (x, y) in enumerate(zip(arg_host, t_arg_host)):
            d = _differs(x, y, False)
            if d:
                d = f"argument {i} after the call: {d}"
                break
    rec["outcome"] = "mismatch" if d else "ok"
    if d:
        rec["why"] = d[:300]
    return rec


class TorchServer:
    """torch's half of the calls, in a process of its own (torch only, no loom): torch 1.13 corrupts
    its heap on some hostile calls (Tensor.flatten(1, -1, "L") of a 2^31 x 2^31 expanded view frees
    an invalid pointer), which in the worker would abort it later, during some innocent loom call.
    A fork per call would isolate it too, but costs 100 ms in a process with both libraries loaded.
    A server that dies or stops answering is replaced, and the call reads as torch's error."""

    def __init__(self):
        self.proc = None

    def running(self):
        return self.proc is not None and self.proc.poll() is None

    def start(self):
        """Starts the server and waits (up to TORCH_START_TIMEOUT) for its ready byte."""
        self._start()
        fd = self.proc.stdout.fileno()
        if not select.select([fd], [], [], TORCH_START_TIMEOUT)[0] or os.read(fd, 1) != b"R":
            self.proc.kill()
            self.proc.wait()
            self.proc = None

    def _start(self):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", f"import sys; sys.path.insert(0, {HERE!r}); "
             "import _hostile_calls; _hostile_calls.torch_server()"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)

    def call(self, target, seed):
        import pickle

        if not self.running():
            self.start()
        if self.proc is None:
            return ("torch did not start", None, None)
        self.proc.stdin.write(f"{target} {seed}\n".encode())
        self.proc.stdin.flush()
        fd = self.proc.stdout.fileno()
        data = b""
        deadline = time.monotonic() + TORCH_TIMEOUT
        need = None
        while need is None or len(data) < need:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                break
            b = os.read(fd, 1 << 20)
            if not b:
                break
            data += b
            if need is None and len(data) >= 8:
                need = 8 + int.from_bytes(data[:8], "little")
        if need is None or len(data) < need:
            self.proc.kill()
            self.proc.wait()
            self.proc = None
            return ("torch died or hung", None, None)
        return pickle.loads(data[8:need])


def torch_server():
    """Reads "target seed" lines; answers each with a length-prefixed pickle of (error text or
    None, host form of the result, host forms of the tensor arguments)."""
    import pickle
    import warnings

    warnings.simplefilter("ignore")
    import torch

    torch.set_num_threads(1)
    out = sys.stdout.buffer
    out.write(b"R")  # ready: TorchServer.start waits for it
    out.flush()
    for line in sys.stdin:
        target, seed = line.split()
        try:
            call = make_call(target, int(seed))
            t_self, t_args, t_kwargs, t_tensors = build_call(torch, call, "cpu")
            tres = _call(torch, target, t_self, t_args, t_kwargs)
            payload = (None, _host(torch, tres), [_host(torch, t) for t in t_tensors])
        except BaseException as e:  # noqa: BLE001
            if isinstance(e, KeyboardInterrupt):
                raise
            payload = (f"{type(e).__name__}: {e}"[:300], None, None)
        torch.set_default_dtype(torch.float32)
        torch.set_grad_enabled(True)
        data = pickle.dumps(payload)
        out.write(len(data).to_bytes(8, "little") + data)
        out.flush()


_TORCH = TorchServer()


def _mixes_devices(call):
    self_desc, args, kwargs = call
    descs = ([self_desc] if self_desc else []) + list(args) + list(kwargs.values())
    flat = []
    for d in descs:
        flat.extend(d["items"] if d.get("kind") == "list" else [d])
    return any(d.get("other_device") for d in flat if d.get("kind") == "tensor") or \
        any(d.get("kind") == "device" and d["which"] in ("other", "cpu") for d in flat)


def _reset_state(loom, torch):
    loom.set_default_dtype(loom.float32)
    torch.set_default_dtype(torch.float32)
    loom.set_grad_enabled(True)
    torch.set_grad_enabled(True)


def worker():
    """Reads "target device seed" lines from stdin; writes "S i", phase letters and "R i <json>"."""
    limit = 6 << 30
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ValueError, OSError):
        pass
    import warnings

    warnings.simplefilter("ignore")
    import loom
    import torch

    torch.set_num_threads(1)
    executor = os.environ.get("LOOM_FUZZ_EXECUTOR", "interpreter")
    loom._C._set_executor(executor)
    out = sys.stdout
    for i, line in enumerate(sys.stdin):
        target, device, seed = line.split()
        out.write(f"S {i}\n")
        out.flush()

        def report(phase):
            out.write(f"P {phase}\n")
            out.flush()

        try:
            rec = run_one(target, device, int(seed), report)
        except Exception as e:  # noqa: BLE001 (a fuzzer bug must not read as loom's)
            rec = {"target": target, "device": device, "seed": int(seed), "outcome": "skip",
                   "why": f"fuzzer: {type(e).__name__}: {e}"[:200]}
        _reset_state(loom, torch)
        out.write("R " + json.dumps(rec, default=str) + "\n")
        out.flush()


# ----------------------------------------------------------------------------------------------
# The parent: batches, deaths, hangs, attribution
# ----------------------------------------------------------------------------------------------

def _spawn(env):
    return subprocess.Popen([sys.executable, "-c", f"import sys; sys.path.insert(0, {HERE!r}); "
                             "import _hostile_calls; _hostile_calls.worker()"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            env=env, cwd=env.get("LOOM_FUZZ_CWD", os.getcwd()), text=True, bufsize=1,
                            start_new_session=True)


def run_batch(calls, timeout=20.0, env=None):
    """Runs calls [(target, device, seed)] in workers; returns their records. A call during which
    the worker died or went silent for `timeout` seconds gets outcome crash / hang (or
    torch_crash when it happened inside torch's half)."""
    env = dict(env or os.environ)
    env.setdefault("OMP_NUM_THREADS", "1")
    records = []
    start = 0
    while start < len(calls):
        proc = _spawn(env)
        batch_start = start
        for c in calls[start:]:
            proc.stdin.write(f"{c[0]} {c[1]} {c[2]}\n")
        proc.stdin.close()
        current, phase = None, None
        died = None
        buf = ""
        fd = proc.stdout.fileno()
        os.set_blocking(fd, False)
        last = time.monotonic()
        while True:
            ready, _, _ = select.select([fd], [], [], 1.0)
            if ready:
                chunk = os.read(fd, 1 << 16).decode()
                if not chunk:
                    break
                last = time.monotonic()
                buf += chunk
                *lines, buf = buf.split("\n")
                for ln in lines:
                    if ln.startswith("S "):
                        current, phase = start + int(ln[2:]) - (start - batch_start) * 0, None
                        current = batch_start + int(ln[2:])
                    elif ln.startswith("P "):
                        phase = ln[2:]
                    elif ln.startswith("R "):
                        records.append(json.loads(ln[2:]))
                        current = None
            elif time.monotonic() - last > {"T": TORCH_TIMEOUT, "W": TORCH_START_TIMEOUT + 5}.get(phase, timeout):
                died = "hang"
                break
        # The worker's whole process group: a forked torch child of a killed worker goes too.
        try:
            os.killpg(proc.pid, 9)
        except ProcessLookupError:
            pass
        proc.wait()
        stderr = proc.stderr.read()[-2000:]
        if current is None:
            if died is None and proc.returncode == 0:
                break
            if died is None:
                # Died between calls (at exit): attribute to the batch as a whole.
                records.append({"target": "<exit>", "device": "", "seed": 0, "outcome": "crash",
                                "why": f"worker exited {proc.returncode} after its calls: {stderr[-500:]}"})
                break
        target, device, seed = calls[current]
        in_torch = phase in ("T", "W")
        kind = died or "crash"
        rec = {"target": target, "device": device, "seed": seed,
               "outcome": ("torch_" + kind) if in_torch else kind,
               "why": f"returncode {proc.returncode}; phase {phase}; stderr: {stderr[-600:]}",
               "batch_start": batch_start}
        records.append(rec)
        start = current + 1
    return records


def confirm_alone(rec, timeout=20.0, env=None):
    """Reruns a crashed call by itself; says whether it needs the calls before it."""
    again = run_batch([(rec["target"], rec["device"], rec["seed"])], timeout, env)
    rec["alone"] = again[0]["outcome"] if again else "?"
    return rec


def plan(seed, calls_per_target, devices=("cpu", "lazy"), targets=None):
    targets = targets or surface()
    r = random.Random(seed)
    out = []
    for t in targets:
        for dev in devices:
            for _ in range(calls_per_target):
                out.append((t, dev, r.randrange(1 << 30)))
    r.shuffle(out)
    return out


def split(items, n):
    k = max(1, math.ceil(len(items) / n))
    return [items[i:i + k] for i in range(0, len(items), k)]


def run_parallel(calls, workers=2, timeout=20.0, env=None):
    """run_batch over `workers` worker chains at once."""
    import concurrent.futures as cf

    with cf.ThreadPoolExecutor(workers) as ex:
        parts = list(ex.map(lambda c: run_batch(c, timeout, env), split(calls, workers)))
    return [r for p in parts for r in p]


# torch's half of a call gets less time: torch computing a huge hostile size for real is not loom's
# problem, and waiting for it would only slow the run.
TORCH_TIMEOUT = 5.0
# Starting torch's process: importing torch under the load of a shared CI machine.
TORCH_START_TIMEOUT = 120.0

BUGS = ("crash", "hang", "bad_exception", "corrupted", "mismatch")


def summarize(records):
    return Counter(r["outcome"] for r in records)


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2, help="calls per target and device")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--targets", default="")
    ap.add_argument("--devices", default="cpu,lazy")
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--json", default="")
    ap.add_argument("--show", default=",".join(BUGS))
    a = ap.parse_args(argv)
    targets = [t for t in a.targets.split(",") if t] or None
    calls = plan(a.seed, a.calls, tuple(a.devices.split(",")), targets)
    t0 = time.time()
    records = run_parallel(calls, a.workers)
    for r in records:
        if r["outcome"] in ("crash", "hang"):
            confirm_alone(r)
    print(f"{len(records)} calls in {time.time() - t0:.1f}s: {dict(summarize(records))}")
    show = set(a.show.split(","))
    for r in sorted(records, key=lambda r: (r["outcome"], r["target"])):
        if r["outcome"] in show:
            print(json.dumps(r, default=str)[:600])
    if a.json:
        with open(a.json, "w") as f:
            json.dump(records, f, default=str)


if __name__ == "__main__":
    main()
