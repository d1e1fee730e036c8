"""The timed cases of BENCH.md: each workload at each size, and how a mode runs it.

A case builds one Runner per mode. Building sets the mode's state up from the same data and the
same initial weights and runs the warm-up steps; what the warm-up computed (outputs, or the loss
trajectory and the parameters it left) is what the harness compares across modes before timing
anything (`disagreement`). A runner's `block(n)` runs n whole steps, each materialized (a lazy
step that is never synchronized did no work), and waits for the device at the end.
"""

import operator
from dataclasses import dataclass, field
from typing import Callable

import numpy as np

import workloads as W

try:
    import torch
except ImportError:
    torch = None


@dataclass
class Runner:
    values: np.ndarray             # what the warm-up computed, compared across modes
    block: Callable[[int], None]   # n materialized steps, then wait for the device
    # Training: the parameters (name -> values) before and after the warm-up, compared across modes.
    initial: dict = field(default_factory=dict)
    parameters: dict = field(default_factory=dict)


@dataclass
class Case:
    workload: str
    name: str
    modes: list                    # the mode names that run it
    build: Callable                # (mode, device) -> Runner
    repeats: int                   # interleaved timed blocks per mode
    steps: int                     # steps per block
    unit: str = "step"
    rtol: float = 1e-4             # agreement of `values` with the reference mode
    atol: float = 1e-5
    note: str = ""
    extra: dict = field(default_factory=dict)


# How far the parameter updates of a training warm-up (after minus before) may differ from the
# reference mode's, by parameter dtype, relative to the updates' size (L2 norms): (over all the
# parameters at once, per parameter tensor).
#
# Why relative to the updates and not element by element: AdamW divides each gradient by its own
# running magnitude, so an element whose true gradient is 0 or nearly (a key bias: softmax ignores
# it) moves by rounding noise scaled up to as much as lr. Measured on the CPU (mlp and gpt, 3 steps,
# loom-lazy and loom-eager against torch-eager): element differences up to 1.1e-5 where updates are
# about 3e-3, yet the updates as a whole agree to 1.4e-5 (mlp) and 4.2e-5 (gpt) of their size, and
# the worst single tensor (gpt's qkv bias) to 9.4e-4. Dropping weight decay moves the whole by
# 5.8e-4 (mlp) and 2.6e-3 (gpt); dropping every bias and LayerNorm update moves those tensors by
# 1.0 of their size. The losses agree to 1.1e-7.
UPDATE_TOLERANCES = {"float32": (2e-4, 1e-2), "float64": (1e-9, 1e-7)}


def _relative(diff_sq, size_sq):
    return float(np.sqrt(diff_sq / size_sq)) if size_sq else float(np.sqrt(diff_sq))


def disagreement(case, reference, ref, got):
    """Why runner `got` did not compute what runner `ref` (of mode `reference`) did, or None: the
    warm-up values within the case's tolerance and, for training, the parameter updates within
    their dtype's (UPDATE_TOLERANCES)."""
    want, have = ref.values, got.values
    if have.shape != want.shape:
        return f"disagrees with {reference}: shape {have.shape}"
    if not np.allclose(have, want, rtol=case.rtol, atol=case.atol, equal_nan=True):
        return f"disagrees with {reference}: max abs difference {np.nanmax(np.abs(have - want)):.3g}"
    if set(got.parameters) != set(ref.parameters):
        return f"parameters differ from {reference}'s: {sorted(set(got.parameters) ^ set(ref.parameters))}"
    total_diff = total_size = 0.0
    for name, want in ref.parameters.items():
        have = got.parameters[name]
        if have.shape != want.shape or have.dtype != want.dtype:
            return f"parameter {name}: {have.dtype} {have.shape}, {reference} has {want.dtype} {want.shape}"
        whole, each = UPDATE_TOLERANCES[want.dtype.name]
        before = ref.initial[name].astype(np.float64)
        update = want.astype(np.float64) - before
        diff_sq = float(np.sum((have.astype(np.float64) - before - update) ** 2))
        size_sq = float(np.sum(update ** 2))
        if not diff_sq <= each ** 2 * size_sq:  # also catches NaN
            return (f"parameter {name}: its update in the warm-up differs from {reference}'s by "
                    f"{_relative(diff_sq, size_sq):.3g} of its size (at most {each:g})")
        total_diff += diff_sq
        total_size += size_sq
    if ref.parameters and not total_diff <= whole ** 2 * total_size:
        return (f"the parameter updates of the warm-up differ from {reference}'s by "
                f"{_relative(total_diff, total_size):.3g} of their size (at most {whole:g})")
    return None


def _tensor(mode, array, device):
    if mode.lib == "numpy":
        return array
    return mode.module.tensor(array, device=mode.device(device))


