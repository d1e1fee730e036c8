"""The kernel cache trusts nothing found on disk, and compilers cannot hang loom (issue 12, items 5
and 11; DESIGN decision 15).

Each test runs a small lazy program in a child process with its own cache folder, then tampers
with the folder, the files or the compiler, and runs it again: a swapped or forged module is
detected and rebuilt (never run), a folder other users could write is refused with a warning, a
process without HOME uses no shared folder, everything loom creates is private, a compiler that
hangs is killed with a clear error and leaves no cache entry, and LOOM_CXX may carry arguments.
"""

import glob
import json
import os
import stat
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

PROGRAMS = {
    "a": "(x.softmax(-1) * x.sigmoid()).sum(0)",
    "b": "(x.tanh() * 3.0 + x.exp()).mean(1)",
}
EXPECTED = {
    "a": lambda x: (np.exp(x - x.max(-1, keepdims=True)) / np.exp(x - x.max(-1, keepdims=True)).sum(-1, keepdims=True)
                    * (1 / (1 + np.exp(-x)))).sum(0),
    "b": lambda x: (np.tanh(x) * 3.0 + np.exp(x)).mean(1),
}
X = np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8)


def program(which):
    return textwrap.dedent(f"""
        import loom, numpy as np, json
        x = loom.tensor(np.linspace(-3, 3, 64, dtype=np.float32).reshape(8, 8), device="lazy")
        loom.metrics_reset()
        y = {PROGRAMS[which]}
        print(json.dumps({{"values": y.tolist(), "metrics": loom.metrics()}}))
    """)


def run(which, env=None, cache=None, preexec=None, timeout=300):
    full = dict(os.environ)
    if cache is not None:
        full["LOOM_CACHE_DIR"] = str(cache)
    for k, v in (env or {}).items():
        if v is None:
            full.pop(k, None)
        else:
            full[k] = v
    return subprocess.run([sys.executable, "-c", program(which)], capture_output=True, text=True, env=full,
                          preexec_fn=preexec, timeout=timeout)


def result(done, which):
    """The child's metrics, after checking it succeeded with the right values."""
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    np.testing.assert_allclose(out["values"], EXPECTED[which](X.astype(np.float64)), rtol=1e-5, atol=1e-6)
    return out["metrics"]


def entries(cache):
    return {os.path.basename(p)[:-3] for p in glob.glob(str(cache / "cpu" / "*.so"))}


