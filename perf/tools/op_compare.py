"""Pieces the suite adapters share (peer_ops_suite.py for tinygrad's test_ops, opinfo_suite.py and
module_suite.py for PyTorch's OpInfo database and nn module tables): turning a result tensor of
either library into a comparable record, describing an exception, naming a failure, comparing two
records with a case's tolerances, and importing torch's test tables."""

import sys
import traceback
import types
import unittest

import numpy as np


def install_expecttest_standin():
    """torch.testing._internal.common_utils imports `expecttest` (a test-only package Debian lacks).
    The helpers use expecttest.TestCase as a base class and read ACCEPT; neither takes part in what
    the suites do (sample inputs, module tables), so a minimal stand-in is enough."""
    if "expecttest" in sys.modules:
        return
    try:
        import expecttest  # noqa: F401 - the real package, where installed
        return
    except ImportError:
        pass
    m = types.ModuleType("expecttest")
    m.ACCEPT = False

    class TestCase(unittest.TestCase):
        pass

    m.TestCase = TestCase
    sys.modules["expecttest"] = m


def restore_torch_global_flags():
    """Importing torch.testing._internal.common_utils calls torch.backends.disable_global_flags()
    (torch's own tests set backend flags only inside flags() contexts). A process that then runs
    programs which assign torch.backends.cudnn.deterministic and the like, as training scripts do,
    would see those assignments raise: the suites that import torch's test tables undo it."""
    import torch.backends
    setattr(torch.backends, "__allow_nonbracketed_mutation_flag", True)


def dtype_name(dt):
    return str(dt).split(".")[-1]


def to_record(t):
    """A result tensor as (array, dtype name, shape); bfloat16 goes through float32 for numpy."""
    if not hasattr(t, "detach"):
        raise TypeError(f"the lambda returned {type(t).__name__}, not a tensor")
    t = t.detach().cpu()
    name = dtype_name(t.dtype)
    if name == "bfloat16": t = t.float()
    return np.array(t.numpy(), copy=True), name, tuple(t.shape)


def exc_info(e):
    """An exception as a JSON-able dict: type, first message line, where it was raised, and its classes."""
    tb = traceback.extract_tb(e.__traceback__)
    where = f"{tb[-1].filename.rsplit('/', 1)[-1]}:{tb[-1].lineno}" if tb else ""
    return {"type": type(e).__name__, "msg": str(e).split("\n")[0][:300], "where": where,
            "mro": [c.__name__ for c in type(e).__mro__]}


def categorize_error(e):
    """The failure class of an exception loom raised where torch succeeded."""
    if e["type"] in ("TinygradOnly",): return "tinygrad-only"
    if "AttributeError" in e["mro"] or "NotImplementedError" in e["mro"]: return "missing op"
    if "TypeError" in e["mro"]: return "argument form"
    return "loom error"


def compare_arrays(got, ref, atol, rtol, what):
    """(None, None) when two records agree; else (kind, detail), kind one of shape / dtype / value.
    Floating values are compared with the tolerances (NaN equals NaN), everything else exactly."""
    g, gname, gshape = got
    r, rname, rshape = ref
    if gshape != rshape: return "shape", f"{what}: shape {gshape} vs torch {rshape}"
    if gname != rname: return "dtype", f"{what}: dtype {gname} vs torch {rname}"
    try:
        if np.issubdtype(r.dtype, np.floating):
            np.testing.assert_allclose(g, r, atol=atol, rtol=rtol)
        else:
            np.testing.assert_equal(g, r)
    except AssertionError as e:
        lines = [l for l in str(e).split("\n") if l.strip()]
        return "value", f"{what}: " + " | ".join(lines[1:4])[:300]
    return None, None
