"""Argument checks of loom's Python-written functions, with PyTorch's wording: a function written
over loom's ops would otherwise meet a value of the wrong type deep inside, as an AttributeError
("'float' object has no attribute 'unbind'") or a StopIteration, which names neither the function
nor the argument. The C++ op table checks its own arguments; these are for the Python side."""

import loom


def tensor(fn, name, value, position=None, optional=False):
    """value itself when it is a Tensor (or None, if optional); else PyTorch's TypeError."""
    if isinstance(value, loom.Tensor) or optional and value is None:
        return value
    where = f" (position {position})" if position is not None else ""
    wanted = "Tensor" if not optional else "Tensor or None"
    raise TypeError(f"{fn}(): argument '{name}'{where} must be {wanted}, not {type(value).__name__}")


def tensors_or_numbers(fn, names, values):
    """values, unchanged, when each is a tensor or a number and at least one is a tensor (an
    elementwise function of tensors or numbers); else PyTorch's TypeError naming the argument."""
    if not any(isinstance(v, loom.Tensor) for v in values):
        got = ", ".join(type(v).__name__ for v in values)
        raise TypeError(f"{fn}(): expected at least one of {', '.join(names)} to be a Tensor, got ({got})")
    for n, v in zip(names, values):
        if not isinstance(v, (loom.Tensor, bool, int, float)):
            raise TypeError(f"{fn}(): argument '{n}' must be Tensor or a number, not {type(v).__name__}")
    return values


def boolean(fn, name, value):
    """value when it is a bool (PyTorch's bool parameters take only bools, not tensors or strings)."""
    if isinstance(value, bool):
        return value
    raise TypeError(f"{fn}(): argument '{name}' must be bool, not {type(value).__name__}")


def tensors(fn, **named):
    """tensor() of each keyword's value, named by the keyword."""
    for name, value in named.items():
        tensor(fn, name, value)


def optional_tensors(fn, **named):
    """tensor(optional=True) of each keyword's value."""
    for name, value in named.items():
        tensor(fn, name, value, optional=True)
