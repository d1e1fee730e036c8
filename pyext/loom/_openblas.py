"""Chooses OpenBLAS's CPU kernels before the library loads (it reads the choice once, at load).

OpenBLAS picks its kernels from the CPU model, and releases older than the CPU fall back to
their slowest generic kernels: Debian 12's OpenBLAS 0.3.21 runs Sapphire Rapids machines on its
SSE3 "Prescott" kernels, 4 to 5x slower than its AVX-512 ones for the small matrix products of
training loops. Where the user has not chosen (OPENBLAS_CORETYPE unset), loom picks the family
the CPU's instruction set supports. The variable is process-wide, so a BLAS loaded later by
numpy or PyTorch gets the same choice.
"""

import os


def _cpu_flags():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def choose_core():
    if "OPENBLAS_CORETYPE" in os.environ:
        return
    flags = _cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "SkylakeX"
    elif {"avx2", "fma"} <= flags:
        os.environ["OPENBLAS_CORETYPE"] = "Haswell"
