"""`python3 -m loom.perf [options]`: the perf harness of an installed loom (perf/run.py)."""

import os
import runpy
import sys

# run.py writes beside itself by default, which is site-packages once installed: default to the
# current folder instead.
if not any(arg == "--out" or arg.startswith("--out=") for arg in sys.argv[1:]):
    sys.argv += ["--out", os.path.join(os.getcwd(), "loom-perf-results")]
runpy.run_path(os.path.join(os.path.dirname(os.path.abspath(__file__)), "run.py"), run_name="__main__")
