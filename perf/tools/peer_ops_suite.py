"""Run a peer project's op test suite (tinygrad's test_ops.py, its PyTorch side) against loom.

tinygrad's test/backend/test_ops.py checks each op with helper_test_op(shapes, torch_fxn,
tinygrad_fxn, atol=..., rtol=..., grad_atol=..., grad_rtol=..., forward_only=..., vals=...):
the torch lambda is the reference. This adapter keeps the torch lambdas and drops tinygrad:

  * The suite's file is read from the path given (never copied into this repository) and
    executed twice: once with `torch` bound to PyTorch (1.13 here, the reference), once with
    `torch` bound to loom. tinygrad's names are stand-ins that accept anything and never run,
    so a tinygrad lambda is never called; the suite's own `assert` statements and
    self.assert* calls (which compare tinygrad against torch) are dropped, and a statement
    that needs a tinygrad value as data (t.numpy()) is skipped (class _Rewrite).
  * helper_test_op and TestOps.helper_test_exception are replaced by recorders. A "case" is
    one such call. In each run a case builds the suite's inputs (numpy, seed 0, the same
    low/high/vals), calls the torch lambda, and, unless forward_only, takes the gradients of
    the output's sum with respect to the inputs (torch.autograd.grad), as the suite does.
  * loom runs each case on every device asked for ("cpu": eager; "lazy": recorded and run at
    the sync that reads the result by the compiled executor, with loom.set_default_device("lazy")
    so tensors the test makes itself are lazy too; "lazy/EXECUTOR": lazy run by another executor
    of loom._C._set_executor, e.g. "lazy/cuda-emulated", the CUDA lowering run on the host). Values, shape and dtype are compared with the reference using
    the case's own tolerances (np.testing.assert_allclose for floating results, exact for the
    rest), gradients with grad_atol/grad_rtol. An exception case passes when loom raises the
    expected exception class (and, with exact=True, the same message); on "lazy" the result
    is synced inside the check, since a program sees a data-dependent error at its next sync.
  * Random data a test body draws from torch (torch.randint for indices, ...) comes from
    PyTorch with the same seed in every run, converted to loom, so all runs see the same data.

Outcomes per case and device: pass; fail (categorised below); "reference unavailable" when
PyTorch 1.13 itself fails the case (an API newer than 1.13, or a tinygrad-only argument), not
counted against loom; a test with no torch case at all is "tinygrad-only" and skipped.
Failure categories: missing op (AttributeError / NotImplementedError: loom lacks the name or
the form), argument form (TypeError: a signature loom does not accept), loom error (another
exception where torch succeeds), wrong shape, wrong dtype, wrong value, wrong gradient
(shape, dtype or value of a gradient), wrong error (a different exception class or message,
or none), crash (the worker process died or ran past --timeout on that device).

Each test runs in a worker process; when a worker dies, the test it was running is a crash on
the device it was running (a death in PyTorch's run marks the test "reference crashed"), and a
new worker continues with the next test.

usage:
  .venv/bin/python perf/tools/peer_ops_suite.py PATH/TO/test_ops.py [--devices cpu,lazy]
      [-k SUBSTRING ...] [--json OUT.json] [--timeout 120] [--show-failures N] [--quiet]

  Get the file with e.g. `git --git-dir=<tinygrad mirror> show HEAD:test/backend/test_ops.py > /tmp/test_ops.py`.
  -k selects tests whose name contains any of the substrings ("test_split", "TestOpsUint8").
  --json writes every case's outcome (test, line, occurrence, device, category, detail) for
  comparing runs. Set LOOM_CACHE_DIR to a directory of your own to keep kernels between runs.
"""

import argparse
import ast
import json
import os
import selectors
import subprocess
import sys
import time
import types
import unittest

import numpy as np

from op_compare import categorize_error as _categorize_error, compare_arrays as _compare_arrays, \
    dtype_name as _dtype_name, exc_info as _exc, to_record as _to_record  # noqa: F401 - shared with opinfo_suite.py


# ---------------------------------------------------------------------------------------------
# tinygrad stand-ins: objects that accept any use and never compute. Their truth value is
# False and they compare unequal to everything, so the suite's platform conditions
# (Device.DEFAULT == "WEBGPU", DEV.interface.startswith("MOCK"), IMAGE>0, ...) take the plain path.

class TinygradOnly(Exception):
    """A tinygrad value was needed as data (numpy(), item(), ...): the rest of the test is tinygrad's."""


