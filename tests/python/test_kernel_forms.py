"""Kernel forms of the renderer that exist for speed, checked for what they compute.

- exp / exp2 map arguments below their underflow point to an exact 0 before the call (glibc's
  vector exp takes a slow path on such lanes): -inf, NaN, +inf, denormal arguments and
  arguments on either side of the underflow point, through fused kernels and softmax with a
  causal mask, against the unfused executor, eager loom and PyTorch.
- Blocked float32 row sums (C++: float over blocks of 256 elements, the blocks in double): rows
  shorter than a block, of whole and partial blocks, against float64 within 32 float32 epsilons
  of the sum of magnitudes, inf and NaN in the last block, softmax and mean over such rows.
- Column reductions (reductions over leading dims of contiguous data: bias and layer-norm
  gradients) walk their channels side by side (fusion/program.h `reduces_columns`): every
  reduction kind and dtype, several stages in one kernel, kept dims before the channels, and
  special values, fused against unfused and PyTorch. The dumped source shows the form is taken.
- Recompute or store (fusion/partition.cpp `initial_materialization`): a value read by several
  kernels is stored once recomputing it would take three full-size loads in each; fewer loads, or
  broadcast ones, stay recomputed.
- Element epilogues: elementwise work over the elements of a row kernel's rows that reads the
  row's results (softmax's exp(x - max) / sum, layer norm's normalize) joins the row kernel when
  the reduced dims are the trailing ones: softmax forward and layer norm forward are one kernel
  each (one together), every float dtype, masked rows, integer rows, several reduced dims;
  column reductions keep their form.
- Loop placement: a pointwise kernel computes each value in the outermost loop it varies in (a
  row's log, power or rsqrt once per row), a column reduction computes what is the same for every
  column before its walk across them, and a bool turned into a number is a select (GCC leaves a
  loop with a bool-to-number conversion scalar). Broadcast operands along every dim, strided and
  in-place destinations, dims of size 1, against the unfused executor, eager loom and PyTorch.
"""

import numpy as np
import pytest

import loom
from _fusion_helpers import dumping_to, outputs_by_thread_count, run_lazy

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(15)


def dumped_sources(tmp_path, program, arrays):
    """The C++ and CUDA sources of the modules the fused executor builds for program."""
    with dumping_to(tmp_path / "dump") as dump:
        run_lazy(program, arrays, "fused")
    cpp = "".join(p.read_text() for p in dump.glob("*.cpp"))
    cu = "".join(p.read_text() for p in dump.glob("*.cu"))
    return cpp, cu


# ---- exp on special arguments ----

def special_arguments(dtype):
    under = -104.0 if dtype == np.float32 else -746.0  # the helpers' thresholds (fusion/targets.cpp)
    values = [-np.inf, np.nan, np.inf, 0.0, -0.0, 1e-40, -1e-40, 5e-324 if dtype == np.float64 else 1e-45,
              under, under - 0.5, under + 0.01, -103.9, -100.0, -87.5, -87.0, -80.0, -20.0, 1.5, 88.0, 89.0,
              709.0, 710.0, -150.0, -149.5, -1074.5, -1075.0, -1076.0, -745.0, -745.2]
    x = np.array(values, dtype=dtype)
    # Long enough for whole vectors and a scalar tail, the special values in every lane.
    return np.concatenate([np.roll(x, k) for k in range(17)])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_exp_of_special_arguments_matches_unfused_eager_and_torch(dtype):
    x = special_arguments(dtype)

    def program(t):
        return t.exp(), t.exp2(), (t * 1.0).exp() + 0.0, t.sigmoid()

    fused = run_lazy(program, [x], "fused")
    unfused = run_lazy(program, [x], "unfused")
    eager = [o.numpy() for o in program(loom.tensor(x))]
    t = torch.tensor(x)
    want = [t.exp().numpy(), t.exp2().numpy(), t.exp().numpy(), t.sigmoid().numpy()]
    for got_all in (fused, unfused, eager):
        for got, ref in zip(got_all, want):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            # Exact zeros and infinities where the true result is one; denormals kept.
            np.testing.assert_array_equal(got == 0, ref == 0)
            np.testing.assert_array_equal(np.isinf(got), np.isinf(ref))
            tiny = np.finfo(dtype).tiny
            np.testing.assert_array_equal((got > 0) & (got < tiny), (ref > 0) & (ref < tiny))
            np.testing.assert_allclose(got, ref, rtol=2e-6 if dtype == np.float32 else 1e-14, atol=0)


