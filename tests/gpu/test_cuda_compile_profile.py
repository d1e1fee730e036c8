"""loom.compile and loom.profiler on a real GPU (issues 16 and 18): their host-emulated forms are
tested in tests/python (test_compile.py, test_profiler.py with the "cuda-emulated" executor);
here the same paths meet the driver. A compiled training step on lazy:cuda computes what the
uncompiled one does and replays as one CUDA Graph launch per call with nothing recorded; a
profile of a lazy:cuda step holds device-timed events (CUDA events on loom's stream) that lie
inside the host's span of the run and reach the Chrome trace."""

import json

import numpy as np

import loom
import workloads as W
from loom import profiler
from test_cuda_graphs import training_setup


def compiled_step(model, optimizer):
    @loom.compile
    def step(x, y):
        loss = loom.nn.functional.cross_entropy(model(x), y)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        return loss
    return step


def test_a_compiled_step_on_the_gpu_equals_the_uncompiled_one_and_replays_one_graph():
    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    want = [W.train_step(loom, model, optimizer, x, y).item() for _ in range(12)]

    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    step = compiled_step(model, optimizer)
    got = [step(x, y).item() for _ in range(4)]
    before = loom.metrics()
    got += [step(x, y).item() for _ in range(8)]
    after = loom.metrics()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    delta = {k: after[k] - before[k] for k in after}
    assert delta["compiled_replays"] == 8
    assert delta["graph_replays"] == 8, delta  # one CUDA Graph launch per call
    assert delta["nodes_recorded"] == 0 and delta["kernels_compiled"] == 0 and delta["traces"] == 0


def test_a_held_output_of_a_gpu_replay_is_not_overwritten():
    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    step = compiled_step(model, optimizer)
    for _ in range(4):
        step(x, y)
    held = step(x, y)
    value = held.item()
    step(x, y).item()
    assert held.item() == value


def test_a_profiled_gpu_step_has_device_timed_events_inside_the_run(tmp_path):
    model, optimizer, x, y = training_setup("mlp", "lazy:cuda")
    for _ in range(3):
        W.train_step(loom, model, optimizer, x, y).item()  # captured and replayed before profiling
    with profiler.profile() as prof:
        W.train_step(loom, model, optimizer, x, y).item()
    events = prof.events()
    device = [e for e in events if e.is_device]
    assert device, [(e.category, e.name) for e in events]
    assert all(e.duration_ns > 0 for e in device)
    runs = [e for e in events if e.category == "plan" and e.name == "run plan"]
    assert len(runs) == 1
    # Device events are placed on the host's clock: none starts before the run that launched it
    # or after the profile's last host event ends.
    end = max(e.start_ns + e.duration_ns for e in events if not e.is_device)
    assert all(runs[0].start_ns <= e.start_ns <= end for e in device)
    path = tmp_path / "trace.json"
    prof.export_chrome_trace(str(path))
    names = [t.get("name") for t in json.loads(path.read_text())["traceEvents"]]
    assert all(e.name in names for e in device)
