"""tests/gpu/check.sh, the one command for a GPU machine, checked where there is none: it fails
at once, with the reason, where no GPU is found; it chooses its CMake generator before
configuring (Unix Makefiles where ninja is missing, a folder configured for another generator
configured afresh); a stage that outlives the deadline is killed and the report keeps every
stage before it, written as each ends; where nvidia-smi lists a GPU loom does not see, it stops
and says so. And the benchmark harness it runs writes its table case by case, with or without
matplotlib. The runs use the build under test (CHECK_PREBUILT), never build loom again."""

import os
import shutil
import subprocess
import sys
import threading
import time

import pytest

import loom

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
CHECK = os.path.join(ROOT, "tests", "gpu", "check.sh")
BUILD = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(loom.__file__))))  # <build>/python/loom


@pytest.fixture(scope="module")
def path_without(tmp_path_factory):
    """path_without(names, add={}) -> today's PATH without the programs `names`, with the scripts
    of `add` (name -> text) first. A folder of PATH that holds one of `names` is replaced by a
    folder of links to its other entries."""
    made = {}

    def make(names, add=None):
        key = (frozenset(names), tuple(sorted((add or {}).items())))
        if key in made:
            return made[key]
        root = tmp_path_factory.mktemp("path")
        folders = []
        if add:
            folders.append(str(root / "added"))
            os.makedirs(folders[-1])
            for name, text in add.items():
                (root / "added" / name).write_text(text)
                os.chmod(root / "added" / name, 0o755)
        for i, d in enumerate(os.environ.get("PATH", "").split(os.pathsep)):
            if not os.path.isdir(d) or not any(os.path.lexists(os.path.join(d, n)) for n in names):
                folders.append(d)
                continue
            shim = root / f"shim{i}"
            shim.mkdir()
            for entry in os.listdir(d):
                if entry not in names:
                    os.symlink(os.path.join(d, entry), shim / entry)
            folders.append(str(shim))
        made[key] = os.pathsep.join(folders)
        return made[key]

    return make


def check_env(tmp_path, **extra):
    env = dict(os.environ, PYTHON=sys.executable, LOOM_CACHE_DIR=str(tmp_path / "cache"), TMPDIR=str(tmp_path))
    for key in ("CHECK_STAGES", "CHECK_DEADLINE", "CHECK_PREBUILT", "CHECK_BUILD_DIR", "CHECK_WITHOUT_GPU", "OUT"):
        env.pop(key, None)
    env.update(extra)
    return env


def run_check(tmp_path, env, timeout=120):
    out = tmp_path / "report"
    done = subprocess.run(["bash", CHECK, str(out)], env=env, capture_output=True, text=True, timeout=timeout)
    report = (out / "report.md").read_text()
    status = [line.split("\t") for line in (out / "status.tsv").read_text().splitlines()]
    return done, report, status, out


def verdicts(status):
    return {row[0]: row[1] for row in status}


def test_without_a_gpu_the_check_fails_at_once_and_says_why(tmp_path, path_without):
    env = check_env(tmp_path, PATH=path_without({"nvidia-smi"}))
    done, report, status, out = run_check(tmp_path, env, timeout=60)
    assert done.returncode == 1, done.stderr
    assert status == [["machine", "FAIL", status[0][2], "no GPU: nvidia-smi not found"]]
    # What the machine has is printed all the same, and the report ends with its summary.
    for line in ("nvcc:", "C++ compiler:", "Python.h:", "torch:", "ninja:"):
        assert line in report
    assert "| machine | FAIL |" in report and "Overall: FAIL (exit 1)" in report
    assert sorted(os.listdir(out)) == ["logs.tar.gz", "report.md", "status.tsv"]


def test_without_ninja_the_check_configures_for_make_over_a_stale_cache(tmp_path, path_without):
    # A folder configured for Ninja before (here: its cache alone) would make cmake refuse
    # another generator; the check removes that cache first.
    if not shutil.which("cmake") or not (shutil.which("nvcc") or os.path.exists("/usr/local/cuda/bin/nvcc")):
        pytest.skip("the check configures with CMake and the CUDA toolkit (LOOM_CUDA=ON)")
    build = tmp_path / "build"
    build.mkdir()
    (build / "CMakeCache.txt").write_text("CMAKE_GENERATOR:INTERNAL=Ninja\n")
    env = check_env(tmp_path, PATH=path_without({"ninja", "nvidia-smi"}),
                    CHECK_WITHOUT_GPU="1", CHECK_STAGES="configure", CHECK_BUILD_DIR=str(build))
    done, report, status, _ = run_check(tmp_path, env, timeout=300)
    assert done.returncode == 1  # no GPU, all the same
    assert verdicts(status) == {"machine": "FAIL", "configure": "PASS"}, report
    assert "generator: Unix Makefiles (ninja not found)" in report
    assert "was configured for 'Ninja', not 'Unix Makefiles': its cache is removed" in report
    assert "CMAKE_GENERATOR:INTERNAL=Unix Makefiles" in (build / "CMakeCache.txt").read_text()
    assert (build / "Makefile").exists() and not (build / "build.ninja").exists()