def test_underflowing_exp_gives_exact_zeros_and_denormals():
    x = np.array([-np.inf, -104.5, -103.9, -100.0, -90.0], dtype=np.float32)
    (got,) = run_lazy(lambda t: (t.exp(),), [np.tile(x, 13)], "fused")
    got = got[:5]
    assert got[0] == 0 and got[1] == 0 and not np.signbit(got[0])
    assert 0 < got[2] < np.finfo(np.float32).tiny and 0 < got[3] < np.finfo(np.float32).tiny
    np.testing.assert_allclose(got[4], np.exp(np.float64(-90.0)), rtol=1e-6)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_masked_softmax_fused_equals_unfused_and_torch(dtype):
    n = 37
    x = RNG.standard_normal((3, n, n)).astype(dtype)
    mask = np.triu(np.ones((n, n), dtype=bool), 1)
    x[:, mask] = -np.inf
    x[1, 5, :] = -np.inf  # a row masked whole: NaN, as in PyTorch
    x[2, 7, 3] = np.nan

    def program(t):
        return t.softmax(-1), t.log_softmax(-1), (t - t.amax(-1, keepdim=True)).exp().sum(-1)

    fused = run_lazy(program, [x], "fused")
    unfused = run_lazy(program, [x], "unfused")
    t = torch.tensor(x)
    want = [t.softmax(-1).numpy(), t.log_softmax(-1).numpy(), (t - t.amax(-1, keepdim=True)).exp().sum(-1).numpy()]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for got_all in (fused, unfused):
        for got, ref in zip(got_all, want):
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol)


def test_both_renderings_call_the_guarded_exp(tmp_path):
    cpp, cu = dumped_sources(tmp_path, lambda t: (t.exp() * 2,), [np.ones(100, np.float32)])
    for source in (cpp, cu):
        assert "loom_expf(" in source and "LOOM_FN float loom_expf" in source


# ---- blocked float32 row sums ----

@pytest.mark.parametrize("n", [1, 17, 255, 256, 257, 1000, 4099])
def test_blocked_row_sums_are_accurate_and_keep_special_values(tmp_path, n):
    # C++ row kernels sum float32 in float over blocks of 256 elements and add the blocks in
    # double (fusion/render.cpp blocked_sum): a row shorter than a block, a whole block, a
    # partial last block, many blocks; positive and mixed-sign rows; inf and NaN in the last block.
    rng = np.random.default_rng(n)  # not the module's RNG: the later tests keep their data
    x = rng.standard_normal((6, n)).astype(np.float32) * 100
    x[1] = np.abs(x[1]) + 1e-3
    x[2] = np.float32(1.0)  # each block's float sum is exact: so is the row's
    x[3, -1] = np.inf
    x[4, -1] = np.nan
    x[5, :] = 0
    x[5, -1] = 3.0

    def program(t):
        return t.sum(-1), (t * 2).softmax(-1), t.mean(-1, keepdim=True) - t.sum(-1, keepdim=True)

    with dumping_to(tmp_path / "dump") as dump:
        fused = run_lazy(program, [x], "fused")
    cpp = "".join(p.read_text() for p in dump.glob("*.cpp"))
    assert "xb0 += 256" in cpp  # the blocked form was taken
    unfused = run_lazy(program, [x], "unfused")
    exact = x.astype(np.float64).sum(-1)
    bound = 32 * np.finfo(np.float32).eps * np.abs(x.astype(np.float64)).sum(-1) + np.finfo(np.float32).tiny
    for got in (fused[0], unfused[0]):
        finite = np.isfinite(exact)
        assert np.all(np.abs(got[finite] - exact[finite]) <= bound[finite])
        assert got[2] == n and got[5] == 3.0
        assert got[3] == np.inf and np.isnan(got[4])
    np.testing.assert_array_equal(fused[0], unfused[0])
    t = torch.tensor(x.astype(np.float64))  # PyTorch in float64: the exact values, rounded once
    want = [(t * 2).softmax(-1).numpy(), (t.mean(-1, keepdim=True) - t.sum(-1, keepdim=True)).numpy()]
    tols = [np.full((6, 1), 1e-6), 2 * bound[:, None]]
    for got_all in (fused, unfused):
        for got, ref, tol in zip(got_all[1:], want, tols):
            np.testing.assert_array_equal(np.isnan(got), np.isnan(ref))
            finite = np.isfinite(ref)
            assert np.all(np.abs(got[finite] - ref[finite]) <= np.broadcast_to(tol, ref.shape)[finite] + 1e-6 * np.abs(ref[finite]))


