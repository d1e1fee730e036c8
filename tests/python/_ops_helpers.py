"""Shared helpers for the op-library suites (test_ops_*.py): the `device` fixture, input layouts,
and comparison of loom results with PyTorch's.

Every op test runs once per device in DEVICES; on "lazy" each result is also compared with the
same program run eagerly on "cpu". Nothing here skips the lazy half: if creating a lazy tensor
breaks, every lazy test fails.
"""

import gc
import os
import re
import sys

import numpy as np
import pytest

import loom
from conftest import DTYPE_NAMES

torch = pytest.importorskip("torch")

DEVICES = ["cpu", "lazy"]

FLOAT_DTYPES = ["float32", "float64"]
INT_DTYPES = ["uint8", "int8", "int16", "int32", "int64"]
ALL_DTYPES = ["bool"] + INT_DTYPES + FLOAT_DTYPES

# (rtol, atol) by result dtype.
TOLERANCES = {"float32": (1e-5, 1e-6), "float64": (1e-12, 1e-13), "float16": (1e-3, 1e-3)}


# LOOM_TEST_LAZY_EXECUTOR=cuda-emulated runs the op suites' lazy programs through the CUDA
# lowering on the host (graph/cuda_emulator.h) instead of the interpreter.
LAZY_EXECUTOR = os.environ.get("LOOM_TEST_LAZY_EXECUTOR", "interpreter")


@pytest.fixture(params=DEVICES)
def device(request):
    """The op suites run lazy mode on the interpreter, the reference executor: they check op
    semantics, and each of their thousands of small one-off programs would otherwise compile a
    module of its own. test_fusion.py checks that the compiled executor equals the interpreter
    for every op; test_ops_fuzz.py runs its random programs compiled."""
    if request.param == "lazy" and not getattr(request.module, "COMPILED", False):
        loom._C._set_executor(LAZY_EXECUTOR)
    try:
        yield request.param
    finally:
        if request.param == "lazy":
            loom._C._set_executor("compiled")
            release_pending()


# The fuzzers draw the same programs on every run, so a CI run is never the first to meet a new one
# (a program that fails is a bug to fix in a session, not a coin CI tosses); LOOM_FUZZ=explore draws
# new ones each run (pytest's --hypothesis-seed=N replays such a run).
FUZZ_DERANDOMIZE = os.environ.get("LOOM_FUZZ") != "explore"


def fuzz_examples(default):
    """max_examples of a hypothesis fuzzer: `default` (sized for CI) unless LOOM_FUZZ_EXAMPLES=N
    asks for N (a longer local hunt; with LOOM_FUZZ=explore, new programs each run)."""
    return int(os.environ.get("LOOM_FUZZ_EXAMPLES") or default)


def release_pending():
    """Drops what keeps a test's pending lazy tensors alive after it ends: pytest stores the last
    failure's traceback (failed and xfailed tests) in sys.last_traceback, whose frames hold them.
    They would otherwise be computed by the next test's first sync, as part of its trace."""
    if getattr(sys, "last_traceback", None) is not None:
        sys.last_type = sys.last_value = sys.last_traceback = None
        gc.collect()


def rng(seed=0):
    return np.random.default_rng(seed)


def random_array(shape, dtype, seed=0, low=None, high=None, nonzero=False):
    """Random values of a numpy dtype: normal floats, small integers, random bools."""
    g = rng(seed)
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return np.asarray(g.random(shape) < 0.5)
    if dtype.kind in "iu":
        lo = low if low is not None else (0 if dtype.kind == "u" else -5)
        hi = high if high is not None else 6
        a = g.integers(lo, hi, size=shape).astype(dtype)
        if nonzero:
            a[a == 0] = 1
        return a
    a = g.standard_normal(shape).astype(dtype)
    if low is not None or high is not None:
        lo = 0.0 if low is None else low
        hi = 1.0 if high is None else high
        a = (lo + (hi - lo) * g.random(shape)).astype(dtype)
    if nonzero:
        a[a == 0] = 1
    return np.asarray(a, dtype=dtype)


LAYOUTS = ["contiguous", "transposed", "strided", "expanded"]