class _Stub:
    def __init__(self, *a, **k): pass
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"): raise AttributeError(name)
        return _Stub()
    def __call__(self, *a, **k): return _Stub()
    def __getitem__(self, k): return _Stub()
    def __setitem__(self, k, v): pass
    def __enter__(self): return self
    def __exit__(self, *a): return False
    def __bool__(self): return False
    def __eq__(self, o): return False
    def __ne__(self, o): return True
    def __lt__(self, o): return _Stub()   # (x < 0).where(...) on a tinygrad value stays tinygrad's
    __le__ = __gt__ = __ge__ = __lt__
    def __hash__(self): return id(self)
    def __contains__(self, o): return True
    def __len__(self): return 0
    def __iter__(self):
        # zip(torch_results, tinygrad_results) must run as long as the torch side does
        for _ in range(256): yield _Stub()
    def __index__(self): return 0
    def __int__(self): return 0
    def __float__(self): return 0.0
    def __array__(self, *a, **k): raise TinygradOnly("tinygrad value used as data")
    def numpy(self): raise TinygradOnly("tinygrad value used as data")
    def item(self): raise TinygradOnly("tinygrad value used as data")
    def tolist(self): raise TinygradOnly("tinygrad value used as data")


def _binop(self, *a): return _Stub()
for _n in ("add radd sub rsub mul rmul truediv rtruediv floordiv rfloordiv mod rmod pow rpow matmul rmatmul "
           "and rand or ror xor rxor lshift rlshift rshift rrshift neg pos abs invert").split():
    setattr(_Stub, f"__{_n}__", _binop)


class _StubClass(type):
    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"): raise AttributeError(name)
        return _Stub()
    def __getitem__(cls, k): return _Stub()


class _TensorStub(_Stub, metaclass=_StubClass):
    pass


class _NIRRenderer:  # only used in isinstance checks
    pass


def _install_tinygrad_stubs():
    def getenv(key, default=0): return type(default)(os.environ.get(key, default)) if key in os.environ else default
    mods = {
        "tinygrad": dict(Tensor=_TensorStub, Device=_TensorStub, dtypes=_TensorStub),
        "tinygrad.helpers": dict(getenv=getenv, DEBUG=0, DEV=_Stub(), IMAGE=0, Context=_Stub, CI=0,
                                 OSX=False, prod=lambda xs: int(np.prod(xs))),
        "tinygrad.tensor": dict(_to_np_dtype=lambda dt: np.float32, Tensor=_TensorStub),
        "tinygrad.renderer": {},
        "tinygrad.renderer.nir": dict(NIRRenderer=_NIRRenderer),
        "tinygrad.dtype": dict(dtypes=_TensorStub),
        "tinygrad.device": dict(Device=_TensorStub, is_dtype_supported=lambda *a, **k: True),
    }
    for name, attrs in mods.items():
        m = types.ModuleType(name)
        m.__dict__.update(attrs)
        m.__getattr__ = lambda n: _Stub()
        sys.modules[name] = m


class _Rewrite(ast.NodeTransformer):
    """Keeps a test's torch cases running past its tinygrad-only statements:

    - `assert` statements go (they compare tinygrad with torch; the adapter compares loom with torch);
    - an expression statement (a call such as np.testing.assert_equal(t.numpy(), ...) on a
      tinygrad value, or a helper call whose inputs are tinygrad's) that raises TinygradOnly is
      skipped and the test goes on with its next statement;
    - `a, b = <tinygrad value>` unpacks into as many stand-ins as there are names."""

    def visit_Assert(self, node):
        return ast.copy_location(ast.Pass(), node)

    def visit_Expr(self, node):
        self.generic_visit(node)
        handler = ast.ExceptHandler(type=ast.Name("peer_TinygradOnly_", ast.Load()), name=None, body=[ast.Pass()])
        return ast.copy_location(ast.Try(body=[node], handlers=[handler], orelse=[], finalbody=[]), node)

    def visit_Assign(self, node):
        self.generic_visit(node)
        t = node.targets[0]
        if len(node.targets) == 1 and isinstance(t, (ast.Tuple, ast.List)) and \
                not any(isinstance(e, ast.Starred) for e in t.elts):
            node.value = ast.Call(ast.Name("peer_unpack_", ast.Load()), [node.value, ast.Constant(len(t.elts))], [])
        return node


def _unpack(value, n):
    return tuple(_Stub() for _ in range(n)) if isinstance(value, _Stub) else value


