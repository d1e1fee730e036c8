"""The targets of BENCH.md, one row each: what is measured, the goal, and how a run's results
decide it. Every target is reported as met, not met, or not measured (with the reason), with the
figure that decided it. A loom row a target needs that errored or computed a wrong answer makes
the target NOT met (a failure is not an absence); a missing or failed baseline leaves it not
measured. CPU figures say how many threads each library ran on: loom uses every core
(LOOM_NUM_THREADS), PyTorch keeps its default and numpy's elementwise ops run on one.
"""

import ddp

MET, NOT_MET = "met", "NOT met"
FAILED = ("error", "wrong")


class _LoomFailed(Exception):
    """A loom row a target needs did not run correctly; the message says which and why."""


def _row(results, case, mode):
    """The ok row of `mode` on `case`, or None; raises _LoomFailed for a failed loom row."""
    for r in results["rows"]:
        if r["case"] == case and r["mode"] == mode:
            if r["status"] == "ok":
                return r
            if r["status"] in FAILED and mode.startswith("loom"):
                raise _LoomFailed(f"{case}, {mode}: {r['status']}: {r['message']}")
    return None


def _cpu_threads(results, *others):
    """How many threads each library ran on, for a CPU figure: loom against `others`."""
    machine = results["machine"]
    counts = {"torch": machine.get("torch_threads"), "numpy": 1}
    return f"loom on {machine.get('loom_threads')} threads, " + ", ".join(f"{o} on {counts[o]}" for o in others)


def failures(results):
    """Every failure of the run: rows of any mode that errored or disagreed with the reference,
    cold starts or a memory measurement that raised. The harness exits non-zero when there is one."""
    out = [f"{r['case']}, {r['mode']}: {r['status']}: {r['message']}" for r in results["rows"]
           if r["status"] in FAILED]
    for workload, cold in (results.get("cold") or {}).items():
        if "error" in cold:
            out.append(f"cold {workload}: error: {cold['error']}")
    if _memory_failed(results):
        out.append(f"memory: error: {results['memory']['error']}")
    for r in (results.get("ddp") or {}).get("rows", []):
        if r["status"] in FAILED:
            out.append(f"ddp {r['workload']}, {r['framework']} on {r['world']} rank(s): {r['status']}: {r['message']}")
    return out


def _memory_failed(results):
    # measure_memory reports an unavailable loom-lazy as an error too; that is no failure.
    mem = results.get("memory")
    return bool(mem) and "error" in mem and not any(
        r["mode"] == "loom-lazy" and r["status"] == "unavailable" for r in results["rows"])


def _ns(seconds):
    return f"{seconds * 1e9:.0f} ns"


def _ops_record(results):
    rows = {op: _row(results, f"ops {op}", "loom-lazy") for op in ("add", "exp", "sum")}
    if not all(rows.values()):
        return None
    figure = ", ".join(f"{op} {_ns(r['median_s'])}" for op, r in rows.items())
    return figure, all(r["median_s"] <= 150e-9 for r in rows.values())


def _speedup(case, device, goals):
    """loom-lazy's speed-up over each baseline mode, against a minimum for each."""
    def decide(results):
        if results["device"] != device:
            return None
        lazy = _row(results, case, "loom-lazy")
        if lazy is None:
            return None
        parts, ok = [], True
        for baseline, goal in goals.items():
            ratio = lazy["vs"].get(baseline)
            if ratio is None:
                return None
            parts.append(f"{ratio:.2f}x {baseline}")
            ok = ok and ratio >= goal
        if device == "cpu":
            parts.append(_cpu_threads(results, "torch"))
        return ", ".join(parts), ok
    return decide


def _compiled_speedup(case, goal):
    """loom-compile's speed-up over torch-eager on the CPU."""
    def decide(results):
        if results["device"] != "cpu":
            return None
        row = _row(results, case, "loom-compile")
        if row is None or "torch-eager" not in row["vs"]:
            return None
        ratio = row["vs"]["torch-eager"]
        return f"{ratio:.2f}x torch-eager, {_cpu_threads(results, 'torch')}", ratio >= goal
    return decide


def _compiled_host(results):
    if results["device"] != "cpu":
        return None
    row = _row(results, "mlp", "loom-compile")
    if row is None or row.get("compiled_host_s") is None:
        return None
    host = row["compiled_host_s"]
    return f"{host * 1e6:.1f} us of a {row['compiled_call_s'] * 1e6:.0f} us call", host <= 15e-6


def _chain_bandwidth(results):
    if results["device"] != "cuda" or results.get("copy_1e7_s") is None:
        return None
    lazy = _row(results, "chain 1e7", "loom-lazy")
    if lazy is None:
        return None
    fraction = results["copy_1e7_s"] / lazy["median_s"]  # both move 4e7 bytes in and 4e7 out
    return f"{fraction:.0%} of a device-to-device copy", fraction >= 0.85


def _chain_cpu(results):
    if results["device"] != "cpu":
        return None
    lazy, numpy = _row(results, "chain 1e7", "loom-lazy"), _row(results, "chain 1e7", "numpy")
    if lazy is None or numpy is None:
        return None
    ratio = numpy["median_s"] / lazy["median_s"]
    return f"{ratio:.2f}x numpy, {_cpu_threads(results, 'numpy')}", ratio >= 3


