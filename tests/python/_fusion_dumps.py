"""LOOM_DUMP_DIR for the duration of a block: the fusion suites read the sources, kernel groups and
traces the executor writes there (graph/compiled.cpp) to check which kernel forms it took."""

import contextlib
import os


@contextlib.contextmanager
def dumping_to(directory):
    """Sets LOOM_DUMP_DIR to `directory` inside the block, and back to what it was after."""
    old = os.environ.get("LOOM_DUMP_DIR")
    os.environ["LOOM_DUMP_DIR"] = str(directory)
    try:
        yield directory
    finally:
        if old is None:
            del os.environ["LOOM_DUMP_DIR"]
        else:
            os.environ["LOOM_DUMP_DIR"] = old
