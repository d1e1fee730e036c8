"""Run PyTorch's own op test database (OpInfo, torch.testing._internal.common_methods_invocations.op_db)
against loom.

For each OpInfo (621 in PyTorch 1.13) and each of its samples (SampleInput: input, args, kwargs), on
each dtype asked for that the OpInfo lists (float32, float64, one integer type and bool by default):

  * loom's counterpart is resolved by the torch callable's home: torch.X -> loom.X,
    torch.nn.functional.X -> loom.nn.functional.X, torch.linalg / torch.special / torch.fft .X ->
    loom's namespace of that name, the method variant -> loom.Tensor.<name>, the in-place variant
    -> loom.Tensor.<name_>. An OpInfo whose `op` is a lambda of the test module is run with its
    module globals rebound (`torch` -> loom, `F` -> loom.nn.functional, ...), so `lambda x: x.T`
    or `lambda x, y: torch.where(...)` run on loom as written.
  * The sample is drawn once from PyTorch (seeded per op), its tensors (at any nesting) are copied
    into fresh leaves for the torch reference and converted to loom on each device ("cpu": eager;
    "lazy": recorded and run at the sync that reads the result, with loom.set_default_device("lazy")
    during the call, so tensors the op makes are lazy too).
  * Outputs (tensors at any nesting, and Python numbers) are compared with torch's: shape, dtype,
    values (floating: rtol/atol per dtype, see TOL; NaN equals NaN; others exact).
  * For OpInfos with supports_autograd, on floating dtypes, the gradients of
    sum(output_i * cotangent_i) (fixed random cotangents, seeded by shape) with respect to every
    sample tensor that requires grad are compared with torch's (an unused input's gradient counts
    as zeros on both sides).
  * error_inputs (where the OpInfo has them): loom must raise an exception of the class torch's
    database names (on "lazy" the result is synced inside the check).

Case classes: pass; mismatch (value / shape / dtype / count of outputs / gradient); loom raised
(loom raised where torch succeeded); missing API (loom has no counterpart name, or raised
AttributeError / NotImplementedError); reference unavailable (torch 1.13 itself raised: nothing to
hold against loom); skipped (reason: complex / sparse input, an input loom has no type for, ...);
crash (the worker died or ran past --timeout in that op: the whole op on that device).
Error-input cases: error pass / error mismatch (another class, or nothing raised).

Each op runs in a worker process (several ops per worker); when a worker dies or hangs the op it
was running is recorded as a crash and a new worker continues with the next op.

Importing op_db needs the test-only package `expecttest` (torch's own test helpers import it; Debian
does not package it). This runner puts a minimal stand-in module into sys.modules before the import
(ACCEPT = False and a TestCase class); it replaces a test-only dependency of torch's helpers, nothing
of loom, and none of the comparisons go through it.

usage:
  .venv/bin/python perf/tools/opinfo_suite.py [--devices cpu,lazy] [--ops abs,add,...]
      [--dtypes float32,float64,int64,bool] [--limit-samples N] [--timeout 120] [--workers 1]
      [--json OUT.json] [--summary OUT.txt] [--no-grad] [--no-errors] [--list]
  --ops takes names as "name" or "name.variant" (the variant_test_name), comma-separated; a name
  alone selects all its variants. Set LOOM_CACHE_DIR to a directory of your own to keep kernels.
"""

import argparse
import functools
import json
import math
import os
import selectors
import subprocess
import sys
import threading
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from op_compare import (compare_arrays, dtype_name, exc_info, install_expecttest_standin,  # noqa: E402
                        restore_torch_global_flags)

# (rtol, atol) for values and for gradients, per dtype.
TOL = {
    "float32": ((1e-4, 1e-5), (1e-3, 1e-4)),
    "float64": ((1e-7, 1e-7), (1e-6, 1e-6)),
    "float16": ((1e-2, 1e-3), (1e-2, 1e-2)),
    "bfloat16": ((1e-2, 1e-2), (5e-2, 5e-2)),
}
DEFAULT_DTYPES = "float32,float64,int64,bool"
INT_DTYPES = ("int64", "int32", "int16", "int8", "uint8")


def load_op_db():
    install_expecttest_standin()
    from torch.testing._internal.common_methods_invocations import op_db
    restore_torch_global_flags()
    return op_db


def op_id(info):
    return info.name + (f".{info.variant_test_name}" if info.variant_test_name else "")


def select(op_db, ops):
    if not ops:
        return list(op_db)
    want = set(ops)
    return [o for o in op_db if op_id(o) in want or o.name in want]