def _materialize(mode):
    """The per-step sync point: loom's lazy modes record until something asks for a value."""
    import loom
    return loom.sync if mode.lazy else (lambda: None)


def _captured(mode, fn, inputs):
    """torch-cudagraph, torch-compile and loom-compile: the step `fn(*inputs)` captured once,
    replayed after."""
    if mode.capture == "loom-compile":
        return mode.module.compile(fn)
    if mode.capture == "compile":
        return torch.compile(fn, mode="reduce-overhead")
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for _ in range(3):
            fn(*inputs)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = fn(*inputs)

    def replay(*_):
        graph.replay()
        return out
    return replay


def _function_runner(mode, device, fn, arrays, numpy_fn=None, warmup=2):
    """A forward-only step `fn(m, *tensors)` returning a tensor or a tuple of tensors."""
    if mode.lib == "numpy":
        def block(n):
            for _ in range(n):
                numpy_fn(*arrays)
        outs = numpy_fn(*arrays)
        return Runner(np.concatenate([np.ravel(o).astype(np.float64) for o in _tuple(outs)]), block)
    m = mode.module
    inputs = [_tensor(mode, a, device) for a in arrays]
    call = lambda *xs: fn(m, *xs)  # noqa: E731
    if mode.capture:
        call = _captured(mode, call, inputs)
    sync = _materialize(mode)

    def step():
        out = call(*inputs)
        sync()  # out is alive here: its values are computed
        return out

    for _ in range(warmup):
        outs = step()
    values = np.concatenate([np.ravel(o.cpu().numpy()).astype(np.float64) for o in _tuple(outs)])

    def block(n):
        for _ in range(n):
            step()
        mode.synchronize(device)
    return Runner(values, block)


def _tuple(x):
    return x if isinstance(x, tuple) else (x,)


# ---- ops: the cost of one tiny op from Python ----

# One op per call, reached without a Python-level wrapper (a lambda would add ~50 ns to every
# call in every mode): the operator for `+`, the unbound tensor method for `.exp()` / `.sum()`.
OPS = {
    "add": lambda tensor_type: operator.add,
    "exp": lambda tensor_type: tensor_type.exp if tensor_type is not np.ndarray else np.exp,
    "sum": lambda tensor_type: tensor_type.sum,
}


def _ops_runner(op):
    def build(mode, device):
        rng = np.random.default_rng(0)
        a, b = (rng.standard_normal(16).astype(np.float32) for _ in range(2))
        x, y = _tensor(mode, a, device), _tensor(mode, b, device)
        fn = OPS[op](type(x))
        call = (lambda: fn(x, y)) if op == "add" else (lambda: fn(x))
        out = call()
        values = np.atleast_1d(np.asarray(out if mode.lib == "numpy" else out.cpu().numpy(), dtype=np.float64))

        # In lazy modes each op is recorded and dropped: this measures recording, as BENCH.md says.
        if op == "add":
            def block(n):
                for _ in range(n):
                    fn(x, y)
                mode.synchronize(device)
        else:
            def block(n):
                for _ in range(n):
                    fn(x)
                mode.synchronize(device)
        return Runner(values, block)
    return build


# ---- training steps ----

_INITIAL = {}


def _initial_state(model_fn):
    """The initial weights every mode starts from: PyTorch's initialization from seed 0 where
    PyTorch is installed, else loom's."""
    if model_fn not in _INITIAL:
        if torch is not None:
            torch.manual_seed(0)
            state = {k: v.detach().numpy().copy() for k, v in model_fn(torch).state_dict().items()}
        else:
            import loom
            loom.manual_seed(0)
            state = {k: v.numpy().copy() for k, v in model_fn(loom).state_dict().items()}
        _INITIAL[model_fn] = state
    return _INITIAL[model_fn]


def training_setup(mode, device, model_fn, data_fn):
    """A model, its AdamW optimizer and a batch on the mode's device, from the shared initial
    weights. Used by the timed cases and by the cold-start child process."""
    m = mode.module
    model = model_fn(m)
    model.load_state_dict({k: m.tensor(v) for k, v in _initial_state(model_fn).items()})
    model = model.to(mode.device(device))
    options = dict(lr=1e-3)
    if mode.capture == "cudagraph":
        options["capturable"] = True
    optimizer = m.optim.AdamW(model.parameters(), **options)
    x, y = data_fn()
    return model, optimizer, _tensor(mode, x, device), _tensor(mode, y, device)