def make(values, device, layout="contiguous"):
    """A loom tensor on `device` with the given memory layout, and the numpy values it holds.

    contiguous: loom.tensor(values); transposed: the last two dims of a contiguous tensor swapped
    (so the result is not contiguous); strided: every other element of a larger tensor (slices
    with step 2); expanded: the first entry along dim 0 broadcast with expand() (stride 0), which
    changes the values to that broadcast."""
    values = np.asarray(values)
    if layout == "contiguous" or values.ndim == 0:
        return loom.tensor(values, device=device), values
    if layout == "transposed":
        if values.ndim < 2:
            return loom.tensor(values, device=device), values
        t = loom.tensor(np.ascontiguousarray(np.swapaxes(values, -1, -2)), device=device).transpose(-1, -2)
        return t, values
    if layout == "strided":
        big = np.zeros(tuple(2 * s + 1 for s in values.shape), dtype=values.dtype)
        index = (slice(1, None, 2),) * values.ndim
        big[index] = values
        return loom.tensor(big, device=device)[index], values
    if layout == "expanded":
        first = values[:1]
        t = loom.tensor(np.ascontiguousarray(first), device=device).expand(*values.shape)
        return t, np.ascontiguousarray(np.broadcast_to(first, values.shape))
    raise ValueError(layout)


def dtype_name(dt):
    """'float32' for loom.float32, torch.float32, np.float32 or 'float32'."""
    if isinstance(dt, str):
        return dt
    if isinstance(dt, loom.dtype):
        return DTYPE_NAMES[dt]
    if isinstance(dt, torch.dtype):
        return str(dt).split(".", 1)[1]
    return np.dtype(dt).name


def tolerance(name, rtol=None, atol=None):
    r, a = TOLERANCES.get(name, (0, 0))
    return (r if rtol is None else rtol), (a if atol is None else atol)


def to_np(x):
    if isinstance(x, loom.Tensor):
        if x.dtype is loom.bfloat16:
            x = x.float()
        return np.array(x.numpy(), copy=True)
    if isinstance(x, torch.Tensor):
        return x.detach().numpy().copy()
    return np.asarray(x)


def assert_close(actual, expected, rtol=None, atol=None, check_dtype=True):
    """loom tensor `actual` equals `expected` (a torch tensor, a loom tensor or a numpy array) in
    shape, dtype and values: exactly for integers and bools, with the result dtype's tolerance
    for floats (NaN equal to NaN, infinities equal only to themselves)."""
    assert isinstance(actual, loom.Tensor), type(actual)
    exp_shape = tuple(expected.shape)
    assert tuple(actual.shape) == exp_shape, (tuple(actual.shape), exp_shape)
    a_name = dtype_name(actual.dtype)
    e_name = dtype_name(expected.dtype)
    if check_dtype:
        assert a_name == e_name, f"dtype {a_name} != expected {e_name}"
    a = to_np(actual)
    e = to_np(expected)
    if a_name.startswith("float") or a_name == "bfloat16" or e_name.startswith("float"):
        r, t = tolerance(a_name, rtol, atol)
        np.testing.assert_allclose(a.astype(np.float64), e.astype(np.float64), rtol=r, atol=t, equal_nan=True)
    else:
        np.testing.assert_array_equal(a, e)


def assert_tree_close(actual, expected, rtol=None, atol=None):
    """assert_close over (nested) tuples / lists of tensors, or plain Python values."""
    if isinstance(expected, (tuple, list)):
        assert isinstance(actual, (tuple, list)), type(actual)
        assert len(actual) == len(expected), (len(actual), len(expected))
        for a, e in zip(actual, expected):
            assert_tree_close(a, e, rtol, atol)
    elif isinstance(expected, (torch.Tensor, loom.Tensor, np.ndarray)):
        assert_close(actual, expected, rtol, atol)
    else:
        assert actual == expected or (actual != actual and expected != expected), (actual, expected)


def materialize(x):
    """Reads results back (a sync point in lazy mode), so errors found only when running surface."""
    if isinstance(x, loom.Tensor):
        x.tolist()
    elif isinstance(x, (tuple, list)):
        for v in x:
            materialize(v)
    return x


def _build(inputs, device, layouts):
    loom_args, torch_args = [], []
    for i, x in enumerate(inputs):
        if isinstance(x, np.ndarray):
            layout = layouts[i] if layouts else "contiguous"
            t, v = make(x, device, layout)
            loom_args.append(t)
            torch_args.append(torch.from_numpy(np.array(v, copy=True)))
        else:
            loom_args.append(x)
            torch_args.append(x)
    return loom_args, torch_args


# ---- errors: loom raises what PyTorch raises ----

# PyTorch's spellings of dtypes in messages ('Long', "long int", 'uint8_t'), as loom spells them.
_DTYPE_WORDS = {"bool": "bool", "byte": "uint8", "uint8_t": "uint8", "char": "int8", "short": "int16",
                "int": "int32", "long": "int64", "half": "float16", "float": "float32", "double": "float64"}
# Words that nearly every message has, so sharing one says nothing about the problem; also
# PyTorch's kernel-name suffixes ("abs_cpu", "GeluKernelImpl").
_GENERIC_WORDS = set("""
    a an the and or of to in on at by for with from as is are be been was were it its this that these those
    not no but if then than so such has have had can cannot could should must may only also either into
    out got get found expected expect expects use used using instead please
    tensor tensors input inputs argument arguments value values type types dtype dtypes size sizes shape shapes
    dimension dimensions dim dims element elements number numbers operator operation
    supported unsupported implemented allowed valid invalid torch loom cpu cuda kernel impl vml lazy
""".split())