def fnv_checksum(data):
    h = 0xcbf29ce484222325
    for byte in data:
        h = ((h ^ byte) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    return h ^ len(data)


def two_cached_programs(cache):
    """Runs both programs into `cache`; returns the entry names of each."""
    result(run("a", cache=cache), "a")
    a = entries(cache)
    result(run("b", cache=cache), "b")
    b = entries(cache) - a
    assert a and b
    return sorted(a)[0], sorted(b)[0]


def swap(cache, x, y, ext):
    d = cache / "cpu"
    (d / f"{x}{ext}").rename(d / "swap.tmp")
    (d / f"{y}{ext}").rename(d / f"{x}{ext}")
    (d / "swap.tmp").rename(d / f"{y}{ext}")


# ---- item 5: what is found on disk ----

def test_swapped_entries_are_detected_and_rebuilt(tmp_path):
    a, b = two_cached_programs(tmp_path)
    swap(tmp_path, a, b, ".so")
    swap(tmp_path, a, b, ".key")  # whole entries swapped: each is filed under the other's name
    for which in ("a", "b"):
        done = run(which, cache=tmp_path)
        m = result(done, which)  # right values: neither ran the other's kernels
        assert m["kernels_compiled"] > 0 and m["modules_loaded_from_disk"] == 0, m
        assert "RuntimeWarning: " in done.stderr and "written for another module" in done.stderr, done.stderr
    swap(tmp_path, a, b, ".so")  # binaries alone swapped: their checksums disagree
    for which in ("a", "b"):
        assert result(run(which, cache=tmp_path), which)["kernels_compiled"] > 0


def test_a_module_with_a_forged_checksum_is_caught_by_its_embedded_key(tmp_path):
    """Anyone can recompute a checksum: put b's binary under a's name with a's key file and a
    checksum made for b's bytes. Only the key inside the binary, read after loading, tells."""
    a, b = two_cached_programs(tmp_path)
    d = tmp_path / "cpu"
    foreign = (d / f"{b}.so").read_bytes()
    header, checksum_line, key = (d / f"{a}.key").read_bytes().split(b"\n", 2)
    assert checksum_line.startswith(b"checksum ")
    (d / f"{a}.key").write_bytes(header + b"\n" + f"checksum {fnv_checksum(foreign):016x}".encode() + b"\n" + key)
    (d / f"{a}.so").write_bytes(foreign)
    done = run("a", cache=tmp_path)
    m = result(done, "a")  # right values: b's kernels never ran in a's place
    assert m["kernels_compiled"] > 0, m
    assert "RuntimeWarning: " in done.stderr and "is not the module it is filed as" in done.stderr, done.stderr
    again = run("a", cache=tmp_path)  # the rebuilt entry is good
    assert result(again, "a")["modules_loaded_from_disk"] >= 1 and "warning" not in again.stderr


def test_a_folder_others_may_write_is_refused_with_a_warning(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir()
    shared.chmod(0o777)  # what loom used to make with HOME unset
    done = run("a", cache=shared)
    result(done, "a")
    warnings = [line for line in done.stderr.splitlines() if "RuntimeWarning: " in line]
    assert len(warnings) == 1, done.stderr
    assert str(shared) in warnings[0] and "writable by others (mode 0777)" in warnings[0]
    assert "private temporary folder" in warnings[0]
    assert list(shared.iterdir()) == []  # nothing written where others could swap it


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to give a folder to another user")
def test_a_folder_of_another_user_is_refused(tmp_path):
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o700)
    os.chown(theirs, 65534, 65534)
    done = run("a", cache=theirs)
    result(done, "a")
    assert "owned by user 65534" in done.stderr
    assert list(theirs.iterdir()) == []


def test_files_and_folders_loom_creates_are_private(tmp_path):
    cache = tmp_path / "deep" / "cache"
    result(run("a", cache=cache, preexec=lambda: os.umask(0)), "a")  # even with a permissive umask
    for root, dirs, files in os.walk(tmp_path / "deep"):
        for name in dirs:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o700, name
        for name in files:
            assert stat.S_IMODE(os.stat(os.path.join(root, name)).st_mode) == 0o600, name
    assert stat.S_IMODE(os.stat(tmp_path / "deep").st_mode) == 0o700  # parents loom made, too
    assert {p.suffix for p in (cache / "cpu").iterdir()} == {".so", ".key", ".cpp"}


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a child as the user nobody")
def test_without_home_no_shared_folder_is_used(tmp_path):
    """HOME unset used to mean /tmp/.cache/loom, made 0777: one user could plant modules another
    (root) would run. Now: the user's own home, and for a user without one (nobody), a private
    folder of the process, removed when it exits."""
    shared = "/tmp/.cache/loom"
    before = os.path.exists(shared) and sorted(os.listdir(shared))

    def as_nobody():
        os.setgid(65534)
        os.setuid(65534)

    env = {"HOME": None, "XDG_CACHE_HOME": None, "LOOM_CACHE_DIR": None, "TMPDIR": None}
    proc = subprocess.Popen([sys.executable, "-c", program("a")], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={k: v for k, v in os.environ.items() if k not in env},
                            preexec_fn=as_nobody, cwd="/")
    out, err = proc.communicate(timeout=300)
    done = subprocess.CompletedProcess(proc.args, proc.returncode, out, err)
    result(done, "a")
    assert "/nonexistent/.cache/loom" in err and "private temporary folder" in err, err
    assert (os.path.exists(shared) and sorted(os.listdir(shared))) == before
    assert glob.glob(f"/tmp/loom-{proc.pid}-*") == []  # the private folder went with the process


# ---- item 11: compilers that hang, and LOOM_CXX with arguments ----

def test_a_compiler_that_hangs_is_stopped_with_a_clear_error(tmp_path):
    pidfile = tmp_path / "helper.pid"
    hanging = tmp_path / "slow-c++"
    hanging.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        if [ "$1" = --version ]; then echo "slow c++ 1.0"; exit 0; fi
        sleep 1000 &
        echo $! > {pidfile}
        sleep 1000
    """))
    hanging.chmod(0o755)
    cache = tmp_path / "cache"
    start = time.monotonic()
    done = run("a", cache=cache, env={"LOOM_CXX": str(hanging), "LOOM_COMPILE_TIMEOUT": "2"})
    assert time.monotonic() - start < 120
    assert done.returncode != 0
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("RuntimeError:") and str(hanging) in last and "within 2 s" in last, done.stderr
    assert "LOOM_COMPILE_TIMEOUT" in last
    helper = int(pidfile.read_text())  # what the compiler started was stopped with it
    state = ""
    if os.path.exists(f"/proc/{helper}/status"):
        state = [line for line in open(f"/proc/{helper}/status") if line.startswith("State:")][0]
    assert state == "" or "Z" in state, state
    assert not any(p.suffix in (".so", ".key") for p in (cache / "cpu").iterdir())  # no entry, partial or whole
    result(run("a", cache=cache), "a")  # a working compiler then builds it


def test_a_bad_compile_timeout_is_a_clear_error(tmp_path):
    done = run("a", cache=tmp_path, env={"LOOM_COMPILE_TIMEOUT": "soon"})
    assert done.returncode != 0
    assert "LOOM_COMPILE_TIMEOUT='soon'" in done.stderr.strip().splitlines()[-1]


def test_loom_cxx_may_carry_arguments_and_quoted_paths(tmp_path):
    """LOOM_CXX is split into words, never given to a shell: a wrapper with a space in its path,
    its own arguments (one with a space), then the compiler ("ccache g++" works the same way)."""
    folder = tmp_path / "my tools"
    folder.mkdir()
    log = tmp_path / "calls.log"
    wrapper = folder / "wrap c++"
    wrapper.write_text(textwrap.dedent(f"""\
        #!/bin/sh
        [ "$1" = --tag ] && [ "$2" = "a b" ] || {{ echo "wrapper got: $*" >&2; exit 9; }}
        shift 2
        echo "$@" >> '{log}'
        exec "$@"
    """))
    wrapper.chmod(0o755)
    marker = tmp_path / "injected"
    cxx = f"'{wrapper}' --tag \"a b\" c++ ; touch {marker}"  # the ';' is a word, not a command
    done = run("a", cache=tmp_path / "cache", env={"LOOM_CXX": cxx})
    assert done.returncode != 0  # c++ is given ';', 'touch' and the marker as files to compile
    assert not marker.exists()
    cxx = f"'{wrapper}' --tag \"a b\" c++"
    result(run("a", cache=tmp_path / "cache", env={"LOOM_CXX": cxx}), "a")
    calls = log.read_text().splitlines()
    assert any(c.startswith("c++ --version") for c in calls) and any(" -shared " in c for c in calls), calls
