"""Run PyTorch's own nn module test databases against loom.nn.

PyTorch 1.13 ships four tables of module test cases in torch.testing._internal:

  * common_modules.module_db: ModuleInfo entries; module_inputs_func(...) gives ModuleInput
    (constructor_input, forward_input, desc, reference_fn);
  * common_nn.module_tests, common_nn.new_module_tests, common_nn.criterion_tests: dicts with
    module_name / constructor (a class, a lambda, or wrap_functional(fn) around a functional),
    constructor_args / constructor_args_fn, input_size / input_fn, target_size / target_fn,
    extra_args, desc / fullname, test_cpu, ...

This adapter keeps torch's modules as the reference and checks loom's counterpart against them.
For every case, each dtype (float64, float32) and each loom device ("cpu": eager, "lazy":
recorded and run at the sync that reads the result):

  1. torch builds the module from the case's constructor arguments (seed 0), casts it to the
     dtype, and makes the inputs (and target) the case asks for. A lazy module (LazyConv2d, ...)
     is materialised by a first forward under no_grad on both sides.
  2. loom builds its module (loom.nn.<same class name>) from the same arguments converted to
     loom (tensors, dtypes, torch classes, functions: see _Translator), and load_state_dict()
     copies torch's parameters and buffers into it; the state_dict keys and shapes must match.
  3. forward with the same inputs; outputs compared (structure, shape, dtype, values).
  4. backward of a fixed random cotangent (numpy seed 2) on every floating output: the input
     gradients and every parameter's .grad are compared (None where torch has None).
  5. the state after the forward (BatchNorm's running statistics, num_batches_tracked) is
     compared, then the module is put into eval() and the forward is compared again.
  6. repr(module) is compared for modules built from a torch class (not functional wrappers).

A module whose train-mode forward is random (Dropout, RReLU, FractionalMaxPool without
_random_samples: torch gives a different output for another seed) has its train-mode values
left uncompared (shape and dtype are still compared) and its eval-mode values compared.

Tolerances: float64 rtol 1e-7, float32 rtol 1e-4 (gradients 1e-3), atol the same times
max(1, max|reference|): a wrong kernel is off by far more, a reordered sum is within them.

Outcome of a case (worst over dtypes and devices): pass; mismatch (what: forward, grad of an
input or parameter, state, eval, repr, state_dict keys); loom raised (an exception where torch
succeeds); missing (loom.nn lacks the class, or the constructor rejects an argument: TypeError /
AttributeError / NotImplementedError); reference unavailable (torch itself raises: not counted
against loom); skipped, with the reason (CUDA-only, quantized, complex-only, ...); crash (the
worker died or ran past --timeout in that case).

Each case runs in a worker process; when it dies or hangs, the case is recorded as a crash and
a new worker goes on with the next case (as in perf/tools/peer_ops_suite.py, whose record and
comparison helpers are reused here).

The test helpers import `expecttest`, a test-only package PyTorch's own test suite depends on
that Debian does not ship. install_expecttest_standin() puts a minimal module of that name into
sys.modules (ACCEPT = False and a plain unittest.TestCase subclass, the two names the helpers
use) before the import. It stands in for a dependency of torch's test helpers, nothing of loom.

usage:
  .venv/bin/python perf/tools/module_suite.py [--filter SUBSTRING ...] [--dtypes float64,float32]
      [--devices cpu,lazy] [--json OUT.json] [--timeout 120] [--quiet] [--list]

  --filter keeps cases whose id contains any of the substrings (ids look like
  "new_module_tests/Conv2d_strided", "module_db/nn.LSTM#3:desc", "criterion_tests/NLLLoss_weights").
  Set LOOM_CACHE_DIR to a directory of your own to keep kernels between runs.
"""

import argparse
import functools
import json
import os
import selectors
import subprocess
import sys
import time
import types

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_ops_suite import _compare_arrays, _exc, _to_record  # noqa: E402  (shared record/compare helpers)
from op_compare import install_expecttest_standin, restore_torch_global_flags  # noqa: E402


TOL = {"float64": (1e-7, 1e-7, 1e-7, 1e-7), "float32": (1e-5, 1e-4, 1e-4, 1e-3)}  # atol, rtol, grad atol, grad rtol
SOURCES = ("module_db", "module_tests", "new_module_tests", "criterion_tests")


# ---------------------------------------------------------------------------------------------
# Cases

def _nn_case_name(spec):
    if spec.get("fullname"):
        return spec["fullname"]
    name = spec.get("module_name") or getattr(spec.get("constructor"), "__name__", "?")
    return name + ("_" + spec["desc"] if spec.get("desc") else "")