# ---------------------------------------------------------------------------------------------
# Resolving loom's counterpart

class Missing(Exception):
    """loom has no counterpart for this torch callable."""


class Skip(Exception):
    """The case cannot be run on loom for a reason that is no failure of loom's (complex input, ...)."""


_HOMES = None


def _homes(torch):
    """id(torch callable) -> (namespace path, name), over the namespaces loom mirrors."""
    global _HOMES
    if _HOMES is None:
        import torch.nn.functional  # noqa: F401
        spaces = [("", torch), ("nn.functional", torch.nn.functional), ("linalg", torch.linalg),
                  ("special", torch.special), ("fft", torch.fft), ("Tensor", torch.Tensor)]
        _HOMES = {}
        for path, ns in reversed(spaces):   # torch.X wins over an alias elsewhere
            for name in dir(ns):
                if name.startswith("__"):
                    continue
                try:
                    obj = getattr(ns, name)
                except Exception:
                    continue
                if callable(obj):
                    _HOMES[id(obj)] = (path, name)
    return _HOMES


def _loom_ns(loom, path):
    ns = loom
    for part in path.split(".") if path else []:
        ns = getattr(ns, part, None)
        if ns is None:
            raise Missing(f"loom.{path} does not exist")
    return ns


class _LoomAsTorch(types.ModuleType):
    """`torch` for a rebound lambda: loom's names, torch's where loom lacks one is a Missing."""

    def __init__(self, loom, path=""):
        super().__init__("torch-as-loom")
        self._loom, self._path = loom, path

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        ns = _loom_ns(self._loom, self._path)
        if not hasattr(ns, name):
            raise Missing(f"loom{'.' + self._path if self._path else ''}.{name}")
        return getattr(ns, name)


def _rebind(fn, loom, torch):
    """A lambda / function of the test module with torch-valued globals rebound to loom."""
    g = dict(fn.__globals__)
    for k, v in list(g.items()):
        if v is torch:
            g[k] = _LoomAsTorch(loom)
        elif isinstance(v, types.ModuleType) and v.__name__ in ("torch.nn.functional", "torch.linalg",
                                                                 "torch.special", "torch.fft"):
            g[k] = _LoomAsTorch(loom, v.__name__[len("torch."):])
    closure = None
    if fn.__closure__:
        # a lambda made in a loop closes over the torch callable it wraps: that callable's loom twin
        cells = []
        for cell in fn.__closure__:
            v = cell.cell_contents
            if callable(v) and (id(v) in _homes(torch) or isinstance(v, (types.FunctionType, functools.partial))):
                v = loom_callable(v, loom, torch)
            cells.append(types.CellType(v))
        closure = tuple(cells)
    return types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, closure)


def loom_callable(f, loom, torch):
    """loom's counterpart of a torch callable (an op, a method descriptor, a partial of one, or a
    function of the test module written against `torch`), raising Missing or Skip."""
    if isinstance(f, functools.partial):
        return functools.partial(loom_callable(f.func, loom, torch), *f.args, **f.keywords)
    home = _homes(torch).get(id(f))
    if home is not None:
        path, name = home
        if path == "Tensor":   # torch.Tensor.X (a method, a dunder such as __radd__): loom.Tensor.X
            name = {"__rdiv__": "__rtruediv__"}.get(name, name)   # Python 2's name, torch keeps an alias
            if not hasattr(loom.Tensor, name):
                raise Missing(f"loom.Tensor.{name}")
            return lambda x, *a, **k: getattr(x, name)(*a, **k)
        ns = _loom_ns(loom, path)
        if not hasattr(ns, name):
            raise Missing(f"loom{'.' + path if path else ''}.{name}")
        return getattr(ns, name)
    if isinstance(f, types.FunctionType) and (f.__module__ or "").startswith("torch.testing"):
        return _rebind(f, loom, torch)
    if type(f).__name__ == "method-wrapper" or (hasattr(f, "__objclass__") and f.__objclass__.__name__ in ("_TensorBase", "Tensor")):
        name = f.__name__
        if not hasattr(loom.Tensor, name):
            raise Missing(f"loom.Tensor.{name}")
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    if isinstance(f, types.FunctionType) and f.__module__ == "torch._tensor":
        name = {"__rdiv__": "__rtruediv__"}.get(f.__name__, f.__name__)
        if not hasattr(loom.Tensor, name):
            raise Missing(f"loom.Tensor.{name}")
        return lambda x, *a, **k: getattr(x, name)(*a, **k)
    raise Skip(f"op is {getattr(f, '__module__', '?')}.{getattr(f, '__name__', f)}, no mirrored namespace")


