"""What tests/gpu/check.sh prints about a machine before it trusts it, one line per fact.

`probe.py python`: the interpreter, whether its Python.h exists (the extension cannot build
without it), the packages the check uses (numpy, pytest, pytest-timeout, matplotlib) and what
PyTorch sees. `probe.py loom N`: after the build, what loom sees, with the CUDA libraries the
process mapped (loom's and PyTorch's copies of libcudart and friends share their sonames, so the
first loaded serves both); exits 3 when nvidia-smi listed N > 0 GPUs and loom sees none, and 4
when loom was built without its CUDA backend. `probe.py bench RESULTS_JSON`: the rows of a
perf/run.py run that are not "ok" (a mode that did not run, errored or disagreed), "no rows" when
it has none, nothing when all are fine. Runs on the standard library alone until it imports what
it reports on.
"""

import importlib
import json
import os
import re
import sys
import sysconfig


def python():
    include = sysconfig.get_paths()["include"]
    header = os.path.join(include, "Python.h")
    print(f"python: {sys.executable} {sys.version.split()[0]}")
    print(f"Python.h: {header} {'found' if os.path.exists(header) else 'MISSING'}")
    if not os.path.exists(header):
        # The headers of the same Python version installed elsewhere build the same extension.
        version = f"python{sys.version_info.major}.{sys.version_info.minor}"
        for top in ("/usr/include", "/usr/local/include", "/opt", "/root", sys.base_prefix):
            found = next((d for d, _, files in _walk(top, 5) if "Python.h" in files and d.endswith(version)), None)
            if found:
                print(f"Python.h elsewhere: {found}")
                break
    for name in ("numpy", "pytest", "pytest_timeout", "matplotlib"):
        try:
            module = importlib.import_module(name)
            print(f"{name}: {getattr(module, '__version__', 'present')}")
        except Exception as e:  # a package that fails to import is as missing as an absent one
            print(f"{name}: missing ({type(e).__name__}: {str(e)[:80]})")
    try:
        import torch
    except Exception as e:
        print(f"torch: missing ({type(e).__name__}: {str(e)[:80]})")
        return 0
    line = f"torch: {torch.__version__}, torch.version.cuda {torch.version.cuda}"
    try:
        if torch.cuda.is_available():
            line += f", sees {torch.cuda.device_count()} GPU(s): {torch.cuda.get_device_name(0)}"
        else:
            line += ", sees no GPU"
    except Exception as e:
        line += f", CUDA query failed: {type(e).__name__}: {str(e)[:80]}"
    print(line)
    return 0


def _walk(top, depth):
    """os.walk, at most `depth` folders down."""
    base = top.rstrip("/").count("/")
    for d, dirs, files in os.walk(top):
        if d.count("/") - base >= depth:
            dirs[:] = []
        yield d, dirs, files


def mapped_cuda_libraries():
    found = set()
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if re.search(r"/lib(cudart|nvrtc|cublas|cublasLt|cuda)\.so", path):
                found.add(path)
    return sorted(found)


def loom_(gpus):
    import loom

    print(f"loom: {loom.__file__}")
    print(f"CUDA backend compiled: {loom.cuda.is_compiled()}")
    count = loom.cuda.device_count()
    reason = loom.cuda.unavailable_reason()
    print(f"loom sees {count} GPU(s){': ' + reason if reason else ''}")
    if count:
        print(f"driver entry points: {loom._C._cuda_driver_status() or 'ok'}")
    try:
        import torch

        if torch.cuda.is_available():
            torch.zeros(1, device="cuda")  # loads PyTorch's CUDA libraries too
    except Exception as e:
        print(f"torch: {type(e).__name__}: {str(e)[:120]}")
    for path in mapped_cuda_libraries():
        print(f"mapped: {path}")
    if not loom.cuda.is_compiled():
        print("FAIL: loom was built without its CUDA backend")
        return 4
    if gpus > 0 and count == 0:
        print(f"FAIL: nvidia-smi lists {gpus} GPU(s) but loom.cuda.device_count() is 0 ({reason}): every GPU "
              "test would be skipped, so the check stops here")
        return 3
    return 0


def bench(path):
    with open(path) as f:
        rows = json.load(f)["rows"]
    bad = {}  # (status, message) -> the rows that had it
    for r in rows:
        if r["status"] != "ok":
            bad.setdefault((r["status"], r.get("message", "")[:120]), []).append(f"{r['case']} {r['mode']}")
    parts = []
    for (status, message), where in bad.items():
        more = f" and {len(where) - 4} more" if len(where) > 4 else ""
        parts.append(f"{status} ({message}): {', '.join(where[:4])}{more}")
    if not rows:
        print("no rows")
    elif parts:
        print("; ".join(parts))
    return 0


if __name__ == "__main__":
    if sys.argv[1:2] == ["python"]:
        sys.exit(python())
    if sys.argv[1:2] == ["loom"] and len(sys.argv) == 3:
        sys.exit(loom_(int(sys.argv[2])))
    if sys.argv[1:2] == ["bench"] and len(sys.argv) == 3:
        sys.exit(bench(sys.argv[2]))
    sys.exit("usage: probe.py python | probe.py loom GPUS_NVIDIA_SMI_LISTS | probe.py bench RESULTS_JSON")