# ---- column reductions ----

DTYPES = ["float32", "float64", "float16", "bfloat16", "int32", "int64", "uint8", "bool"]


def column_input(dtype, shape):
    x = RNG.standard_normal(shape) * 3
    if dtype in ("float32", "float64"):
        flat = x.reshape(-1)
        flat[7], flat[100] = np.inf, -np.inf
        flat[201] = np.nan
        flat[305] = 1e-310 if dtype == "float64" else 1e-41  # denormal
    if dtype in ("int32", "int64"):
        return np.round(x).astype(dtype)
    if dtype == "uint8":
        return np.abs(np.round(x)).astype(np.uint8)
    if dtype == "bool":
        return x > 0.5
    return x.astype(np.float32 if dtype == "bfloat16" else dtype)


def column_programs(dtype, dims):
    """(name, function) pairs reducing over `dims` (0, or the two leading dims (0, 1)) of a
    contiguous (rows, ..., channels) input, written once for loom and torch tensors."""
    floating = dtype in ("float32", "float64", "float16", "bfloat16")
    one = dims == 0  # arg, any, all and prod take a single dim
    progs = [("amax", lambda t: t.amax(dims)), ("amin", lambda t: t.amin(dims))]
    if one:
        progs += [("argmax", lambda t: t.argmax(0)), ("argmin", lambda t: t.argmin(0))]
    if dtype == "bool":
        progs.append(("sum", lambda t: t.sum(dims)))
        if one:
            progs += [("any", lambda t: t.any(0)), ("all", lambda t: t.all(0))]
        return progs
    progs += [("sum", lambda t: t.sum(dims)), ("sum_keepdim", lambda t: t.sum(dims, keepdim=True))]
    if one and dtype != "uint8":
        progs.append(("prod", lambda t: (t.remainder(3) - 1).prod(0) if not floating else (t * 0.1 + 1).prod(0)))
    if floating:
        progs += [
            ("mean", lambda t: t.mean(dims)),
            # Several stages and an epilogue in one kernel: a layer-norm gradient's column sums.
            ("var", lambda t: t.float().var(dims)),
            ("two_sums", lambda t: (t.float() * 2 + 1).sum(dims) * t.float().abs().sum(dims)),
            ("exp_sum", lambda t: (t.float() - 3).exp().sum(dims)),
        ]
    return progs


