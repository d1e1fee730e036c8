#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (CMake, nvcc, Python with numpy, pytest and
# PyTorch; no Boost, no apt, no internet): builds loom with its CUDA backend, runs the GPU test
# suites and the Python suites on that build, runs the GPU benchmarks of BENCH.md (perf/run.py
# --device cuda, PyTorch modes included), and writes a short report to the folder given as the
# first argument (default: $OUT, else ./gpu-report). Meant to finish in under 8 minutes.
set -uo pipefail
cd "$(dirname "$0")/../.."
report_dir=${1:-${OUT:-gpu-report}}
mkdir -p "$report_dir"
report="$report_dir/report.md"
PYTHON=${PYTHON:-python3}
log() { echo "$@" | tee -a "$report"; }

: > "$report"
log "# loom GPU check, $(date -u '+%Y-%m-%d %H:%M UTC')"
log ""
log '```'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$report"
nvcc --version | tail -1 | tee -a "$report"
$PYTHON -c "import sys, numpy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__)" 2>&1 | tee -a "$report"
log '```'

# Build: the C++ suites need Boost.Test, which this machine lacks; the Python suites run instead.
start=$(date +%s)
if cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON -DLOOM_BUILD_TESTS=OFF \
     -DPython3_EXECUTABLE="$(command -v $PYTHON)" > "$report_dir/build.log" 2>&1 &&
   cmake --build build-gpu -j "$(nproc)" >> "$report_dir/build.log" 2>&1; then
  log "- build: ok ($(( $(date +%s) - start )) s)"
else
  log "- build: FAILED (last lines of build.log below)"
  log '```'; tail -30 "$report_dir/build.log" | tee -a "$report"; log '```'
  exit 1
fi
export PYTHONPATH="$PWD/build-gpu/python"
export LOOM_CACHE_DIR="$report_dir/loom-cache"

run_pytest() {  # name, paths...
  local name=$1; shift
  local out="$report_dir/$name.log"
  timeout 240 $PYTHON -m pytest -q -p no:cacheprovider "$@" > "$out" 2>&1
  local rc=$?
  log "- $name: $(tail -1 "$out") (exit $rc)"
  grep -E "^(FAILED|ERROR)" "$out" | head -20 | sed 's/^/  - /' | tee -a "$report"
}
run_pytest gpu-tests tests/gpu
run_pytest python-suites tests/python -x --deselect tests/python/test_zz_cuda_renders.py

log ""
log "## Benchmarks (perf/run.py --device cuda --quick)"
timeout 300 $PYTHON perf/run.py --device cuda --quick --out "$report_dir/perf" > "$report_dir/perf.log" 2>&1
log "exit $?"
cat "$report_dir/perf/results.md" >> "$report" 2>/dev/null || tail -20 "$report_dir/perf.log" >> "$report"
