"""What a user adds to weights_only loading's allow-list, as torch.serialization's (PyTorch 2.4):
add_safe_globals, the safe_globals context manager, get_safe_globals, clear_safe_globals.

A checkpoint of a whole module (loom.save(model)) names the module's classes; weights_only
loading refuses every global it does not know, so a program that trusts those classes lists
them: `with loom.serialization.safe_globals([MyModel, loom.nn.Linear]): loom.load(f)`. A listed
class is instantiated as pickle does (its __new__, then its state set: no __init__ runs), and a
listed function may be called with arguments from the file: list only what is safe so.
"""

import threading

_lock = threading.Lock()
_allowed = {}  # "module.qualname" -> the object


def _entry(item):
    """(name, object) of an entry: an object (named by its module and qualified name) or an
    (object, "module.name") pair, for objects saved under another name."""
    if isinstance(item, tuple):
        if len(item) != 2 or not isinstance(item[1], str):
            raise TypeError(f"a safe global is an object or an (object, 'module.name') pair, not {item!r}")
        return item[1], item[0]
    module, name = getattr(item, "__module__", None), getattr(item, "__qualname__", None)
    if not isinstance(module, str) or not isinstance(name, str):
        raise TypeError(f"{item!r} has no __module__ and __qualname__ to be found by: pass (object, 'module.name')")
    return f"{module}.{name}", item


def add_safe_globals(safe_globals):
    """Allows the listed classes and functions in weights_only loading, from now on."""
    entries = [_entry(item) for item in safe_globals]
    with _lock:
        _allowed.update(entries)


def get_safe_globals():
    """The objects add_safe_globals allowed (and open safe_globals blocks), in the order added."""
    with _lock:
        return list(_allowed.values())


def clear_safe_globals():
    with _lock:
        _allowed.clear()


def allowed(full_name):
    """The allowed object named `full_name` ("module.qualname"), or None."""
    with _lock:
        return _allowed.get(full_name)


class safe_globals:
    """`with safe_globals([...]):` allows them inside the block only (what was allowed before stays)."""

    def __init__(self, safe_globals):
        self._entries = [_entry(item) for item in safe_globals]
        self._before = None

    def __enter__(self):
        with _lock:
            self._before = dict(_allowed)
            _allowed.update(self._entries)
        return self

    def __exit__(self, *exc):
        with _lock:
            added = {name for name, _ in self._entries if name not in self._before}
            for name in added:
                _allowed.pop(name, None)
        return False