def resolve(info, variant, loom, torch):
    """loom's callable for an OpInfo's variant ("op", "method", "inplace"), raising Missing."""
    f = {"op": info.op, "method": info.method_variant, "inplace": info.inplace_variant}[variant]
    return loom_callable(f, loom, torch)


# ---------------------------------------------------------------------------------------------
# Converting a sample

def _walk(x, leaf, torch):
    if isinstance(x, torch.Tensor):
        return leaf(x)
    if isinstance(x, torch.Size):
        return tuple(x)
    if isinstance(x, tuple) and hasattr(x, "_fields"):
        return type(x)(*[_walk(v, leaf, torch) for v in x])
    if isinstance(x, (list, tuple)):
        return type(x)(_walk(v, leaf, torch) for v in x)
    if isinstance(x, dict):
        return {k: _walk(v, leaf, torch) for k, v in x.items()}
    return x


def torch_copy(sample_parts, torch, grad_ok):
    """Fresh leaf copies of every tensor (so mutations and graphs of one run never reach another);
    the leaves that require grad are returned in walk order."""
    leaves = []

    def leaf(t):
        c = t.detach().clone()
        if grad_ok and t.requires_grad:
            c.requires_grad_(True)
            leaves.append(c)
        return c

    return _walk(sample_parts, leaf, torch), leaves


def loom_copy(sample_parts, loom, torch, device, grad_ok, keep_aliasing=False):
    """loom copies of a sample's tensors. keep_aliasing (error_inputs): tensors that share memory
    in torch (an out= that is an input, or a view of one, or an expanded out=) become views of one
    loom tensor holding their storage, with their strides and offsets, so that loom sees the
    overlap torch refuses."""
    leaves = []
    same = {}  # one torch tensor met twice (error_inputs' out= that is an input): one loom tensor
    bases = {}  # keep_aliasing: torch storage address -> the loom tensor of the whole storage

    def leaf(t):
        key = (t.data_ptr(), tuple(t.shape), t.stride(), t.dtype) if t.numel() else None
        if key is not None and key in same:
            return same[key]
        same[key] = c = aliased(t) if keep_aliasing and t.numel() and not t.requires_grad else copy(t)
        return c

    def aliased(t):
        storage = t.storage()
        where = (storage.data_ptr(), t.dtype)
        if where not in bases:
            bases[where] = copy(torch.empty(0, dtype=t.dtype).set_(storage))
        return bases[where].as_strided(tuple(t.shape), t.stride(), t.storage_offset())

    def copy(t):
        if t.is_complex():
            raise Skip("complex tensor")
        if t.layout != torch.strided:
            raise Skip(f"{t.layout} tensor")
        name = dtype_name(t.dtype)
        ldt = getattr(loom, name, None)
        if ldt is None:
            raise Skip(f"dtype {name}")
        src = t.detach()
        arr = (src.float() if name == "bfloat16" else src).numpy()
        c = loom.tensor(np.array(arr, copy=True), dtype=ldt, device=device)
        if grad_ok and t.requires_grad:
            c.requires_grad_(True)
            leaves.append(c)
        return c

    def walk(x):
        if isinstance(x, torch.dtype):
            lx = getattr(loom, dtype_name(x), None)
            if lx is None:
                raise Skip(f"dtype {x}")
            return lx
        if isinstance(x, torch.device):
            return device
        if isinstance(x, torch.memory_format):
            name = str(x).split(".")[-1]
            if not hasattr(loom, name):
                raise Missing(f"loom.{name}")
            return getattr(loom, name)
        if isinstance(x, torch.Generator):
            raise Skip("torch.Generator argument")
        if callable(x) and not isinstance(x, type) and (id(x) in _homes(torch) or isinstance(x, functools.partial)):
            return loom_callable(x, loom, torch)   # e.g. distance_function=F.pairwise_distance
        if isinstance(x, torch.Tensor):
            return leaf(x)
        if isinstance(x, torch.Size):
            return tuple(x)
        if isinstance(x, tuple) and hasattr(x, "_fields"):
            return type(x)(*[walk(v) for v in x])
        if isinstance(x, (list, tuple)):
            return type(x)(walk(v) for v in x)
        if isinstance(x, dict):
            return {k: walk(v) for k, v in x.items()}
        if isinstance(x, str) and x in ("cpu", "cuda"):
            return x if x == "cuda" else device
        return x

    return walk(sample_parts), leaves


