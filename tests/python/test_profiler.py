"""loom.profiler and loom.explain_syncs() (issue 18): a profiled training step lists every step of
its plan once, generated kernels name the ops they fused and the Python line of each, the Chrome
trace is valid JSON whose begin and end events match, profiling changes neither the work done
(loom.metrics()) nor the results, and each sync is reported with its cause and line."""

import collections
import inspect
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import loom
from loom import profiler

STEP_CATEGORIES = ("kernel", "blas", "library", "collective", "copy")
HERE = os.path.abspath(__file__)


def mlp(seed=0):
    loom.manual_seed(seed)
    nn = loom.nn
    model = nn.Sequential(nn.Linear(16, 32), nn.GELU(), nn.Linear(32, 32), nn.GELU(), nn.Linear(32, 4))
    model = model.to("lazy")
    optimizer = loom.optim.AdamW(model.parameters(), lr=1e-2)
    rng = np.random.default_rng(seed)
    x = loom.tensor(rng.standard_normal((8, 16)).astype(np.float32)).to("lazy")
    y = loom.tensor(rng.integers(0, 4, 8)).to("lazy")
    return model, optimizer, x, y


def train_step(model, optimizer, x, y):
    logits = model(x)                                               # line: forward
    loss = loom.nn.functional.cross_entropy(logits, y)              # line: loss
    optimizer.zero_grad(set_to_none=True)
    loss.backward()                                                 # line: backward
    optimizer.step()                                                # line: update
    return loss.item()                                              # line: sync


def lines_of(function, marker):
    source, first = inspect.getsourcelines(function)
    return {first + i for i, text in enumerate(source) if f"# line: {marker}" in text}


def step_events(events):
    return [e for e in events if e.category in STEP_CATEGORIES]


def runs(events):
    return [e for e in events if e.category == "plan" and e.name == "run plan"]


def inside(event, span):
    return span.start_ns <= event.start_ns and event.start_ns + event.duration_ns <= span.start_ns + span.duration_ns


def delta(before, after):
    return {k: after[k] - before[k] for k in before if not k.startswith("plan_cache_") and not k.startswith("arena")}


@pytest.fixture
def warm_mlp():
    loom._C._set_executor("compiled")
    parts = mlp()
    for _ in range(3):  # lowered, compiled, and the steady state reached
        train_step(*parts)
    return parts


def test_profiled_mlp_step_lists_every_plan_step_once(warm_mlp, tmp_path, monkeypatch):
    # The plan's steps as the lowering wrote them (LOOM_DUMP_DIR: one line per step), against
    # the profile's step spans of one steady-state step.
    monkeypatch.setenv("LOOM_DUMP_DIR", str(tmp_path))
    loom.clear_plan_cache()
    train_step(*warm_mlp)
    (groups,) = list(tmp_path.glob("*.groups"))
    listed = collections.Counter()
    for line in groups.read_text().splitlines():
        kind, name = line.split()[:2]
        listed["kernel " + name if kind == "kernel" else "op " + name] += 1
    monkeypatch.delenv("LOOM_DUMP_DIR")

    before = loom.metrics()
    with profiler.profile() as prof:
        train_step(*warm_mlp)
    work = delta(before, loom.metrics())
    events = prof.events()
    (run,) = runs(events)
    steps = step_events(events)
    assert all(inside(e, run) for e in steps)
    assert int(run.args["steps"]) == len(steps) == work["kernel_launches"] == sum(listed.values())
    seen = collections.Counter("kernel " + e.name.split(":")[0] if e.category == "kernel" else "op " + e.name
                               for e in steps)
    assert seen == listed
    # Around the run: the sync that asked for it, the trace build, the cache lookup (a hit).
    (sync,) = [e for e in events if e.category == "sync"]
    assert sync.args["cause"] == "step" and inside(run, sync)  # optimizer.step() ends the step
    assert [e.args["result"] for e in events if e.name == "plan cache lookup"] == ["hit"]
    assert any(e.name == "build trace and key" and inside(e, sync) for e in events)
    assert not [e for e in events if e.category == "compile"]
    memory = [e for e in events if e.kind == "counter"]
    assert memory and memory[-1].args["allocated"] > 0 and memory[-1].args["reserved"] >= memory[-1].args["allocated"]
    # Every step writes bytes; a product reads both operands.
    for e in steps:
        assert e.bytes_written > 0 and e.bytes_read >= 0, e
    products = [e for e in steps if e.category == "blas"]
    assert products and all(e.name == "MatMul" for e in products)