# ---------------------------------------------------------------------------------------------
# The loom side of `torch`: loom itself, except that random data comes from PyTorch so that
# both runs see the same numbers (the data a test draws is its input, not the op under test).

def _loom_namespace(loom, real_torch):
    def dtype_to_torch(dt):
        return getattr(real_torch, str(dt).split(".")[-1]) if dt is not None else None

    def from_torch(fn):
        def draw(*args, **kwargs):
            kwargs.pop("device", None)
            rg = kwargs.pop("requires_grad", False)
            if "dtype" in kwargs: kwargs["dtype"] = dtype_to_torch(kwargs["dtype"])
            args = [dtype_to_torch(a) if isinstance(a, loom.dtype) else a for a in args]
            t = getattr(real_torch, fn)(*args, **kwargs)
            return loom.tensor(t.numpy(), requires_grad=rg)
        draw.__name__ = fn
        return draw

    ns = types.ModuleType("torch")
    ns.__getattr__ = lambda name: getattr(loom, name)
    for fn in ("rand", "randn", "randint", "randperm"):
        setattr(ns, fn, from_torch(fn))

    def manual_seed(s):
        real_torch.manual_seed(s)
        return loom.manual_seed(s)
    ns.manual_seed = manual_seed
    return ns


# ---------------------------------------------------------------------------------------------
# Recording one run of the suite