def all_cases():
    """[(case id, source, locator)]; the locator finds the case again in a worker."""
    from torch.testing._internal import common_modules, common_nn
    restore_torch_global_flags()
    out, seen = [], {}

    def add(cid, src, loc):
        n = seen.get(cid, 0)
        seen[cid] = n + 1
        out.append((cid if n == 0 else f"{cid}~{n}", src, loc))

    for i, mi in enumerate(common_modules.module_db):
        for j, mi_in in enumerate(_module_db_inputs(mi, "float64")):
            add(f"module_db/{mi.name}#{j}" + (f":{mi_in.desc}" if mi_in.desc else ""), "module_db", [i, j])
    for src in SOURCES[1:]:
        for i, spec in enumerate(getattr(common_nn, src)):
            add(f"{src}/{_nn_case_name(spec)}", src, [i])
    return out


def _module_db_inputs(mi, dtype_name):
    import torch
    torch.manual_seed(0)
    return mi.module_inputs_func(mi, device="cpu", dtype=getattr(torch, dtype_name), requires_grad=True,
                                 training=True)


class Skip(Exception):
    """The case is not run, with this reason."""


class RefUnavailable(Exception):
    """torch itself fails the case."""


def _skip_reason(src, spec):
    if src == "module_db":
        if spec.module_cls.__module__.startswith("torch.ao") or "quantized" in spec.name:
            return "quantized module (ao.nn.quantized): not in loom's scope"
        return None
    if spec.get("test_cpu", True) is False:
        return "CUDA-only case (test_cpu=False)"
    desc = (spec.get("desc") or "") + (spec.get("fullname") or "")
    if "cuda" in desc.lower() or "cudnn" in desc.lower():
        return "CUDA/cuDNN-specific case"
    if "complex" in desc.lower():
        return "complex-valued case: loom has no complex dtypes"
    if spec.get("has_sparse_gradients") or "sparse" in desc.lower():
        return "sparse gradients: loom has no sparse layout"
    return None


# ---------------------------------------------------------------------------------------------
# torch -> loom translation of constructor arguments, inputs and the functions a case builds with