def test_kernel_events_carry_their_python_lines(warm_mlp):
    with profiler.profile() as prof:
        train_step(*warm_mlp)
    kernels = [e for e in prof.events() if e.category == "kernel"]
    assert kernels
    step_lines = set().union(*(lines_of(train_step, m) for m in ("forward", "loss", "backward", "update")))
    found = set()
    for k in kernels:
        assert k.fused, k
        for op, where in k.fused:
            assert where is not None, (k.name, op)
            file, line, function = where
            assert file == HERE and function == "train_step", where
            found.add(line)
    assert found <= step_lines
    # Forward, loss, backward and the optimizer's update each fused into some kernel.
    assert len(found) == 4
    # The table shows them.
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=100)
    assert "test_profiler.py:" in table and "# of Calls" in table


def test_fused_kernel_lists_each_op_and_its_line():
    loom._C._set_executor("compiled")
    x = loom.tensor(np.linspace(-1, 1, 64, dtype=np.float32)).to("lazy")
    with profiler.profile() as prof:
        first = inspect.currentframe().f_lineno + 1
        y = (x * 2.0).exp()
        z = y + 1.0
        del y  # not an output: computed inside the kernel only
        values = z.numpy()
    np.testing.assert_allclose(values, np.exp(np.linspace(-1, 1, 64, dtype=np.float32) * 2) + 1, rtol=1e-6)
    (k,) = [e for e in prof.events() if e.category == "kernel"]
    assert [(op, where[1]) for op, where in k.fused] == [("Mul", first), ("Exp", first), ("Add", first + 1)]
    assert k.name.endswith(": Mul+Exp+Add")
    assert k.bytes_read == 64 * 4 and k.bytes_written == 64 * 4
    # Each recorded op is a span with its line; the sync closes a span over the recording.
    records = [e for e in prof.events() if e.category == "record"]
    assert [(e.name, e.source[1]) for e in records if e.name != "record"] == [
        ("record Mul", first), ("record Exp", first), ("record Add", first + 1)]
    assert k.sources() == [f"test_profiler.py:{first} (Mul+Exp)", f"test_profiler.py:{first + 1} (Add)"]
    (whole,) = [e for e in records if e.name == "record"]
    assert whole.args["ops"] == "3"
    (sync,) = [e for e in prof.events() if e.category == "sync"]
    assert sync.args["cause"] == "host" and sync.source[1] == first + 3
    assert [(cause, where[1]) for cause, where, _ in prof.syncs()] == [("host", first + 3)]


def test_chrome_trace_is_valid_json_with_matching_begin_and_end(warm_mlp, tmp_path):
    with profiler.profile() as prof:
        with profiler.record_function("my step"):
            train_step(*warm_mlp)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    trace = json.loads(path.read_text())
    events = trace["traceEvents"]
    open_spans = collections.defaultdict(list)
    last_ts = collections.defaultdict(float)
    names = collections.Counter()
    for e in events:
        assert e["ph"] in ("B", "E", "C", "M"), e
        if e["ph"] in ("M", "C"):
            continue
        assert e["ts"] >= last_ts[e["tid"]], e
        last_ts[e["tid"]] = e["ts"]
        if e["ph"] == "B":
            open_spans[e["tid"]].append(e)
            names[e["cat"]] += 1
        elif e["ph"] == "E":
            assert open_spans[e["tid"]], f"an end event without a begin on tid {e['tid']}"
            open_spans[e["tid"]].pop()
    assert all(not stack for stack in open_spans.values())
    # Every span of the profile is in the trace, once.
    spans = [e for e in prof.events() if e.kind == "span"]
    assert sum(names.values()) == len(spans)
    assert names["kernel"] == len([e for e in spans if e.category == "kernel"]) > 0
    assert names["user"] == 1 and names["sync"] == 1 and names["plan"] == 1
    kernel = next(e for e in events if e.get("cat") == "kernel")
    assert kernel["args"]["fused ops"] and "test_profiler.py" in kernel["args"]["fused ops"][0]
    assert any(e["ph"] == "C" and "allocated" in e["args"] for e in events)


def test_profiling_does_not_change_the_work_or_the_results():
    loom._C._set_executor("compiled")
    plain, profiled = mlp(), mlp()
    for parts in (plain, profiled):
        for _ in range(3):
            train_step(*parts)
    loom.clear_plan_cache()  # every plan the loop uses is lowered here, unprofiled
    for parts in (plain, profiled):
        train_step(*parts)

    def work(parts, profile):
        before = loom.metrics()
        if profile:
            with profiler.profile():
                loss = train_step(*parts)
        else:
            loss = train_step(*parts)
        return loss, delta(before, loom.metrics())

    losses_plain, losses_profiled = [], []
    for i in range(4):
        loss, plain_work = work(plain, False)
        losses_plain.append(loss)
        loss, profiled_work = work(profiled, i % 2 == 0)
        losses_profiled.append(loss)
        # The same ops recorded, the same plan replayed, the same steps run, nothing compiled.
        assert plain_work == profiled_work
        assert plain_work["graph_cache_hits"] == 1 and plain_work["kernels_compiled"] == 0
    assert losses_plain == losses_profiled
    for (name, a), (_, b) in zip(plain[0].state_dict().items(), profiled[0].state_dict().items()):
        np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=name)


