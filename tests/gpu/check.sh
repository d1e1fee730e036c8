#!/usr/bin/env bash
# The check of loom on a machine with an NVIDIA GPU, in one call that ends by its deadline:
# builds loom with its CUDA backend, runs the smoke test (tests/gpu/smoke.py), each GPU suite in a
# process of its own (a kernel fault poisons its process's CUDA context), a LOOM_LAUNCH_BLOCKING=1
# rerun of whatever failed, then the GPU benchmarks. tests/gpu/README.md says how to run it.
#
#   tests/gpu/check.sh [REPORT_DIR]      (default: $OUT, else ./gpu-report)
#
# The report is written stage by stage, so a run cut short keeps every finished stage:
# REPORT_DIR/report.md (what ran, per stage: verdict, time, failing tests with their first error
# lines, log tails), status.tsv (stage, verdict, seconds, note), logs.tar.gz (every log), and
# bench.json, bench-extra.json, bench-cold.json (the harness's figures): six files at most, no
# folders (what a device machine sends back is limited to eight files).
#
# Knobs: CHECK_DEADLINE (seconds for the whole run, default 540: every stage, configure and build
# included, runs under `timeout` of what is left), CHECK_STAGES (comma-separated stages to run,
# default all: configure, build, import, smoke, test_cuda_runtime, test_cuda_execution,
# test_cuda_graphs, blocking, bench, bench-compile, bench-cold; build configures a folder that
# was never configured), CHECK_BUILD_DIR (default build-gpu), CHECK_PREBUILT (a build folder to
# use as it is: no configure, no build),
# CHECK_PYTHON_INCLUDE (a folder with Python.h, when the interpreter's own is missing),
# CHECK_WITHOUT_GPU=1 (go on where there is no GPU: checks the script; the result is a failure
# all the same), PYTHON (default python3).
#
# Exit status: 0 when every stage that ran passed and none was cut short; 1 otherwise. No GPU is
# a failure, with the reason.
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
root=$PWD
began=$(date +%s)
deadline=${CHECK_DEADLINE:-540}
report_dir=${1:-${OUT:-gpu-report}}
mkdir -p "$report_dir" && report_dir=$(cd "$report_dir" && pwd)
report=$report_dir/report.md
status=$report_dir/status.tsv
work=$(mktemp -d "${TMPDIR:-/tmp}/loom-gpu-check.XXXXXX")
PYTHON=$(command -v "${PYTHON:-python3}" || echo "${PYTHON:-python3}")
build=${CHECK_PREBUILT:-${CHECK_BUILD_DIR:-build-gpu}}
case $build in /*) build_path=$build ;; *) build_path=$root/$build ;; esac
failed=0

# ---- the report ----

left() { echo $((deadline - ($(date +%s) - began))); }
say() { printf '%s\n' "$*" | tee -a "$report"; }
block() {  # block FILE [LINES]: a file's tail as a code block of the report
  say '```'
  if [ -n "${2:-}" ]; then tail -n "$2" "$1"; else cat "$1"; fi | tee -a "$report"
  say '```'
}
save_logs() {  # every log so far, into one file of the report folder (atomically)
  tar -czf "$report_dir/logs.tar.gz.part" -C "$work" . 2>/dev/null && mv "$report_dir/logs.tar.gz.part" "$report_dir/logs.tar.gz"
}
selected() { [ -z "${CHECK_STAGES:-}" ] || [[ ",$CHECK_STAGES," == *",$1,"* ]]; }

# verdict NAME VERDICT NOTE: PASS, FAIL, KILLED (cut short: a failure), SKIPPED, or INFO (a
# diagnosis, not a verdict on loom).
verdict() {
  local name=$1 result=$2 note=$3 took=${took:-0}
  [ "$result" = FAIL ] || [ "$result" = KILLED ] && failed=1
  say "**$result** ($took s) $note"
  say ""
  printf '%s\t%s\t%s\t%s\n' "$name" "$result" "$took" "$note" >> "$status"
  save_logs
}

# run NAME CAP COMMAND...: COMMAND, its output in $work/NAME.log, under `timeout` of CAP seconds or
# of the time left before the deadline, whichever is less. Sets rc, took and cut ("" or why the
# command was killed). A stage with under 5 s left does not start (rc 125).
run() {
  local name=$1 cap=$2
  shift 2
  local budget limit
  budget=$(left)
  say "### $name"
  if ((budget < 5)); then
    took=0 rc=125 cut="no time left"
    return
  fi
  limit=$budget
  cut="by the deadline ($deadline s for the whole check, CHECK_DEADLINE)"
  if ((cap < budget)); then
    limit=$cap
    cut="at its cap of $cap s"
  fi
  say "(started at $(($(date +%s) - began)) s, $limit s allowed)"
  local t0
  t0=$(date +%s)
  timeout -k 10 "$limit" "$@" > "$work/$name.log" 2>&1
  rc=$?
  took=$(($(date +%s) - t0))
  if ((rc == 124 || rc == 137)); then cut="killed $cut after $took s"; else cut=""; fi
}

# The verdict of a plain command stage: PASS on status 0, else with the log's last lines (none
# when TAIL_LINES is 0: the caller showed the log).
plain_verdict() {
  local name=$1 note=$2 tail_lines=${3:-30}
  if ((rc == 125)); then verdict "$name" SKIPPED "$cut"; return; fi
  if ((rc != 0 && tail_lines > 0)); then block "$work/$name.log" "$tail_lines"; fi
  if [ -n "$cut" ]; then
    verdict "$name" KILLED "$cut"
  elif ((rc != 0)); then
    verdict "$name" FAIL "exit $rc; $note"
  else
    verdict "$name" PASS "$note"
  fi
}

# pytest_stage NAME CAP ARGS...: one pytest process; on a GPU machine a skipped test is a failure.
pytest_flags=(-p no:cacheprovider -v --tb=short -rfEs --color=no)
pytest_stage() {
  local name=$1 cap=$2
  shift 2
  run "$name" "$cap" "$PYTHON" -m pytest "${pytest_flags[@]}" --junitxml="$work/$name.xml" "$@"
  local log=$work/$name.log
  if ((rc == 125)); then verdict "$name" SKIPPED "$cut"; return; fi
  local summary
  summary=$(grep -E '^=+ .*(passed|failed|error|skipped|deselected|no tests ran).* in [0-9.]+s' "$log" | tail -1 | tr -d '=' |
    sed 's/^ *//;s/ *$//')
  grep -E '^(FAILED|ERROR) ' "$log" | head -30 > "$work/$name.failures"
  if [ -s "$work/$name.failures" ]; then
    say "Failures (the first error line of each; the whole log is $name.log in logs.tar.gz):"
    block "$work/$name.failures"
  fi
  local skipped
  skipped=$(grep -E '^SKIPPED ' "$log" | head -10)
  if [ -n "$cut" ] || [ -z "$summary" ]; then
    # Killed, or the process died (a fault, a hung test stopped by pytest-timeout): the last
    # test it started is the suspect.
    local last
    last=$(grep -oE '^tests/[^ ]+::[^ ]+' "$log" | tail -1)
    [ -n "$last" ] && echo "$last" >> "$work/crashed"
    block "$log" 30
    verdict "$name" "$([ -n "$cut" ] && echo KILLED || echo FAIL)" \
      "${cut:-exit $rc without a pytest summary}; the last test started: ${last:-none}"
    return
  fi
  if ((rc == 0)) && [ -n "$skipped" ] && ((gpus > 0)); then
    say "Skipped on a machine with a GPU:"
    printf '%s\n' "$skipped" > "$work/$name.skips"
    block "$work/$name.skips"
    verdict "$name" FAIL "$summary; a GPU test skipped where nvidia-smi lists a GPU"
  elif ((rc != 0)); then
    [ -s "$work/$name.failures" ] || block "$log" 30
    verdict "$name" FAIL "$summary (exit $rc)"
  else
    verdict "$name" PASS "$summary"
  fi
}

