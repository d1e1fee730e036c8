"""Deep graphs (DESIGN decision 14): graph depth is bounded by memory, never by the C stack.

Every program here records a chain as long as a loop: a lazy trace of N elementwise ops synced
at once, autograd graphs N functions deep run backward and freed, in eager and lazy mode. Each
runs in a child process, on a thread with a small stack (STACK_BYTES), so that a recursion by
depth anywhere (a trace walk, the partitioner, the renderer, the backward engine, a destructor
chain) overflows it at these sizes and fails the test cleanly instead of crashing pytest.

CI runs N = 20,000 (well past what a recursion survives on this stack, and under a minute in
all on two cores). LOOM_TEST_DEEP_N=1000000 runs the goal size (minutes, and a few GiB for the
autograd graphs).

Also here: the trace cut (LOOM_MAX_TRACE_NODES: a long trace is synced in pieces) and sizes no
device can hold, which lazy mode refuses when the op is recorded, as eager mode does when it
allocates.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom

N = int(os.environ.get("LOOM_TEST_DEEP_N", "20000"))
STACK_BYTES = 256 * 1024

HARNESS = """
import sys, threading, traceback
import numpy as np
import loom
threading.stack_size({stack})
failed = []

def main():
    try:
{body}
    except BaseException:
        traceback.print_exc()
        failed.append(True)

t = threading.Thread(target=main)
t.start()
t.join()
print("DONE")
sys.exit(1 if failed else 0)
"""


def run_deep(body, n=N, env=None):
    """Runs `body` (Python source using the name N) in a child process on a small-stack thread."""
    timeout = 900 + n // 100  # generous: the limit only stops a hang
    code = HARNESS.format(stack=STACK_BYTES, body=textwrap.indent(f"N = {n}\n" + textwrap.dedent(body), " " * 8))
    full_env = dict(os.environ)
    full_env.update(env or {})
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=timeout)
    assert done.returncode == 0 and "DONE" in done.stdout, (
        f"child exited with {done.returncode} (a negative number is a signal: -11 is a stack overflow)\n"
        f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}")
    return done.stdout


# The chain: x + 1 and x * 0.5 alternately. Both are exact in float32 (a fused multiply-add of
# them too), so the lazy result equals the sequential numpy one bit for bit.
CHAIN = """
def chain(x, n):
    for i in range(n):
        x = x + 1 if i % 2 == 0 else x * 0.5
    return x

def expected(n):
    x = np.arange(4, dtype=np.float32)
    for i in range(n):
        x = x + np.float32(1) if i % 2 == 0 else x * np.float32(0.5)
    return x
"""


def test_long_lazy_chain_syncs_as_one_trace():
    run_deep(CHAIN + """
before = loom.metrics()["traces"]
x = chain(loom.arange(4, dtype=loom.float32, device="lazy"), N)
got = np.array(x.tolist(), dtype=np.float32)
assert np.array_equal(got, expected(N)), (got, expected(N))
assert loom.metrics()["traces"] - before == 1 or N > 100000  # cut only past the default limit
""")


def test_long_lazy_chain_with_every_value_alive():
    # Every value is an output of the trace: the kernels that store them must stay bounded.
    run_deep("""
