"""Installing loom as Python users expect: a wheel built by `pip` from the checkout installs into a
fresh virtual environment, works from outside the checkout, uninstalls without a trace, and does
not touch other installs (the checkout's own, the system's).

The wheel build reuses the CMake build folder of the loom under test (setup.py's LOOM_BUILD_DIR),
so it compiles nothing new."""

import os
import pathlib
import site
import subprocess
import sys
import sysconfig

import pytest

import loom

ROOT = pathlib.Path(__file__).resolve().parents[2]

# A lazy training step, run by the installed loom from a folder outside the checkout.
TRAIN = """
import os, sys, loom
assert os.path.realpath(loom.__file__).startswith(os.path.realpath(sys.prefix)), loom.__file__
model = loom.nn.Sequential(loom.nn.Linear(8, 16), loom.nn.GELU(), loom.nn.Linear(16, 3)).to("lazy")
opt = loom.optim.AdamW(model.parameters(), lr=1e-2)
x = loom.randn(4, 8, device="lazy")
y = loom.tensor([0, 1, 2, 1], device="lazy")
losses = []
for _ in range(5):
    loss = loom.nn.functional.cross_entropy(model(x), y)
    opt.zero_grad()
    loss.backward()
    opt.step()
    losses.append(loss.item())
assert losses[-1] < losses[0], losses
print(loom.__version__, loom.version.git)
"""


def build_folder():
    """The CMake build folder that made the loom under test (<build>/python/loom/_C*.so)."""
    extension = pathlib.Path(os.path.realpath(loom._C.__file__))
    return extension.parents[2]


def clean_env(**extra):
    """The environment without PYTHONPATH: a venv's interpreter must import its own loom, not the
    build tree a developer's PYTHONPATH points at."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env.update(extra)
    return env


def run(*args, cwd, env=None, timeout=600):
    env = clean_env() if env is None else env
    done = subprocess.run([str(a) for a in args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)
    assert done.returncode == 0, f"{' '.join(map(str, args))} failed:\n{done.stdout}\n{done.stderr}"
    return done.stdout


def site_packages(venv):
    return pathlib.Path(run(venv / "bin" / "python", "-c", "import sysconfig; print(sysconfig.get_path('purelib'))",
                            cwd=venv).strip())


@pytest.fixture(scope="module")
def wheel(tmp_path_factory):
    out = tmp_path_factory.mktemp("wheel")
    env = clean_env(LOOM_BUILD_DIR=str(build_folder()))
    run(sys.executable, "-m", "pip", "wheel", "--no-build-isolation", "--no-deps", "--no-index", "-q", "-w", out, ROOT,
        cwd=out, env=env)
    wheels = list(out.glob("loom-*.whl"))
    assert len(wheels) == 1, wheels
    return wheels[0]


def test_wheel_has_the_engine_the_extension_the_package_and_the_harness(wheel):
    import zipfile

    names = set(zipfile.ZipFile(wheel).namelist())
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    for name in [f"loom/_C{suffix}", "loom/libloom.so", "loom/version.py", "loom/__init__.py", "loom/nn/functional.py",
                 "loom/optim/adam.py", "loom/perf/run.py", "loom/perf/__main__.py"]:
        assert name in names, f"{name} missing from {wheel.name}"
    assert wheel.name.startswith(f"loom-{loom.__version__}-")


def test_wheel_installs_into_a_fresh_venv_runs_outside_the_checkout_and_uninstalls_cleanly(wheel, tmp_path):
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", "--system-site-packages", venv, cwd=tmp_path)
    python = venv / "bin" / "python"
    run(python, "-m", "pip", "install", "--no-deps", "--no-index", "-q", wheel, cwd=tmp_path)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    version, git = run(python, "-c", TRAIN, cwd=elsewhere).split()
    assert version == loom.__version__ and git == loom.version.git
    assert "usage" in run(python, "-m", "loom.perf", "--help", cwd=elsewhere)

    # The checkout's own loom is untouched by the second install beside it.
    mine = run(sys.executable, "-c", "import loom, os; print(os.path.realpath(loom.__file__))", cwd=elsewhere,
               env=dict(os.environ))
    assert not mine.startswith(os.path.realpath(venv))

    run(python, "-m", "pip", "uninstall", "-y", "-q", "loom", cwd=tmp_path)
    left = [p.name for p in site_packages(venv).iterdir() if p.name.lower().startswith("loom")]
    assert left == [], f"pip uninstall left {left}"
    gone = subprocess.run([python, "-c", "import loom"], cwd=elsewhere, env=clean_env(), capture_output=True, text=True)
    assert gone.returncode != 0


def test_version_and_config_describe_this_build():
    assert loom.__version__ == loom.version.__version__
    assert loom.__version__.count(".") == 2
    assert loom.version.git
    assert (loom.version.cuda is None) == (not loom.cuda.is_compiled())
    text = loom.show_config()
    assert text.startswith(f"loom {loom.__version__} (git {loom.version.git})")
    for fact in ["C++ compiler", "C++ flags", "CPU matrix products", "CUDA toolkit"]:
        assert fact in text


def test_config_names_the_compile_cache_in_use(tmp_path):
    cache = tmp_path / "cache"
    code = "import loom; print(loom.show_config())"
    env = dict(os.environ, LOOM_CACHE_DIR=str(cache))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert f"compile cache: {cache}/cpu" in done.stdout, done.stdout + done.stderr


def test_no_machine_wide_install_points_at_a_checkout():
    """Setup installs into the checkout's own environment: no .pth in the system's site-packages
    makes one checkout's build "the" loom of every program on the machine."""
    for folder in site.getsitepackages() + [site.getusersitepackages()]:
        pth = pathlib.Path(folder) / "loom.pth"
        assert not pth.exists(), f"{pth} points every Python program on this machine at {pth.read_text().strip()}"