# ---------------------------------------------------------------------------------------------
# Flattening and comparing results

def flatten(x, out):
    if isinstance(x, (list, tuple)):
        for v in x:
            flatten(v, out)
    elif isinstance(x, dict):
        for k in sorted(x):
            flatten(x[k], out)
    else:
        out.append(x)
    return out


def _is_tensor(x):
    return hasattr(x, "detach") and hasattr(x, "dtype") and hasattr(x, "shape")


def record(x):
    if _is_tensor(x):
        if str(getattr(x, "layout", "strided")).split(".")[-1] != "strided":
            return ("unsupported", f"{x.layout} output", tuple(x.shape))
        t = x.detach().cpu()
        name = dtype_name(t.dtype)
        if name in ("complex64", "complex128", "complex32"):
            return ("unsupported", "complex output", tuple(t.shape))
        if name == "bfloat16":
            t = t.float()
        return np.array(t.numpy(), copy=True), name, tuple(t.shape)
    if x is None or isinstance(x, (bool, int, float, str)):
        return x
    if hasattr(x, "dtype") and hasattr(x, "is_floating_point") and not hasattr(x, "shape"):
        return ("dtype", dtype_name(x))
    return ("object", type(x).__name__)


def _structure(r):
    """A tensor record with its values blanked (NaN-free zeros): shape and dtype stay comparable."""
    if isinstance(r, tuple) and len(r) == 3 and isinstance(r[0], np.ndarray):
        return np.zeros(r[0].shape, r[0].dtype), r[1], r[2]
    return r if not isinstance(r, (int, float)) else 0


# Ops that return indices of equal values in an order PyTorch leaves open (its CPU sort is not
# stable past a size, topk / kthvalue / mode pick any of equal elements): an index output that
# differs from torch's passes when it selects the same values of the input (tied_indices).
TIE_OPS = {"sort", "argsort", "msort", "topk", "kthvalue", "mode", "median", "nanmedian", "max", "min",
           "argmax", "argmin"}


def tied_indices(a, gi, ri):
    """True when index arrays gi (loom's) and ri (torch's) pick the same values of input `a` along
    some axis (the op's dim), NaN equal to NaN."""
    if gi.shape != ri.shape or a.ndim == 0:
        return False
    for d in range(a.ndim):
        g2, r2 = (gi, ri) if gi.ndim == a.ndim else (np.expand_dims(gi, d), np.expand_dims(ri, d))
        if g2.ndim != a.ndim:
            continue
        try:
            gv, rv = np.take_along_axis(a, g2, d), np.take_along_axis(a, r2, d)
        except (IndexError, ValueError):
            continue
        if np.array_equal(gv, rv, equal_nan=np.issubdtype(a.dtype, np.floating)):
            return True
    return False


def compare_outputs(got, ref, tol, what, tie_input=None):
    if len(got) != len(ref):
        return "count", f"{what}: {len(got)} outputs vs torch {len(ref)}"
    for i, (g, r) in enumerate(zip(got, ref)):
        w = f"{what}[{i}]" if len(ref) > 1 else what
        if isinstance(r, tuple) and len(r) == 3 and isinstance(r[0], np.ndarray):
            if not (isinstance(g, tuple) and len(g) == 3 and isinstance(g[0], np.ndarray)):
                return "type", f"{w}: {type(g).__name__} vs torch tensor"
            rtol, atol = tol.get(r[1], tol["float32"])[0 if what == "output" else 1]
            kind, detail = compare_arrays(g, r, atol, rtol, w)
            if kind == "value" and tie_input is not None and r[1] == "int64" and tied_indices(tie_input, g[0], r[0]):
                kind = None
            if kind:
                return kind, detail
        elif isinstance(r, tuple) and r and r[0] == "unsupported":
            return "skip", r[1]
        elif isinstance(r, float) and isinstance(g, (int, float)) and not isinstance(g, bool):
            if not (math.isclose(g, r, rel_tol=1e-5, abs_tol=1e-6) or (math.isnan(g) and math.isnan(r))):
                return "value", f"{w}: {g} vs torch {r}"
        elif isinstance(r, tuple) and r and r[0] == "dtype":
            if g != r and not (isinstance(g, tuple) and g == r):
                return "value", f"{w}: {g} vs torch {r}"
        elif isinstance(r, tuple) and r and r[0] == "object":
            continue
        elif g != r or type(g) is not type(r):
            return "value", f"{w}: {g!r} vs torch {r!r}"
    return None, None