summary() {
  local code=$1
  say "## Summary"
  say ""
  say "| stage | verdict | seconds | note |"
  say "|---|---|---|---|"
  while IFS=$'\t' read -r name result took note; do
    say "| $name | $result | $took | ${note//|/\\|} |"
  done < "$status"
  say ""
  say "Overall: $([ "$code" = 0 ] && echo PASS || echo FAIL) (exit $code) in $(($(date +%s) - began)) s" \
    "of a $deadline s deadline. Rerun one stage: CHECK_STAGES=<stage> tests/gpu/check.sh (tests/gpu/README.md)."
  save_logs
}

finish() {
  local code=$failed
  trap - TERM INT
  summary "$code"
  rm -rf "$work"
  exit "$code"
}
trap 'say "(interrupted)"; failed=1; finish' TERM INT

: > "$report"
: > "$status"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo "unknown (no git)")
say "# loom GPU check, $(date -u '+%Y-%m-%d %H:%M UTC'), commit $commit"
say ""
say "Deadline $deadline s; stages: ${CHECK_STAGES:-all}; build folder: $build$([ -n "${CHECK_PREBUILT:-}" ] && echo ' (prebuilt)')."
say ""

# ---- the machine: printed first, whatever happens next ----

say "## Machine"
t0=$(date +%s)
gpus=0
gpu_reason=""
if [ -x /usr/local/cuda/bin/nvcc ] && ! command -v nvcc > /dev/null 2>&1; then export PATH="$PATH:/usr/local/cuda/bin"; fi
# The toolkit nvcc belongs to, through any links to it (CMake is told, so it finds the same one).
cuda_root=$(dirname "$(dirname "$(readlink -f "$(command -v nvcc || echo /nonexistent/bin/nvcc)")")")
{
  echo "host: $(uname -srm), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo) memory"
  if command -v nvidia-smi > /dev/null 2>&1; then
    timeout 30 nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader 2>&1 |
      sed 's/^/gpu: /'
    echo "driver's CUDA version: $(timeout 30 nvidia-smi 2>/dev/null | grep -o 'CUDA Version: [0-9.]*' | cut -d' ' -f3)"
  else
    echo "gpu: nvidia-smi not found"
  fi
  if command -v nvcc > /dev/null 2>&1; then
    echo "nvcc: $(command -v nvcc), $(nvcc --version | grep -o 'release [0-9.]*, V[0-9.]*')"
    for lib in cudart nvrtc cublas; do
      echo "lib$lib: $(ls "$cuda_root"/lib64/lib$lib.so* "$cuda_root"/lib/lib$lib.so* 2> /dev/null | head -3 | tr '\n' ' ')"
    done
  else
    echo "nvcc: not found (PATH or /usr/local/cuda/bin)"
  fi
  cxx=${CXX:-c++}
  echo "C++ compiler: $cxx: $($cxx --version 2>&1 | head -1)"
  echo "cmake: $(cmake --version 2>&1 | head -1)"
  echo "ninja: $(command -v ninja || echo 'not found: Unix Makefiles')"
  timeout 60 "$PYTHON" tests/gpu/probe.py python 2>&1
} > "$work/machine.log" 2>&1
block "$work/machine.log"
took=$(($(date +%s) - t0))
if ! command -v nvidia-smi > /dev/null 2>&1; then
  gpu_reason="nvidia-smi not found"