class Run:
    """One execution of the suite: the library bound to `torch` and the device loom uses."""

    def __init__(self, path, lib, real_torch, loom=None, device=None):
        # "lazy/<executor>": the lazy device run by another of loom's executors (loom._C._set_executor)
        device, _, self.executor = (device or "").partition("/")
        self.lib, self.real_torch, self.loom, self.device = lib, real_torch, loom, device or None
        self.records = None
        with open(path) as f:
            src = f.read()
        tree = _Rewrite().visit(ast.parse(src, path))
        code = compile(ast.fix_missing_locations(tree), path, "exec")
        g = {"__name__": "peer_suite", "__file__": path, "peer_TinygradOnly_": TinygradOnly, "peer_unpack_": _unpack}
        saved = sys.modules.get("torch")
        sys.modules["torch"] = lib  # the suite's `import torch` binds the library under test
        try:
            exec(code, g)
        finally:
            sys.modules["torch"] = saved
        g["helper_test_op"] = self.helper_test_op
        g["prepare_test_op"] = lambda *a, **k: ([], [])
        self.g = g
        self.classes = {n: c for n, c in g.items()
                        if isinstance(c, type) and issubclass(c, unittest.TestCase) and c.__module__ == "peer_suite"}
        run = self
        for c in self.classes.values():
            c.helper_test_exception = lambda s, *a, **k: run.helper_test_exception(*a, **k)
            for name in dir(unittest.TestCase):
                if name.startswith("assert") and name not in ("assertRaises", "assertRaisesRegex"):
                    setattr(c, name, lambda *a, **k: None)
            c.assertRaises = lambda s, *a, **k: _Swallow(*a)
            c.assertRaisesRegex = lambda s, *a, **k: _Swallow(*a[:1])

    def tests(self):
        out = []
        for cname, c in self.classes.items():
            out += [f"{cname}.{m}" for m in unittest.TestLoader().getTestCaseNames(c)]
        return out

    # inputs as the suite's prepare_test_op makes them, on this run's device
    def inputs(self, shps, vals, low, high, forward_only):
        lib = self.lib
        if shps is None:
            data = [np.array(x) for x in vals]
        else:
            np.random.seed(0)
            data = [np.random.uniform(low=low, high=high, size=size).astype(np.float32) for size in shps]
        ts = []
        for d in data:
            if d.dtype == np.float64: d = d.astype(np.float32)   # torch.tensor(list of floats): float32
            if d.dtype == np.int64: d = d.astype(np.int32)       # the suite casts torch's int64 to int32
            kw = {} if self.device is None else {"device": self.device}
            t = lib.tensor(d, **kw)   # from the array itself: a list would lose a 0-size dim's inner sizes
            if not forward_only: t.requires_grad_(True)
            ts.append(t)
        return ts

    def _key(self):
        f = sys._getframe(2)
        while f is not None and not f.f_code.co_name.startswith(("test_", "_test", "helper_")):
            f = f.f_back
        return f.f_lineno if f is not None else 0

    def helper_test_op(self, shps, torch_fxn, tinygrad_fxn=None, atol=1e-6, rtol=1e-3, grad_atol=1e-4,
                       grad_rtol=1e-3, forward_only=False, vals=None, low=-2, high=2):
        rec = {"kind": "op", "line": self._key(), "tol": [atol, rtol, grad_atol, grad_rtol]}
        self.records.append(rec)
        try:
            ts = self.inputs(shps, vals, low, high, forward_only)
            rec["out"] = _to_record(torch_fxn(*ts))
        except TinygradOnly:
            rec["tinygrad_only"] = True   # e.g. vals=[..., dtypes.int.max]: the inputs are tinygrad's
            raise
        except Exception as e:
            rec["error"] = _exc(e)
            return
        if not forward_only and ts:
            try:
                grads = self.lib.autograd.grad(torch_fxn(*ts).sum(), ts)
                rec["grads"] = [_to_record(g) for g in grads]
            except Exception as e:
                rec["grad_error"] = _exc(e)

    def helper_test_exception(self, shps, torch_fxn, tinygrad_fxn=None, expected=None, forward_only=False,
                              exact=False, vals=None, low=-1.5, high=1.5):
        rec = {"kind": "exception", "line": self._key(), "exact": exact}
        self.records.append(rec)
        expected = expected if isinstance(expected, tuple) else (expected,)
        rec["expected"] = [e.__name__ for e in expected]
        try:
            ts = self.inputs(shps, vals, low, high, forward_only)
            r = torch_fxn(*ts)
            if hasattr(r, "cpu"): r.cpu()   # lazy: a data-dependent error shows at the sync
            rec["raised"] = None
        except TinygradOnly:
            rec["tinygrad_only"] = True
            raise
        except Exception as e:
            rec["raised"] = _exc(e)
            rec["matches"] = isinstance(e, expected)
            rec["message"] = str(e)

    def run_test(self, test_id):
        cname, mname = test_id.split(".")
        self.records = []
        self.real_torch.manual_seed(0)
        if self.loom is not None: self.loom.manual_seed(0)
        np.random.seed(1337)
        body_error = None
        prev = None
        if self.device is not None:
            prev = self.loom.get_default_device() if hasattr(self.loom, "get_default_device") else None
            self.loom.set_default_device(self.device)
            if self.executor: self.loom._C._set_executor(self.executor)
        try:
            tc = self.classes[cname](mname)
            getattr(tc, mname)()
        except unittest.SkipTest as e:
            body_error = {"type": "SkipTest", "msg": str(e), "where": "", "mro": []}
        except TinygradOnly:
            body_error = {"type": "TinygradOnly", "msg": "", "where": "", "mro": []}
        except Exception as e:
            body_error = _exc(e)
        finally:
            if self.device is not None:
                self.loom.set_default_device(prev if prev is not None else "cpu")
                if self.executor: self.loom._C._set_executor("compiled")
        counts = {}
        for r in self.records:   # a case is named by its line and its occurrence on that line
            counts[r["line"]] = counts.get(r["line"], 0) + 1
            r["occ"] = counts[r["line"]]
        return self.records, body_error


class _Swallow:
    """assertRaises as a context manager: the checked code is tinygrad's; nothing is asserted."""
    def __init__(self, *a):
        if len(a) > 1 and callable(a[1]):
            try: a[1](*a[2:])
            except Exception: pass
    def __enter__(self): return self
    def __exit__(self, *a): return True


# ---------------------------------------------------------------------------------------------
# Comparing a loom record with the reference record

def compare(ref, got, body_error):
    """(category, detail) for one case; category None means pass."""
    if got is None:
        if body_error is None: return "loom error", "case not reached"
        cat = _categorize_error(body_error)
        return cat, f"test body before this case: {body_error['type']}: {body_error['msg']} ({body_error['where']})"
    if ref["kind"] == "exception":
        if got.get("raised") is None:
            return "wrong error", f"no exception raised (torch: {ref['raised']['type']})"
        if not got["matches"]:
            return "wrong error", f"{got['raised']['type']}: {got['raised']['msg']} (expected {'/'.join(ref['expected'])})"
        if ref["exact"] and got["message"] != ref["message"]:
            return "wrong error", f"message {got['message']!r} vs torch {ref['message']!r}"
        return None, None
    if "error" in got:
        e = got["error"]
        return _categorize_error(e), f"{e['type']}: {e['msg']} ({e['where']})"
    atol, rtol, gatol, grtol = ref["tol"]
    cat, detail = _compare_arrays(got["out"], ref["out"], atol, rtol, "forward")
    if cat: return {"shape": "wrong shape", "dtype": "wrong dtype", "value": "wrong value"}[cat], detail
    if "grads" in ref:
        if "grad_error" in got:
            e = got["grad_error"]
            return _categorize_error(e) + " (backward)", f"{e['type']}: {e['msg']} ({e['where']})"
        for i, (g, r) in enumerate(zip(got["grads"], ref["grads"])):
            cat, detail = _compare_arrays(g, r, gatol, grtol, f"grad {i}")
            if cat: return "wrong gradient", detail
    return None, None