def cotangent(shape, dtype_np):
    seed = (sum((i + 1) * 7919 * s for i, s in enumerate(shape)) + len(shape)) % (2 ** 31)
    return np.random.RandomState(seed).standard_normal(shape).astype(dtype_np)


def grads_of(lib, outs, leaves, to_lib):
    """Gradients of sum(out_i * cotangent_i) over the floating outputs that need grad (None -> None)."""
    loss = None
    for o in outs:
        if not _is_tensor(o) or not o.requires_grad or dtype_name(o.dtype) not in TOL:
            continue
        c = to_lib(cotangent(tuple(o.shape), np.float64)).to(o.dtype)
        term = (o * c).sum()
        loss = term if loss is None else loss + term
    if loss is None:
        return None
    gs = lib.autograd.grad(loss, leaves, allow_unused=True)
    return [None if g is None else g for g in gs]


# ---------------------------------------------------------------------------------------------
# One case

def _classify_loom_error(e):
    if isinstance(e, Missing):
        return "missing API"
    if isinstance(e, Skip):
        return "skipped"
    if isinstance(e, (AttributeError, NotImplementedError)):
        return "missing API"
    return "loom raised"


def run_case(info, variant, sample, dtype, devices, loom, torch, do_grad):
    """{device: (class, detail)} for one sample."""
    grad_ok = do_grad and variant == "op" and info.supports_autograd and dtype in TOL
    parts = (sample.input, sample.args, sample.kwargs)
    # reference
    (inp, args, kwargs), t_leaves = torch_copy(parts, torch, grad_ok)
    try:
        tfn = {"op": info.op, "method": info.method_variant, "inplace": info.inplace_variant}[variant]
        torch.manual_seed(0)
        tout = tfn(inp, *args, **kwargs)
    except Exception as e:
        return {d: ("reference unavailable", f"{type(e).__name__}: {str(e)[:200]}") for d in devices}
    t_flat = flatten(tout, [])
    ref = [record(x) for x in t_flat]
    # A random op (dropout, bernoulli, empty, ...) gives other values under another seed: for it
    # only the structure (count, shape, dtype) is compared, since loom's generator is its own.
    # The database wraps some random ops in wrapper_set_seed (a fixed seed per call): those are random too.
    random_op = "wrapper_set_seed" in getattr(getattr(tfn, "__code__", None), "co_names", ())
    # empty / empty_like / new_empty* return uninitialised memory: values are no reference either
    random_op = random_op or "empty" in info.name.split(".")[0]
    try:
        (inp2, args2, kwargs2), _ = torch_copy(parts, torch, False)
        torch.manual_seed(1)
        again = [record(x) for x in flatten(tfn(inp2, *args2, **kwargs2), [])]
        random_op = random_op or compare_outputs(again, ref, TOL, "output")[0] is not None
    except Exception:
        pass
    if random_op:
        ref = [_structure(r) for r in ref]
    ref_grads, grad_unstable = None, False
    if grad_ok and t_leaves:
        try:
            go = flatten(sample.output_process_fn_grad(tout), [])
            tg = grads_of(torch, go, t_leaves, lambda a: torch.from_numpy(a))
            if tg is not None:
                ref_grads = [None if g is None else record(g) for g in tg]
                # torch 1.13's backward of some ops (sgn on real input) reads uninitialised memory:
                # a gradient torch cannot reproduce on a second identical run is no reference.
                (inp2, args2, kwargs2), leaves2 = torch_copy(parts, torch, True)
                torch.manual_seed(0)
                out2 = tfn(inp2, *args2, **kwargs2)
                tg2 = grads_of(torch, flatten(sample.output_process_fn_grad(out2), []), leaves2,
                               lambda a: torch.from_numpy(a))
                again = [None if g is None else record(g) for g in tg2]
                if not random_op and compare_outputs([x for x in again if x is not None],
                                                     [x for x in ref_grads if x is not None], TOL, "grad")[0]:
                    grad_unstable = True
        except Exception:
            ref_grads = None   # torch cannot differentiate this sample: values only
    out = {}
    for d in devices:
        prev = loom.get_default_device()
        try:
            fn = resolve(info, variant, loom, torch)
            (linp, largs, lkwargs), l_leaves = loom_copy(parts, loom, torch, d, grad_ok)
            loom.set_default_device(d)
            try:
                lout = fn(linp, *largs, **lkwargs)
            finally:
                loom.set_default_device(prev)
            got = [record(x) for x in flatten(lout, [])]
            if random_op:
                got = [_structure(g) for g in got]
            tie = None
            if info.name in TIE_OPS and isinstance(sample.input, torch.Tensor) and not sample.input.is_complex():
                tie = sample.input.detach().float().numpy() if sample.input.dtype == torch.bfloat16 else sample.input.detach().numpy()
            kind, detail = compare_outputs(got, ref, TOL, "output", tie)
            if kind == "skip":
                out[d] = ("skipped", detail)
                continue
            if kind:
                out[d] = ("mismatch", f"{kind}: {detail}")
                continue
            if ref_grads is not None:
                lo = flatten(sample.output_process_fn_grad(lout), [])
                lg = grads_of(loom, lo, l_leaves, lambda a: loom.tensor(a, device=d))
                if lg is None:
                    out[d] = ("mismatch", "gradient: no output of loom's requires grad")
                    continue
                gg, rg = [], []
                for g, r, lf in zip(lg, ref_grads, l_leaves):
                    if g is None and r is None:
                        continue
                    zero = np.zeros(tuple(lf.shape), dtype={"float32": np.float32}.get(dtype_name(lf.dtype), np.float64))
                    gg.append(record(g) if g is not None else (zero, dtype_name(lf.dtype), tuple(lf.shape)))
                    rg.append(r if r is not None else (zero, dtype_name(lf.dtype), tuple(lf.shape)))
                if random_op:   # the gradient of a random op carries its random mask
                    gg, rg = [_structure(g) for g in gg], [_structure(r) for r in rg]
                kind, detail = compare_outputs(gg, rg, TOL, "grad")
                if kind and grad_unstable:
                    out[d] = ("reference unavailable", f"torch's gradient differs between two identical runs ({detail[:120]})")
                    continue
                if kind:
                    out[d] = ("mismatch", f"gradient {kind}: {detail}")
                    continue
            out[d] = ("pass", "")
        except Exception as e:  # noqa: BLE001 - every loom failure is a case outcome
            cls = _classify_loom_error(e)
            out[d] = (cls, f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}")
        finally:
            if loom.get_default_device() != prev:
                loom.set_default_device(prev)
    return out


