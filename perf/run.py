#!/usr/bin/python3
"""loom's perf harness: the workloads of BENCH.md in every mode, side by side, in one process.

For each case it builds every mode from the same data and initial weights, runs the warm-up,
checks that all modes computed the same thing (a mode that disagrees is reported as wrong and not
timed), then times blocks of whole steps, interleaving the modes repeat by repeat so machine drift
hits them alike. It reports medians, the spread, speed-ups over the PyTorch baselines, loom's
counters per step, and the targets of BENCH.md as met or not. Outputs go to --out: results.json,
results.md and results.png (when matplotlib is installed); the Markdown table is printed last.
results.md and results.json are rewritten after every case, marked partial until the run ends.
`--profile WORKLOAD` times nothing: it profiles the workload's steps in loom-lazy mode with
loom.profiler and writes the Chrome trace (profile-<case>.json) and the table (.txt) to --out.
"""

import argparse
import datetime
import gc
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import loom  # noqa: E402
import cases as C  # noqa: E402
import ddp  # noqa: E402
import report  # noqa: E402
import targets as T  # noqa: E402
import workloads as W  # noqa: E402
from modes import BASELINES, BY_NAME, MODES, torch  # noqa: E402

WORKLOADS = ["ops", "chain", "softmax", "mlp", "gpt", "cold", "memory", "ddp"]


def progress(text):
    end = "\r" if sys.stderr.isatty() else "\n"
    sys.stderr.write(f"{text:<78}{end}")
    sys.stderr.flush()


def counter_delta(before, after):
    return {k: after[k] - before[k] for k in before}


def reference_mode(built):
    for name in ("torch-eager", "numpy", "loom-eager"):
        if name in built:
            return name
    return next(iter(built))


def run_case(case, mode_names, device):
    """Rows (one per mode) for one case."""
    rows, built = [], {}
    for name in case.modes:
        if name not in mode_names:
            continue
        mode = BY_NAME[name]
        row = dict(workload=case.workload, case=case.name, mode=name, unit=case.unit, note=case.note)
        why = mode.unavailable(device)
        if why:
            rows.append(dict(row, status="unavailable", message=why))
            continue
        progress(f"{case.name}: {name}: building and warming up")
        try:
            mode.enter()
            before = mode.counters()
            runner = case.build(mode, device)
            mode.settle()  # the warm-up's plans swapped to their -O3 kernels before any timing
            warm = counter_delta(before, mode.counters()) if before else None
        except Exception as e:  # a mode that cannot run the program is reported, not fatal
            rows.append(dict(row, status="error", message=f"{type(e).__name__}: {e}".splitlines()[0][:160]))
            continue
        row.update(status="ok", times=[], counters=[], peaks=[],
                   warmup_compile_s=warm["compile_seconds"] if warm else None)
        built[name] = (mode, runner, row)
        rows.append(row)
    if not built:
        return rows
    # Agreement before timing.
    ref = reference_mode(built)
    for name, (mode, runner, row) in list(built.items()):
        why = C.disagreement(case, ref, built[ref][1], runner)
        if why:
            row.update(status="wrong", message=why)
            del built[name]
    # Interleaved, rotated repeats: every mode runs once per round, in a shifting order.
    names = list(built)
    for r in range(case.repeats):
        order = names[r % len(names):] + names[:r % len(names)] if names else []
        for name in order:
            mode, runner, row = built[name]
            progress(f"{case.name}: {name}: repeat {r + 1}/{case.repeats}")
            mode.enter()
            mode.synchronize(device)
            memory = mode.memory(device)
            mode.reset_peak_memory(device)
            before = mode.counters()
            t0 = time.perf_counter()
            runner.block(case.steps)
            elapsed = time.perf_counter() - t0
            row["times"].append(elapsed / case.steps)
            if before is not None:
                row["counters"].append(counter_delta(before, mode.counters()))
            if memory is not None:
                row["peaks"].append(mode.memory(device)[1] - memory[0])
    for name, (mode, runner, row) in built.items():
        summarize(row, case.steps)
    del built
    gc.collect()
    return rows


def summarize(row, steps):
    times = row.pop("times")
    counters, peaks = row.pop("counters"), row.pop("peaks")
    row.update(median_s=statistics.median(times), min_s=min(times), max_s=max(times), repeat_s=times)
    if counters:
        total = {k: sum(c[k] for c in counters) for k in counters[0]}
        n = steps * len(counters)
        row.update(kernels_per_step=total["kernel_launches"] / n, graphs_per_step=total["graph_replays"] / n,
                   traces_per_step=total["traces"] / n, compiled_after_warmup=total["kernels_compiled"] + total["kernels_optimized"],
                   graphs_lowered_after_warmup=total["graph_cache_misses"])
        if total.get("compiled_replays"):  # loom-compile: a replayed call's time outside the plan's run
            replays = total["compiled_replays"]
            row.update(replays_per_step=replays / n,
                       compiled_call_s=total["compiled_replay_seconds"] / replays,
                       compiled_host_s=(total["compiled_replay_seconds"] - total["compiled_plan_seconds"]) / replays)
    if peaks:
        row["step_peak_bytes"] = max(peaks)