def test_a_stage_past_the_deadline_is_killed_and_earlier_stages_are_already_reported(tmp_path, path_without):
    # The smoke test never ends here (a python that sleeps instead); the deadline kills it. While
    # it sleeps, the report already holds the stages before it.
    sleepy = f"""#!/bin/sh
case "$*" in *tests/gpu/smoke.py*) touch "{tmp_path}/smoke-started"; exec sleep 600 ;; esac
exec "{sys.executable}" "$@"
"""
    (tmp_path / "python").write_text(sleepy)
    os.chmod(tmp_path / "python", 0o755)
    env = check_env(tmp_path, PATH=path_without({"nvidia-smi"}), PYTHON=str(tmp_path / "python"),
                    CHECK_WITHOUT_GPU="1", CHECK_PREBUILT=BUILD, CHECK_STAGES="import,smoke", CHECK_DEADLINE="20")
    out = tmp_path / "report"
    seen = {}

    def watch():  # what the report said while the smoke stage ran
        while not (tmp_path / "smoke-started").exists() and not seen.get("stop"):
            time.sleep(0.1)
        if (out / "status.tsv").exists():
            seen["status"] = (out / "status.tsv").read_text()

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        done, report, status, _ = run_check(tmp_path, env, timeout=120)
    finally:
        seen["stop"] = True
        watcher.join()
    assert done.returncode == 1
    assert [row[0] for row in status] == ["machine", "configure", "build", "import", "smoke"]
    assert verdicts(status)["import"] == "PASS", report
    assert verdicts(status)["smoke"] == "KILLED", report
    assert "killed by the deadline (20 s for the whole check, CHECK_DEADLINE)" in dict((r[0], r[3]) for r in status)["smoke"]
    assert "Overall: FAIL (exit 1)" in report
    assert [line.split("\t")[0] for line in seen["status"].splitlines()] == ["machine", "configure", "build", "import"]


def test_a_gpu_that_nvidia_smi_lists_and_loom_does_not_see_stops_the_check(tmp_path, path_without):
    if loom.cuda.is_available() or not loom.cuda.is_compiled():
        pytest.skip("loom sees a GPU here, or has no CUDA backend to look for one with")
    fake = {"nvidia-smi": '#!/bin/sh\ncase "$*" in *-L*) echo "GPU 0: NVIDIA H200 (UUID: GPU-0)" ;; '
                          '*) echo "0, NVIDIA H200, 580.00, 143771 MiB, 9.0" ;; esac\n'}
    env = check_env(tmp_path, PATH=path_without({"nvidia-smi"}, add=fake),
                    CHECK_PREBUILT=BUILD, CHECK_STAGES="import,smoke")
    done, report, status, _ = run_check(tmp_path, env)
    assert done.returncode == 1
    assert verdicts(status) == {"machine": "PASS", "configure": "SKIPPED", "build": "SKIPPED", "import": "FAIL"}
    assert "FAIL: nvidia-smi lists 1 GPU(s) but loom.cuda.device_count() is 0" in report
    # Without the import stage, the GPU suites refuse to pass by skipping.
    env["CHECK_STAGES"] = "test_cuda_runtime"
    done, report, status, _ = run_check(tmp_path, env)
    assert done.returncode == 1
    assert verdicts(status)["test_cuda_runtime"] == "FAIL"
    assert "LOOM_REQUIRE_GPU=1, but loom sees no GPU" in report


# ---- the harness's outputs (perf/run.py, perf/report.py) ----

@pytest.fixture
def harness(monkeypatch):
    monkeypatch.syspath_prepend(os.path.join(ROOT, "perf"))
    import run

    yield run
    loom._C._set_executor("compiled")


def test_the_harness_writes_its_table_case_by_case(harness, tmp_path, monkeypatch):
    # A run cut short after its first case (here: an interrupt at the second) keeps that case.
    real, calls = harness.run_case, []

    def first_case_only(case, modes, device):
        calls.append(case.name)
        if len(calls) > 1:
            raise KeyboardInterrupt
        return real(case, modes, device)

    monkeypatch.setattr(harness, "run_case", first_case_only)
    with pytest.raises(KeyboardInterrupt):
        harness.main(["--workloads", "softmax", "--modes", "loom-eager", "--quick", "--out", str(tmp_path)])
    table = (tmp_path / "results.md").read_text()
    assert table.startswith("**partial results")
    assert f"| {calls[0]} | loom-eager |" in table
    assert calls[1] not in table


def test_the_harness_writes_no_chart_without_matplotlib(harness, tmp_path, monkeypatch, capsys):
    import report

    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib raises ImportError
    results = dict(device="cpu", quick=True, date="today", machine=dict(cpu="a CPU"), modes_run=["loom-eager"],
                   rows=[dict(workload="chain", case="chain 1e3", mode="loom-eager", unit="step", note="",
                              status="ok", median_s=1e-3, min_s=1e-3, max_s=2e-3, vs={})])
    table = report.write_all(results, [], str(tmp_path))
    assert "| chain 1e3 | loom-eager | 1 ms / step |" in table
    assert sorted(os.listdir(tmp_path)) == ["results.json", "results.md"]
    assert "matplotlib is not installed: no chart" in capsys.readouterr().err