def _training_runner(model_fn, data_fn, warmup=3):
    def build(mode, device):
        m = mode.module
        model, optimizer, x, y = training_setup(mode, device, model_fn, data_fn)
        step = lambda: W.train_step(m, model, optimizer, x, y)  # noqa: E731
        losses = []
        if mode.capture == "cudagraph":
            # PyTorch's whole-network capture: warm up on a side stream, capture one step with
            # the gradients unset, then every replay is one full step.
            stream = torch.cuda.Stream()
            stream.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(stream):
                losses = [step().item() for _ in range(warmup)]
            torch.cuda.current_stream().wait_stream(stream)
            graph = torch.cuda.CUDAGraph()
            optimizer.zero_grad(set_to_none=True)
            with torch.cuda.graph(graph):
                static_loss = step()

            def replay():
                graph.replay()
                return static_loss
            run = replay
        elif mode.capture == "compile":
            run = torch.compile(step, mode="reduce-overhead")
        elif mode.capture == "loom-compile":
            run = m.compile(step)
        else:
            run = step
        while len(losses) < warmup:
            losses.append(run().item())
        # Copies: the next steps update the parameters in place.
        parameters = {k: np.array(v.detach().cpu().numpy(), copy=True) for k, v in model.state_dict().items()}

        def block(n):
            for _ in range(n):
                run().item()  # the loss is read every step, in every mode
            mode.synchronize(device)
        return Runner(np.array(losses), block, _initial_state(model_fn), parameters)
    return build


# ---- the table of cases ----

LOOM_AND_TORCH = ["loom-lazy", "loom-compile", "loom-lazy-nofuse", "loom-lazy-nograph", "loom-eager",
                  "torch-eager", "torch-cudagraph", "torch-compile"]

# (repeats, steps per block) for the full run and for --quick
SIZES = {
    "ops": ((5, 20000), (3, 4000)),
    "chain 1e3": ((7, 1000), (3, 200)),
    "chain 1e5": ((7, 200), (3, 40)),
    "chain 1e7": ((5, 3), (3, 1)),
    "chain+sum 1e5": ((7, 200), (3, 40)),
    "chain+sum 1e7": ((5, 3), (3, 1)),
    "softmax 256x512": ((7, 100), (3, 20)),
    "softmax 4096x1024": ((5, 5), (3, 1)),
    "mlp": ((5, 40), (3, 10)),
    "gpt": ((5, 20), (3, 4)),
}


def _chain_case(label, n, fn=W.chain, numpy_fn=W.chain_numpy):
    rng = np.random.default_rng(1)
    x = rng.uniform(-2, 2, int(n)).astype(np.float32)
    build = lambda mode, device: _function_runner(mode, device, fn, [x], numpy_fn)  # noqa: E731
    return label, build


def _softmax_case(rows, cols):
    rng = np.random.default_rng(2)
    arrays = [rng.standard_normal((rows, cols)).astype(np.float32), rng.standard_normal(cols).astype(np.float32),
              rng.standard_normal(cols).astype(np.float32)]
    return lambda mode, device: _function_runner(mode, device, W.softmax_layer_norm, arrays)


def cases(quick):
    pick = 1 if quick else 0
    out = []
    for op in OPS:
        out.append(Case("ops", f"ops {op}", ["loom-lazy", "loom-eager", "torch-eager", "numpy"], _ops_runner(op),
                        *SIZES["ops"][pick], unit="op", note="loom-lazy: recording only (no sync), as BENCH.md"))
    for label, n in [("chain 1e3", 1e3), ("chain 1e5", 1e5), ("chain 1e7", 1e7)]:
        name, build = _chain_case(label, n)
        out.append(Case("chain", name, LOOM_AND_TORCH + ["numpy"], build, *SIZES[label][pick]))
    for label, n in [("chain+sum 1e5", 1e5), ("chain+sum 1e7", 1e7)]:
        name, build = _chain_case(label, n, W.chain_sum, W.chain_sum_numpy)
        out.append(Case("chain", name, LOOM_AND_TORCH + ["numpy"], build, *SIZES[label][pick]))
    for rows, cols in [(256, 512), (4096, 1024)]:
        label = f"softmax {rows}x{cols}"
        out.append(Case("softmax", label, LOOM_AND_TORCH, _softmax_case(rows, cols), *SIZES[label][pick]))
    # The losses agree to about 1e-7 (float32 rounding); the parameters are checked too.
    out.append(Case("mlp", "mlp", LOOM_AND_TORCH, _training_runner(W.mlp_model, W.mlp_data), *SIZES["mlp"][pick],
                    rtol=1e-5, atol=1e-6))
    out.append(Case("gpt", "gpt", LOOM_AND_TORCH, _training_runner(W.gpt_model, W.gpt_data), *SIZES["gpt"][pick],
                    rtol=1e-5, atol=1e-6))
    return out


def training_runner(workload):
    """The runner builder of a training workload, for the memory measurement."""
    return {"mlp": _training_runner(W.mlp_model, W.mlp_data), "gpt": _training_runner(W.gpt_model, W.gpt_data)}[workload]


MODEL_AND_DATA = {"mlp": (W.mlp_model, W.mlp_data), "gpt": (W.gpt_model, W.gpt_data)}
