"""Every CUDA module the suites rendered compiles with NVRTC for sm_90 (Hopper), no GPU needed.

The executor writes the CUDA rendering of each module it lowers to $LOOM_CUDA_RENDER_DIR
(conftest.py sets it); this file runs last and compiles them all.
"""

import glob
import os

import pytest

import loom


def test_rendered_cuda_modules_compile_with_nvrtc():
    if not loom._C._nvrtc_available():
        pytest.skip("this build of loom has no NVRTC (built without the CUDA toolkit)")
    directory = os.environ["LOOM_CUDA_RENDER_DIR"]
    if not glob.glob(os.path.join(directory, "*.cu")):
        # Run alone: render a representative module first.
        x = loom.arange(12.0, device="lazy").reshape(3, 4)
        (x.softmax(-1) * 2).argmax(-1).tolist()
    failures = []
    paths = sorted(glob.glob(os.path.join(directory, "*.cu")))
    for path in paths:
        with open(path) as f:
            source = f.read()
        try:
            loom._C._nvrtc_compile(source, 90, os.path.basename(path))
        except RuntimeError as e:
            failures.append(f"{path}: {str(e)[:2000]}")
    assert paths
    assert not failures, f"{len(failures)} of {len(paths)} CUDA modules failed to compile:\\n" + "\\n".join(failures[:5])