else
  gpus=$(timeout 30 nvidia-smi -L 2>/dev/null | grep -c '^GPU [0-9]')
  ((gpus > 0)) || gpu_reason="nvidia-smi lists no GPU: $(timeout 30 nvidia-smi -L 2>&1 | head -1)"
fi
if ((gpus == 0)); then
  verdict machine FAIL "no GPU: $gpu_reason"
  [ "${CHECK_WITHOUT_GPU:-0}" = 1 ] || finish
elif [ -z "${CHECK_PREBUILT:-}" ] && grep -q '^Python.h: .* MISSING' "$work/machine.log" && [ -z "${CHECK_PYTHON_INCLUDE:-}" ] &&
  ! grep -q '^Python.h elsewhere: ' "$work/machine.log"; then
  verdict machine FAIL "Python.h of $PYTHON is missing: the extension cannot build (CHECK_PYTHON_INCLUDE names a folder with the headers of the same Python version)"
  finish
elif ! command -v nvcc > /dev/null 2>&1 && [ -z "${CHECK_PREBUILT:-}" ]; then
  verdict machine FAIL "nvcc not found: no CUDA toolkit to build the backend with"
  finish
else
  if grep -q '^Python.h: .* MISSING' "$work/machine.log" && [ -z "${CHECK_PYTHON_INCLUDE:-}" ]; then
    CHECK_PYTHON_INCLUDE=$(sed -n 's/^Python.h elsewhere: //p' "$work/machine.log")
  fi
  verdict machine PASS "$gpus GPU(s)${CHECK_PYTHON_INCLUDE:+; Python.h from $CHECK_PYTHON_INCLUDE}"