class _Translator:
    """Converts torch objects a case hands over into loom's: tensors (same values, dtype and
    requires_grad), dtypes, torch.Size, torch nn classes (loom.nn class of the same name), and
    functions (a copy whose globals see loom as `torch`, loom.nn as `nn`, loom.nn.functional as
    `F`, and whose closure cells are translated too), recursively through tuples, lists, dicts."""

    def __init__(self, torch, loom, device):
        self.torch, self.loom, self.device = torch, loom, device
        self._globals = {}
        self._fns = {}
        ns = types.ModuleType("torch")
        ns.__getattr__ = lambda name: getattr(loom, name)
        ns.nn = loom.nn
        self.ns = ns

    def dtype(self, dt):
        return getattr(self.loom, str(dt).split(".")[-1])

    def tensor(self, t, requires_grad=None):
        torch, loom = self.torch, self.loom
        t0 = t
        t = t.detach().cpu()
        if t.dtype == torch.bfloat16:
            arr = t.float().numpy()
        else:
            arr = t.numpy()
        x = loom.tensor(np.array(arr, copy=True), dtype=self.dtype(t.dtype))
        if self.device != "cpu":
            x = x.to(self.device)
        rg = t0.requires_grad if requires_grad is None else requires_grad
        if rg:
            x.requires_grad_(True)
        return x

    def module_class(self, cls):
        name = cls.__name__
        if not hasattr(self.loom.nn, name):
            raise AttributeError(f"loom.nn has no {name}")
        return getattr(self.loom.nn, name)

    def __call__(self, obj):
        torch = self.torch
        if isinstance(obj, torch.Tensor):
            return self.tensor(obj)
        if isinstance(obj, torch.dtype):
            return self.dtype(obj)
        if isinstance(obj, torch.Size):
            return self.loom.Size(obj)
        if isinstance(obj, torch.device):
            return self.device
        if isinstance(obj, type) and issubclass(obj, torch.nn.Module):
            if obj.__name__ == "FunctionalModule":
                return self.functional_module(obj)
            return self.module_class(obj)
        if isinstance(obj, torch.nn.Module):
            raise Skip(f"a torch module instance ({type(obj).__name__}) as an argument")
        if isinstance(obj, functools.partial):   # wraps(nn.KLDivLoss)(partial(nn.KLDivLoss, log_target=True))
            return functools.partial(self(obj.func), *self(obj.args), **self(obj.keywords))
        if isinstance(obj, types.FunctionType) and str(obj.__module__).startswith("torch.testing"):
            return self.function(obj)   # the case's own lambda: rebound to loom
        if isinstance(obj, (types.FunctionType, types.BuiltinFunctionType)) or (callable(obj) and getattr(obj, "__module__", "") and
                                                           str(getattr(obj, "__module__", "")).startswith("torch")):
            return self.library_function(obj)
        if isinstance(obj, tuple) and hasattr(obj, "_fields"):
            return type(obj)(*(self(o) for o in obj))
        if isinstance(obj, (tuple, list)):
            return type(obj)(self(o) for o in obj)
        if isinstance(obj, dict):
            return {k: self(v) for k, v in obj.items()}
        if isinstance(obj, types.ModuleType):
            return self.module_object(obj)
        return obj

    def library_function(self, fn):
        """torch.nn.functional.gelu, torch.tanh, ...: loom's function of the same name."""
        torch, loom = self.torch, self.loom
        name = getattr(fn, "__name__", None)
        for tmod, lmod in ((torch.nn.functional, loom.nn.functional), (torch, loom)):
            if name and getattr(tmod, name, None) is fn:
                if not hasattr(lmod, name):
                    raise AttributeError(f"loom has no {lmod.__name__}.{name}")
                return getattr(lmod, name)
        return fn

    def module_object(self, m):
        torch, loom = self.torch, self.loom
        if m is torch:
            return self.ns
        if m is torch.nn:
            return loom.nn
        if m is torch.nn.functional:
            return loom.nn.functional
        if m.__name__.startswith("torch."):
            sub = m.__name__[len("torch."):]
            obj = loom
            for part in sub.split("."):
                obj = getattr(obj, part)
            return obj
        return m

    def globals_for(self, g):
        key = id(g)
        if key not in self._globals:
            new = dict(g)
            self._globals[key] = new
            for k, v in g.items():
                if isinstance(v, types.ModuleType):
                    try:
                        new[k] = self.module_object(v)
                    except AttributeError:
                        pass
                elif isinstance(v, types.FunctionType) and v.__module__ == g.get("__name__"):
                    new[k] = types.FunctionType(v.__code__, new, v.__name__, v.__defaults__, v.__closure__)
                elif isinstance(v, type) and issubclass(v, self.torch.nn.Module) and v.__module__.startswith("torch.nn"):
                    if hasattr(self.loom.nn, v.__name__):
                        new[k] = getattr(self.loom.nn, v.__name__)
        return self._globals[key]

    def function(self, fn):
        if id(fn) in self._fns:
            return self._fns[id(fn)]
        if not fn.__module__ or not fn.__module__.startswith("torch.testing"):
            return fn   # a library function (functools.partial target, ...): left as it is
        closure = None
        if fn.__closure__:
            closure = tuple(types.CellType(self(c.cell_contents)) for c in fn.__closure__)
        new = types.FunctionType(fn.__code__, self.globals_for(fn.__globals__), fn.__name__,
                                 self(fn.__defaults__) if fn.__defaults__ else None, closure)
        new.__kwdefaults__ = self(fn.__kwdefaults__) if fn.__kwdefaults__ else None
        self._fns[id(fn)] = new
        return new

    def functional_module(self, cls):
        """wrap_functional(fn, **kwargs): a module whose forward is fn(*args, **kwargs)."""
        cells = dict(zip(cls.forward.__code__.co_freevars, cls.forward.__closure__ or ()))
        fn = self(cells["fn"].cell_contents)
        kwargs = self(cells["kwargs"].cell_contents) if "kwargs" in cells else {}
        loom = self.loom

        class FunctionalModule(loom.nn.Module):
            def forward(self, *args):
                return fn(*args, **kwargs)

        return FunctionalModule


# ---------------------------------------------------------------------------------------------
# Building and running one side

def _flatten(out, acc, path=""):
    """Output structure as [(path, value)]: tensors and plain values, through tuples and lists."""
    if isinstance(out, (tuple, list)):
        acc.append((path + "/len", len(out)))
        for i, o in enumerate(out):
            _flatten(o, acc, f"{path}[{i}]")
    elif hasattr(out, "data") and hasattr(out, "batch_sizes"):   # PackedSequence
        _flatten(tuple(out), acc, path)
    else:
        acc.append((path or "out", out))
    return acc


def _is_tensor(x):
    return hasattr(x, "detach") and hasattr(x, "shape") and hasattr(x, "dtype")


def _floating(t):
    return str(t.dtype).split(".")[-1] in ("float64", "float32", "float16", "bfloat16")