def run_error_input(info, ei, devices, loom, torch):
    s = ei.sample_input
    out = {}
    for d in devices:
        prev = loom.get_default_device()
        try:
            fn = resolve(info, "op", loom, torch)
            (inp, args, kwargs), _ = loom_copy((s.input, s.args, s.kwargs), loom, torch, d, False, keep_aliasing=True)
        except (Missing, Skip) as e:
            out[d] = (_classify_loom_error(e), str(e)[:200])
            continue
        except Exception as e:  # noqa: BLE001
            out[d] = ("skipped", f"input conversion: {type(e).__name__}: {str(e)[:150]}")
            continue
        try:
            loom.set_default_device(d)
            try:
                r = fn(inp, *args, **kwargs)
                for x in flatten(r, []):   # lazy: a data-dependent error shows at the sync
                    if _is_tensor(x):
                        x.cpu().numpy() if dtype_name(x.dtype) != "bfloat16" else x.float().cpu()
            finally:
                loom.set_default_device(prev)
            out[d] = ("error mismatch", f"nothing raised (torch: {ei.error_type.__name__})")
        except Exception as e:  # noqa: BLE001
            if isinstance(e, ei.error_type):
                out[d] = ("error pass", "")
            else:
                out[d] = ("error mismatch", f"{type(e).__name__}: {str(e)[:150]} (torch: {ei.error_type.__name__})")
    return out


def variants(info):
    vs = ["op"]
    if info.method_variant is not None and info.method_variant is not info.op:
        vs.append("method")
    if info.inplace_variant is not None:
        vs.append("inplace")
    return vs