def test_off_path_records_nothing(warm_mlp):
    assert not loom._C._profiler_active() and not loom._C._capturing_sources()
    with profiler.profile() as prof:
        pass
    assert not loom._C._profiler_active() and not loom._C._capturing_sources()
    # Work done between profiles is not in the next one.
    train_step(*warm_mlp)
    with profiler.profile() as prof:
        pass
    assert [e for e in prof.events() if e.kind == "span"] == []
    # A profile while nothing runs hands out no spans; one around a step hands out that step's.
    with profiler.profile() as prof:
        train_step(*warm_mlp)
    assert len(runs(prof.events())) == 1


def test_kernels_of_ops_recorded_before_the_profile_have_no_lines(warm_mlp):
    model, optimizer, x, y = warm_mlp
    loss = loom.nn.functional.cross_entropy(model(x), y)
    with profiler.profile() as prof:
        loss.item()
    kernels = [e for e in prof.events() if e.category == "kernel"]
    assert kernels and all(where is None for k in kernels for _, where in k.fused)


def test_debug_source_keeps_lines_outside_profiles(tmp_path):
    script = tmp_path / "debug_source.py"
    script.write_text(
        "import loom, numpy as np\n"
        "from loom import profiler\n"
        "x = loom.tensor(np.ones(8, np.float32)).to('lazy')\n"
        "y = (x * 3.0).tanh()\n"
        "with profiler.profile() as prof:\n"
        "    y.numpy()\n"
        "(k,) = [e for e in prof.events() if e.category == 'kernel']\n"
        "print([(op, where[1] if where else None) for op, where in k.fused])\n")
    env = dict(os.environ, LOOM_DEBUG_SOURCE="1")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[('Mul', 4), ('Tanh', 4)]"
    env.pop("LOOM_DEBUG_SOURCE")
    out = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[('Mul', None), ('Tanh', None)]"


def test_explain_syncs_names_each_cause_and_line(capsys):
    loom._C._set_executor("compiled")
    loom.explain_syncs(reset=True)
    x = loom.tensor(np.arange(6, dtype=np.float32)).to("lazy")
    lines = {}
    for _ in range(3):
        y = x * 2.0
        lines["item"] = inspect.currentframe().f_lineno + 1
        y.sum().item()
    z = x - 2.0
    lines["repr"] = inspect.currentframe().f_lineno + 1
    print(z)
    w = x + 1.0
    lines["data_dependent_shape"] = inspect.currentframe().f_lineno + 1
    nz = loom.nonzero(w > 3.0)
    assert nz.numpy().ravel().tolist() == [3, 4, 5]  # materialized by the sync of nonzero
    lines["host"] = inspect.currentframe().f_lineno + 1
    assert (x * 3.0).tolist() == [0.0, 3.0, 6.0, 9.0, 12.0, 15.0]
    loom.sync()  # nothing pending: no sync runs a trace
    report = loom.explain_syncs()
    capsys.readouterr()
    got = {(s.cause, s.line): s.count for s in report}
    assert got == {("item", lines["item"]): 3, ("repr", lines["repr"]): 1,
                   ("data_dependent_shape", lines["data_dependent_shape"]): 1, ("host", lines["host"]): 1}
    assert all(s.file == HERE and s.function == "test_explain_syncs_names_each_cause_and_line" for s in report)
    assert report[0].cause == "item" and f"test_profiler.py:{lines['item']}" in str(report)
    assert loom.explain_syncs(reset=True) == report and loom.explain_syncs() == []


def test_schedule_records_the_active_steps_and_calls_on_trace_ready(warm_mlp):
    actions = profiler.schedule(wait=1, warmup=1, active=2, repeat=1)
    assert [actions(i).name for i in range(6)] == ["NONE", "WARMUP", "RECORD", "RECORD_AND_SAVE", "NONE", "NONE"]
    ready = []
    with profiler.profile(schedule=actions, on_trace_ready=lambda p: ready.append(p.events())) as prof:
        for _ in range(6):
            train_step(*warm_mlp)
            prof.step()
    assert len(ready) == 1
    events = ready[0]
    assert sorted(e.name for e in events if e.category == "user") == ["ProfilerStep#2", "ProfilerStep#3"]
    assert len(runs(events)) == 2  # the two active steps, not the warm-up
    for step in (e for e in events if e.category == "user"):
        assert len([r for r in runs(events) if inside(r, step)]) == 1
    with pytest.raises(ValueError, match="active"):
        profiler.schedule(wait=0, warmup=0, active=0)