def _torch_build(src, loc, dtype_name):
    """(constructor, ctor args, ctor kwargs, forward args, forward kwargs, is criterion, source spec)
    made by torch: the torch-side objects the case defines, before any conversion."""
    import torch
    from torch.testing._internal import common_modules, common_nn
    restore_torch_global_flags()
    torch.manual_seed(0)
    if src == "module_db":
        mi = common_modules.module_db[loc[0]]
        why = _skip_reason(src, mi)
        if why:
            raise Skip(why)
        mi_in = _module_db_inputs(mi, dtype_name)[loc[1]]
        ci, fi = mi_in.constructor_input, mi_in.forward_input
        return mi.module_cls, ci.args, ci.kwargs, fi.args, fi.kwargs, False, mi
    spec = getattr(common_nn, src)[loc[0]]
    why = _skip_reason(src, spec)
    if why:
        raise Skip(why)
    ctor = spec.get("constructor") or getattr(torch.nn, spec["module_name"])
    if "constructor_args" in spec:
        cargs = spec["constructor_args"]
    elif "constructor_args_fn" in spec:
        cargs = spec["constructor_args_fn"]()
    else:
        cargs = ()

    def sized(s):
        if isinstance(s, list):
            return [sized(x) for x in s]
        if isinstance(s, torch.Tensor):
            return s.double()
        return torch.randn(s)

    def get(name):
        if name in spec:
            return spec[name]
        if name + "_fn" in spec:
            return spec[name + "_fn"]()
        if name + "_size" in spec:
            return sized(spec[name + "_size"])
        return None

    inp = get("input")
    if isinstance(inp, torch.Tensor):
        inp = (inp,)
    elif isinstance(inp, list):
        inp = (inp,)
    criterion = src == "criterion_tests" or ("target" in spec or "target_fn" in spec or "target_size" in spec)
    args = tuple(inp)
    if criterion:
        args = args + (get("target"),) + tuple(spec.get("extra_args", ()))
    return ctor, tuple(cargs), {}, args, {}, criterion, spec


def _to_dtype(torch, x, dtype, requires_grad):
    """Floating tensors to dtype; floating leaf inputs get requires_grad like torch's test does."""
    if isinstance(x, torch.Tensor):
        if x.is_complex():
            raise Skip("complex-valued input: loom has no complex dtypes")
        if x.is_floating_point():
            y = x.detach().to(dtype)
            if requires_grad:
                y.requires_grad_(True)
            return y
        return x
    if isinstance(x, (tuple, list)):
        return type(x)(_to_dtype(torch, o, dtype, requires_grad) for o in x)
    if isinstance(x, dict):
        return {k: _to_dtype(torch, v, dtype, requires_grad) for k, v in x.items()}
    return x


def _clone(torch, x):
    if isinstance(x, torch.Tensor):
        return x.detach().clone().requires_grad_(x.requires_grad)
    if isinstance(x, (tuple, list)):
        return type(x)(_clone(torch, o) for o in x)
    if isinstance(x, dict):
        return {k: _clone(torch, v) for k, v in x.items()}
    return x


def _leaves(x, acc):
    """Every tensor in nested tuples, lists and dicts (the forward's inputs)."""
    if _is_tensor(x):
        acc.append(x)
    elif isinstance(x, (tuple, list)):
        for o in x:
            _leaves(o, acc)
    elif isinstance(x, dict):
        for o in x.values():
            _leaves(o, acc)
    return acc


def _is_lazy_module(m):
    return any(type(p).__name__.startswith("Uninitialized") for p in list(m.parameters()) + list(m.buffers()))


def _record_out(out):
    recs = []
    for path, v in _flatten(out, []):
        if _is_tensor(v):
            recs.append((path, "tensor", _to_record(v)))
        else:
            recs.append((path, "value", repr(v)))
    return recs


def _cotangents(outs, dtype_name):
    """A fixed random cotangent per floating output tensor that needs a gradient (numpy seed 2)."""
    rs = np.random.RandomState(2)
    cots = []
    for path, v in outs:
        if _is_tensor(v) and _floating(v) and v.requires_grad:
            cots.append((path, rs.standard_normal(tuple(v.shape)).astype(dtype_name)))
    return cots