def reference_usable(ref):
    if ref["kind"] == "exception":
        return ref.get("raised") is not None and ref.get("matches", False)
    return "out" in ref


# ---------------------------------------------------------------------------------------------
# Worker: runs tests in order, one JSON line per test on stdout

def worker(args):
    import torch as real_torch
    import loom
    _install_tinygrad_stubs()
    ref_run = Run(args.path, real_torch, real_torch)
    lns = _loom_namespace(loom, real_torch)
    runs = {d: Run(args.path, lns, real_torch, loom, d) for d in args.devices}
    tests = ref_run.tests()
    if args.k: tests = [t for t in tests if any(k in t for k in args.k)]
    if args.list:
        print(json.dumps({"tests": tests}), flush=True)
        return
    for test in tests[args.start:]:
        print(json.dumps({"begin": test, "phase": "torch"}), flush=True)
        ref, ref_body = ref_run.run_test(test)
        out = {"test": test, "ref_body": ref_body, "cases": []}
        per_dev = {}
        for d, run in runs.items():
            print(json.dumps({"begin": test, "phase": d}), flush=True)
            try:
                recs, body = run.run_test(test)
            except BaseException as e:  # noqa: BLE001 - a harness-level failure is recorded, not fatal
                recs, body = [], _exc(e)
            per_dev[d] = ({(r["line"], r["occ"]): r for r in recs}, body)
        for r in ref:
            case = {"line": r["line"], "occ": r["occ"], "kind": r["kind"]}
            if r.get("tinygrad_only"):
                case["tinygrad_only"] = True
            elif not reference_usable(r):
                e = r.get("error") or r.get("raised")
                case["ref_unavailable"] = f"{e['type']}: {e['msg']}" if e else "torch raised no exception"
            else:
                case["devices"] = {}
                for d, (recs, body) in per_dev.items():
                    cat, detail = compare(r, recs.get((r["line"], r["occ"])), body)
                    case["devices"][d] = [cat, detail]
            out["cases"].append(case)
        print(json.dumps(out), flush=True)


# ---------------------------------------------------------------------------------------------
# Parent: restarts a worker after a crash, aggregates, prints

def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("path", help="tinygrad's test/backend/test_ops.py (read, never copied)")
    p.add_argument("--devices", default="cpu,lazy", help="comma-separated: cpu, lazy, lazy/cuda-emulated, lazy/interpreter, ...")
    p.add_argument("-k", action="append", default=[], help="run tests whose id contains this (repeatable)")
    p.add_argument("--json", help="write every case's outcome here")
    p.add_argument("--timeout", type=float, default=120.0, help="seconds one test may take before it counts as a crash")
    p.add_argument("--show-failures", type=int, default=400, help="failure lines to print")
    p.add_argument("--quiet", action="store_true")
    p.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--list", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--start", type=int, default=0, help=argparse.SUPPRESS)
    args = p.parse_args()
    args.devices = [d for d in args.devices.split(",") if d]
    if args.worker:
        return worker(args)

    base = [sys.executable, os.path.abspath(__file__), args.path, "--devices", ",".join(args.devices)]
    for k in args.k: base += ["-k", k]
    listing = subprocess.run(base + ["--worker", "--list"], capture_output=True, text=True)
    if listing.returncode != 0:
        sys.stderr.write(listing.stderr); return 1
    tests = json.loads(listing.stdout.strip().splitlines()[-1])["tests"]
    results = []
    start = 0
    t0 = time.time()
    while start < len(tests):
        proc = subprocess.Popen(base + ["--worker", "--start", str(start)], stdout=subprocess.PIPE,
                                stderr=subprocess.DEVNULL, text=True, bufsize=1)
        current, phase, began = None, None, time.time()
        sel = selectors.DefaultSelector()
        sel.register(proc.stdout, selectors.EVENT_READ)
        crashed = None
        while True:
            ready = sel.select(timeout=1.0)
            if ready:
                line = proc.stdout.readline()
                if not line: break
                msg = json.loads(line)
                if "begin" in msg:
                    if msg["begin"] != current: began = time.time()
                    current, phase = msg["begin"], msg["phase"]
                else:
                    results.append(msg); start += 1; current = None
                    if not args.quiet:
                        bad = sum(1 for c in msg["cases"] for v in c.get("devices", {}).values() if v[0])
                        print(f"[{start}/{len(tests)} {time.time()-t0:5.0f}s] {msg['test']}: {len(msg['cases'])} cases, {bad} failing",
                              file=sys.stderr, flush=True)
            elif current is not None and time.time() - began > args.timeout:
                proc.kill(); crashed = f"timeout after {args.timeout:.0f}s"; break
        proc.wait()
        if start >= len(tests): break
        if current is None: current = tests[start]
        why = crashed or f"worker exited with {proc.returncode}"
        if phase == "torch":   # PyTorch itself died or hung: nothing to hold against loom
            results.append({"test": current, "ref_body": {"type": "crash", "msg": why}, "cases": []})
        else:
            results.append({"test": current, "crash": f"{why} (on {phase})", "crash_device": phase, "cases": []})
        start += 1
    return report(results, args)