def test_key_averages_table_sorts_and_counts(warm_mlp):
    with profiler.profile() as prof:
        for _ in range(3):
            train_step(*warm_mlp)
    averages = prof.key_averages()
    by_key = {a.key: a for a in averages}
    assert by_key["run plan"].count == 3 and by_key["MatMul"].count % 3 == 0
    for a in averages:
        assert a.self_cpu_time_total <= a.cpu_time_total + 1e-6
    table = averages.table(sort_by="self_cpu_time_total", row_limit=5)
    rows = table.splitlines()[3:8]
    assert len(rows) == 5
    selfs = sorted((a.self_cpu_time_total for a in averages), reverse=True)[:5]
    assert [r.split()[0] for r in rows] == [
        next(a for a in averages if a.self_cpu_time_total == s).key.split()[0] for s in selfs]
    with pytest.raises(ValueError, match="sort_by"):
        averages.table(sort_by="nonsense")


def test_emulated_cuda_steps_are_listed_once_with_their_lines():
    loom._C._set_executor("cuda-emulated")
    try:
        loom.clear_plan_cache()
        parts = mlp(1)
        before = loom.metrics()
        with profiler.profile() as prof:
            train_step(*parts)  # the first run of a plan: direct launches, each counted
        work = delta(before, loom.metrics())
        (run,) = runs(prof.events())
        assert run.args["executor"] == "cuda-emulated"
        steps = step_events(prof.events())
        assert int(run.args["steps"]) == len(steps) == work["kernel_launches"]
        kernels = [e for e in steps if e.category == "kernel"]
        assert kernels and all(k.fused and all(w and w[0] == HERE for _, w in k.fused) for k in kernels)
        assert any(e.category == "blas" for e in steps)
        for _ in range(2):
            train_step(*parts)  # captured, then replayed
        with profiler.profile() as prof:
            train_step(*parts)
        (run,) = runs(prof.events())
        assert run.args.get("graph") == "replay"
        assert int(run.args["steps"]) == len(step_events(prof.events()))
    finally:
        loom._C._set_executor("compiled")


def test_profiles_do_not_nest():
    with profiler.profile():
        with pytest.raises(RuntimeError, match="already running"):
            with profiler.profile():
                pass


def test_a_new_trace_shows_its_lookup_miss_lowering_and_compile():
    loom._C._set_executor("compiled")
    loom.clear_plan_cache()
    x = loom.tensor(np.linspace(0, 1, 37 * 53, dtype=np.float32).reshape(37, 53)).to("lazy")
    with profiler.profile() as prof:
        values = (x.sin() * x.cos()).sum(1).numpy()
    np.testing.assert_allclose(values, (np.sin(x.numpy()) * np.cos(x.numpy())).sum(1), rtol=1e-5)
    events = prof.events()
    (lookup,) = [e for e in events if e.name == "plan cache lookup"]
    (lower,) = [e for e in events if e.name == "lower plan"]
    (compile_,) = [e for e in events if e.category == "compile"]
    kernels = [e for e in events if e.category == "kernel"]
    assert lookup.args["result"] == "miss" and inside(lower, lookup) and inside(compile_, lower)
    assert compile_.name == "compile c++ module"
    assert int(compile_.args["kernels"]) == len(kernels) == len(compile_.args["kernel names"].split())
    assert compile_.args["from"] in ("compiler", "disk cache", "memory cache")
    assert float(compile_.args["compiler seconds"]) >= 0
    (run,) = runs(events)
    assert not inside(kernels[0], lower) and inside(kernels[0], run)


def test_a_collective_is_a_step_of_its_own_category():
    dist = pytest.importorskip("loom.distributed")
    if not dist.is_gloo_available():
        pytest.skip("this build has no Gloo")
    loom._C._set_executor("compiled")
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:0", rank=0, world_size=1)
    try:
        t = loom.arange(6.0, device="lazy") * 2.0
        with profiler.profile() as prof:
            line = inspect.currentframe().f_lineno + 1
            dist.all_reduce(t)
            assert t.tolist() == [0.0, 2.0, 4.0, 6.0, 8.0, 10.0]
    finally:
        dist.destroy_process_group()
    (step,) = [e for e in step_events(prof.events()) if e.category == "collective"]
    assert step.name == "AllReduce" and step.source[1] == line
    assert step.bytes_read == step.bytes_written == 6 * 4
