"""loom.autograd.profiler: torch.autograd.profiler's profile and record_function, which older
scripts use, on loom.profiler (the same recording and tables)."""

from loom import profiler as _profiler

record_function = _profiler.record_function


class profile(_profiler.profile):
    """torch.autograd.profiler.profile(enabled=True, *, use_cuda=False, record_shapes=False,
    profile_memory=False, with_stack=False, ...): loom.profiler.profile, which also times GPU
    work where there is a GPU (use_cuda is accepted); enabled=False records nothing."""

    def __init__(self, enabled=True, *, use_cuda=False, record_shapes=False, profile_memory=False,
                 with_stack=False, **kwargs):
        super().__init__(record_shapes=record_shapes, profile_memory=profile_memory, with_stack=with_stack)
        self.enabled = enabled

    def __enter__(self):
        return super().__enter__() if self.enabled else self

    def __exit__(self, *exc):
        return super().__exit__(*exc) if self.enabled else False
