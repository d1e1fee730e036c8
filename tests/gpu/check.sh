#!/usr/bin/env bash
# One command for a machine with an NVIDIA GPU (CMake, nvcc, Python with numpy, pytest and
# PyTorch; no Boost, no apt, no internet): builds loom with its CUDA backend, runs the GPU
# suites (and their LOOM_LAUNCH_BLOCKING=1 variant), the host-side CUDA suites, and the GPU
# benchmarks of BENCH.md (perf/run.py --device cuda --quick, PyTorch modes included), and writes
# a short report to the folder given as the first argument (default: $OUT, else ./gpu-report).
# Meant to finish in under 8 minutes. CHECK_CPU_SUITES=1 also runs the whole Python suite
# afterwards (a few more minutes; CI runs it anyway). On a GPU machine plain "lazy" means the
# GPU, so the lazy halves of those suites then run on it: expect failures where they call
# .numpy() on a lazy result (GPU tensors need .cpu() first, as in PyTorch).
set -uo pipefail
cd "$(dirname "$0")/../.."
report_dir=${1:-${OUT:-gpu-report}}
mkdir -p "$report_dir"
report="$report_dir/report.md"
PYTHON=${PYTHON:-python3}
log() { echo "$@" | tee -a "$report"; }
began=$(date +%s)

: > "$report"
log "# loom GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $(git rev-parse --short HEAD 2>/dev/null)"
log ""
log '```'
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1 | tee -a "$report"
nvcc --version | tail -1 | tee -a "$report"
$PYTHON -c "import sys, numpy, torch; print(sys.version.split()[0], 'numpy', numpy.__version__, 'torch', torch.__version__)" 2>&1 | tee -a "$report"
log '```'

# Build: the C++ suites need Boost.Test, which this machine lacks; the Python suites run instead.
start=$(date +%s)
if cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON -DLOOM_BUILD_TESTS=OFF \
     -DPython3_EXECUTABLE="$(command -v $PYTHON)" > "$report_dir/build.log" 2>&1 ||
   cmake -S . -B build-gpu -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON -DLOOM_BUILD_TESTS=OFF \
     -DPython3_EXECUTABLE="$(command -v $PYTHON)" >> "$report_dir/build.log" 2>&1; then
  if cmake --build build-gpu -j "$(nproc)" >> "$report_dir/build.log" 2>&1; then
    log "- build: ok ($(( $(date +%s) - start )) s); libloom needs: $(readelf -d build-gpu/python/loom/libloom.so | grep -o 'lib[a-z]*\.so[.0-9]*' | tr '\n' ' ')"
  else
    log "- build: FAILED (last lines of build.log below)"
    log '```'; tail -30 "$report_dir/build.log" | tee -a "$report"; log '```'
    exit 1
  fi
else
  log "- configure: FAILED (last lines of build.log below)"
  log '```'; tail -30 "$report_dir/build.log" | tee -a "$report"; log '```'
  exit 1
fi
export PYTHONPATH="$PWD/build-gpu/python"
export LOOM_CACHE_DIR="$report_dir/loom-cache"
$PYTHON -c "import loom; print('loom sees', loom.cuda.device_count(), 'GPU(s)', loom.cuda.unavailable_reason())" 2>&1 | tee -a "$report"

run_pytest() {  # name, seconds, pytest arguments...
  local name=$1 seconds=$2; shift 2
  local out="$report_dir/$name.log"
  local t0=$(date +%s)
  timeout "$seconds" $PYTHON -m pytest -q -p no:cacheprovider -rfEs "$@" > "$out" 2>&1
  local rc=$?
  log "- $name: $(tail -1 "$out") (exit $rc, $(( $(date +%s) - t0 )) s)"
  grep -E "^(FAILED|ERROR)" "$out" | head -25 | sed 's/^/  - /' | tee -a "$report"
}
log ""
log "## Smoke test (tests/gpu/smoke.py: one layer at a time)"
log '```'
timeout 180 $PYTHON tests/gpu/smoke.py 2>&1 | tee "$report_dir/smoke.log" | grep -E "^(OK|FAILED)" | tee -a "$report"
log '```'
run_pytest gpu-tests 300 tests/gpu
LOOM_LAUNCH_BLOCKING=1 run_pytest gpu-tests-launch-blocking 120 tests/gpu/test_cuda_execution.py -k "matmul_dtypes or out_of_range or index"
run_pytest host-cuda-tests 120 tests/python/test_cuda_backend.py tests/python/test_cuda_lowering.py

log ""
log "## Benchmarks (perf/run.py --device cuda --quick)"
t0=$(date +%s)
timeout 300 $PYTHON perf/run.py --device cuda --quick --out "$report_dir/perf" > "$report_dir/perf.log" 2>&1
log "exit $? ($(( $(date +%s) - t0 )) s)"
cat "$report_dir/perf/results.md" >> "$report" 2>/dev/null || tail -20 "$report_dir/perf.log" >> "$report"

if [ "${CHECK_CPU_SUITES:-0}" = 1 ]; then
  run_pytest python-suites 400 tests/python -x --deselect tests/python/test_zz_cuda_renders.py
fi
log ""
log "total: $(( $(date +%s) - began )) s"