def checkpoint(results, out):
    """The table so far, written after each case, so that a run cut short (a deadline, a crash)
    keeps every case it finished. The chart waits for the end."""
    add_ratios(results["rows"])
    report.write_all(dict(results, partial=True), T.evaluate(results), out, chart=False)


def add_ratios(rows):
    by_case = {}
    for r in rows:
        if r["status"] == "ok":
            by_case.setdefault(r["case"], {})[r["mode"]] = r
    for r in rows:
        if r["status"] == "ok":
            r["vs"] = {b: by_case[r["case"]][b]["median_s"] / r["median_s"] for b in BASELINES
                       if b in by_case[r["case"]]}


# ---- cold start: a child process per measurement ----

def cold_child(workload, device):
    """Runs in a fresh process: times the first training step of loom-lazy (the model and data
    are set up before the clock starts) and prints the figures as JSON."""
    mode = BY_NAME["loom-lazy"]
    model_fn, data_fn = C.MODEL_AND_DATA[workload]
    model, optimizer, x, y = C.training_setup(mode, device, model_fn, data_fn)
    loom.metrics_reset()
    t0 = time.perf_counter()
    W.train_step(loom, model, optimizer, x, y).item()
    elapsed = time.perf_counter() - t0
    m = loom.metrics()
    print(json.dumps(dict(first_step_s=elapsed, kernels_compiled=m["kernels_compiled"],
                          compile_seconds=m["compile_seconds"], modules_loaded_from_disk=m["modules_loaded_from_disk"])))


def measure_cold(device):
    out = {}
    for workload in ("mlp", "gpt"):
        progress(f"cold: {workload}")
        with tempfile.TemporaryDirectory(prefix="loom-cold-") as cache:
            env = dict(os.environ, LOOM_CACHE_DIR=cache)
            runs = {}
            try:
                for label in ("empty_cache", "warm_disk_cache"):
                    done = subprocess.run([sys.executable, os.path.abspath(__file__), "--cold-child", workload,
                                           "--device", device], env=env, capture_output=True, text=True, timeout=600)
                    if done.returncode != 0:
                        raise RuntimeError(done.stderr.strip().splitlines()[-1] if done.stderr.strip() else "failed")
                    runs[label] = json.loads(done.stdout.strip().splitlines()[-1])
                out[workload] = runs
            except Exception as e:
                out[workload] = dict(error=str(e)[:200])
    return out


# ---- memory: the gpt step's footprint and its arena against the live intermediates ----

def measure_memory(device):
    mode = BY_NAME["loom-lazy"]
    why = mode.unavailable(device)
    if why:
        return dict(error=why)
    progress("memory: gpt")
    gc.collect()
    mode.enter()
    runner = C.training_runner("gpt")(mode, device)
    runner.block(1)
    resident = mode.memory(device)[0]
    mode.reset_peak_memory(device)
    runner.block(1)
    peak = mode.memory(device)[1]
    m = loom.metrics()  # the plan of the step just run
    return dict(peak_bytes=peak, resident_bytes=resident, arena_bytes=m["arena_bytes"],
                arena_live_peak_bytes=m["arena_live_peak_bytes"])


def measure_copy(device):
    """A device-to-device copy of 1e7 float32 (the chain bandwidth target's yardstick)."""
    if device != "cuda" or torch is None or not torch.cuda.is_available():
        return None
    x = torch.empty(int(1e7), device="cuda")
    y = torch.empty_like(x)
    for _ in range(3):
        y.copy_(x)
    torch.cuda.synchronize()
    times = []
    for _ in range(5):
        t0 = time.perf_counter()
        for _ in range(20):
            y.copy_(x)
        torch.cuda.synchronize()
        times.append((time.perf_counter() - t0) / 20)
    return statistics.median(times)


def machine(device):
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    info = dict(cpu=f"{cpu}, {os.cpu_count()} cores", platform=platform.platform(), python=platform.python_version(),
                numpy=np.__version__, torch=torch.__version__ if torch else None,
                loom_threads=loom.get_num_threads(), torch_threads=torch.get_num_threads() if torch else None,
                openblas_coretype=os.environ.get("OPENBLAS_CORETYPE"))
    try:
        info["loom_commit"] = subprocess.run(["git", "-C", HERE, "rev-parse", "--short", "HEAD"], capture_output=True,
                                             text=True).stdout.strip() or None
    except OSError:
        info["loom_commit"] = None
    if device == "cuda" and torch is not None and torch.cuda.is_available():
        info["gpu"] = torch.cuda.get_device_name()
    return info