def run_side(lib, tr, case, dtype_name, state0, warm_args, check_random=False):
    """Runs the case with lib (torch, or loom through translator tr) and returns a record of everything
    compared. state0: a state_dict to load (None on torch's side)."""
    ctor, cargs, ckwargs, fargs, fkwargs, criterion, spec = case
    is_torch = tr is None
    dtype = getattr(lib, dtype_name)
    rec = {}
    lib.manual_seed(0)
    lib.set_default_dtype(dtype)
    if is_torch:
        module = ctor(*cargs, **ckwargs)
    else:
        lctor = tr(ctor)
        module = lctor(*tr(cargs), **tr(ckwargs))
    module = module.to(dtype)
    if is_torch and _is_lazy_module(module):
        # torch's lazy parameters get their shapes (and values) at a first forward; loom's module
        # stays uncalled and takes them from load_state_dict, as "build, load a checkpoint, run" does
        with lib.no_grad():
            module(*warm_args[0], **warm_args[1])
    if is_torch:
        state0 = {k: v.detach().clone() for k, v in module.state_dict().items()}
    else:
        module.load_state_dict({k: tr.tensor(v, requires_grad=False) for k, v in state0.items()})
        if tr.device != "cpu":
            module = module.to(tr.device)
    rec["state_keys"] = [(k, tuple(v.shape)) for k, v in module.state_dict().items()]
    args, kwargs = fargs, fkwargs
    lib.manual_seed(1)
    out = module(*args, **kwargs)
    flat = _flatten(out, [])
    rec["out"] = _record_out(out)
    cots = _cotangents(flat, dtype_name)
    rec["cot_paths"] = [p for p, _ in cots]
    if cots:
        byp = dict(flat)
        outs = [byp[p] for p, _ in cots]
        grads = [lib.tensor(c, dtype=dtype, device=outs[i].device) for i, (_, c) in enumerate(cots)]
        lib.autograd.backward(outs, grads)
        ins = [x for x in _leaves((args, kwargs), []) if x.requires_grad]
        rec["input_grads"] = [None if x.grad is None else _to_record(x.grad) for x in ins]
        rec["param_grads"] = [(n, None if p.grad is None else _to_record(p.grad)) for n, p in module.named_parameters()]
    rec["state"] = [(k, _to_record(v)) for k, v in module.state_dict().items()]
    rec["repr"] = repr(module)   # after the forward: a lazy module has become its concrete class
    module.eval()
    lib.manual_seed(1)
    with lib.no_grad():
        rec["eval_out"] = _record_out(module(*args, **kwargs))
    if check_random:   # the same train-mode forward under another seed: does the output change?
        module.train()
        lib.manual_seed(12345)
        with lib.no_grad():
            again = _record_out(module(*args, **kwargs))
        module.eval()
        lib.manual_seed(12345)
        with lib.no_grad():
            again_eval = _record_out(module(*args, **kwargs))
        rec["random_eval"] = any(
            a[1] == "tensor" and (a[2][0].shape != b[2][0].shape or not np.array_equal(a[2][0], b[2][0], equal_nan=True))
            for a, b in zip(rec["eval_out"], again_eval))
        rec["random_train"] = any(
            a[1] == "tensor" and (a[2][0].shape != b[2][0].shape or not np.array_equal(a[2][0], b[2][0], equal_nan=True))
            for a, b in zip(rec["out"], again))
    return rec, state0


# ---------------------------------------------------------------------------------------------
# Comparison

def _cmp_rec(got, ref, atol, rtol, what):
    """_compare_arrays with atol scaled by the reference's magnitude."""
    r = ref[0]
    scale = 1.0
    if r.size and np.issubdtype(r.dtype, np.floating):
        finite = np.abs(r[np.isfinite(r)])
        if finite.size:
            scale = max(1.0, float(finite.max()))
    return _compare_arrays(got, ref, atol * scale, rtol, what)


def _cmp_outs(got, ref, atol, rtol, what, values=True):
    if len(got) != len(ref):
        return f"{what}: {len(got)} output parts vs torch {len(ref)} ({[p for p, *_ in got]} vs {[p for p, *_ in ref]})"
    for (gp, gk, gv), (rp, rk, rv) in zip(got, ref):
        if gp != rp or gk != rk:
            return f"{what}: output structure {gp}:{gk} vs torch {rp}:{rk}"
        if gk == "value":
            if gv != rv:
                return f"{what} {gp}: {gv} vs torch {rv}"
            continue
        if not values:
            gv, rv = (gv[0][:0].reshape(0), gv[1], gv[2]), (rv[0][:0].reshape(0), rv[1], rv[2])
        cat, detail = _cmp_rec(gv, rv, atol, rtol, f"{what} {gp}")
        if cat:
            return detail
    return None


def _normalize_repr(s):
    """The library's own name in a repr (loom.Size([2, 2]) for torch.Size([2, 2])) is no difference."""
    return s.replace("loom.", "torch.")


