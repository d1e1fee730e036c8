"""A binary file opened for loading: its length known before anything is read, so every size a
file declares can be checked against it before memory is allocated for it."""

import contextlib
import io
import os


class Source:
    """A binary file from its current position on: `size` bytes, read front to back or at
    positions (`seek`, relative to where it started). A stream that cannot seek (a pipe, a socket)
    is read whole first: its length is known only then."""

    def __init__(self, f, name):
        self.name = name  # how errors name the file: "'ckpt.pt'" or "<file object>"
        seekable = getattr(f, "seekable", None)
        if seekable is not None and seekable():
            self.f = f
            self.start = f.tell()
            self.size = f.seek(0, os.SEEK_END) - self.start
            f.seek(self.start)
        else:
            self.f = f
            data = self.read(None)
            self.f, self.start, self.size = io.BytesIO(data), 0, len(data)

    def tell(self):
        return self.f.tell() - self.start

    def seek(self, pos):
        self.f.seek(self.start + pos)

    def remaining(self):
        return self.size - self.tell()

    def read(self, n):
        """Up to n bytes (all the rest for None); never more than the file holds, whatever n is."""
        if n is not None:
            n = max(0, min(n, self.size - self.tell()))
        data = self.f.read() if n is None else self.f.read(n)
        if not isinstance(data, (bytes, bytearray, memoryview)):
            raise TypeError(f"loom.load needs a binary file, but read() returned {type(data).__name__}")
        return bytes(data)

    def peek(self, n):
        """The first n bytes of the file (fewer if it is shorter), leaving the position at the start."""
        self.seek(0)
        data = self.read(n)
        self.seek(0)
        return data

    def read_into(self, view):
        """Fills a writable byte memoryview; False if the file ends first."""
        readinto = getattr(self.f, "readinto", None)
        done = 0
        while done < len(view):
            if readinto is not None:
                n = readinto(view[done:])
            else:
                chunk = self.read(min(len(view) - done, 1 << 24))
                n = len(chunk)
                view[done:done + n] = chunk
            if not n:
                return False
            done += n
        return True


@contextlib.contextmanager
def opened(f):
    """A Source for a path or a binary file object (a path is opened and closed here)."""
    if hasattr(f, "read"):
        name = getattr(f, "name", None)
        yield Source(f, repr(name) if isinstance(name, str) else "<file object>")
    else:
        with open(f, "rb") as file:
            yield Source(file, repr(os.fspath(f)))
