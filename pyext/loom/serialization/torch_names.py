"""PyTorch's names that checkpoints spell, and loom's counterparts: storage classes and dtypes.

A checkpoint's pickle names PyTorch globals (torch.FloatStorage, torch.float32); loom writes
them without importing torch (Name) and reads them without importing anything (the tables).
"""

import loom

# torch.<dtype>: loom's dtypes under PyTorch's names, and the dtypes loom lacks.
DTYPES = {"bool": loom.bool, "uint8": loom.uint8, "int8": loom.int8, "int16": loom.int16, "int32": loom.int32,
          "int64": loom.int64,
          "float16": loom.float16, "bfloat16": loom.bfloat16, "float32": loom.float32, "float64": loom.float64}
MISSING_DTYPES = {"uint16", "uint32", "uint64", "complex32", "complex64", "complex128",
                  "float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz", "qint8", "quint8", "qint32",
                  "quint4x2", "quint2x4", "bits8", "bits16", "bits1x8", "bits2x4", "bits4x2"}

# torch.<Name>Storage: the typed storage classes (UntypedStorage holds bytes).
STORAGES = {"BoolStorage": "bool", "ByteStorage": "uint8", "CharStorage": "int8", "ShortStorage": "int16",
            "IntStorage": "int32", "LongStorage": "int64",
            "HalfStorage": "float16", "BFloat16Storage": "bfloat16", "FloatStorage": "float32",
            "DoubleStorage": "float64", "UntypedStorage": "uint8"}
MISSING_STORAGES = {"ComplexFloatStorage": "complex64",
                    "ComplexDoubleStorage": "complex128", "QInt8Storage": "qint8", "QUInt8Storage": "quint8",
                    "QInt32Storage": "qint32", "QUInt4x2Storage": "quint4x2", "QUInt2x4Storage": "quint2x4"}
STORAGE_OF_DTYPE = {DTYPES[d]: name for name, d in STORAGES.items() if name != "UntypedStorage"}


class StorageType:
    """What a checkpoint's storage class (torch.FloatStorage, ...) stands for when loom reads it:
    the element dtype, or None where loom has no such dtype."""

    def __init__(self, name, dtype_name):
        self.name, self.dtype_name = name, dtype_name
        self.dtype = DTYPES.get(dtype_name)

    def __repr__(self):
        return f"torch.{self.name}"


def storage_types():
    """{"torch.FloatStorage": StorageType, ...}, with the old torch.cuda.* names too."""
    out = {}
    for table in (STORAGES, MISSING_STORAGES):
        for name, dtype_name in table.items():
            for module in ("torch", "torch.cuda", "torch.storage"):
                out[f"{module}.{name}"] = StorageType(name, dtype_name)
    return out


class Name:
    """A PyTorch global that loom writes into a pickle by name (torch._utils._rebuild_tensor_v2),
    never importing it: the pickler (pickler.py) writes a GLOBAL opcode for it."""

    def __init__(self, module, name):
        self.module, self.name = module, name

    def __repr__(self):
        return f"{self.module}.{self.name}"

    def __call__(self, *args):  # pickle's save_reduce asks for a callable; this one is only written
        raise TypeError(f"{self!r} is PyTorch's, named in checkpoints; loom does not call it")