def _steady_state(results):
    lazy = [r for r in results["rows"] if r["mode"] == "loom-lazy" and r["unit"] == "step"]
    for r in lazy:
        if r["status"] in FAILED:
            raise _LoomFailed(f"{r['case']}, loom-lazy: {r['status']}: {r['message']}")
    rows = [r for r in lazy if r["status"] == "ok"]
    if not rows:
        return None
    compiled = sum(r["compiled_after_warmup"] for r in rows)
    lowered = sum(r["graphs_lowered_after_warmup"] for r in rows)
    return f"{compiled} kernels compiled, {lowered} graphs lowered after warm-up ({len(rows)} cases)", \
        compiled == 0 and lowered == 0


def _cold(results):
    """First step with an empty kernel cache (mlp at most 0.3 s, gpt 1 s) and from a warm disk
    cache in a new process (each at most 100 ms)."""
    if results["device"] != "cpu":
        return None
    limits = {"mlp": 0.3, "gpt": 1.0}
    parts, ok = [], True
    for workload, limit in limits.items():
        cold = results.get("cold", {}).get(workload)
        if not cold:
            return None
        if "error" in cold:
            raise _LoomFailed(f"cold {workload}: error: {cold['error']}")
        empty, warm = cold["empty_cache"]["first_step_s"], cold["warm_disk_cache"]["first_step_s"]
        parts.append(f"{workload}: empty cache {empty:.2f} s, warm disk cache {warm * 1e3:.0f} ms")
        ok = ok and empty <= limit and warm <= 0.1
    return "; ".join(parts), ok


def _fusion_never_loses(results):
    """On every workload loom-lazy is no slower than loom-lazy-nofuse (same executor, no fusion)."""
    slower, compared = [], 0
    for r in results["rows"]:
        if r["mode"] != "loom-lazy" or r["status"] != "ok" or r["unit"] != "step":
            continue
        nofuse = _row(results, r["case"], "loom-lazy-nofuse")
        if nofuse is None:
            continue
        compared += 1
        if r["median_s"] > nofuse["median_s"]:
            slower.append(f"{r['case']} {nofuse['median_s'] / r['median_s']:.2f}x")
    if not compared:
        return None
    return (f"slower than unfused: {', '.join(slower)}" if slower else f"no slower on {compared} cases"), not slower


def _memory(results):
    mem = results.get("memory")
    if _memory_failed(results):
        raise _LoomFailed(f"memory: error: {mem['error']}")
    if not mem or "error" in mem or not mem.get("arena_live_peak_bytes"):
        return None
    ratio = mem["arena_bytes"] / mem["arena_live_peak_bytes"]
    return (f"arena {mem['arena_bytes'] / 2**20:.2f} MiB, live peak {mem['arena_live_peak_bytes'] / 2**20:.2f} MiB "
            f"({ratio:.2f}x)"), ratio <= 1.1


TARGETS = [
    ("ops, lazy record cost", "at most 150 ns per op", _ops_record),
    ("mlp, CPU", "loom-lazy at least 3x torch-eager", _speedup("mlp", "cpu", {"torch-eager": 3})),
    ("gpt, CPU", "loom-lazy at least 1.5x torch-eager", _speedup("gpt", "cpu", {"torch-eager": 1.5})),
    ("fusion", "on every workload loom-lazy no slower than loom-lazy-nofuse", _fusion_never_loses),
    ("mlp, GPU", "at least 5x torch-eager, 1.5x torch-cudagraph, 1.0x torch-compile",
     _speedup("mlp", "cuda", {"torch-eager": 5, "torch-cudagraph": 1.5, "torch-compile": 1.0})),
    ("gpt, GPU", "at least 3x torch-eager, 1.0x torch-compile",
     _speedup("gpt", "cuda", {"torch-eager": 3, "torch-compile": 1.0})),
    ("mlp, CPU, loom.compile", "loom-compile at least 5x torch-eager", _compiled_speedup("mlp", 5)),
    ("gpt, CPU, loom.compile", "loom-compile at least 1.3x torch-eager", _compiled_speedup("gpt", 1.3)),
    ("mlp, CPU, loom.compile host overhead", "at most 15 us a replayed call outside the plan's run",
     _compiled_host),
    ("chain 1e7, GPU", "effective bandwidth at least 85% of a device-to-device copy", _chain_bandwidth),
    ("chain 1e7, CPU", "at least 3x faster than numpy", _chain_cpu),
    ("steady state", "0 kernels compiled and 0 graphs captured after warm-up", _steady_state),
    ("cold, CPU", "first step with an empty cache: mlp at most 0.3 s, gpt 1 s; 100 ms with a warm disk cache",
     _cold),
    ("memory", "graph arena at most 1.1x the peak of live intermediates", _memory),
    ("ddp scaling, 2 ranks", "loom-lazy on 2 ranks at least 1.6x the samples/s of 1 rank (mlp, gpt)",
     lambda results: ddp.scaling_target(results, _LoomFailed)),
    ("ddp vs PyTorch, 2 ranks", "loom-lazy's DDP step faster than PyTorch DDP's (mlp, gpt)",
     lambda results: ddp.torch_target(results, _LoomFailed)),
]


def evaluate(results):
    """[{what, target, figure, verdict}] for every target of BENCH.md."""
    out = []
    for what, goal, decide in TARGETS:
        try:
            decided = decide(results)
        except _LoomFailed as e:
            decided = (str(e), False)
        if decided is None:
            figure, verdict = "-", "not measured on this device or run"
        else:
            figure, ok = decided
            verdict = MET if ok else NOT_MET
        out.append(dict(what=what, target=goal, figure=figure, verdict=verdict))
    return out