def cast(lib, x, dtype):
    t = lib.tensor(x) if lib is torch else x
    if dtype == "bfloat16":
        t = t.to(lib.bfloat16)
    if dtype == "float16":
        t = t.to(lib.float16)
    return t


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(37, 70), (5, 9, 130)], ids=["2d", "3d"])
def test_column_reductions_fused_equal_unfused_and_torch(dtype, shape):
    x = column_input(dtype, shape)
    progs_dims = 0 if len(shape) == 2 else (0, 1)
    progs = column_programs(dtype, progs_dims)
    names = [n for n, _ in progs]

    def program(t):
        t = cast(loom, t, dtype)
        return [f(t) for _, f in progs]

    fused = run_lazy(program, [x], "fused")
    unfused = run_lazy(program, [x], "unfused")
    tx = cast(torch, x, dtype)
    want = []
    for _, f in progs:
        try:
            r = f(tx)
        except RuntimeError:  # an op torch 1.13 lacks for this dtype on the CPU: its float64 result
            r = f(torch.tensor(x).double()).to(tx.dtype if tx.dtype != torch.bool else torch.int64)
        want.append(r.float().numpy() if r.dtype in (torch.bfloat16, torch.float16) else r.numpy())
    narrow = dtype in ("float16", "bfloat16")
    for which, got_all in (("fused", fused), ("unfused", unfused)):
        for name, got, ref in zip(names, got_all, want):
            got = got.astype(np.float32) if narrow and got.dtype == np.float16 else got
            ref = ref.astype(np.float32) if narrow and ref.dtype == np.float16 else ref
            msg = f"{which} {name} {dtype}"
            assert got.shape == ref.shape, msg
            if name.startswith("arg") or not np.issubdtype(np.asarray(ref).dtype, np.floating):
                np.testing.assert_array_equal(got, ref, err_msg=msg)
            else:
                tol = 2e-2 if narrow else (1e-5 if dtype == "float32" or name in ("var", "two_sums", "exp_sum") else 1e-12)
                # A narrow sum is rounded to its dtype: an ulp of a sum of 37 terms near 30.
                atol = {"bfloat16": 0.5, "float16": 0.1}.get(dtype, tol)
                if dtype == "float32" and name == "two_sums":
                    # A product of two float32 sums errs by a few ulps of its terms' magnitudes, not
                    # of its value: where the first sum cancels, that is far past 1e-5 of the
                    # result with no kernel at fault (random inputs reached 7e-4). Bound it by the
                    # same product over |x| (its largest column), a sum order's worst case at a few ulps.
                    a = np.abs(np.nan_to_num(x.astype(np.float64), nan=0, posinf=0, neginf=0))
                    scale = (2 * a + 1).sum(progs_dims) * a.sum(progs_dims)
                    atol = 8 * np.finfo(np.float32).eps * float(scale.max())
                np.testing.assert_allclose(got, ref, rtol=tol, atol=atol, err_msg=msg)


def test_column_reduction_with_kept_dims_before_the_channels():
    x = RNG.standard_normal((4, 37, 70)).astype(np.float32)
    x[1, 3, 5] = np.nan

    def program(t):
        return t.sum(1), t.amax(1), t.argmin(1), (t * t).mean(1)

    fused = run_lazy(program, [x], "fused")
    unfused = run_lazy(program, [x], "unfused")
    t = torch.tensor(x)
    want = [t.sum(1).numpy(), t.amax(1).numpy(), t.argmin(1).numpy(), (t * t).mean(1).numpy()]
    for got_all in (fused, unfused):
        for got, ref in zip(got_all, want):
            np.testing.assert_allclose(got, ref, rtol=1e-5, atol=1e-5)


def test_column_reductions_take_the_column_form_on_both_targets(tmp_path):
    x = RNG.standard_normal((40, 70)).astype(np.float32)
    cpp, cu = dumped_sources(tmp_path, lambda t: (t.sum(0), t.sum(1)), [x])
    assert "xb += 64" in cpp  # channels side by side in the vector loop
    # CUDA: a thread per column (coalesced), and the row sum still a block per row.
    assert "row = blockIdx.x * (i64)blockDim.x + threadIdx.x" in cu
    assert "for (i64 row = blockIdx.x; row < rows; row += gridDim.x)" in cu


def test_column_results_do_not_depend_on_the_thread_count(tmp_path):
    outs = outputs_by_thread_count(tmp_path, """
        import numpy as np, loom
        x = np.random.default_rng(3).standard_normal((300, 1000)).astype(np.float32)
        t = loom.tensor(x, device="lazy")
        print((t.sum(0) * 1.0).numpy().tobytes().hex())
    """)
    assert len(outs) == 1


# ---- recompute or store ----

def kernel_loads(tmp_path, program, arrays):
    """The node ids each fused kernel loads (from the dumped kernel groups), and the results."""
    with dumping_to(tmp_path / "dump") as dump:
        outs = run_lazy(program, arrays, "fused")
    (groups,) = [p.read_text() for p in dump.glob("*.groups")]
    kernels = [line for line in groups.splitlines() if line.startswith("kernel")]
    return [set(k.split("loads")[1].split()) for k in kernels], outs


def residual_programs(lib, a, b, c, bias):
    """v read by a row and a column reduction (two kernels); the variants differ in what v loads."""
    return {
        "three loads": lambda: (a * b + c, lambda v: (v.amax(1), v.sum(0))),
        "two loads": lambda: (a * b + 1.5, lambda v: (v.amax(1), v.sum(0))),
        "two loads and a broadcast one": lambda: (a * b + bias, lambda v: (v.amax(1), v.sum(0))),
    }


