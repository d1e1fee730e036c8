"""Eager all-reduces of one size on a job of Gloo ranks on this machine: per rank, the median and
90th percentile latency of a call, the calling thread's CPU time per call (user and system
apart), voluntary context switches and loom.metrics()' exchange reads (polled, blocked) per call.
The transport's own cost without a training step around it: compare builds by running this with
each build's python in turn, interleaved (perf/RESULTS.md, "ddp, one message per peer").

usage: python perf/tools/allreduce_calls.py [--world 2] [--count 42624] [--calls 2000]
The default count is BENCH mlp's gradient bucket (166.5 KiB of float32). One thread per rank.
"""

import argparse
import json
import os
import resource
import socket
import subprocess
import sys
import time


def rank_main(count, calls):
    import loom
    import loom.distributed as dist
    dist.init_process_group("gloo")
    x = loom.ones(count)
    for _ in range(50):
        dist.all_reduce(x)
    dist.barrier()
    before, m0, ru0 = time.thread_time(), loom.metrics(), resource.getrusage(resource.RUSAGE_THREAD)
    latency = []
    for _ in range(calls):
        t = time.perf_counter()
        dist.all_reduce(x)
        latency.append(time.perf_counter() - t)
    cpu, m1, ru1 = time.thread_time() - before, loom.metrics(), resource.getrusage(resource.RUSAGE_THREAD)
    latency.sort()
    us = 1e6 / calls
    print(json.dumps(dict(rank=dist.get_rank(), median_us=latency[calls // 2] * 1e6,
                          p90_us=latency[int(calls * 0.9)] * 1e6, cpu_us=cpu * us,
                          user_us=(ru1.ru_utime - ru0.ru_utime) * us, sys_us=(ru1.ru_stime - ru0.ru_stime) * us,
                          voluntary=(ru1.ru_nvcsw - ru0.ru_nvcsw) / calls,
                          reads_polled=(m1["exchange_reads_polled"] - m0["exchange_reads_polled"]) / calls,
                          reads_blocked=(m1["exchange_reads_blocked"] - m0["exchange_reads_blocked"]) / calls)),
          flush=True)
    dist.destroy_process_group()


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--world", type=int, default=2)
    ap.add_argument("--count", type=int, default=42624)
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--rank", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.rank:
        return rank_main(a.count, a.calls)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = dict(os.environ, MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), WORLD_SIZE=str(a.world),
               LOOM_NUM_THREADS="1", OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    procs = [subprocess.Popen([sys.executable, os.path.abspath(__file__), "--rank", "--count", str(a.count),
                               "--calls", str(a.calls)], env=dict(env, RANK=str(r), LOCAL_RANK=str(r)),
                              stdout=subprocess.PIPE, text=True) for r in range(a.world)]
    try:
        for p in procs:
            out, _ = p.communicate(timeout=300)
            r = json.loads(out.strip().splitlines()[-1])
            print(f"rank {r['rank']}: median {r['median_us']:.1f} us, p90 {r['p90_us']:.1f} us, CPU {r['cpu_us']:.1f} us "
                  f"(user {r['user_us']:.1f}, system {r['sys_us']:.1f}), {r['voluntary']:.2f} voluntary switches, "
                  f"reads {r['reads_polled']:.2f} polled {r['reads_blocked']:.2f} blocked, per call")
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
            p.wait()


if __name__ == "__main__":
    main()
