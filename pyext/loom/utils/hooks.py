"""RemovableHandle: what register_*_hook returns (torch.utils.hooks.RemovableHandle)."""

import itertools
import weakref


class RemovableHandle:
    """Removes the hook it was returned for from the dicts that hold it, once: by remove() or at
    the end of a `with` block. It holds the dicts weakly, so a handle kept alive does not keep
    its module alive."""

    _next_id = itertools.count()

    def __init__(self, hooks_dict, *extra_dicts):
        self.id = next(RemovableHandle._next_id)
        self._refs = tuple(weakref.ref(d) for d in (hooks_dict, *extra_dicts))

    def remove(self):
        for ref in self._refs:
            d = ref()
            if d is not None:
                d.pop(self.id, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()
        return False