def compare(ref, got, dtype_name, builtin_class):
    """None when loom's record matches torch's, else (kind, detail)."""
    atol, rtol, gatol, grtol = TOL[dtype_name]
    if got["state_keys"] != ref["state_keys"]:
        return "state_dict keys", f"{got['state_keys']} vs torch {ref['state_keys']}"
    random_train = ref.get("random_train", False)
    d = _cmp_outs(got["out"], ref["out"], atol, rtol, "forward", values=not random_train)
    if d:
        return "forward", d
    if got["cot_paths"] != ref["cot_paths"]:
        return "grad", f"outputs needing a gradient {got['cot_paths']} vs torch {ref['cot_paths']}"
    if not random_train and "input_grads" in ref:
        for i, (g, r) in enumerate(zip(got["input_grads"], ref["input_grads"])):
            if (g is None) != (r is None):
                return "grad", f"input {i} grad {'None' if g is None else 'set'} vs torch {'None' if r is None else 'set'}"
            if r is not None:
                cat, detail = _cmp_rec(g, r, gatol, grtol, f"grad of input {i}")
                if cat:
                    return "grad", detail
        if len(got["input_grads"]) != len(ref["input_grads"]):
            return "grad", f"{len(got['input_grads'])} inputs need a gradient vs torch {len(ref['input_grads'])}"
        gp, rp = dict(got["param_grads"]), dict(ref["param_grads"])
        if list(gp) != list(rp):
            return "grad", f"parameters {list(gp)} vs torch {list(rp)}"
        for n, r in rp.items():
            g = gp[n]
            if (g is None) != (r is None):
                return "grad", f"{n}.grad {'None' if g is None else 'set'} vs torch {'None' if r is None else 'set'}"
            if r is not None:
                cat, detail = _cmp_rec(g, r, gatol, grtol, f"{n}.grad")
                if cat:
                    return "grad", detail
    if not random_train:
        gs, rs = dict(got["state"]), dict(ref["state"])
        for k, r in rs.items():
            cat, detail = _cmp_rec(gs[k], r, atol, rtol, f"state {k} after forward")
            if cat:
                return "state", detail
    d = _cmp_outs(got["eval_out"], ref["eval_out"], atol, rtol, "eval forward", values=not ref.get("random_eval"))
    if d:
        return "eval", d
    if builtin_class and _normalize_repr(got["repr"]) != ref["repr"]:
        return "repr", f"{got['repr']!r} vs torch {ref['repr']!r}"[:400]
    return None


def _classify_error(e, phase):
    mro = e["mro"]
    if phase == "construct" and ("TypeError" in mro or "AttributeError" in mro or "NotImplementedError" in mro):
        return "missing"
    if "NotImplementedError" in mro or (phase != "construct" and "AttributeError" in mro
                                         and "has no attribute" in e["msg"] and "loom" in e["msg"]):
        return "missing"
    return "loom raised"


# ---------------------------------------------------------------------------------------------
# Worker

def run_case(src, loc, dtypes, devices):
    import torch
    import loom
    res = {"dtypes": {}}
    for dtype_name in dtypes:
        dres = res["dtypes"][dtype_name] = {}
        saved_torch_dt = torch.get_default_dtype()
        try:
            torch.set_default_dtype(torch.float64)   # torch's test_nn builds its cases in double
            try:
                case = _torch_build(src, loc, dtype_name)
            except Skip as e:
                return {"skip": str(e)}
            except Exception as e:  # noqa: BLE001
                dres["ref_unavailable"] = f"building: {type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                continue
            ctor, cargs, ckwargs, fargs, fkwargs, criterion, spec = case
            tdt = getattr(torch, dtype_name)
            # criterion targets are not differentiated (torch's CriterionTest leaves them as made)
            if criterion:
                n_in = len(fargs) - 1 - len(spec.get("extra_args", ()))
                fargs = _to_dtype(torch, fargs[:n_in], tdt, True) + _to_dtype(torch, fargs[n_in:], tdt, False)
            elif src == "module_db":
                fargs = _to_dtype(torch, fargs, tdt, True)
                fkwargs = _to_dtype(torch, fkwargs, tdt, True)
            else:
                fargs = _to_dtype(torch, fargs, tdt, True)
            case = (ctor, cargs, ckwargs, fargs, fkwargs, criterion, spec)
            # loom's inputs come from a copy taken before torch's forward (an in-place module changes its input)
            pristine = (_clone(torch, fargs), _clone(torch, fkwargs))
            t_warm = (tuple(x.detach() if isinstance(x, torch.Tensor) else x for x in fargs), fkwargs)
            try:
                ref, state0 = run_side(torch, None, case, dtype_name, None, t_warm, check_random=True)
            except Skip as e:
                return {"skip": str(e)}
            except Exception as e:  # noqa: BLE001
                dres["ref_unavailable"] = f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''}"
                continue
            builtin = isinstance(ctor, type) and ctor.__name__ != "FunctionalModule"
            for dev in devices:
                prev = loom.get_default_device()
                loom.set_default_device(dev)
                try:
                    tr = _Translator(torch, loom, dev)
                    phase = "construct"
                    try:
                        lctor = tr(ctor)
                        lcase = (ctor, cargs, ckwargs, tr(pristine[0]), tr(pristine[1]), criterion, spec)
                        l_warm = (tr(t_warm[0]), tr(t_warm[1]))
                        lcase = (_Pre(lctor), lcase[1], lcase[2], lcase[3], lcase[4], criterion, spec)
                        phase = "run"
                        got, _ = run_side(loom, _PreTr(tr), lcase, dtype_name, state0, l_warm)
                        diff = compare(ref, got, dtype_name, builtin)
                        dres[dev] = ["pass", ""] if diff is None else ["mismatch", f"[{diff[0]}] {diff[1]}"]
                    except Skip as e:
                        return {"skip": str(e)}
                    except Exception as e:  # noqa: BLE001
                        info = _exc(e)
                        if phase == "run" and _constructing(e):
                            phase = "construct"
                        dres[dev] = [_classify_error(info, phase),
                                     f"{phase}: {info['type']}: {info['msg']} ({info['where']})"]
                finally:
                    loom.set_default_device(prev)
        finally:
            torch.set_default_dtype(saved_torch_dt)
            loom.set_default_dtype(loom.float32)
    return res


