"""The harness's outputs: a JSON file with every figure, a Markdown table, a PNG chart."""

import json
import os
import sys


def duration(seconds):
    if seconds is None:
        return "-"
    for unit, scale in (("s", 1), ("ms", 1e-3), ("us", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.0f} ns"


def _number(x, digits=1):
    return "-" if x is None else f"{x:.{digits}f}"


def _ratio(row, baseline):
    r = row["vs"].get(baseline)
    return "-" if r is None else f"{r:.2f}x"


def markdown(results, targets):
    dev = results["device"]
    baselines = [b for b in ("torch-eager", "torch-cudagraph", "torch-compile") if b in results["modes_run"]]
    lines = [f"loom perf harness, {results['date']}, device {dev}"
             f"{' (quick run)' if results['quick'] else ''}: {results['machine']['cpu']}"
             f"{', ' + results['machine']['gpu'] if results['machine'].get('gpu') else ''}"
             f"; CPU threads: loom {results['machine'].get('loom_threads')}, torch {results['machine'].get('torch_threads')}",
             ""]
    head = ["case", "mode", "time per step (median)", "spread (min to max)"] + [f"vs {b}" for b in baselines] + [
        "kernels / step", "graphs / step", "compiled after warm-up", "step peak memory", "status"]
    lines += ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in results["rows"]:
        if r["status"] == "unavailable":
            continue  # listed once below the table
        if r["status"] == "ok":
            cells = [r["case"], r["mode"], f"{duration(r['median_s'])} / {r['unit']}",
                     f"{duration(r['min_s'])} to {duration(r['max_s'])}"] + [_ratio(r, b) for b in baselines] + [
                _number(r.get("kernels_per_step")), _number(r.get("graphs_per_step"), 2),
                "-" if r.get("compiled_after_warmup") is None else str(r["compiled_after_warmup"]),
                "-" if r.get("step_peak_bytes") is None else f"{r['step_peak_bytes'] / 2**20:.2f} MiB", "ok"]
        else:
            cells = [r["case"], r["mode"]] + ["-"] * (len(head) - 3) + [f"{r['status']}: {r['message']}"]
        lines.append("| " + " | ".join(cells) + " |")
    notes = sorted({r["note"] for r in results["rows"] if r.get("note")})
    unavailable = {}
    for r in results["rows"]:
        if r["status"] == "unavailable":
            unavailable.setdefault(r["message"], set()).add(r["mode"])
    notes += [f"not run ({why}): {', '.join(sorted(modes))}" for why, modes in sorted(unavailable.items())]
    lines += [""] + [f"- {n}" for n in notes]
    if results.get("cold"):
        lines += ["", "| cold start (loom-lazy, first step) | empty kernel cache | warm disk cache, new process |",
                  "|---|---|---|"]
        for w, c in results["cold"].items():
            if "error" in c:
                lines.append(f"| {w} | error: {c['error']} | |")
                continue
            e, d = c["empty_cache"], c["warm_disk_cache"]
            lines.append(f"| {w} | {duration(e['first_step_s'])} ({e['kernels_compiled']} kernels compiled in "
                         f"{e['compile_seconds']:.2f} s) | {duration(d['first_step_s'])} "
                         f"({d['modules_loaded_from_disk']} modules from disk, {d['kernels_compiled']} compiled) |")
    mem = results.get("memory")
    if mem:
        lines += [""]
        if "error" in mem:
            lines.append(f"memory (gpt, loom-lazy): error: {mem['error']}")
        else:
            lines.append(f"memory (gpt, loom-lazy): peak {mem['peak_bytes'] / 2**20:.2f} MiB during a step, "
                         f"{mem['resident_bytes'] / 2**20:.2f} MiB resident between steps; graph arena "
                         f"{mem['arena_bytes'] / 2**20:.2f} MiB for {mem['arena_live_peak_bytes'] / 2**20:.2f} MiB "
                         f"of intermediates live at once")
    from ddp import markdown as ddp_markdown  # perf/ddp.py: the multi-process workload
    lines += ddp_markdown(results.get("ddp"), duration)
    lines += ["", "| target (BENCH.md) | goal | figure | verdict |", "|---|---|---|---|"]
    lines += [f"| {t['what']} | {t['target']} | {t['figure']} | {t['verdict']} |" for t in targets]
    return "\n".join(lines) + "\n"


def write_json(results, path):
    with open(path, "w") as f:
        json.dump(results, f, indent=1, sort_keys=True)


def write_chart(results, path):
    """Time per step by case and mode, log scale: one group of bars per case. Without matplotlib,
    no chart (a note on stderr): the table and the JSON file hold every figure."""
    try:
        import matplotlib
    except ImportError:
        print("matplotlib is not installed: no chart", file=sys.stderr)
        return
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = [r for r in results["rows"] if r["status"] == "ok"]
    case_names = list(dict.fromkeys(r["case"] for r in rows))
    mode_names = list(dict.fromkeys(r["mode"] for r in rows))
    width = 0.8 / max(len(mode_names), 1)
    fig, ax = plt.subplots(figsize=(max(8, 1.3 * len(case_names)), 5))
    for i, mode in enumerate(mode_names):
        xs, ys, errs = [], [], []
        for j, case in enumerate(case_names):
            r = next((r for r in rows if r["case"] == case and r["mode"] == mode), None)
            if r:
                xs.append(j + i * width)
                ys.append(r["median_s"])
                errs.append([[r["median_s"] - r["min_s"]], [r["max_s"] - r["median_s"]]])
        if xs:
            lo = [e[0][0] for e in errs]
            hi = [e[1][0] for e in errs]
            ax.bar(xs, ys, width, label=mode, yerr=[lo, hi], capsize=2)
    ax.set_yscale("log")
    ax.set_ylabel("time per step or op (s, log scale)")
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(case_names))])
    ax.set_xticklabels(case_names, rotation=30, ha="right")
    ax.set_title(f"loom perf harness, {results['device']}, {results['date']}")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def write_all(results, targets, out_dir, chart=True):
    """results.json, results.md and (with `chart`) results.png; results["partial"] marks a run
    still going (perf/run.py writes after every case)."""
    os.makedirs(out_dir, exist_ok=True)
    table = markdown(results, targets)
    if results.get("partial"):
        table = "**partial results: the run had not finished when this was written**\n\n" + table
    write_json(dict(results, targets=targets), os.path.join(out_dir, "results.json"))
    with open(os.path.join(out_dir, "results.md"), "w") as f:
        f.write(table)
    if chart:
        write_chart(results, os.path.join(out_dir, "results.png"))
    return table
