"""loom imported under another name: `sys.modules["torch"] = loom`, the way some harnesses run an
unmodified PyTorch script on loom. Python then resolves `import torch.nn` by searching
loom.__path__ and would execute loom/nn/__init__.py a second time as a new module "torch.nn":
a second set of classes (torch.nn.Module is not loom.nn.Module, a Parameter of one is no
Parameter to the other) and of module state. This finder, last on sys.meta_path, answers such
names with loom's own modules: "torch.nn" is loom.nn, the same object.
"""

import importlib
import importlib.abc
import importlib.util
import sys


class _Existing(importlib.abc.Loader):
    """Loads a module that already exists: the import system records it under the new name."""

    def __init__(self, module):
        self.module = module

    def create_module(self, spec):
        return self.module

    def exec_module(self, module):
        pass


class AliasFinder(importlib.abc.MetaPathFinder):
    def find_spec(self, fullname, path, target=None):
        head, dot, rest = fullname.partition(".")
        if not dot or head == "loom":
            return None
        loom = sys.modules.get("loom")
        if loom is None or sys.modules.get(head) is not loom:
            return None
        module = importlib.import_module(f"loom.{rest}")
        return importlib.util.spec_from_loader(fullname, _Existing(module), origin=getattr(module, "__file__", None))


def install():
    # First, so that it answers before the path finder (which would execute the file again).
    if not any(isinstance(finder, AliasFinder) for finder in sys.meta_path):
        sys.meta_path.insert(0, AliasFinder())
