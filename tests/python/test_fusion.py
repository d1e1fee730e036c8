"""Fusion, run-time compilation and cached graph replay (the compiled executor).

Structure is checked through loom.metrics(): how many kernels a step launches, that a second
run compiles nothing and replays one cached graph, that a new batch size compiles no kernel and
that a new process loads modules from the disk cache. Numerics: fused == unfused == eager.
"""

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import loom

RNG = np.random.default_rng(0)


def launches_of(step, *inputs):
    """Kernel launches of one run of step on materialized lazy inputs (after a warm-up run)."""
    args = [loom.tensor(a, device="lazy") for a in inputs]
    step(*args).tolist()  # warm-up: compile and cache
    loom.metrics_reset()
    out = step(*args)
    loom.sync()
    m = loom.metrics()
    out.tolist()
    return m


def chain(x):
    y = x
    for i in range(5):
        y = ((y * 1.01 + 0.5).exp() * 0.1).tanh()  # 4 ops per round: 20 elementwise ops
    return y


def layer_norm(x, w, b, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    var = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / (var + eps).sqrt() * w + b


def test_elementwise_chain_is_one_kernel():
    m = launches_of(chain, RNG.standard_normal(1000).astype(np.float32))
    assert m["kernel_launches"] == 1
    assert m["graph_replays"] == 1 and m["traces"] == 1


@pytest.mark.parametrize("name", ["softmax", "log_softmax", "layer_norm"])
def test_normalizations_take_at_most_two_kernels(name):
    x = RNG.standard_normal((8, 33)).astype(np.float32)
    if name == "layer_norm":
        w, b = RNG.standard_normal(33).astype(np.float32), RNG.standard_normal(33).astype(np.float32)
        m = launches_of(layer_norm, x, w, b)
    else:
        m = launches_of(lambda t: getattr(t, name)(-1), x)
    assert m["kernel_launches"] <= 2


def test_second_run_compiles_nothing_and_replays_the_cached_graph():
    x = loom.tensor(RNG.standard_normal((4, 16)).astype(np.float32), device="lazy")
    (x.softmax(-1) * 3).sum().item()
    before = loom.metrics()
    (x.softmax(-1) * 3).sum().item()
    after = loom.metrics()
    assert after["kernels_compiled"] == before["kernels_compiled"]
    assert after["graph_cache_hits"] == before["graph_cache_hits"] + 1
    assert after["graph_replays"] == before["graph_replays"] + 1
    assert after["graph_cache_misses"] == before["graph_cache_misses"]


def test_new_batch_size_compiles_no_kernel():
    def step(batch):
        x = loom.tensor(RNG.standard_normal((batch, 24)).astype(np.float32), device="lazy")
        w = loom.tensor(RNG.standard_normal(24).astype(np.float32), device="lazy")
        return (layer_norm(x, w, w).relu() * 2).sum(-1).tolist()

    step(8)
    before = loom.metrics()
    step(13)
    after = loom.metrics()
    assert after["graph_cache_misses"] == before["graph_cache_misses"] + 1  # a new graph...
    assert after["kernels_compiled"] == before["kernels_compiled"]  # ...and no new kernel


PROGRAM = textwrap.dedent("""
    import loom, numpy as np, json
    x = loom.tensor(np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8), device="lazy")
    loom.metrics_reset()
    y = (x.softmax(-1) * x.sigmoid()).sum(0)
    print(json.dumps({"values": y.tolist(), "metrics": loom.metrics()}))
""")


def run_program(cache_dir, extra_env=None):
    env = dict(os.environ, LOOM_CACHE_DIR=str(cache_dir), **(extra_env or {}))
    done = subprocess.run([sys.executable, "-c", PROGRAM], capture_output=True, text=True, env=env, timeout=120)
    return done


def test_new_process_loads_modules_from_disk(tmp_path):
    import json

    first = json.loads(run_program(tmp_path).stdout)
    second = json.loads(run_program(tmp_path).stdout)
    assert first["metrics"]["kernels_compiled"] > 0
    assert second["metrics"]["kernels_compiled"] == 0
    assert second["metrics"]["modules_loaded_from_disk"] >= 1
    np.testing.assert_allclose(first["values"], second["values"])


def test_corrupt_cache_entry_is_rebuilt(tmp_path):
    import json

    first = json.loads(run_program(tmp_path).stdout)
    for so in (tmp_path / "cpu").glob("*.so"):
        so.write_bytes(so.read_bytes()[:100])  # truncated
    again = run_program(tmp_path)
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    assert result["metrics"]["kernels_compiled"] > 0  # rebuilt, not loaded
    np.testing.assert_allclose(first["values"], result["values"])


def test_compile_failure_is_reported_and_the_cache_stays_consistent(tmp_path):
    failing = tmp_path / "failing-cxx"
    failing.write_text("#!/bin/sh\nif [ \"$1\" = --version ]; then echo fake 1.0; exit 0; fi\n"
                       "echo 'error: the compiler refused' >&2\nexit 1\n")
    failing.chmod(0o755)
    broken = run_program(tmp_path, {"LOOM_CXX": str(failing)})
    assert broken.returncode != 0
    assert "failed to compile" in broken.stderr and "the compiler refused" in broken.stderr
    assert "source saved to" in broken.stderr
    fixed = run_program(tmp_path)  # the same program, a working compiler: nothing stale is reused
    assert fixed.returncode == 0, fixed.stderr


def test_missing_compiler_gives_a_clear_message(tmp_path):
    broken = run_program(tmp_path, {"LOOM_CXX": "/nonexistent/c++"})
    assert broken.returncode != 0
    assert "needs a C++ compiler" in broken.stderr and "LOOM_CXX" in broken.stderr


def test_dump_dir_has_ir_groups_and_both_sources(tmp_path):
    dump = tmp_path / "dump"
    done = run_program(tmp_path, {"LOOM_DUMP_DIR": str(dump)})
    assert done.returncode == 0, done.stderr
    for ext in ("ir", "groups", "cpp", "cu"):
        assert list(dump.glob(f"*.{ext}")), ext
    assert "extern \"C\" __global__" in next(dump.glob("*.cu")).read_text()


# ---- numerics: fused == unfused == interpreter == eager ----

def programs():
    def mlp_like(x, w, b):
        h = (x @ w + b).relu()
        return (h.log_softmax(-1) * -1).mean(), h.amax(0), h.argmax(-1)

    def broadcasting(x, w, b):
        return (x.T[1:, ::2] * b[:1].unsqueeze(0)).sigmoid().sum(1), (x - x.mean(0)).abs().max(), x.clamp(-0.5, 0.5)

    def reductions(x, w, b):
        return x.var(1), x.std(0), x.logsumexp(-1), x.norm(), x.prod(1), x.amin(0), (x > 0).all(1), x.cumsum(1)

    def views(x, w, b):
        y = x.reshape(4, 2, 5).transpose(0, 2)
        return (y * 2).flatten(), y.sum((0, 2)), x.view(40)[3:30:3].exp()

    return [mlp_like, broadcasting, reductions, views]


@pytest.mark.parametrize("program", programs(), ids=lambda p: p.__name__)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_fused_equals_unfused_equals_eager(program, dtype):
    x = RNG.standard_normal((8, 5)).astype(dtype)
    w = RNG.standard_normal((5, 5)).astype(dtype)
    b = RNG.standard_normal(5).astype(dtype)
    results = {}
    try:
        for executor in ["fused", "unfused", "interpreter"]:
            loom._C._set_executor(executor)
            args = [loom.tensor(a, device="lazy") for a in (x, w, b)]
            results[executor] = [o.numpy() for o in program(*args)]
    finally:
        loom._C._set_executor("compiled")
    results["eager"] = [o.numpy() for o in program(*(loom.tensor(a) for a in (x, w, b)))]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for name in ["fused", "unfused", "interpreter"]:
        for got, want in zip(results[name], results["eager"]):
            assert got.dtype == want.dtype and got.shape == want.shape
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=name)


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "int32", "int64", "uint8", "bool"])
def test_narrow_and_integer_dtypes_fuse_like_eager(dtype):
    a = (RNG.standard_normal((6, 7)) * 4).astype(np.float32)

    def program(t):
        if dtype == "bool":
            return ((t > 0) & ~(t > 2)).sum(1), (t > 1).any(0)
        return (t * 2 + 1).abs().amax(1), (t - 1).sum(0), t.maximum(t.flip(1))

    cast = getattr(loom, dtype)
    eager = [o.float().numpy() for o in program(loom.tensor(a).to(cast))]
    lazy = [o.float().numpy() for o in program(loom.tensor(a, device="lazy").to(cast))]
    for got, want in zip(lazy, eager):
        np.testing.assert_allclose(got, want, rtol=1e-2 if dtype in ("float16", "bfloat16") else 0)