def profile_workload(workload, device, out, steps, quick):
    """--profile: each case of `workload` in loom-lazy mode, built and warmed up as the timed run
    does, then `steps` steps under loom.profiler; writes profile-<case>.json (a Chrome trace: open
    it in https://ui.perfetto.dev or chrome://tracing) and profile-<case>.txt (the table) to
    `out`, and prints the tables."""
    mode = BY_NAME["loom-lazy"]
    why = mode.unavailable(device)
    if why:
        raise SystemExit(f"perf/run.py --profile: loom-lazy cannot run here: {why}")
    os.makedirs(out, exist_ok=True)
    written = []
    for case in C.cases(quick):
        if case.workload != workload or "loom-lazy" not in case.modes:
            continue
        progress(f"{case.name}: loom-lazy: building and warming up")
        mode.enter()
        runner = case.build(mode, device)
        progress(f"{case.name}: loom-lazy: profiling {steps} {case.unit}s")
        with loom.profiler.profile() as prof:
            runner.block(steps)
        stem = os.path.join(out, "profile-" + case.name.replace(" ", "-"))
        prof.export_chrome_trace(stem + ".json")
        table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=40)
        with open(stem + ".txt", "w") as f:
            f.write(f"{case.name}, loom-lazy, {steps} {case.unit}s on {device}\n{table}")
        written.append(stem)
        sys.stderr.write("\n")
        print(f"{case.name}: {steps} {case.unit}s, loom-lazy on {device}\n{table}")
    loom._C._set_executor("compiled")
    if not written:
        raise SystemExit(f"perf/run.py --profile: no case of '{workload}' runs in loom-lazy mode")
    for stem in written:
        print(f"Chrome trace: {stem}.json (open in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def parse_args(argv):
    modes_help = "; ".join(f"{m.name}: {m.what}" for m in MODES)
    p = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=f"workloads: {', '.join(WORKLOADS)} (BENCH.md).  modes: {modes_help}.")
    p.add_argument("--workloads", default=",".join(WORKLOADS), help="comma-separated workloads (default: all)")
    p.add_argument("--modes", default=",".join(m.name for m in MODES),
                   help="comma-separated modes (default: every mode available on the device)")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu", help="where tensors live (default: cpu)")
    p.add_argument("--quick", action="store_true", help="fewer repeats and steps (scripts/demo: under 3 minutes)")
    p.add_argument("--out", default=os.path.join(HERE, "results", "latest"),
                   help="output folder for results.json, results.md, results.png (default: perf/results/latest)")
    p.add_argument("--profile", metavar="WORKLOAD",
                   help="instead of timing: profile WORKLOAD's steps in loom-lazy mode (loom.profiler) and write "
                        "its Chrome trace and table to --out")
    p.add_argument("--profile-steps", type=int, default=5, metavar="N", help="steps profiled by --profile (default 5)")
    p.add_argument("--cold-child", metavar="WORKLOAD", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    args.modes = [m.strip() for m in args.modes.split(",") if m.strip()]
    if args.profile and args.profile not in ("ops", "chain", "softmax", "mlp", "gpt"):
        p.error(f"--profile: choose a workload of timed steps (ops, chain, softmax, mlp, gpt), not '{args.profile}'")
    if args.profile_steps < 1:
        p.error("--profile-steps must be at least 1")
    for w in args.workloads:
        if w not in WORKLOADS:
            p.error(f"unknown workload '{w}' (choose from {', '.join(WORKLOADS)})")
    for m in args.modes:
        if m not in BY_NAME:
            p.error(f"unknown mode '{m}' (choose from {', '.join(BY_NAME)})")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.cold_child:
        cold_child(args.cold_child, args.device)
        return 0
    if args.profile:
        return profile_workload(args.profile, args.device, args.out, args.profile_steps, args.quick)
    if torch is None:
        print("PyTorch is not installed: the torch modes are skipped, loom modes run alone", file=sys.stderr)
    # PyTorch keeps its default thread count: on this 2-core VM, 2 threads made its small-op
    # training steps 3 to 4x slower than its default of 1 (measured 2026-11-29). The table
    # header prints both libraries' counts.
    results = dict(date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
                   device=args.device, quick=args.quick, machine=machine(args.device), rows=[],
                   modes_run=[m for m in args.modes if BY_NAME[m].unavailable(args.device) is None])
    started = time.perf_counter()
    for case in C.cases(args.quick):
        if case.workload in args.workloads:
            results["rows"] += run_case(case, args.modes, args.device)
            checkpoint(results, args.out)
    add_ratios(results["rows"])
    if "chain" in args.workloads:
        results["copy_1e7_s"] = measure_copy(args.device)
    if "memory" in args.workloads:
        try:
            results["memory"] = measure_memory(args.device)
        except Exception as e:
            results["memory"] = dict(error=f"{type(e).__name__}: {e}"[:200])
    if "cold" in args.workloads:
        results["cold"] = measure_cold(args.device)
    if "ddp" in args.workloads:
        try:
            results["ddp"] = ddp.measure(args.device, args.quick, progress)
        except Exception as e:
            results["ddp"] = dict(rows=[], error=f"{type(e).__name__}: {e}"[:200])
    results["elapsed_s"] = time.perf_counter() - started
    loom._C._set_executor("compiled")
    progress(f"done in {results['elapsed_s']:.0f} s; writing {args.out}")
    sys.stderr.write("\n")
    table = report.write_all(results, T.evaluate(results), args.out)
    print(table)
    failed = T.failures(results)  # a wrong answer or a failed loom mode fails the run
    for failure in failed:
        print(f"perf/run.py: {failure}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
