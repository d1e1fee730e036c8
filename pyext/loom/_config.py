"""loom.show_config(): how this loom was built and what it finds on this machine, as
torch.__config__.show() (the text to paste into a bug report)."""

from loom import _C, cuda, version


def show_config():
    """A description of this build (version, commit, compiler, flags, BLAS, CUDA toolkit) and of
    what it can use here (threads, GPUs and why none, NVRTC, the distributed backends). Returns the text, as torch does."""
    gpus = cuda.device_count()
    lines = [
        f"loom {version.__version__} (git {version.git}), {version.build_type} build",
        f"  - C++ compiler: {version.cxx}",
        f"  - C++ flags: {version.cxx_flags or '(none)'}",
        f"  - CPU matrix products: {version.blas}",
        f"  - linalg factorizations and solvers: {getattr(version, 'lapack', 'unknown')}",
        f"  - CPU threads for generated kernels: {_C.get_num_threads()}",
        f"  - CUDA toolkit: {version.cuda or 'none (built without the CUDA backend)'}",
    ]
    if cuda.is_compiled():
        lines.append("  - NVRTC: linked (kernels compile at run time for the device's architecture)")
        lines.append(f"  - GPUs: {gpus}" + ("" if gpus else f" ({cuda.unavailable_reason()})"))
    for backend in ("gloo", "nccl"):  # loom.distributed's transports; why not, where one is missing
        why = _C._dist_unavailable(backend)
        lines.append(f"  - loom.distributed {backend}: " + (why or "available"))
    lines.append(f"  - compile cache: {_C._cache_dir()}")
    return "\n".join(lines) + "\n"
