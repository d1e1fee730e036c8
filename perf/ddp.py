"""The ddp workload: BENCH's mlp and gpt steps under DistributedDataParallel, loom-lazy against
PyTorch's DDP, on jobs of 1 and 2 processes (Gloo on the CPU; on a machine with several GPUs,
NCCL), one thread per rank, the same per-rank batch in every job (weak scaling).

Each measurement is a job started here (python3 perf/ddp.py --child ...), every process reaped
whatever happens. Every rank builds the model from the shared initial weights and its own batch,
runs the warm-up steps, then timed blocks of steps between barriers; rank 0 reports the median
step time and every step's p10 and p90, the samples per second of the whole job, the bytes each
rank all-reduces per step (loom: counted by loom.metrics(); PyTorch: its gradients' bytes, which
its DDP all-reduces once per step), loom's traces and compiles per step, and the warm-up losses,
which must agree between loom and PyTorch before any time counts.
"""

import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import numpy as np  # noqa: E402

import workloads as W  # noqa: E402

FRAMEWORKS = ["loom-lazy", "torch"]
WORLDS = [1, 2]
WARMUP = 3
# (repeats, steps per block): full run and --quick
SIZES = {"mlp": ((5, 30), (3, 8)), "gpt": ((3, 8), (2, 3))}
DATA = {"mlp": lambda rank: W.mlp_data(seed=rank), "gpt": lambda rank: W.gpt_data(seed=rank)}
MODELS = {"mlp": W.mlp_model, "gpt": W.gpt_model}


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


# ---- one rank ----

# Per-thread CPU time and context switches of this process (robust to the machine's load, which
# wall time is not): CPU time from each thread's CPU clock (nanoseconds; /proc's ticks are too
# coarse for a few hundred steps), switches from /proc/self/task/<tid>/status. A thread is named
# by what it was blocked in when sampled (the main thread; Gloo's network thread waits in
# epoll_wait, the rendezvous store's server in poll, worker threads on a futex).
_SYSCALLS = {"7": "poll", "202": "futex", "232": "epoll_wait", "281": "epoll_pwait", "45": "recvfrom",
             "0": "read", "23": "select", "270": "pselect6"}


def _threads():
    out = {}
    for tid in os.listdir("/proc/self/task"):
        try:
            status = open(f"/proc/self/task/{tid}/status").read()
            call = open(f"/proc/self/task/{tid}/syscall").read().split()[0]
            cpu = time.clock_gettime((~int(tid) << 3) | 6)  # the thread's CPU clock (Linux's encoding)
        except (OSError, ValueError):
            continue  # the thread ended
        fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
        out[int(tid)] = dict(cpu=cpu, voluntary=int(fields["voluntary_ctxt_switches"]),
                             involuntary=int(fields["nonvoluntary_ctxt_switches"]),
                             waits_in=_SYSCALLS.get(call, "running" if call == "running" else f"syscall {call}"))
    return out


def _thread_use(before, after, steps):
    """Per thread alive at the end: CPU time and switches per step."""
    rows = []
    for tid, a in sorted(after.items()):
        b = before.get(tid, dict(cpu=0.0, voluntary=0, involuntary=0))
        rows.append(dict(thread="main" if tid == os.getpid() else a["waits_in"],
                         cpu_per_step_s=(a["cpu"] - b["cpu"]) / steps,
                         voluntary_per_step=(a["voluntary"] - b["voluntary"]) / steps,
                         involuntary_per_step=(a["involuntary"] - b["involuntary"]) / steps))
    return rows


def _quantile(values, q):
    ordered = sorted(values)
    return ordered[round(q * (len(ordered) - 1))]