def problem_words(message):
    """The words of an error message that can say what the problem is: lower case, snake_case and
    CamelCase names split into their parts too, PyTorch's dtype names spelled as loom's, and
    without the words every message has."""
    text = re.sub(r"([a-z])([A-Z])", r"\1 \2", message).lower().replace("long int", "long")
    words = set()
    for token in re.findall(r"[a-z0-9_]+", text):
        for part in [token] + token.split("_"):
            part = _DTYPE_WORDS.get(part, part)
            if len(part) >= 3 and not part.isdigit() and part not in _GENERIC_WORDS:
                words.add(part)
    return words


def assert_same_error(loom_error, torch_error):
    """loom raised what PyTorch raised: the same exception type, and a message naming the same
    problem, which here means sharing at least one of the words of PyTorch's message that are not
    in every message (an op, a dtype, "broadcast", "overflow", ...). Loose by design: the two
    libraries word some messages differently, and PyTorch's wording changes between versions."""
    assert type(loom_error) is type(torch_error), (
        f"loom raised {type(loom_error).__name__}: {loom_error}\n"
        f"PyTorch raised {type(torch_error).__name__}: {torch_error}")
    shared = problem_words(str(loom_error)) & problem_words(str(torch_error))
    assert shared, (f"loom's message names another problem than PyTorch's:\n  loom: {loom_error}\n"
                    f"  PyTorch: {torch_error}")


def assert_raises_like(torch_error, call):
    """call() raises what PyTorch raised (assert_same_error); its result is materialized, as lazy
    errors found in the data surface at a sync."""
    try:
        materialize(call())
    except Exception as e:
        assert_same_error(e, torch_error)
    else:
        pytest.fail(f"loom raised nothing; PyTorch raised {type(torch_error).__name__}: {torch_error}")


def check(device, fn, *inputs, torch_fn=None, layouts=None, rtol=None, atol=None):
    """Runs fn(loom, *loom_inputs) and (torch_fn or fn)(torch, *torch_inputs) and compares them.

    Numpy-array inputs become tensors (with the layouts given, one per input); other inputs
    (Python numbers, strings, None) are passed as they are. On the lazy device the result is
    also compared with the same program run on the cpu. If torch raises, loom must raise too:
    the same exception type, with a message naming the same problem (assert_same_error).
    Returns (loom result, torch result)."""
    loom_args, torch_args = _build(inputs, device, layouts)
    tfn = torch_fn or fn
    try:
        ref = tfn(torch, *torch_args)
    except Exception as e:  # PyTorch rejects this input: so must loom
        assert_raises_like(e, lambda: fn(loom, *loom_args))
        return None, e
    out = fn(loom, *loom_args)
    assert_tree_close(out, ref, rtol, atol)
    if device == "lazy":
        cpu_args, _ = _build(inputs, "cpu", layouts)
        assert_tree_close(out, fn(loom, *cpu_args), rtol, atol)
    return out, ref


class SubChecks:
    """Runs several checks in one test and reports every failing one (not just the first):

        sub = SubChecks()
        for case in cases:
            with sub(case):
                check(...)
        sub.finish()
    """

    def __init__(self):
        self.failures = []
        self._label = None

    def __call__(self, label):
        self._label = label
        return self

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None or issubclass(exc_type, KeyboardInterrupt):
            return False
        text = str(exc).strip().splitlines()
        self.failures.append(f"{self._label}: {exc_type.__name__}: {' | '.join(text[:6])[:400]}")
        return True

    def finish(self):
        if self.failures:
            pytest.fail(f"{len(self.failures)} failing case(s):\n" + "\n".join(self.failures), pytrace=False)


def results_by_name(out):
    """A program's results {name: tensor or tuple of tensors} as {"name.i": numpy array}, to compare
    runs of one program on several executors (a sync point: the arrays are read)."""
    flat = {}
    for name, value in out.items():
        for i, t in enumerate(value if isinstance(value, tuple) else (value,)):
            flat[f"{name}.{i}"] = t.numpy()
    return flat


def recorded_then_replayed(program):
    """program()'s value as a float, after checking the lazy device's promise for it: recording it
    syncs nothing, and a second run of the same program hits the cached plan (no plan miss) and
    gives the same value."""
    syncs = loom.metrics()["syncs"]
    first = program()
    assert loom.metrics()["syncs"] == syncs
    value = first.item()
    misses = loom.metrics()["graph_cache_misses"]
    assert program().item() == value
    assert loom.metrics()["graph_cache_misses"] == misses
    return value