values = [loom.arange(4, dtype=loom.float32, device="lazy")]
ref = [np.arange(4, dtype=np.float32)]
for i in range(N // 2):
    values.append(values[-1] * 0.5 + 1)
    ref.append(ref[-1] * np.float32(0.5) + np.float32(1))
loom.sync()
for k in (1, len(values) // 2, len(values) - 1):
    assert np.array_equal(np.array(values[k].tolist(), dtype=np.float32), ref[k]), k
""")


def test_long_chain_of_views_and_ops():
    # Views of computed values are folded into index arithmetic; a chain of them is as deep.
    run_deep("""
x = loom.arange(6, dtype=loom.float32, device="lazy").reshape(2, 3)
y = np.arange(6, dtype=np.float32).reshape(2, 3)
for i in range(N // 2):
    x = x.t() + 1
    y = y.T + np.float32(1)
assert np.array_equal(np.array(x.tolist(), dtype=np.float32), y)
""")


def test_long_chain_of_in_place_updates():
    run_deep("""
x = loom.zeros(3, device="lazy")
v = x[1:]  # a view written through, re-derived from its base after each write
for i in range(N // 2):
    x.add_(1)
    v.mul_(1.0)
assert x.tolist() == [N // 2] * 3
""")


def test_trace_cut_syncs_a_long_trace_in_pieces():
    out = run_deep(CHAIN + """
before = loom.metrics()["traces"]
x = chain(loom.arange(4, dtype=loom.float32, device="lazy"), N)
kept = x * 1  # pending when the chain ends: computed by the last piece
got = np.array(kept.tolist(), dtype=np.float32)
assert np.array_equal(got, expected(N))
print("TRACES", loom.metrics()["traces"] - before)
""", env={"LOOM_MAX_TRACE_NODES": "1000"})
    traces = int(out.split("TRACES ")[1].split()[0])
    assert N // 1000 <= traces <= N // 1000 + 2


def test_trace_cut_does_not_cut_a_loop_that_syncs():
    out = run_deep("""
w = loom.ones(4, device="lazy")
before = loom.metrics()["traces"]
for step in range(30):
    for i in range(40):
        w = w * 1.0
    w.sum().item()
print("TRACES", loom.metrics()["traces"] - before)
""", n=0, env={"LOOM_MAX_TRACE_NODES": "50"})
    assert int(out.split("TRACES ")[1].split()[0]) == 30


@pytest.mark.parametrize("value", ["-1", "1e5", "lots", "10 "])
def test_trace_cut_limit_must_be_a_number(value):
    env = dict(os.environ, LOOM_MAX_TRACE_NODES=value)
    code = "import loom\ntry:\n    loom.ones(2, device='lazy') + 1\nexcept ValueError as e:\n    print('ERR', e)\n"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert "ERR LOOM_MAX_TRACE_NODES must be a number of nodes" in done.stdout, done.stdout + done.stderr


AUTOGRAD_CHAIN = """
def grad_chain(device, n):
    w = loom.arange(4, dtype=loom.float32, device=device).requires_grad_()
    x = w
    for i in range(n):
        x = x * 2.0 if i % 2 == 0 else x * 0.5  # exact: the gradient is 1 (or 2 after an odd count)
    return w, x
"""


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_deep_backward_runs_and_frees(device):
    run_deep(AUTOGRAD_CHAIN + f"""
w, x = grad_chain("{device}", N)
x.sum().backward()
scale = 2.0 if N % 2 else 1.0
assert w.grad.tolist() == [scale] * 4, w.grad.tolist()
del x  # the graph, N functions deep, dies here
# and once more without backward: the saved values are still in it
w, x = grad_chain("{device}", N)
del w, x
""")


@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_deep_double_backward(device):
    # create_graph: the gradient's history runs back through every function, and the saved
    # values carry the histories of what they were saved from.
    run_deep(AUTOGRAD_CHAIN + f"""
w, x = grad_chain("{device}", N // 4)
y = (x * x).sum()
(g,) = loom.autograd.grad(y, w, create_graph=True)  # 2 * x * scale, with history
g.sum().backward()
scale = 2.0 if (N // 4) % 2 else 1.0
assert w.grad.tolist() == [2.0 * scale * scale] * 4, w.grad.tolist()
del w, x, y, g
""")


def test_deep_graph_of_in_place_ops_frees():
    run_deep("""
w = loom.ones(3, requires_grad=True)
y = w * 1.0
for i in range(N):
    y.mul_(1.0)  # each write's function leads to the previous one
y.sum().backward()
assert w.grad.tolist() == [1.0] * 3
del y
""")


def test_deep_graph_dropped_by_an_exception_unwinding():
    # The chain dies in a frame the exception leaves, not in a del.
    run_deep("""
def build():
    w = loom.ones(2, device="lazy", requires_grad=True)
    x = w
    for i in range(N):
        x = x + 1.0
    raise KeyError("unwind")
try:
    build()
except KeyError:
    pass
assert loom.ones(2, device="lazy").sum().item() == 2.0
""")


# ---- sizes no device can hold ----

HUGE = 2**62 + 16


def error_of(fn):
    try:
        fn()
    except Exception as e:  # noqa: BLE001 - the type is part of what is compared
        return type(e), str(e)
    return None


CREATIONS = {
    "ones": lambda size, device: loom.ones(size, device=device),
    "zeros": lambda size, device: loom.zeros(size, device=device),
    "full": lambda size, device: loom.full((size,), 2.0, device=device),
    "empty": lambda size, device: loom.empty(size, device=device),
    "rand": lambda size, device: loom.rand(size, device=device),
    "randn": lambda size, device: loom.randn(size, device=device),
    "randint": lambda size, device: loom.randint(0, 5, (size,), device=device),
    "arange": lambda size, device: loom.arange(size, device=device),
    "ones_2d": lambda size, device: loom.ones(2**31, 2**31 + 1, device=device),
    "ones_int64": lambda size, device: loom.ones(size // 2, dtype=loom.int64, device=device),
}


@pytest.mark.parametrize("name", sorted(CREATIONS))
def test_lazy_creation_refuses_what_eager_refuses(name):
    make = CREATIONS[name]
    eager = error_of(lambda: make(HUGE, "cpu"))
    assert eager is not None, "eager mode accepted the size"
    lazy = error_of(lambda: make(HUGE, "lazy"))
    assert lazy == eager


@pytest.mark.parametrize("size", [2**61, 2**59])
def test_lazy_refuses_more_bytes_than_any_device_has(size):
    # 2^61 float32 elements overflow int64 bytes; 2^59 of them are 2^61 bytes, more than the
    # 2^60 any device has: MemoryError in both modes.
    eager = error_of(lambda: loom.ones(size))
    lazy = error_of(lambda: loom.ones(size, device="lazy"))
    assert eager is not None and lazy == eager


def test_the_example_of_the_issue_raises_at_once():
    # In a child process: where the size is not refused, the sum runs for years.
    code = ("import loom\ntry:\n    loom.ones(2**62 + 16, device='lazy').sum().item()\n"
            "except RuntimeError as e:\n    print('ERR', e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert "ERR Storage size calculation overflowed with sizes=[4611686018427387920]" in done.stdout, done.stderr


@pytest.mark.parametrize("materialize", [
    lambda v: v.contiguous(),
    lambda v: v.clone(),
    lambda v: v + 1,
    lambda v: v * v,
    lambda v: v.double(),
    lambda v: loom.where(v > 0, v, v),
])
@pytest.mark.parametrize("device", ["cpu", "lazy"])
def test_an_expanded_view_is_fine_but_its_copy_is_refused(materialize, device):
    # 2^62 elements: the count fits int64 (a view of no memory), the bytes of a float copy do not
    # (where's bool intermediate, 2^62 bytes, does fit: the allocation of 4 EiB fails instead).
    v = loom.ones(1, 1, device=device).expand(2**31, 2**31)
    assert v.shape == (2**31, 2**31)
    if device == "cpu":  # prints its edges only (a lazy one is read whole first: too large)
        assert repr(v).startswith("tensor([[1., 1., 1.,  ..., 1., 1., 1.],")
    with pytest.raises((RuntimeError, MemoryError), match="Storage size calculation overflowed|out of memory"):
        materialize(v)
    # A view of more than 2^63 - 1 elements is refused at the expand, as PyTorch refuses it.
    with pytest.raises(RuntimeError, match="numel: integer multiplication overflow"):
        loom.ones(1, 1, device=device).expand(2**31, 2**33)


@pytest.mark.parametrize("op", ["exp", "add", "cat", "cumsum", "where", "clone"])
def test_every_op_result_is_checked_in_lazy_mode(op):
    # 2^62 elements: the count fits int64, the bytes do not (the overflow error, at the op whose
    # result it is, in both modes).
    def run(device):
        a = loom.ones(1, 1, device=device).expand(2**31, 2**31)
        b = loom.ones(1, 1, device=device).expand(2**31, 2**31)
        return {"exp": lambda: a.exp(), "add": lambda: a + b, "cat": lambda: loom.cat([a, b], 1),
                "cumsum": lambda: a.cumsum(0), "where": lambda: loom.where(a > 0, a, b),
                "clone": lambda: b.clone()}[op]()

    eager = error_of(lambda: run("cpu"))
    assert eager is not None and eager[0] in (MemoryError, RuntimeError), eager
    assert error_of(lambda: run("lazy")) == eager


# ---- shapes with more dimensions than a tensor has (runtime/layout.h kMaxDims) ----

def test_deeply_nested_data_is_refused_not_recursed():
    # 100,000 nested lists: the conversion recursed once per level and overflowed the C stack.
    data = 1.0
    for _ in range(100_000):
        data = [data]
    with pytest.raises(ValueError, match="too many dimensions 'list'"):
        loom.tensor(data)
    nested = 1.0
    for _ in range(64):
        nested = [nested]
    assert loom.tensor(nested).shape == (1,) * 64  # the limit itself is fine


@pytest.mark.parametrize("device", ["cpu", "lazy"])
@pytest.mark.parametrize("make", [
    lambda device: loom.ones((1,) * 65, device=device),
    lambda device: loom.ones(1, device=device).reshape((1,) * 65),
    lambda device: loom.ones(1, device=device).view((1,) * 100_000),
])
def test_more_than_64_dimensions_are_refused_where_they_are_made(make, device):
    with pytest.raises(RuntimeError, match="a tensor has at most 64 dimensions"):
        make(device)
