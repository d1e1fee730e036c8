"""The launcher: python3 -m loom.distributed.run --nproc-per-node N script.py args...

torchrun's interface for one job of fixed size: it starts N copies of the script on this node with
the environment init_process_group("...") reads (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE,
LOCAL_RANK, LOCAL_WORLD_SIZE, GROUP_RANK), forwards SIGINT, SIGTERM and SIGHUP to them, and when
one rank fails, stops the others (SIGTERM, then SIGKILL after --kill-grace seconds) and exits
with the failed rank's exit code, printing which rank failed and its last error. Unless
LOOM_NUM_THREADS is set, each rank gets its share of the node's cores as its thread count.

Several nodes: run it on each with the same --nnodes, --master-addr and --master-port and its
own --node-rank. Differences from torchrun: no elastic restarts (--max-restarts), no rendezvous
backends; on one node without --master-port a free port is chosen (torchrun uses 29500).
"""

import argparse
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time


def _free_port():
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("", 0))
        return s.getsockname()[1]


def parse_args(argv):
    p = argparse.ArgumentParser(prog="python3 -m loom.distributed.run", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--nproc-per-node", "--nproc_per_node", type=int, default=1, help="processes on this node")
    p.add_argument("--nnodes", type=int, default=1, help="nodes of the job (default 1)")
    p.add_argument("--node-rank", "--node_rank", type=int, default=0, help="this node's index (0 to nnodes-1)")
    p.add_argument("--master-addr", "--master_addr", default="127.0.0.1", help="the address of node 0")
    p.add_argument("--master-port", "--master_port", type=int, default=None,
                   help="a free port on node 0 (default: one chosen on a single node; 29500 with several)")
    p.add_argument("--standalone", action="store_true", help="one node, a free port on the loopback")
    p.add_argument("--kill-grace", type=float, default=5.0,
                   help="seconds the other ranks get to exit after SIGTERM when one fails (default 5)")
    p.add_argument("-m", "--module", action="store_true", help="run the script as a module (python -m)")
    p.add_argument("--no-python", "--no_python", action="store_true", help="run the script as a program")
    p.add_argument("script", help="the training script (or module, or program)")
    p.add_argument("args", nargs=argparse.REMAINDER, help="its arguments")
    a = p.parse_args(argv)
    if a.nproc_per_node < 1 or a.nnodes < 1 or not 0 <= a.node_rank < a.nnodes:
        p.error("need --nproc-per-node >= 1, --nnodes >= 1 and 0 <= --node-rank < --nnodes")
    if a.standalone:
        a.nnodes, a.node_rank, a.master_addr = 1, 0, "127.0.0.1"
    if a.master_port is None:
        a.master_port = _free_port() if a.nnodes == 1 else 29500
    return a


def _command(a, error_file):
    if a.no_python:
        return [a.script, *a.args]
    entry = [sys.executable, "-m", "loom.distributed._entry", error_file]
    return [*entry, "-m", a.script, *a.args] if a.module else [*entry, a.script, *a.args]


def _last_error(error_file, returncode):
    try:
        with open(error_file) as f:
            return json.load(f).get("message")
    except (OSError, ValueError):
        pass
    if returncode < 0:
        try:
            return f"killed by {signal.Signals(-returncode).name}"
        except ValueError:
            return f"killed by signal {-returncode}"
    return None


def _signal(procs, signum):
    """`signum` to every rank still running (to its whole session)."""
    for p in procs:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signum)
            except ProcessLookupError:
                pass


def _stop(procs, grace, signum=signal.SIGTERM):
    """`signum` to every rank still running, SIGKILL to those alive after `grace` seconds."""
    _signal(procs, signum)
    end = time.monotonic() + grace
    while time.monotonic() < end and any(p.poll() is None for p in procs):
        time.sleep(0.02)
    _signal(procs, signal.SIGKILL)
    for p in procs:
        p.wait()


def main(argv=None):
    a = parse_args(sys.argv[1:] if argv is None else argv)
    world = a.nnodes * a.nproc_per_node
    received = []

    def forward(signum, frame):
        received.append(signum)
        _signal(procs, signum)

    # Each rank's share of this node's cores (torchrun sets OMP_NUM_THREADS=1 for the same
    # reason): loom's default, a thread per core in every rank, would put several runnable
    # threads on each core, and a rank's collective waits for the slowest of them.
    threads = max(1, len(os.sched_getaffinity(0)) // a.nproc_per_node)
    procs = []
    previous = {s: signal.signal(s, forward) for s in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)}
    with tempfile.TemporaryDirectory(prefix="loom-run-") as errors:
        files = []
        try:
            for local in range(a.nproc_per_node):
                rank = a.node_rank * a.nproc_per_node + local
                files.append(os.path.join(errors, f"rank{rank}.json"))
                env = dict(os.environ, MASTER_ADDR=a.master_addr, MASTER_PORT=str(a.master_port), RANK=str(rank),
                           WORLD_SIZE=str(world), LOCAL_RANK=str(local), LOCAL_WORLD_SIZE=str(a.nproc_per_node),
                           GROUP_RANK=str(a.node_rank), ROLE_RANK=str(rank), ROLE_WORLD_SIZE=str(world))
                env.setdefault("LOOM_NUM_THREADS", str(threads))
                # Each rank in a session of its own: signals reach it from here, once.
                procs.append(subprocess.Popen(_command(a, files[-1]), env=env, start_new_session=True))
            failed = None
            while failed is None and any(p.poll() is None for p in procs):
                if received:
                    # Forwarded already; a rank blocked in a collective may only see it when the
                    # call returns: SIGKILL whoever is still there after the grace period.
                    _stop(procs, a.kill_grace, received[0])
                    break
                for local, p in enumerate(procs):
                    if p.poll() not in (None, 0):
                        failed = local
                        break
                else:
                    time.sleep(0.05)
            if received:
                print(f"loom.distributed.run: stopped by {signal.Signals(received[0]).name}", file=sys.stderr)
                return 128 + received[0]
            if failed is None:
                failed = next((i for i, p in enumerate(procs) if p.returncode != 0), None)
            if failed is None:
                return 0
            p = procs[failed]
            rank = a.node_rank * a.nproc_per_node + failed
            _stop(procs, a.kill_grace)
            code = p.returncode if p.returncode > 0 else 128 - p.returncode
            why = _last_error(files[failed], p.returncode)
            print(f"loom.distributed.run: rank {rank} (local rank {failed}, pid {p.pid}) failed with exit code "
                  f"{p.returncode}; the other ranks were stopped." + (f"\n  its last error: {why}" if why else ""),
                  file=sys.stderr)
            return code
        finally:
            _stop(procs, a.kill_grace)
            for s, h in previous.items():
                signal.signal(s, h)


if __name__ == "__main__":
    sys.exit(main())