class _Pre:
    """Marks a constructor already translated, so run_side's translator passes it through."""
    def __init__(self, ctor): self.ctor = ctor


class _PreTr:
    def __init__(self, tr): self.tr, self.device = tr, tr.device
    def __call__(self, obj):
        if isinstance(obj, _Pre):
            return _Constructing(obj.ctor)
        return self.tr(obj)
    def tensor(self, *a, **k): return self.tr.tensor(*a, **k)


class _ConstructError(Exception):
    pass


class _Constructing:
    """Calls the loom constructor; an exception raised inside it is tagged as a construction error."""
    def __init__(self, ctor): self.ctor = ctor
    def __call__(self, *a, **k):
        try:
            return self.ctor(*a, **k)
        except Exception as e:
            e._loom_suite_construct = True
            raise


def _constructing(e):
    return getattr(e, "_loom_suite_construct", False)


def worker(args):
    install_expecttest_standin()
    import torch  # noqa: F401
    cases = all_cases()
    if args.filter:
        cases = [c for c in cases if any(f in c[0] for f in args.filter)]
    if args.list:
        print(json.dumps({"cases": cases}), flush=True)
        return
    k, n = (int(x) for x in args.shard.split("/"))
    cases = cases[k::n]
    for cid, src, loc in cases[args.start:]:
        print(json.dumps({"begin": cid}), flush=True)
        t0 = time.time()
        try:
            r = run_case(src, loc, args.dtypes, args.devices)
        except BaseException as e:  # noqa: BLE001 - a harness-level failure is recorded, not fatal
            r = {"harness_error": f"{type(e).__name__}: {e}"[:300]}
        r.update(case=cid, seconds=round(time.time() - t0, 2))
        print(json.dumps(r), flush=True)


# ---------------------------------------------------------------------------------------------
# Parent: one worker at a time, restarted after a crash or a hang; aggregation

OUTCOME_ORDER = ["crash", "mismatch", "loom raised", "missing", "pass", "reference unavailable", "skipped"]


def outcome(r, devices):
    """(outcome, detail) of one case: the worst over dtypes and devices."""
    if "crash" in r:
        return "crash", r["crash"]
    if "skip" in r:
        return "skipped", r["skip"]
    if "harness_error" in r:
        return "loom raised", "harness: " + r["harness_error"]
    worst, detail = None, ""
    any_ref = False
    for dt, dres in r["dtypes"].items():
        if "ref_unavailable" in dres:
            continue
        any_ref = True
        for dev in devices:
            o, d = dres.get(dev, ["crash", "not reached"])
            if worst is None or OUTCOME_ORDER.index(o) < OUTCOME_ORDER.index(worst):
                worst, detail = o, f"{dt}/{dev}: {d}"
    if not any_ref:
        d = next(iter(r["dtypes"].values()), {}).get("ref_unavailable", "")
        return "reference unavailable", d
    return worst, detail


