"""The functions PyTorch writes in Python (torch.functional) because they take their tensors as
varargs or their arguments in several shapes: each normalizes its arguments and calls one row of
the op table (loom._C), which does the work."""

from loom import _C


def _tensors(name, tensors):
    """f(a, b, c) or f([a, b, c]): the tensors as a list."""
    if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)):
        return list(tensors[0])
    return list(tensors)


def meshgrid(*tensors, indexing=None):
    """Grids of the 1-d inputs' values; indexing "ij" (the default) or "xy" (the first two
    outputs' dims swapped)."""
    if indexing is None:
        return _C.meshgrid(_tensors("meshgrid", tensors))
    return _C.meshgrid(_tensors("meshgrid", tensors), indexing=indexing)


def cartesian_prod(*tensors):
    return _C.cartesian_prod(_tensors("cartesian_prod", tensors))


def block_diag(*tensors):
    return _C.block_diag(_tensors("block_diag", tensors))


def _atleast(row, tensors):
    if len(tensors) == 1 and not isinstance(tensors[0], (list, tuple)):
        return row(tensors[0])
    return tuple(row(t) for t in _tensors(row.__name__, tensors))


def atleast_1d(*tensors):
    return _atleast(_C.atleast_1d, tensors)


def atleast_2d(*tensors):
    return _atleast(_C.atleast_2d, tensors)


def atleast_3d(*tensors):
    return _atleast(_C.atleast_3d, tensors)


def _sublist_equation(args):
    """einsum(op0, sublist0, op1, sublist1, ..., [out_sublist]): the operands and the equation
    the sublists spell (labels 0-51 as letters, Ellipsis as ...)."""
    def spell(sublist):
        out = []
        for label in sublist:
            if label is Ellipsis:
                out.append("...")
            elif isinstance(label, int) and 0 <= label < 52:
                out.append(chr(ord("A") + label) if label < 26 else chr(ord("a") + label - 26))
            else:
                raise ValueError(f"einsum(): expected subscript to be within the range [0, 52), but got {label}")
        return "".join(out)
    operands, terms = list(args[0::2]), [spell(s) for s in args[1::2]]
    if len(args) % 2:  # an output sublist after the last operand's
        operands = operands[:-1]
        return operands, ",".join(terms) + "->" + spell(args[-1])
    return operands, ",".join(terms)


def einsum(equation, *operands):
    """Einstein summation: any equation PyTorch accepts (ellipsis, implicit output, repeated
    labels for diagonals), lowered to views, sums and matrix products; three or more operands
    contract pairwise, the pair with the smallest result first. The sublist form
    einsum(op0, [0, 1], op1, [1, 2], [0, 2]) spells the same equations."""
    if not isinstance(equation, str):
        operands, equation = _sublist_equation((equation,) + operands)
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = operands[0]
    if not operands:
        raise ValueError("einsum(): must specify the equation string and at least one operand, or at least one "
                         "operand and its subscripts list")
    return _C.einsum(equation, list(operands))


def tensordot(a, b, dims=2):
    """a's last `dims` dims contracted with b's first, or the dims listed in a pair of lists.
    (out= is added at import by loom/_out.py.)"""
    if isinstance(dims, _C.Tensor):
        dims = dims.tolist()
    if isinstance(dims, int):
        if dims < 0:
            raise RuntimeError(f"tensordot expects dims >= 0, but got dims={dims}")
        return _C.tensordot(a, b, list(range(-dims, 0)), list(range(dims)))
    if isinstance(dims, (list, tuple)) and len(dims) == 2:
        return _C.tensordot(a, b, dims[0], dims[1])
    raise RuntimeError(f"tensordot expects dims to be an int or a pair of lists, got {dims!r}")


def spmm(input, mat2):
    """torch.spmm: the matrix product of a sparse (in PyTorch) and a dense matrix. loom's tensors are
    all strided, so it is mm: programs that pass dense matrices (PyTorch takes them too) run."""
    return _C.mm(input, mat2)


def chain_matmul(*matrices):
    """The product of the matrices, in the cheapest order (as linalg.multi_dot)."""
    return _C.chain_matmul(_tensors("chain_matmul", matrices))


def broadcast_shapes(*shapes):
    """The shape that tensors of the given shapes broadcast to (no tensor is made). Each shape is
    a sequence of ints or a single int."""
    result = []
    for shape in shapes:
        dims = (shape,) if isinstance(shape, int) else tuple(shape)
        for d in dims:
            if not isinstance(d, int) or isinstance(d, bool):
                raise TypeError(f"broadcast_shapes(): expected an int or a sequence of ints, got {shape!r}")
            if d < 0:
                raise RuntimeError(f"Trying to create tensor with negative dimension {d}: {list(dims)}")
        if len(dims) > len(result):
            result = [1] * (len(dims) - len(result)) + result
        for i, d in enumerate(dims, start=len(result) - len(dims)):
            if result[i] == 1:
                result[i] = d
            elif d != 1 and d != result[i]:
                raise RuntimeError(f"shape mismatch: objects cannot be broadcast to a single shape.  Mismatch is "
                                   f"between arg 0 and arg {shapes.index(shape)}.")
    return _C.Size(result)


def broadcast_tensors(*tensors):
    """The tensors expanded to their common shape (views, as expand)."""
    tensors = _tensors("broadcast_tensors", tensors)
    for i, t in enumerate(tensors):
        if not isinstance(t, _C.Tensor):
            raise TypeError(f"broadcast_tensors(): expected Tensor as element {i} in argument 0, but got "
                            f"{type(t).__name__}")
    shape = broadcast_shapes(*[tuple(t.shape) for t in tensors])
    return tuple(t.expand(shape) for t in tensors)


def result_type(tensor1, tensor2):
    """The dtype PyTorch's type promotion gives an op of the two (tensors or Python numbers): a
    0-d tensor or a number counts only when it is of a higher category than the tensors with
    dims. Computed by where() on stand-ins without elements, so the rule is the op library's."""
    def stand_in(x):
        if isinstance(x, _C.Tensor):
            return _C.empty((0,) * x.dim() if x.dim() else (), dtype=x.dtype)
        if isinstance(x, (bool, int, float)):
            return x
        raise TypeError(f"result_type(): argument must be Tensor or Number, not {type(x).__name__}")
    a, b = stand_in(tensor1), stand_in(tensor2)
    if not isinstance(a, _C.Tensor) and not isinstance(b, _C.Tensor):
        a = _C.tensor(a)  # two numbers: the first one's dtype as a 0-d tensor's
    condition = _C.empty((0,) * max(getattr(a, "ndim", 0), getattr(b, "ndim", 0)), dtype=_C.bool)
    return _C.where(condition, a, b).dtype
