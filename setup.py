"""Builds the loom wheel by driving its CMake build (pyproject.toml names this file's backend).

The engine (libloom), the extension (loom._C) and the generated loom/version.py are built by
CMake into <build dir>/python/loom, the same package root `cmake --build` makes; the Python files
come from pyext/loom (the package) and perf/ (loom.perf, the benchmark harness).

  pip install --no-build-isolation .       a wheel: everything copied into site-packages
  pip install --no-build-isolation -e .    development: imports read pyext/loom and perf/ in
                                           place, and the built files are linked into
                                           pyext/loom, so `cmake --build build` updates them

Options, from the environment (pip's --config-settings do not reach setuptools' commands):
  LOOM_BUILD_DIR    the CMake build folder (default: build/ in the source tree, reused)
  LOOM_BUILD_TYPE   CMAKE_BUILD_TYPE of a new build folder (default: Release)
  LOOM_CUDA         AUTO (default: when the CUDA toolkit is found), ON or OFF
  LOOM_BUILD_JOBS   parallel build jobs (default: every core)
  CMAKE_GENERATOR   the generator of a new build folder (default: Ninja when ninja is installed)
"""

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, find_packages, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent

# What CMake makes in <build>/python/loom besides copies of pyext/loom's Python files.
BUILT_FILES = ("libloom.so", "version.py")


def project_version():
    for line in (ROOT / "CMakeLists.txt").read_text().splitlines():
        if line.startswith("project(loom VERSION "):
            return line.split()[2].rstrip(")")
    raise RuntimeError("CMakeLists.txt: no `project(loom VERSION x.y.z ...)` line")


def cmake_options(build_dir):
    """-D options for CMake: the interpreter always (the extension is built for it); the rest only
    when the environment asks, or for a new build folder, so an existing folder keeps its own."""
    options = {"Python3_EXECUTABLE": sys.executable}
    fresh = not (build_dir / "CMakeCache.txt").exists()
    if "LOOM_CUDA" in os.environ:
        options["LOOM_CUDA"] = os.environ["LOOM_CUDA"]
    if fresh or "LOOM_BUILD_TYPE" in os.environ:
        options["CMAKE_BUILD_TYPE"] = os.environ.get("LOOM_BUILD_TYPE", "Release")
    if fresh:
        options["LOOM_BUILD_TESTS"] = "OFF"  # the C++ suites need Boost.Test; a wheel needs neither
    args = [f"-D{name}={value}" for name, value in options.items()]
    if fresh and "CMAKE_GENERATOR" not in os.environ:
        # Chosen before the first configure: a failed `-G Ninja` leaves a cache that pins it.
        args += ["-G", "Ninja" if shutil.which("ninja") else "Unix Makefiles"]
    return args


class CMakeBuild(build_ext):
    """Builds loom._C (and what it needs) with CMake instead of setuptools' compiler."""

    def run(self):
        # Editable installs (and --inplace) import from pyext/loom: link the built files there.
        # (setuptools clears `inplace` while building, so decide here.)
        self.link_into_source = bool(self.editable_mode or self.inplace)
        super().run()

    def copy_extensions_to_source(self):
        pass  # run() linked them already

    def build_extension(self, ext):
        build_dir = Path(os.environ.get("LOOM_BUILD_DIR", ROOT / "build")).resolve()
        jobs = os.environ.get("LOOM_BUILD_JOBS", str(os.cpu_count() or 1))
        subprocess.run(["cmake", "-S", str(ROOT), "-B", str(build_dir), *cmake_options(build_dir)], check=True)
        subprocess.run(["cmake", "--build", str(build_dir), "--target", "loom_python", "-j", jobs], check=True)

        built = build_dir / "python" / "loom"
        extension = Path(self.get_ext_fullpath(ext.name))
        names = [extension.name, *BUILT_FILES]
        for name in names:
            if not (built / name).exists():
                raise RuntimeError(f"the CMake build made no {built / name}")
            place(built / name, extension.parent / name, link=False)
        if self.link_into_source:
            source = Path(self.get_finalized_command("build_py").get_package_dir("loom")).resolve()
            for name in names:
                place(built / name, source / name, link=True)


def place(source, target, link):
    """Copies `source` to `target`, or links it (relatively, so the checkout can move)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    if target.is_symlink() or target.exists():
        target.unlink()
    if link:
        target.symlink_to(os.path.relpath(source, target.parent))
    else:
        shutil.copy2(source, target)


setup(
    version=project_version(),
    packages=find_packages("pyext") + ["loom.perf"],
    package_dir={"loom": "pyext/loom", "loom.perf": "perf"},
    ext_modules=[Extension("loom._C", sources=[])],
    cmdclass={"build_ext": CMakeBuild},
    options={"build": {"build_base": "build/setuptools"}},  # beside CMake's files, not among them
    zip_safe=False,
)
