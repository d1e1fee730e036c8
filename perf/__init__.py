"""loom's perf harness (BENCH.md). Run it from a checkout with `perf/run.py`, or from an installed
loom with `python3 -m loom.perf` (same options; see --help)."""