# ---- every op through the compiler: fused == unfused == interpreter == eager ----
# One trace per (dtype, layout) holds every op, so the whole check compiles a handful of modules.

UNARY_FLOAT = ["abs", "neg", "exp", "exp2", "log", "log2", "log1p", "expm1", "sqrt", "rsqrt", "sin", "cos", "tan",
               "tanh", "sigmoid", "relu", "silu", "erf", "floor", "ceil", "round", "sign", "reciprocal", "square",
               "isnan", "isinf", "logical_not"]
UNARY_INT = ["abs", "neg", "sign", "square", "relu", "logical_not", "floor", "ceil", "round", "isnan", "bitwise_not"]
BINARY_FLOAT = ["add", "sub", "mul", "div", "floor_divide", "remainder", "pow", "maximum", "minimum", "eq", "ne", "lt",
                "le", "gt", "ge", "logical_and", "logical_or", "logical_xor"]
BINARY_INT = ["add", "sub", "mul", "div", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "logical_and",
              "logical_or", "bitwise_and", "bitwise_or", "bitwise_xor"]


def every_op(m, x, y, floating):
    """Every elementwise and reduction op of the library applied to x (and y): a dict of results."""
    out = {}
    safe = x.abs() + 0.5 if floating else x
    for name in UNARY_FLOAT if floating else UNARY_INT:
        arg = safe if name in ("log", "log2", "sqrt", "rsqrt", "reciprocal", "log1p") else x
        out[name] = getattr(m, name)(arg)
    for name in BINARY_FLOAT if floating else BINARY_INT:
        other = safe if name in ("div", "floor_divide", "remainder", "pow") else y
        base = safe if name == "pow" else x
        out[name] = getattr(m, name)(base, other)
        out[name + "_scalar"] = getattr(m, name)(base, 2)
    out["where"] = m.where(x > 0, x, y)
    out["clamp"] = x.clamp(-1, 1)
    out["pow_scalar_base"] = 2 ** (x if floating else x.clamp(0, 5))
    if floating:
        out["gelu"] = m.gelu(x)
        out["gelu_tanh"] = m.gelu(x, approximate="tanh")
        out["softplus"] = m.softplus(x, beta=2, threshold=3)
        out["nan_to_num"] = m.nan_to_num(x / (x - x))
        out["lerp"] = m.lerp(x, y, 0.3)
        out["addcmul"] = m.addcmul(x, x, y, value=0.5)
        for dim in (0, 1, (0, 1)):
            out[f"mean{dim}"] = x.mean(dim)
            out[f"var{dim}"] = x.var(dim)
            out[f"std{dim}"] = x.std(dim)
            out[f"logsumexp{dim}"] = x.logsumexp(dim)
            out[f"norm{dim}"] = x.norm(dim=dim)
        out["softmax"] = x.softmax(-1)
        out["log_softmax"] = x.log_softmax(0)
    for dim in (0, 1, (0, 1)):
        out[f"sum{dim}"] = x.sum(dim)
        out[f"amax{dim}"] = x.amax(dim)
        out[f"amin{dim}"] = x.amin(dim, keepdim=True)
        out[f"all{dim}"] = (x > 0).all(dim)
        out[f"any{dim}"] = (x > 1).any(dim)
    out["prod"] = (x * 0.1 if floating else x.clamp(-2, 2)).prod(1)
    out["argmax"] = x.argmax(1)
    out["argmin"] = x.argmin(0)
    out["argmax_all"] = x.argmax()
    out["max_dim"] = x.max(1).values
    return out


