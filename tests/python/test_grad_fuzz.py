"""Property test: the gradients of random programs equal PyTorch's, and a random program run
through loom.compile equals PyTorch on every call.

The programs are test_ops_fuzz.py's (elementwise, reduction, view, matmul, data, in-place and nn
ops, drawn by running them on torch, on inputs of test_ops_fuzz's shapes and memory layouts), in
float64 and, against PyTorch's own float32 error, in float32. For the gradient test every input requires grad
and the program's loss is a weighted sum of every floating value it made (weights drawn with the
program, so each value's gradient path matters and none cancels another); loom's gradients of the
inputs, on the device under test (the lazy device runs the compiled executor: fused backward
kernels), must equal torch's. For the compile test the program is the body of a loom.compile'd
function called on three sets of inputs: the first calls record, the later ones replay."""

import numpy as np
import pytest

hypothesis = pytest.importorskip("hypothesis")
from hypothesis import HealthCheck, given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

import loom  # noqa: E402
import test_ops_fuzz as fuzz  # noqa: E402  (its programs and ops; its own test is collected there)
from _ops_helpers import FUZZ_DERANDOMIZE, assert_close, device, fuzz_examples, torch  # noqa: E402,F401

pytestmark = pytest.mark.filterwarnings("ignore::UserWarning")

COMPILED = True  # the device fixture keeps the compiled executor for lazy (see _ops_helpers.device)

# Ops whose gradient PyTorch 1.13 does not define (integer results, data-dependent index sets it
# raises on) or defines at points loom need not copy: left out of the gradient programs.
NOT_DIFFERENTIABLE = {"argmin", "floordiv", "mod", "eq_mask", "trunc", "trunc_frac", "shifts", "float_cast",
                      "masked_select", "median", "sort", "cummax", "aminmax", "scatter", "fmod"}


@st.composite
def grad_programs(draw, dtype="float64"):
    """A program of floats of `dtype` without the ops above, and one loss weight per value it makes."""
    # float32 programs leave out the ops whose value jumps (see fuzz.DISCONTINUOUS).
    excluded = NOT_DIFFERENTIABLE | (fuzz.DISCONTINUOUS if dtype == "float32" else set())
    inputs, steps = draw(fuzz.programs(dtypes=(dtype, "int64"), exclude=excluded - NOT_DIFFERENTIABLE))
    if inputs[0][0].dtype != np.dtype(dtype):
        # Float inputs of the same shapes (not the integers converted: they sit on kinks, where
        # PyTorch's own kernels disagree, e.g. hardswish at 3) and steps drawn again below (an
        # int64 program's ops may not apply to floats).
        g = np.random.default_rng(draw(st.integers(0, 2**31 - 1)))
        inputs = [(fuzz.input_values(g, a.shape, dtype, layout), layout) for a, layout in inputs]
        steps = []
    env = fuzz.input_tensors(torch, None, inputs)
    kept = []
    for name, params, squash in steps:
        if name in NOT_DIFFERENTIABLE:
            continue
        try:
            result = fuzz.OPS_BY_NAME[name][1](torch, env, params)
        except (RuntimeError, IndexError, ValueError):
            continue  # the program without the dropped steps indexes values differently
        if not fuzz._is_float(result):
            continue
        env.append(fuzz._squash(torch, result) if squash else result)
        kept.append((name, params, squash))
    for _ in range(draw(st.integers(0 if kept else 1, 4))):
        name = draw(st.sampled_from(sorted(set(fuzz.OPS_BY_NAME) - excluded)))
        options = fuzz.OPS_BY_NAME[name][0](env)
        if not options:
            continue
        params = draw(st.sampled_from(options))
        try:
            result = fuzz.OPS_BY_NAME[name][1](torch, env, params)
        except (RuntimeError, ValueError):
            continue
        if not fuzz._is_float(result):
            continue
        squash = bool(result.numel() and result.abs().nan_to_num(0, 0, 0).max() > fuzz.BOUND)
        env.append(fuzz._squash(torch, result) if squash else result)
        kept.append((name, params, squash))
    seed = draw(st.integers(0, 2**31 - 1))
    return inputs, kept, seed