def _test_skip_kind(res):
    """Why a test has no torch case: the suite skips it, its torch side is unavailable, or it is tinygrad's."""
    body = res.get("ref_body") or {}
    if body.get("type") == "SkipTest": return "skipped by the suite"
    if body.get("type") == "crash": return "reference crashed"
    if body.get("type") not in (None, "TinygradOnly"): return "reference unavailable"
    return "tinygrad-only"


def report(results, args):
    devs = args.devices
    stats = {d: {"pass": 0, "fail": 0} for d in devs}
    ref_unavail, tiny_cases, crashes = 0, 0, []
    skipped_tests = {}
    failures = {d: {} for d in devs}
    for res in results:
        if "crash" in res:
            crashes.append(res)   # counted on the device it died on; the devices after it did not run
            d = res["crash_device"]
            failures[d].setdefault("crash", []).append((res["test"], 0, res["crash"]))
            stats[d]["fail"] += 1
            continue
        usable = [c for c in res["cases"] if "devices" in c]
        if not usable and not any("ref_unavailable" in c for c in res["cases"]):
            skipped_tests.setdefault(_test_skip_kind(res), []).append(res["test"])
        for c in res["cases"]:
            if c.get("tinygrad_only"):
                tiny_cases += 1; continue
            if "ref_unavailable" in c:
                ref_unavail += 1; continue
            for d, (cat, detail) in c["devices"].items():
                if cat is None:
                    stats[d]["pass"] += 1
                else:
                    stats[d]["fail"] += 1
                    failures[d].setdefault(cat, []).append((res["test"], c["line"], detail))
    n_cases = sum(len(r["cases"]) for r in results)
    print(f"peer op suite: {args.path}")
    print(f"tests: {len(results)}, crashed: {len(crashes)}; without a comparable case: " +
          (", ".join(f"{k} {len(v)}" for k, v in sorted(skipped_tests.items())) or "none"))
    print(f"cases: {n_cases}; not compared: reference unavailable in torch {__import__('torch').__version__} {ref_unavail}, "
          f"tinygrad-only inputs {tiny_cases}")
    for d in devs:
        s = stats[d]; tot = s["pass"] + s["fail"]
        print(f"  {d:20s}: pass {s['pass']:4d}  fail {s['fail']:4d}  of {tot}  ({100.0*s['pass']/max(tot,1):.1f}%)")
    for k, v in sorted(skipped_tests.items()):
        print(f"  tests {k}: {' '.join(t.split('.')[-1] for t in v)}")
    for d in devs:
        print(f"\nfailures on {d} by category:")
        for cat, items in sorted(failures[d].items(), key=lambda kv: -len(kv[1])):
            print(f"  {cat}: {len(items)}")
    shown = 0
    for d in devs:
        print(f"\n--- {d} failures ---")
        for cat, items in sorted(failures[d].items(), key=lambda kv: -len(kv[1])):
            for test, line, detail in items:
                if shown >= args.show_failures: break
                print(f"  [{cat}] {test}:{line}  {detail}")
                shown += 1
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"devices": devs, "stats": stats, "results": results}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main() or 0)