def run_all(args):
    base = [sys.executable, os.path.abspath(__file__), "--dtypes", ",".join(args.dtypes),
            "--devices", ",".join(args.devices), "--shard", args.shard]
    for f in args.filter:
        base += ["--filter", f]
    listing = subprocess.run(base + ["--worker", "--list"], capture_output=True, text=True)
    if listing.returncode != 0:
        sys.stderr.write(listing.stderr)
        raise SystemExit(1)
    cases = json.loads(listing.stdout.strip().splitlines()[-1])["cases"]
    k, n = (int(x) for x in args.shard.split("/"))
    cases = cases[k::n]
    results, start, t0 = [], 0, time.time()
    while start < len(cases):
        proc = subprocess.Popen(base + ["--worker", "--start", str(start)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, bufsize=1)
        current, began, crashed = None, time.time(), None
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        while True:
            if sel.select(timeout=1.0):
                line = proc.stdout.readline()
                if not line:
                    break
                msg = json.loads(line)
                if "begin" in msg:
                    current, began = msg["begin"], time.time()
                else:
                    results.append(msg)
                    start += 1
                    current = None
                    if not args.quiet:
                        o, d = outcome(msg, args.devices)
                        print(f"[{start}/{len(cases)} {time.time() - t0:5.0f}s] {msg['case']}: {o}"
                              + (f"  {d[:160]}" if o not in ("pass",) else ""), file=sys.stderr, flush=True)
            elif current is not None and time.time() - began > args.timeout:
                proc.kill()
                crashed = f"timeout after {args.timeout:.0f}s"
                break
        proc.wait()
        if start >= len(cases):
            break
        cid = current or cases[start][0]
        results.append({"case": cid, "crash": crashed or f"worker exited with {proc.returncode}"})
        start += 1
        if not args.quiet:
            print(f"[{start}/{len(cases)}] {cid}: crash ({results[-1]['crash']})", file=sys.stderr, flush=True)
    return results


def summarize(results, devices):
    counts, by_kind, rows = {}, {}, []
    for r in results:
        o, d = outcome(r, devices)
        counts[o] = counts.get(o, 0) + 1
        kind = o
        if o == "mismatch" and "[" in d:
            kind = "mismatch " + d.split("[", 1)[1].split("]", 1)[0]
        by_kind[kind] = by_kind.get(kind, 0) + 1
        rows.append((r["case"], o, d))
    return counts, by_kind, rows


def report(results, args, out=sys.stdout):
    counts, by_kind, rows = summarize(results, args.devices)
    compared = sum(v for k, v in counts.items() if k not in ("reference unavailable", "skipped"))
    print(f"module suite: {len(results)} cases (torch {__import__('torch').__version__}); dtypes "
          f"{','.join(args.dtypes)}; devices {','.join(args.devices)}", file=out)
    print(f"compared: {compared}; pass {counts.get('pass', 0)} ({100.0 * counts.get('pass', 0) / max(compared, 1):.1f}%)",
          file=out)
    for k in OUTCOME_ORDER:
        if counts.get(k):
            print(f"  {k:24s} {counts[k]:4d}", file=out)
    print("by kind:", file=out)
    for k, v in sorted(by_kind.items(), key=lambda kv: -kv[1]):
        print(f"  {k:24s} {v:4d}", file=out)
    print("\nper case:", file=out)
    for cid, o, d in rows:
        if o == "pass" and not args.show_passes:
            continue
        print(f"  {o:22s} {cid:60s} {d[:220]}", file=out)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"dtypes": args.dtypes, "devices": args.devices, "counts": counts, "by_kind": by_kind,
                       "cases": [{"case": c, "outcome": o, "detail": d} for c, o, d in rows],
                       "results": results}, f, indent=1)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--filter", action="append", default=[], help="run cases whose id contains this (repeatable)")
    p.add_argument("--dtypes", default="float64,float32")
    p.add_argument("--devices", default="cpu,lazy")
    p.add_argument("--json", help="write every case's outcome and records here")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one case may take before it counts as a crash")
    p.add_argument("--show-passes", action="store_true", help="list passing cases in the per-case table too")
    p.add_argument("--shard", default="0/1", help="K/N: run every N-th case starting at the K-th (two shards on two cores)")
    p.add_argument("--list", action="store_true", help="print the case ids and exit")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.dtypes = [d for d in args.dtypes.split(",") if d]
    args.devices = [d for d in args.devices.split(",") if d]
    if args.worker:
        return worker(args)
    if args.list:
        install_expecttest_standin()
        for cid, _, _ in all_cases():
            if not args.filter or any(f in cid for f in args.filter):
                print(cid)
        return 0
    results = run_all(args)
    report(results, args)
    return 0


if __name__ == "__main__":
    sys.exit(main() or 0)
