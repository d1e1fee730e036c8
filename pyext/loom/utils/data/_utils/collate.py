"""default_collate and default_convert (torch.utils.data._utils.collate): how a DataLoader
turns a list of samples into a batch, and a sample into tensors when it does not batch."""

import collections.abc

import numpy as np

import loom

_ERROR = "default_collate: batch must contain tensors, numpy arrays, numbers, dicts or lists; found {}"


def _numeric_array(a):
    """True for numpy arrays and scalars that become tensors (not strings or objects)."""
    return a.dtype.kind not in "SaUO"


def _same_type(elem, make):
    """make() rebuilt as elem's container type when the type allows it, else as PyTorch
    falls back: a dict or a list."""
    try:
        return make(type(elem))
    except TypeError:
        return None


def default_convert(data):
    """numpy arrays and numpy numbers become tensors, inside mappings, named tuples and
    sequences too; everything else is returned as it is."""
    if isinstance(data, loom.Tensor):
        return data
    if isinstance(data, (np.ndarray, np.generic)) and not isinstance(data, (np.str_, np.bytes_)):
        return loom.as_tensor(data) if _numeric_array(data) else data
    if isinstance(data, collections.abc.Mapping):
        out = _same_type(data, lambda t: t({k: default_convert(v) for k, v in data.items()}))
        return out if out is not None else {k: default_convert(v) for k, v in data.items()}
    if isinstance(data, tuple) and hasattr(data, "_fields"):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        out = _same_type(data, lambda t: t([default_convert(d) for d in data]))
        return out if out is not None else [default_convert(d) for d in data]
    return data


def default_collate(batch):
    """Stacks a list of samples into a batch, recursively: tensors are stacked along a new first
    dim, numpy arrays and numbers become tensors (Python floats float64, ints int64, bools
    bool), strings stay a list, mappings collate per key, named tuples per field, other
    sequences position by position (tuples become lists, as PyTorch's)."""
    elem = batch[0]
    if isinstance(elem, loom.Tensor):
        return loom.stack(list(batch), 0)
    if isinstance(elem, np.ndarray) and not isinstance(elem, np.generic):
        if not _numeric_array(elem):
            raise TypeError(_ERROR.format(elem.dtype))
        return default_collate([loom.as_tensor(b) for b in batch])
    if isinstance(elem, np.generic) and not isinstance(elem, (np.str_, np.bytes_)):
        if not _numeric_array(elem):
            raise TypeError(_ERROR.format(elem.dtype))
        return loom.as_tensor(np.array(batch))
    if isinstance(elem, bool):
        return loom.tensor(batch, dtype=loom.bool)
    if isinstance(elem, float):
        return loom.tensor(batch, dtype=loom.float64)
    if isinstance(elem, int):
        return loom.tensor(batch, dtype=loom.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        collated = {key: default_collate([d[key] for d in batch]) for key in elem}
        out = _same_type(elem, lambda t: t(collated))
        return out if out is not None else collated
    if isinstance(elem, tuple) and hasattr(elem, "_fields"):
        return type(elem)(*(default_collate(list(samples)) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        size = len(elem)
        if any(len(e) != size for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        transposed = [default_collate(list(samples)) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return transposed
        out = _same_type(elem, lambda t: t(transposed))
        return out if out is not None else transposed
    raise TypeError(_ERROR.format(type(elem)))