fi

# ---- build ----

say "## Build"
if [ -n "${CHECK_PREBUILT:-}" ]; then
  took=0
  say "### configure"
  verdict configure SKIPPED "CHECK_PREBUILT=$build"
  say "### build"
  verdict build SKIPPED "CHECK_PREBUILT=$build"
else
  # The generator is chosen before configuring: a folder configured for another one (an earlier
  # run where ninja existed) is configured afresh, never retried over a stale cache.
  if command -v ninja > /dev/null 2>&1; then generator=Ninja; else generator="Unix Makefiles"; fi
  if [ -f "$build/CMakeCache.txt" ]; then
    cached=$(sed -n 's/^CMAKE_GENERATOR:INTERNAL=//p' "$build/CMakeCache.txt")
    if [ "$cached" != "$generator" ]; then
      echo "$build was configured for '$cached', not '$generator': its cache is removed" > "$work/generator.log"
      rm -rf "$build/CMakeCache.txt" "$build/CMakeFiles"
    fi
  fi
  if selected configure || { selected build && [ ! -f "$build/CMakeCache.txt" ]; }; then
    run configure 180 cmake -S . -B "$build" -G "$generator" -DCMAKE_BUILD_TYPE=Release -DLOOM_CUDA=ON \
      -DLOOM_BUILD_TESTS=OFF -DPython3_EXECUTABLE="$PYTHON" -DCUDAToolkit_ROOT="$cuda_root" \
      ${CHECK_PYTHON_INCLUDE:+-DPython3_INCLUDE_DIR=$CHECK_PYTHON_INCLUDE}
    if [ -f "$work/generator.log" ]; then
      cat "$work/generator.log" >> "$work/configure.log"
      say "$(cat "$work/generator.log")"
    fi
    plain_verdict configure "generator: $generator$([ "$generator" = Ninja ] || echo ' (ninja not found)')" 40
    [ "$(tail -1 "$status" | cut -f2)" = PASS ] || finish
  fi
  if selected build; then
    run build 400 cmake --build "$build" -j "$(nproc)"
    if ((rc == 0)); then
      needs=$(readelf -d "$build/python/loom/libloom.so" 2>/dev/null | grep -o 'lib[a-zA-Z0-9_]*\.so[.0-9]*' | tr '\n' ' ')
      plain_verdict build "libloom needs: $needs"
    else
      grep -E ': (fatal )?error|CMake Error|Error [0-9]' "$work/build.log" | head -15 > "$work/build.errors"
      [ -s "$work/build.errors" ] && block "$work/build.errors"
      plain_verdict build "the first errors above, then the log's tail" 40
      finish
    fi
  fi
fi

export PYTHONPATH="$build_path/python${PYTHONPATH:+:$PYTHONPATH}"
export LOOM_CACHE_DIR=${LOOM_CACHE_DIR:-$build_path/loom-cache}
export PYTHONUNBUFFERED=1 LOOM_REQUIRE_GPU=1

# ---- does loom see the GPU nvidia-smi lists? ----

say "## Tests"
if selected import; then
  run import 120 "$PYTHON" tests/gpu/probe.py loom "$gpus"
  block "$work/import.log" 40
  plain_verdict import "$(grep '^loom sees' "$work/import.log")" 0
  ((rc != 0)) && finish  # nothing after it can run: a GPU loom does not see, a library that does not load
fi

if "$PYTHON" -c "import pytest_timeout" > /dev/null 2>&1; then
  # A hung test (a kernel that never ends) dumps every thread's stack and ends its process.
  pytest_flags+=(--timeout=150 --timeout-method=thread)
fi

if selected smoke; then
  run smoke 150 "$PYTHON" tests/gpu/smoke.py
  grep -E '^(OK|FAILED) ' "$work/smoke.log" > "$work/smoke.steps"
  [ -s "$work/smoke.steps" ] && block "$work/smoke.steps"
  if ((rc != 0)) && ((rc != 125)); then
    awk '/^(OK|FAILED) /{if (on) exit} /^FAILED /{on=1} on{print}' "$work/smoke.log" | head -40 > "$work/smoke.first"
    if [ -s "$work/smoke.first" ] && [ -z "$cut" ]; then
      say "The first failure's traceback:"
      block "$work/smoke.first"
    else  # killed, or died without reporting a step: the end of its output
      block "$work/smoke.log" 30
    fi
  fi
  plain_verdict smoke "$(grep -c '^OK ' "$work/smoke.log") steps OK, $(grep -c '^FAILED ' "$work/smoke.log") FAILED" 0
