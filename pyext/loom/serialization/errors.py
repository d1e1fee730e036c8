"""The errors of loom.load: one type for every malformed file, naming the file and the problem."""

import pickle


class InvalidFileError(ValueError):
    """loom.load was given bytes that are not a valid checkpoint (PyTorch zip or legacy format,
    safetensors)."""


class UnsafeFileError(InvalidFileError, pickle.UnpicklingError):
    """A checkpoint names a global (a function or class to call) that weights_only loading does not
    allow: loading it would run code the file chooses. Also a pickle.UnpicklingError, as
    PyTorch's weights_only refusal is."""


class Errors:
    """Makes the errors of loading one source: `error(what)` says what is wrong with it."""

    def __init__(self, source, kind="checkpoint"):
        self.source, self.kind = source, kind

    def __call__(self, what, cls=InvalidFileError):
        return cls(f"{self.source} is not a valid {self.kind}: {what}")

    def unsafe(self, what):
        return UnsafeFileError(f"{self.source}: weights_only loading refuses {what}. If you trust it, allow it "
                               "with loom.serialization.add_safe_globals([...]) or the safe_globals([...]) context "
                               "manager; loom.load(..., weights_only=False) loads anything, running the code the "
                               "file names: do that only for files you trust (TORCH_FORCE_NO_WEIGHTS_ONLY_LOAD=1 in "
                               "the environment makes that the default, as it was before PyTorch 2.6)")