def run_op(info, args, loom, torch):
    t0 = time.time()
    cases = []
    listed = {dtype_name(d) for d in info.dtypes}
    dts = []
    for want in args.dtypes:
        if want == "int" or want in INT_DTYPES:
            pick = want if want in listed else next((i for i in INT_DTYPES if i in listed), None) if want == "int" else None
            if pick and pick not in dts:
                dts.append(pick)
        elif want in listed:
            dts.append(want)
    for dt in dts:
        tdt = getattr(torch, dt)
        for variant in variants(info):
            torch.manual_seed(0)
            try:
                samples = list(info.sample_inputs("cpu", tdt, requires_grad=(variant == "op" and info.supports_autograd
                                                                               and dt in TOL and not args.no_grad)))
            except Exception as e:  # noqa: BLE001
                cases.append({"dtype": dt, "variant": variant, "sample": -1,
                              "devices": {d: ("skipped", f"sample_inputs raised {type(e).__name__}: {str(e)[:150]}")
                                          for d in args.devices}})
                continue
            if args.limit_samples:
                samples = samples[:args.limit_samples]
            for i, s in enumerate(samples):
                res = run_case(info, variant, s, dt, args.devices, loom, torch, not args.no_grad)
                cases.append({"dtype": dt, "variant": variant, "sample": i, "devices": res})
    if not args.no_errors and info.error_inputs_func is not None:
        try:
            eis = list(info.error_inputs("cpu"))
        except Exception as e:  # noqa: BLE001
            eis = []
            cases.append({"kind": "error", "sample": -1,
                          "devices": {d: ("skipped", f"error_inputs raised {type(e).__name__}") for d in args.devices}})
        if args.limit_samples:
            eis = eis[:args.limit_samples]
        for i, ei in enumerate(eis):
            cases.append({"kind": "error", "sample": i, "devices": run_error_input(info, ei, args.devices, loom, torch)})
    return {"op": op_id(info), "seconds": round(time.time() - t0, 3), "cases": cases}


# ---------------------------------------------------------------------------------------------
# Worker and parent

def worker(args):
    import torch
    import loom
    torch.set_num_threads(1)
    op_db = select(load_op_db(), args.ops)
    ids = [op_id(o) for o in op_db]
    if args.list:
        print(json.dumps({"ops": ids}), flush=True)
        return
    mine = set(args.only.split("\x1f")) if args.only else None
    for info in op_db:
        oid = op_id(info)
        if mine is not None and oid not in mine:
            continue
        print(json.dumps({"begin": oid}), flush=True)
        try:
            res = run_op(info, args, loom, torch)
        except Exception as e:  # noqa: BLE001 - a harness-level failure is the op's, recorded
            res = {"op": oid, "seconds": 0, "cases": [], "harness_error": exc_info(e)}
        print(json.dumps(res), flush=True)