# Note [Weak scaling on a shared core]. Two ranks exchange gradients every step, so a 2-rank
# step lasts as long as the slower rank's: each rank's step time plus the all-reduce plus the
# pauses of the OTHER rank (the moments its core was taken from it: the host's timer and
# interrupts on a virtual machine, other processes). A 1-rank job only pays its own. This probe
# measures those pauses on this core: a loop that reads the clock and counts gaps over 10 us
# (Python's loop reads it every ~0.1 us), for `seconds`.
def interruptions(seconds=1.0):
    """(pauses per second, mean pause in us, share of the time lost) on the core this runs on."""
    gaps, lost = 0, 0
    clock = time.perf_counter_ns
    start = prev = clock()
    end = start + int(seconds * 1e9)
    while prev < end:
        now = clock()
        if now - prev > 10_000:
            gaps += 1
            lost += now - prev
        prev = now
    elapsed = (prev - start) / 1e9
    return gaps / elapsed, (lost / gaps / 1e3 if gaps else 0.0), lost / 1e9 / elapsed


def _initial(workload):
    import cases as C
    return C._initial_state(MODELS[workload])


def _child(framework, workload, device, repeats, steps):
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    backend = "nccl" if device == "cuda" else "gloo"
    if framework == "torch":
        import torch as m
        import torch.distributed as dist
        from torch.nn.parallel import DistributedDataParallel as DDP
        m.set_num_threads(1)
        where = f"cuda:{rank}" if device == "cuda" else "cpu"
        sync = (lambda: m.cuda.synchronize()) if device == "cuda" else (lambda: None)
    else:
        import loom as m
        import loom.distributed as dist
        from loom.nn.parallel import DistributedDataParallel as DDP
        where = f"lazy:cuda:{rank}" if device == "cuda" else "lazy:cpu"
        sync = m.synchronize
    dist.init_process_group(backend)
    model = MODELS[workload](m)
    model.load_state_dict({k: m.tensor(v) for k, v in _initial(workload).items()})
    ddp = DDP(model.to(where))
    opt = m.optim.AdamW(ddp.parameters(), lr=1e-3)
    x, y = (m.tensor(a, device=where) for a in DATA[workload](rank))
    losses = [W.train_step(m, ddp, opt, x, y).item() for _ in range(WARMUP)]
    if framework == "loom-lazy":
        m._C._wait_for_optimized_kernels()  # kernels at -O3 before timing (perf/modes.py Mode.settle)
    metrics = (lambda: m.metrics()) if framework == "loom-lazy" else (lambda: None)
    times, counters = [], []
    each, step_ends = [], []  # every step's own time: a 2-rank step waits for the slower rank
    threads_before = _threads()
    for _ in range(repeats):
        dist.barrier()
        before = metrics()
        t0 = time.perf_counter()
        for _ in range(steps):
            W.train_step(m, ddp, opt, x, y).item()  # the loss is read every step
            step_ends.append(time.perf_counter())
        sync()
        times.append((time.perf_counter() - t0) / steps)
        each.extend(b - a for a, b in zip([t0] + step_ends[:-1], step_ends))
        step_ends.clear()
        after = metrics()
        if before is not None:
            counters.append({k: after[k] - before[k] for k in ("traces", "collectives", "collective_bytes",
                                                               "kernels_compiled", "kernels_optimized",
                                                               "graph_cache_misses",
                                                               "exchange_reads_polled", "exchange_reads_blocked")})
    threads = _thread_use(threads_before, _threads(), steps * repeats)
    if framework == "torch":
        reduced = sum(p.numel() * p.element_size() for p in model.parameters() if p.requires_grad)
    else:
        reduced = sum(c["collective_bytes"] for c in counters) / (steps * repeats)
    batch = x.shape[0]
    out = dict(framework=framework, workload=workload, world=world, median_s=statistics.median(times),
               min_s=min(times), max_s=max(times), samples_per_s=world * batch / statistics.median(times),
               bytes_all_reduced=reduced, losses=losses, per_rank_batch=batch,
               step_p10_s=_quantile(each, 0.1), step_p90_s=_quantile(each, 0.9))
    if counters:
        n = steps * repeats
        out.update(traces_per_step=sum(c["traces"] for c in counters) / n,
                   collectives_per_step=sum(c["collectives"] for c in counters) / n,
                   compiled_after_warmup=sum(c["kernels_compiled"] + c["kernels_optimized"] for c in counters),
                   # how rank 0's exchange reads waited (runtime/distributed/gloo.cpp, Note [Spinning
                   # before a blocking read]): their message arrived while polling, or they blocked
                   reads_polled_per_step=sum(c["exchange_reads_polled"] for c in counters) / n,
                   reads_blocked_per_step=sum(c["exchange_reads_blocked"] for c in counters) / n,
                   lowered_after_warmup=sum(c["graph_cache_misses"] for c in counters))
    dist.destroy_process_group()
    print(f"THREADS {rank} " + json.dumps(threads), flush=True)
    if rank == 0:
        print("RESULT " + json.dumps(out), flush=True)