@pytest.mark.parametrize("variant,stored", [("three loads", True), ("two loads", False),
                                            ("two loads and a broadcast one", False)])
def test_value_of_many_loads_read_by_several_kernels_is_stored_once(tmp_path, variant, stored):
    arrays = [RNG.standard_normal((64, 48)).astype(np.float32) for _ in range(3)]
    arrays.append(RNG.standard_normal(48).astype(np.float32))

    def program(a, b, c, bias):
        v, consumers = residual_programs(loom, a, b, c, bias)[variant]()
        return consumers(v)

    loads, fused = kernel_loads(tmp_path, program, arrays)
    # Stored: one kernel computes v from its inputs, the two reductions load v alone.
    computing_v = [k for k in loads if len(k) >= 2]
    assert len(computing_v) == (1 if stored else 2), loads
    unfused = run_lazy(program, arrays, "unfused")
    t = [torch.tensor(x) for x in arrays]
    v, consumers = residual_programs(torch, *t)[variant]()
    want = [r.numpy() for r in consumers(v)]
    for got in (fused, unfused):
        for g, w in zip(got, want):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)


# ---- loop placement ----

def broadcast_program(lib, x, row, col, labels):
    """Values that vary along some dims of a (4, 6, 37) domain only: per (batch, row), per
    column, per batch; a one-hot compare of int64 labels; math calls on each."""
    t = x.transpose(0, 1)  # a strided (non-linear) domain
    r = row.abs() + 0.5
    a = (t - r.log()) * (r.rsqrt() ** 3) + col.exp()
    b = (t * 0.25).exp() / (r + col.abs())
    onehot = (labels[:, None, None] == lib.arange(37, device=labels.device)[None, None, :] % 4).float()
    c = onehot * row.sigmoid() - (labels[:, None, None] > 1).to(lib.int64) * 2
    return a, b, c, (x[:, :1, :] * row.transpose(0, 1)[:, :1, :]).tanh()


def broadcast_arrays(dtype):
    x = RNG.standard_normal((6, 4, 37)).astype(dtype)
    row = RNG.standard_normal((4, 6, 1)).astype(dtype)
    col = RNG.standard_normal(37).astype(dtype)
    labels = RNG.integers(0, 4, 4).astype(np.int64)
    return [x, row, col, labels]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_values_in_outer_loops_equal_unfused_eager_and_torch(dtype):
    arrays = broadcast_arrays(dtype)
    fused = run_lazy(lambda *t: broadcast_program(loom, *t), arrays, "fused")
    unfused = run_lazy(lambda *t: broadcast_program(loom, *t), arrays, "unfused")
    eager = [o.numpy() for o in broadcast_program(loom, *[loom.tensor(a) for a in arrays])]
    want = [o.numpy() for o in broadcast_program(torch, *[torch.tensor(a) for a in arrays])]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for which, got_all in (("fused", fused), ("unfused", unfused), ("eager", eager)):
        for i, (got, ref) in enumerate(zip(got_all, want)):
            assert got.shape == ref.shape and got.dtype == ref.dtype, (which, i)
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=f"{which} output {i}")


def test_row_values_are_computed_once_per_row(tmp_path):
    arrays = broadcast_arrays(np.float32)
    loom.clear_plan_cache()  # the program ran above: lower it again, so that it is dumped
    cpp, _ = dumped_sources(tmp_path, lambda *t: broadcast_program(loom, *t), arrays)
    # The per-row log is written before the innermost loop (one indent level less than the loads
    # of the element), and a bool becomes a number through a select.
    lines = cpp.splitlines()
    log_lines = [ln for ln in lines if "logf(" in ln and "const float" in ln]
    assert log_lines, "no log in the dump"
    depth = lambda ln: len(ln) - len(ln.lstrip())  # noqa: E731
    innermost = max(depth(ln) for ln in lines if "#pragma omp simd" in ln)
    assert all(depth(ln) <= innermost for ln in log_lines), log_lines
    assert "? (float)1 : (float)0" in cpp