fi

suites=(tests/gpu/test_cuda_runtime.py)
for f in tests/gpu/test_*.py; do [ "$f" = tests/gpu/test_cuda_runtime.py ] || suites+=("$f"); done
for f in "${suites[@]}"; do
  name=$(basename "$f" .py)
  selected "$name" && pytest_stage "$name" 240 "$f"
done

# What failed, again, one test per process with LOOM_LAUNCH_BLOCKING=1: the device waits after
# every launch, so a fault names the kernel that caused it.
if selected blocking; then
  cat "$work"/*.failures "$work/crashed" 2>/dev/null | sed -E 's/^(FAILED|ERROR) //; s/ - .*//' | grep '::' |
    awk '!seen[$0]++' | head -8 > "$work/rerun"
  if [ -s "$work/rerun" ]; then
    say "### blocking"
    say "LOOM_LAUNCH_BLOCKING=1, one process per test:"
    : > "$work/blocking.results"
    t0=$(date +%s)
    while read -r test; do
      budget=$(($(left) - 60))  # leave the benchmarks a minute
      ((budget > 90)) && budget=90
      if ((budget < 10)); then
        echo "- $test: not rerun (no time left)" >> "$work/blocking.results"
        continue
      fi
      LOOM_LAUNCH_BLOCKING=1 timeout -k 5 "$budget" "$PYTHON" -m pytest -p no:cacheprovider -v --tb=short --color=no \
        "$test" >> "$work/blocking.log" 2>&1 < /dev/null
      code=$?
      if ((code == 0)); then
        echo "- $test: passes with LOOM_LAUNCH_BLOCKING=1 (suspect an asynchronous error or a race)" >> "$work/blocking.results"
      else
        echo "- $test: fails again (exit $code): $(grep -E '^E ' "$work/blocking.log" | tail -3 | head -1 | cut -c1-300)" >> "$work/blocking.results"
      fi
    done < "$work/rerun"
    took=$(($(date +%s) - t0))
    block "$work/blocking.results"
    verdict blocking INFO "a diagnosis of the failures counted above"
  fi
fi

# ---- benchmarks, last and bounded ----

say "## Benchmarks"
bench() {  # bench NAME CAP RESULT_FILE ARGS...: perf/run.py, its (partial) table into the report
  local name=$1 cap=$2 json=$3 rows
  shift 3
  run "$name" "$cap" "$PYTHON" perf/run.py --device cuda --quick --out "$work/$name" "$@"
  if [ -f "$work/$name/results.md" ]; then
    say "perf/run.py $*:"
    say ""
    tee -a "$report" < "$work/$name/results.md"
    say ""
  fi
  [ -f "$work/$name/results.json" ] && cp "$work/$name/results.json" "$report_dir/$json"
  if ((rc == 0)); then  # a mode that did not run, or ran wrong, fails the stage
    rows=$("$PYTHON" tests/gpu/probe.py bench "$work/$name/results.json" 2>&1)
    if [ -n "$rows" ]; then
      verdict "$name" FAIL "not every case ran and agreed: $rows"
      return
    fi
  fi
  plain_verdict "$name" "" 20
}
if selected bench; then
  bench bench 300 bench.json --workloads chain,softmax,mlp,gpt \
    --modes loom-lazy,loom-lazy-nograph,loom-eager,torch-eager,torch-cudagraph
fi
# torch.compile (minutes of compiling) and cold starts only when time is left.
if selected bench-compile; then
  if (($(left) >= 150)); then
    bench bench-compile 600 bench-extra.json --workloads mlp,gpt --modes loom-lazy,torch-compile
  else
    say "### bench-compile"
    took=0 verdict bench-compile SKIPPED "under 150 s left"
  fi
fi
if selected bench-cold; then
  if (($(left) >= 90)); then
    bench bench-cold 600 bench-cold.json --workloads cold
  else
    say "### bench-cold"
    took=0 verdict bench-cold SKIPPED "under 90 s left"
  fi
fi

finish