# ---- the jobs ----

def _job(framework, workload, world, device, repeats, steps, deadline=900):
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), WORLD_SIZE=str(world),
               LOOM_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = []
    try:
        for r in range(world):
            procs.append(subprocess.Popen(
                [sys.executable, os.path.abspath(__file__), "--child", framework, workload, device, str(repeats),
                 str(steps)], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)), stdout=subprocess.PIPE,
                stderr=subprocess.PIPE, text=True, start_new_session=True))
        end = time.monotonic() + deadline
        outputs = [p.communicate(timeout=max(end - time.monotonic(), 1)) for p in procs]
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for p, (out, err) in zip(procs, outputs):
        if p.returncode != 0:
            raise RuntimeError(err.strip().splitlines()[-1] if err.strip() else f"exit code {p.returncode}")
    line = next(line for line in outputs[0][0].splitlines() if line.startswith("RESULT "))
    result = json.loads(line[len("RESULT "):])
    result["threads"] = [json.loads(line.split(" ", 2)[2]) for out, _ in outputs for line in out.splitlines()
                         if line.startswith("THREADS ")]
    return result


def measure(device, quick, progress=lambda text: None):
    """{"rows": [...]}: one row per (workload, framework, world), status ok or error/wrong/unavailable."""
    try:
        import torch  # noqa: F401
        have_torch = True
    except ImportError:
        have_torch = False
    import loom
    import loom.distributed as dist
    rows = []
    if device == "cuda" and loom.cuda.device_count() < max(WORLDS):
        return dict(rows=[], error=f"needs {max(WORLDS)} GPUs, found {loom.cuda.device_count()}")
    pick = 1 if quick else 0
    for workload in ("mlp", "gpt"):
        repeats, steps = SIZES[workload][pick]
        for framework in FRAMEWORKS:
            for world in WORLDS:
                row = dict(workload=workload, framework=framework, world=world)
                if framework == "torch" and not have_torch:
                    rows.append(dict(row, status="unavailable", message="PyTorch is not installed"))
                    continue
                if framework == "loom-lazy" and device == "cpu" and not dist.is_gloo_available():
                    rows.append(dict(row, status="unavailable", message=loom._C._dist_unavailable("gloo")))
                    continue
                progress(f"ddp {workload}: {framework} on {world} rank(s)")
                try:
                    rows.append(dict(row, status="ok", **_job(framework, workload, world, device, repeats, steps)))
                except Exception as e:  # reported, not fatal
                    rows.append(dict(row, status="error", message=f"{type(e).__name__}: {e}"[:200]))
    # Agreement: loom's warm-up losses against PyTorch's, job by job.
    for r in rows:
        if r["status"] != "ok" or r["framework"] == "torch":
            continue
        ref = next((t for t in rows if t["status"] == "ok" and t["framework"] == "torch"
                    and t["workload"] == r["workload"] and t["world"] == r["world"]), None)
        if ref and not np.allclose(r["losses"], ref["losses"], rtol=1e-5, atol=1e-6):
            r.update(status="wrong", message=f"warm-up losses {r['losses']} differ from PyTorch's {ref['losses']}")
    return dict(rows=rows)