def test_in_place_update_with_row_operands():
    x = RNG.standard_normal((5, 1, 33)).astype(np.float32)
    row = RNG.standard_normal((5, 1, 1)).astype(np.float32)

    def run(executor):
        loom._C._set_executor(executor)
        try:
            xt = loom.tensor(x, device="lazy")
            xt.mul_(loom.tensor(row, device="lazy").exp())
            xt.add_(loom.tensor(np.abs(row), device="lazy").log1p())
            return xt.numpy()
        finally:
            loom._C._set_executor("compiled")

    want = (torch.tensor(x) * torch.tensor(row).exp() + torch.tensor(np.abs(row)).log1p()).numpy()
    for executor in ("fused", "unfused"):
        np.testing.assert_allclose(run(executor), want, rtol=1e-6, atol=1e-6, err_msg=executor)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_column_reduction_with_row_operands_takes_the_column_form(tmp_path, dtype):
    """A layer norm's weight gradient: sum over rows of g * (x - mean) * rstd, with rstd and mean
    one value per row, for every channel."""
    g = RNG.standard_normal((96, 70)).astype(dtype)
    x = RNG.standard_normal((96, 70)).astype(dtype)
    var = (RNG.random((96, 1)) + 0.1).astype(dtype)
    mean = RNG.standard_normal((96, 1)).astype(dtype)

    def program(lib, g, x, var, mean):
        rstd = (var / 2.0 + 1e-5).rsqrt()
        return (g * (x - mean) * rstd).sum(0), (g * rstd.exp()).amax(0)

    cpp, cu = dumped_sources(tmp_path, lambda *t: program(loom, *t), [g, x, var, mean])
    assert "xb += 64" in cpp  # channels side by side
    assert "row = blockIdx.x * (i64)blockDim.x + threadIdx.x" in cu  # CUDA: a thread per channel
    fused = run_lazy(lambda *t: program(loom, *t), [g, x, var, mean], "fused")
    unfused = run_lazy(lambda *t: program(loom, *t), [g, x, var, mean], "unfused")
    want = [o.numpy() for o in program(torch, *[torch.tensor(a) for a in (g, x, var, mean)])]
    tol = 1e-5 if dtype == np.float32 else 1e-12
    for which, got_all in (("fused", fused), ("unfused", unfused)):
        for got, ref in zip(got_all, want):
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=which)


# ---- element epilogues ----

def row_programs(lib, dtype):
    F = lib.nn.functional
    floating = dtype in ("float32", "float64", "float16", "bfloat16")
    if not floating:
        return {
            "centered": lambda t: t - t.amax(-1, keepdim=True),
            "scaled": lambda t: t * t.sum(-1, keepdim=True) + t.amin(-1, keepdim=True),
        }
    return {
        "softmax": lambda t: F.softmax(t, -1),
        "log_softmax": lambda t: F.log_softmax(t, -1),
        "layer_norm": lambda t: F.layer_norm(t, (t.shape[-1],)),
        "rms": lambda t: t * (t * t).mean(-1, keepdim=True).add(1e-5).rsqrt(),
        "two_dims": lambda t: t / t.abs().sum((-2, -1), keepdim=True),
    }


def row_input(dtype, shape):
    x = RNG.standard_normal(shape) * 2
    if dtype in ("float32", "float64"):
        x[0, 1, :] = -np.inf  # a row masked whole
        x[1, 2, ::3] = -np.inf  # a causal-style mask
        x[2, 0, 4] = np.nan
        x[2, 3, 5] = 1e-310 if dtype == "float64" else 1e-41
    if dtype in ("int32", "int64"):
        return np.round(x * 10).astype(dtype)
    return x.astype(np.float32 if dtype in ("float16", "bfloat16") else dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "bfloat16", "int32", "int64"])
def test_row_epilogues_fused_equal_unfused_and_torch(dtype):
    x = row_input(dtype, (3, 5, 70))
    names = list(row_programs(loom, dtype))

    def program(t):
        t = cast(loom, t, dtype)
        return [f(t) for f in row_programs(loom, dtype).values()]

    fused = run_lazy(program, [x], "fused")
    unfused = run_lazy(program, [x], "unfused")
    tx = cast(torch, x, dtype)
    want = []
    for f in row_programs(torch, dtype).values():
        r = f(tx) if dtype not in ("float16", "bfloat16") else f(tx.float()).to(tx.dtype)
        want.append(r.float().numpy() if r.dtype in (torch.bfloat16, torch.float16) else r.numpy())
    narrow = dtype in ("float16", "bfloat16")
    tol = {"float16": 1e-2, "bfloat16": 5e-2, "float32": 1e-5, "float64": 1e-12}.get(dtype, 0)
    for which, got_all in (("fused", fused), ("unfused", unfused)):
        for name, got, ref in zip(names, got_all, want):
            got = got.astype(np.float32) if narrow else got
            msg = f"{which} {name} {dtype}"
            assert got.shape == ref.shape, msg
            np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, err_msg=msg)