LAYOUTS = {
    "contiguous": lambda m, a: m.tensor(a),
    "transposed": lambda m, a: m.tensor(np.ascontiguousarray(a.T)).T,
    "sliced": lambda m, a: m.tensor(np.repeat(a, 2, axis=1))[:, ::2],
    "broadcast": lambda m, a: m.tensor(a[:1]).expand(*a.shape),
}


def run_every_op(executor, dtype, layout):
    rng = np.random.default_rng(1)
    a = (rng.standard_normal((6, 8)) * 3).astype(dtype)
    b = (rng.standard_normal((6, 8)) * 3).astype(dtype)
    floating = np.dtype(dtype).kind == "f"
    if not floating:
        a, b = np.round(a).astype(dtype), np.round(b).astype(dtype)
    if executor == "eager":
        x, y = LAYOUTS[layout](loom, a), loom.tensor(b)
    else:
        loom._C._set_executor(executor)
        if layout == "transposed":  # a strided lazy input (not a copy made dense by .to())
            x = loom.tensor(np.ascontiguousarray(a.T), device="lazy").T
        else:
            x = LAYOUTS[layout](loom, a).to("lazy")
        y = loom.tensor(b, device="lazy")
    try:
        outs = every_op(loom, x, y, floating)
        loom.sync()
        return {k: v.double().numpy() if v.dtype in (loom.float32, loom.float64) else v.numpy() for k, v in outs.items()}
    finally:
        loom._C._set_executor("compiled")


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
def test_every_op_compiled_equals_eager(dtype, layout):
    eager = run_every_op("eager", dtype, layout)
    tol = {np.float32: 2e-5, np.float64: 1e-12}.get(dtype, 0)
    for executor in ["fused", "unfused"]:
        got = run_every_op(executor, dtype, layout)
        assert got.keys() == eager.keys()
        for name in eager:
            assert got[name].dtype == eager[name].dtype, (executor, name)
            np.testing.assert_allclose(got[name], eager[name], rtol=tol, atol=tol, equal_nan=True,
                                       err_msg=f"{executor} {name}")