def markdown(ddp, duration):
    if not ddp:
        return []
    lines = ["", "| ddp (one thread per rank, same batch per rank) | ranks | step (median) | spread | samples/s | "
             "steps p10 / p90 | vs 1 rank | bytes all-reduced / step / rank | traces / step | compiled after warm-up | "
             "CPU / step, rank 0: main thread, others | status |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    if ddp.get("error"):
        lines.append(f"| ddp | | | | | | | | | | | not run: {ddp['error']} |")
    rows = ddp["rows"]
    for r in rows:
        name = f"{r['workload']}, {r['framework']}"
        if r["status"] != "ok":
            lines.append(f"| {name} | {r['world']} | - | - | - | - | - | - | - | - | - | {r['status']}: {r['message']} |")
            continue
        threads = (r.get("threads") or [[]])[0]
        main = sum(t["cpu_per_step_s"] for t in threads if t["thread"] == "main")
        others = sum(t["cpu_per_step_s"] for t in threads if t["thread"] != "main")
        cpu = f"{duration(main)}, {duration(others)}" if threads else "-"
        one = next((o for o in rows if o["status"] == "ok" and o["framework"] == r["framework"]
                    and o["workload"] == r["workload"] and o["world"] == 1), None)
        scale = f"{r['samples_per_s'] / one['samples_per_s']:.2f}x" if one else "-"
        lines.append(f"| {name} | {r['world']} | {duration(r['median_s'])} | {duration(r['min_s'])} to "
                     f"{duration(r['max_s'])} | {r['samples_per_s']:.0f} | "
                     f"{duration(r['step_p10_s'])} / {duration(r['step_p90_s'])} | {scale} | "
                     f"{r['bytes_all_reduced'] / 1024:.1f} KiB | {r.get('traces_per_step', '-')} | "
                     f"{r.get('compiled_after_warmup', '-')} | {cpu} | ok |")
    return lines


def _ok(results, workload, framework, world):
    for r in (results.get("ddp") or {}).get("rows", []):
        if r["workload"] == workload and r["framework"] == framework and r["world"] == world:
            return r if r["status"] == "ok" else r["status"]
    return None


def scaling_target(results, failed):
    """loom-lazy on 2 ranks at least 1.6x the samples per second of 1 rank, mlp and gpt."""
    parts, ok = [], True
    for workload in ("mlp", "gpt"):
        one, two = _ok(results, workload, "loom-lazy", 1), _ok(results, workload, "loom-lazy", 2)
        for r in (one, two):
            if isinstance(r, str):
                raise failed(f"ddp {workload}, loom-lazy: {r}")
        if one is None or two is None:
            return None
        ratio = two["samples_per_s"] / one["samples_per_s"]
        parts.append(f"{workload} {ratio:.2f}x")
        ok = ok and ratio >= 1.6
    return ", ".join(parts), ok


def torch_target(results, failed):
    """loom-lazy's DDP step faster than PyTorch's, 2 ranks, mlp and gpt."""
    parts, ok = [], True
    for workload in ("mlp", "gpt"):
        mine, theirs = _ok(results, workload, "loom-lazy", 2), _ok(results, workload, "torch", 2)
        if isinstance(mine, str):
            raise failed(f"ddp {workload}, loom-lazy: {mine}")
        if mine is None or not isinstance(theirs, dict):
            return None
        ratio = theirs["median_s"] / mine["median_s"]
        parts.append(f"{workload} {ratio:.2f}x PyTorch DDP")
        ok = ok and ratio > 1.0
    return ", ".join(parts), ok


def _thread_text(per_rank):
    return "; ".join(f"rank {r}: " + ", ".join(
        f"{t['thread']} {t['cpu_per_step_s'] * 1e6:.0f} us/{t['voluntary_per_step']:.1f}v/{t['involuntary_per_step']:.1f}i"
        for t in threads if t["cpu_per_step_s"] > 0 or t["thread"] == "main") for r, threads in enumerate(per_rank))


def pairs(argv):
    """Scaling measured as 1-rank and 2-rank jobs in turn, round by round (the way to compare on a
    shared machine): for each round and workload, each job's median step, the 2-rank samples/s
    against the 1-rank, the same for two 1-rank jobs run at once (what two processes on this
    machine get with nothing exchanged: the ceiling of weak scaling), the load average, and each
    rank's threads (CPU time per step, voluntary/involuntary context switches per step)."""
    import argparse
    ap = argparse.ArgumentParser(prog="ddp.py pairs")
    ap.add_argument("--workloads", default="mlp,gpt")
    ap.add_argument("--frameworks", default="loom-lazy")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--device", default="cpu")
    a = ap.parse_args(argv)
    for rnd in range(a.rounds):
        for workload in a.workloads.split(","):
            repeats, steps = SIZES[workload][1 if a.quick else 0]
            for framework in a.frameworks.split(","):
                load = os.getloadavg()[0]
                per_s, mean_us, share = interruptions()
                print(f"round {rnd}: this core's pauses over 10 us: {per_s:.0f}/s, {mean_us:.0f} us each, "
                      f"{share:.1%} of the time (Note [Weak scaling on a shared core])", flush=True)
                one = _job(framework, workload, 1, a.device, repeats, steps)
                two = _job(framework, workload, 2, a.device, repeats, steps)
                # The ceiling of weak scaling here: two 1-rank jobs at once, nothing exchanged.
                alone = [None, None]
                jobs = [threading.Thread(target=lambda i=i: alone.__setitem__(
                    i, _job(framework, workload, 1, a.device, repeats, steps))) for i in range(2)]
                for j in jobs:
                    j.start()
                for j in jobs:
                    j.join()
                ceiling = sum(r["samples_per_s"] for r in alone) / one["samples_per_s"]
                print(f"round {rnd} {workload} {framework} load {load:.1f}-{os.getloadavg()[0]:.1f}: "
                      f"1 rank {one['median_s'] * 1e3:.3f} ms, 2 ranks {two['median_s'] * 1e3:.3f} ms, "
                      f"{two['samples_per_s'] / one['samples_per_s']:.2f}x; two 1-rank jobs at once "
                      f"{alone[0]['median_s'] * 1e3:.3f} and {alone[1]['median_s'] * 1e3:.3f} ms, {ceiling:.2f}x",
                      flush=True)
                print(f"    steps p10 / p90: 1 rank {one['step_p10_s'] * 1e6:.0f} / {one['step_p90_s'] * 1e6:.0f} us, "
                      f"2 ranks {two['step_p10_s'] * 1e6:.0f} / {two['step_p90_s'] * 1e6:.0f} us", flush=True)
                print(f"    1 rank: {_thread_text(one['threads'])}", flush=True)
                print(f"    2 ranks: {_thread_text(two['threads'])}", flush=True)
                if "reads_polled_per_step" in two:
                    print(f"    2 ranks, rank 0's exchange reads per step: {two['reads_polled_per_step']:.2f} polled, "
                          f"{two['reads_blocked_per_step']:.2f} blocked", flush=True)
                print(f"    two 1-rank jobs: {_thread_text([r['threads'][0] for r in alone])}", flush=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        framework, workload, device, repeats, steps = sys.argv[2:7]
        _child(framework, workload, device, int(repeats), int(steps))
    elif sys.argv[1:2] == ["pairs"]:
        pairs(sys.argv[2:])
    else:
        print(json.dumps(measure(sys.argv[1] if len(sys.argv) > 1 else "cpu", "--quick" in sys.argv), indent=1))