def kernel_count(tmp_path, program, arrays):
    loads, outs = kernel_loads(tmp_path, program, arrays)
    return len(loads), outs


@pytest.mark.parametrize("name,kernels", [("softmax", 1), ("layer_norm", 1), ("both", 1), ("rms", 1)])
def test_row_forward_is_one_kernel(tmp_path, name, kernels):
    x = RNG.standard_normal((64, 96)).astype(np.float32)
    w = RNG.standard_normal(96).astype(np.float32)

    def program(lib):
        F = lib.nn.functional

        def run(t, w):
            progs = {
                "softmax": lambda: [F.softmax(t, -1)],
                "layer_norm": lambda: [F.layer_norm(t, (96,), w, w)],
                "both": lambda: [F.softmax(t, -1), F.layer_norm(t, (96,), w, w)],
                "rms": lambda: [t * (t * t).mean(-1, keepdim=True).add(1e-5).rsqrt() * w],
            }
            return progs[name]()
        return run

    count, got = kernel_count(tmp_path, program(loom), [x, w])
    assert count == kernels
    want = [r.numpy() for r in program(torch)(torch.tensor(x), torch.tensor(w))]
    for g, r in zip(got, want):
        np.testing.assert_allclose(g, r, rtol=1e-5, atol=1e-5)


def test_column_reductions_keep_their_form_beside_elementwise_work(tmp_path):
    x = RNG.standard_normal((40, 70)).astype(np.float32)
    program = lambda t: (t - t.mean(0), t.sum(0))  # noqa: E731
    cpp, cu = dumped_sources(tmp_path, program, [x])
    assert "xb += 64" in cpp
    (got_a, got_b) = run_lazy(program, [x], "fused")
    t = torch.tensor(x)
    np.testing.assert_allclose(got_a, (t - t.mean(0)).numpy(), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_b, t.sum(0).numpy(), rtol=1e-5, atol=1e-5)


def test_a_full_reduction_leaves_its_elementwise_consumer_to_all_threads(tmp_path):
    x = RNG.standard_normal(5000).astype(np.float32)
    count, got = kernel_count(tmp_path, lambda t: (t - t.mean(),), [x])
    assert count == 2  # the serial row of the sum, then a pointwise kernel threads split
    np.testing.assert_allclose(got[0], x - x.astype(np.float64).mean(), rtol=1e-5, atol=1e-5)


def test_both_renderings_walk_the_row_again_for_the_epilogue(tmp_path):
    x = RNG.standard_normal((8, 300)).astype(np.float32)
    cpp, cu = dumped_sources(tmp_path, lambda t: (t.softmax(-1) * 3.0,), [x])
    assert cu.count("kk < inner; kk += blockDim.x") == 3  # max, sum of exp, the epilogue
    assert cpp.count("#pragma omp simd") == 3


def test_a_kernel_takes_at_most_sixteen_reductions():
    """Forty column sums of one shape (a recurrent model's per-step bias gradients) run in kernels
    of at most 16 reductions (fusion/partition.cpp kMaxKernelStages): the compiler's time grows
    faster than a kernel's size. The sum of their results equals the eager one."""
    rng = np.random.default_rng(4)
    parts = [rng.standard_normal((8, 33)).astype(np.float32) for _ in range(40)]
    want = sum(p.sum(0, dtype=np.float64) for p in parts)
    lazy = [loom.tensor(p, device="lazy") for p in parts]
    loom.sync()
    loom.metrics_reset()
    total = lazy[0].sum(0)
    for t in lazy[1:]:
        total = total + t.sum(0)
    got = total.numpy()
    assert loom.metrics()["kernel_launches"] >= 3  # 40 reductions: three kernels of at most 16
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