# Library ops (matrix products, gathers) read views of computed values in place: a transposed
# or sliced operand costs no copy kernel, and the result equals eager mode's. Each program is
# one generated kernel (its elementwise ops fuse) and one library call.
VIEW_OPERANDS = {
    "matmul_transposed": lambda a, b: a.exp() @ (b * 2).T,
    "matmul_sliced": lambda a, b: a.exp()[1:] @ (b * 2).T[:, 1:3],
    "matmul_permuted_3d": lambda a, b: (a * 3).reshape(2, 3, 4).permute(0, 2, 1) @ (b + 1).reshape(2, 3, 4),
    # a batched linear's weight gradient: dims merged by a reshape, then transposed
    "matmul_merged_then_transposed": lambda a, b: (a * 3).reshape(2, 3, 4).reshape(6, 4).T @ (b + 1),
    "index_select_of_transpose": lambda a, b: (a + b).T.index_select(0, loom.tensor([3, 0, 3], device=a.device)),
    "gather_of_slice": lambda a, b: (a * b)[:, ::2].gather(1, loom.tensor([[1, 0]] * 6, device=a.device)),
}


@pytest.mark.parametrize("name", list(VIEW_OPERANDS))
def test_library_ops_read_views_of_computed_values_in_place(name):
    fn = VIEW_OPERANDS[name]
    a = RNG.standard_normal((6, 4)).astype(np.float32)
    b = RNG.standard_normal((6, 4)).astype(np.float32)
    want = fn(loom.tensor(a), loom.tensor(b)).numpy()
    assert launches_of(fn, a, b)["kernel_launches"] == 2
    got = fn(loom.tensor(a, device="lazy"), loom.tensor(b, device="lazy")).numpy()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


THREADED_PROGRAM = textwrap.dedent("""
    import loom, numpy as np, sys
    rng = np.random.default_rng(5)
    x = loom.tensor(rng.standard_normal((700, 300)).astype(np.float32), device="lazy")
    w = loom.tensor(rng.standard_normal(300).astype(np.float32), device="lazy")
    big = ((x * 1.5).tanh() + w).exp()                     # pointwise, split over rows
    rows = x.softmax(-1) + x.log_softmax(-1)               # row kernels, split over rows
    flat = (x.reshape(-1) * 0.5).sigmoid()                 # linear pointwise, split over elements
    np.savez(sys.argv[1], big=big.numpy(), rows=rows.numpy(), flat=flat.numpy())
""")


def test_threads_split_kernels_without_changing_results(tmp_path):
    """Kernels large enough to be split across threads give the bits one thread gives."""
    outs = {}
    for threads in ("1", "4"):
        path = tmp_path / f"out{threads}.npz"
        env = dict(os.environ, LOOM_CACHE_DIR=str(tmp_path / "cache"), LOOM_NUM_THREADS=threads)
        done = subprocess.run([sys.executable, "-c", THREADED_PROGRAM, str(path)], capture_output=True, text=True,
                              env=env, timeout=300)
        assert done.returncode == 0, done.stderr
        outs[threads] = np.load(path)
    for name in ("big", "rows", "flat"):
        np.testing.assert_array_equal(outs["1"][name], outs["4"][name], err_msg=name)


@pytest.mark.parametrize("threads", ["1", "3"])
def test_get_num_threads_reports_loom_num_threads(threads):
    env = dict(os.environ, LOOM_NUM_THREADS=threads)
    done = subprocess.run([sys.executable, "-c", "import loom; print(loom.get_num_threads())"], capture_output=True,
                          text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == threads