def weighted_loss(m, env, seed):
    """sum_k (env[k] * w_k).sum() over the floating values, w_k fixed by the seed."""
    g = np.random.default_rng(seed)
    total = None
    for v in env:
        if not fuzz._is_float(v):
            continue
        w = g.standard_normal(tuple(v.shape))
        w_t = torch.from_numpy(w) if m is torch else loom.tensor(w, device=v.device)
        term = (v * w_t).sum()
        total = term if total is None else total + term
    return total


def gradients(m, device, inputs, steps, seed):
    """The gradients of the weighted loss with respect to the inputs' leaves (a transposed, strided
    or expanded input is a view of its leaf: the gradient flows back through the view)."""
    pairs = [fuzz.leaf_and_input(m, device, a, layout, requires_grad=True) for a, layout in inputs]
    leaves = [leaf for leaf, _ in pairs]
    env = [x for _, x in pairs]
    for name, params, squash in steps:
        result = fuzz.OPS_BY_NAME[name][1](m, env, params)
        env.append(fuzz._squash(m, result) if squash else result)
    weighted_loss(m, env, seed).backward()
    return [leaf.grad for leaf in leaves]


@settings(max_examples=fuzz_examples(80), deadline=None, database=None, derandomize=FUZZ_DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=grad_programs())
def test_random_program_gradients(device, program):
    inputs, steps, seed = program
    ref = gradients(torch, None, inputs, steps, seed)
    out = gradients(loom, device, inputs, steps, seed)
    for k, (o, r) in enumerate(zip(out, ref)):
        if r is None:
            assert o is None or not np.any(fuzz.np.asarray(o.cpu().numpy())), f"input {k}: torch has no gradient"
            continue
        assert o is not None, f"input {k}: loom has no gradient after {steps}"
        try:
            assert_close(o, r, rtol=1e-8, atol=1e-8 * fuzz.BOUND)
        except AssertionError as e:
            raise AssertionError(f"gradient of input {k} after {steps}: {e}") from None


@settings(max_examples=fuzz_examples(40), deadline=None, database=None, derandomize=FUZZ_DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=grad_programs(dtype="float32"))
def test_random_program_gradients_float32(device, program):
    """The gradients in float32 (the backward kernels' float32 forms), as accurate as PyTorch's
    float32 ones against PyTorch's float64 gradients on the same float32 inputs."""
    inputs, steps, seed = program
    exact = gradients(torch, None, fuzz.as_float64(inputs), steps, seed)
    theirs = gradients(torch, None, inputs, steps, seed)
    ours = gradients(loom, device, inputs, steps, seed)
    for k, (o, t, e) in enumerate(zip(ours, theirs, exact)):
        if t is None:
            assert o is None or not np.any(o.cpu().numpy()), f"input {k}: torch has no gradient"
            continue
        assert o is not None, f"input {k}: loom has no gradient after {steps}"
        fuzz.assert_float32_close(o, t, e, f"gradient of input {k} after {steps}")


@settings(max_examples=fuzz_examples(40), deadline=None, database=None, derandomize=FUZZ_DERANDOMIZE,
          suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow])
@given(program=fuzz.programs())
def test_random_programs_compiled(program):
    """The program as a loom.compile'd function of its inputs, called on three input sets of the
    same shapes (the second and third calls may replay a captured plan): each call's values equal
    torch's on the same inputs."""
    inputs, steps = program
    # masked_select's result has a size of the data's: later steps drawn for one input set may not
    # apply to the others.
    hypothesis.assume(all(name != "masked_select" for name, _, _ in steps))

    def body(*xs):
        env = list(xs)
        for name, params, squash in steps:
            result = fuzz.OPS_BY_NAME[name][1](loom, env, params)
            env.append(fuzz._squash(loom, result) if squash else result)
        return env[len(xs):]

    compiled = loom.compile(body)
    held = []
    for call in range(3):
        g = np.random.default_rng(call)
        xs = [(a if call == 0 else fuzz.input_values(g, a.shape, a.dtype.name, layout), layout) for a, layout in inputs]
        ref = fuzz.run_program(torch, None, xs, steps)[len(xs):]
        out = compiled(*fuzz.input_tensors(loom, "lazy", xs))
        fuzz._compare(out, ref, steps, 0)
        held.append((out, ref))
    for out, ref in held:  # a later call's replay never overwrote an earlier call's results
        fuzz._compare(out, ref, steps, 0)