def _drive(base, ops, timeout, results, lock, log):
    """Runs `ops` in worker processes, restarting after a death or a hang (that op is a crash)."""
    todo = list(ops)
    while todo:
        proc = subprocess.Popen(base + ["--worker", "--only", "\x1f".join(todo)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, bufsize=1)
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        current, began, why = None, time.time(), None
        while True:
            if sel.select(timeout=1.0):
                line = proc.stdout.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "begin" in msg:
                    current, began = msg["begin"], time.time()
                else:
                    with lock:
                        results[msg["op"]] = msg
                        log(msg)
                    if msg["op"] in todo:
                        todo.remove(msg["op"])
                    current = None
            elif current is not None and time.time() - began > timeout:
                proc.kill()
                why = f"timeout after {timeout:.0f}s"
                break
        proc.wait()
        if not todo:
            break
        cur = current if current is not None else todo[0]
        why = why or f"worker exited with {proc.returncode}"
        with lock:
            results[cur] = {"op": cur, "seconds": round(time.time() - began, 3), "cases": [], "crash": why}
            log(results[cur])
        todo.remove(cur)


CLASSES = ["pass", "mismatch", "loom raised", "missing API", "reference unavailable", "skipped",
           "error pass", "error mismatch"]


def summarize(results, devices):
    totals = {d: {} for d in devices}
    table = []
    for oid in sorted(results):
        r = results[oid]
        row = {"op": oid, "seconds": r.get("seconds", 0), "devices": {}}
        for d in devices:
            c = {}
            if "crash" in r:
                c["crash"] = 1
            if "harness_error" in r:
                c["harness error"] = 1
            for case in r["cases"]:
                if d in case["devices"]:
                    k = case["devices"][d][0]
                    c[k] = c.get(k, 0) + 1
            row["devices"][d] = c
            for k, v in c.items():
                totals[d][k] = totals[d].get(k, 0) + v
        table.append(row)
    return totals, table


def op_status(row_dev):
    """An op's status on a device: pass when every compared case passes (and at least one ran)."""
    bad = [k for k in row_dev if k in ("mismatch", "loom raised", "missing API", "crash", "error mismatch", "harness error")]
    if bad:
        return "fail"
    return "pass" if row_dev.get("pass", 0) else "none"


def write_summary(results, devices, out):
    totals, table = summarize(results, devices)
    lines = [f"OpInfo suite: {len(results)} ops, devices {', '.join(devices)}"]
    for d in devices:
        t = totals[d]
        cmp_ = sum(t.get(k, 0) for k in ("pass", "mismatch", "loom raised", "missing API"))
        ops_pass = sum(1 for row in table if op_status(row["devices"][d]) == "pass")
        ops_fail = sum(1 for row in table if op_status(row["devices"][d]) == "fail")
        lines.append(f"  {d:6s}: cases pass {t.get('pass', 0)} of {cmp_} compared "
                     f"({100.0 * t.get('pass', 0) / max(cmp_, 1):.1f}%); ops all-pass {ops_pass}, failing {ops_fail}; "
                     + ", ".join(f"{k} {v}" for k, v in sorted(t.items(), key=lambda kv: -kv[1])))
    lines.append("")
    lines.append(f"{'op':40s} {'sec':>6s}  " + "  ".join(f"{d:>40s}" for d in devices))
    for row in table:
        cells = []
        for d in devices:
            c = row["devices"][d]
            cells.append(f"{op_status(c):4s} " + ",".join(f"{k.replace(' ', '_')}={v}" for k, v in sorted(c.items())))
        lines.append(f"{row['op']:40s} {row['seconds']:6.1f}  " + "  ".join(f"{x:>40s}" for x in cells))
    text = "\n".join(lines) + "\n"
    if out:
        with open(out, "w") as f:
            f.write(text)
    return text, totals, table


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--devices", default="cpu,lazy", help="comma-separated loom devices: cpu, lazy")
    p.add_argument("--ops", default="", help="comma-separated op names (name or name.variant)")
    p.add_argument("--dtypes", default=DEFAULT_DTYPES,
                   help="comma-separated; 'int' picks the first integer dtype the op lists")
    p.add_argument("--limit-samples", type=int, default=0, help="at most N samples per op, dtype and variant")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one op may take before it counts as a crash")
    p.add_argument("--workers", type=int, default=1, help="worker processes (ops split between them)")
    p.add_argument("--json", help="write every case's outcome here")
    p.add_argument("--summary", help="write the text summary here (also printed)")
    p.add_argument("--no-grad", action="store_true", help="compare values only")
    p.add_argument("--no-errors", action="store_true", help="do not run error_inputs")
    p.add_argument("--list", action="store_true", help="list the selected OpInfos and exit")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--only", default="", help=argparse.SUPPRESS)
    args = p.parse_args()
    args.devices = [d for d in args.devices.split(",") if d]
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.ops = [o for o in args.ops.split(",") if o]
    if args.worker:
        return worker(args)
    base = [sys.executable, os.path.abspath(__file__), "--devices", ",".join(args.devices),
            "--dtypes", ",".join(args.dtypes), "--limit-samples", str(args.limit_samples)]
    if args.ops:
        base += ["--ops", ",".join(args.ops)]
    for flag in ("no_grad", "no_errors"):
        if getattr(args, flag):
            base.append("--" + flag.replace("_", "-"))
    listing = subprocess.run(base + ["--worker", "--list"], capture_output=True, text=True)
    if listing.returncode != 0:
        sys.stderr.write(listing.stderr)
        return 1
    ops = json.loads(listing.stdout.strip().splitlines()[-1])["ops"]
    if args.list:
        print("\n".join(ops))
        return 0
    results, lock, t0 = {}, threading.Lock(), time.time()

    def log(msg):
        if args.quiet:
            return
        bad = sum(1 for c in msg["cases"] for v in c["devices"].values() if v[0] not in ("pass", "error pass",
                                                                                            "skipped", "reference unavailable"))
        extra = f" CRASH {msg['crash']}" if "crash" in msg else ""
        print(f"[{len(results)}/{len(ops)} {time.time() - t0:5.0f}s] {msg['op']}: {len(msg['cases'])} cases, "
              f"{bad} failing, {msg.get('seconds', 0):.1f}s{extra}", file=sys.stderr, flush=True)

    n = max(1, args.workers)
    threads = [threading.Thread(target=_drive, args=(base, ops[i::n], args.timeout, results, lock, log)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    text, totals, table = write_summary(results, args.devices, args.summary)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"devices": args.devices, "dtypes": args.dtypes, "totals": totals,
                       "ops": [results[k] for k in sorted(results)]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main() or 0)
