"""loom.func: torch.func's function transforms, by autograd and by loops.

functional_call runs a module with other tensors in place of its parameters and buffers (meta-
learning, ensembling). grad, grad_and_value, vjp, jacrev, jacfwd and hessian are reverse-mode
autograd over the function's inputs, recorded with create_graph so that transforms compose
(grad(grad(f))). vmap maps a function over a batch dimension by calling it once per batch element
and stacking the results: the semantics of torch.func.vmap, including in_dims / out_dims, nested
tuples, lists and dicts, and the randomness modes, but with one call per element (in lazy mode
those calls record into one trace, whose kernels fuse). Unlike PyTorch's vmap, a function that
reads values (.item(), data-dependent control flow) works here."""

import contextlib
import functools

import loom
from loom import autograd

# ---- functional_call ----


def _resolve(module, dotted):
    *path, leaf = dotted.split(".")
    for part in path:
        module = getattr(module, part)
    return module, leaf


@contextlib.contextmanager
def _swapped(module, tensors, strict):
    known = dict(module.named_parameters(remove_duplicate=False))
    known.update(dict(module.named_buffers(remove_duplicate=False)))
    if strict:
        missing = sorted(set(known) - set(tensors))
        unexpected = sorted(set(tensors) - set(known))
        if missing or unexpected:
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}: missing keys {missing}, "
                               f"unexpected keys {unexpected}")
    saved = []
    try:
        for name, value in tensors.items():
            owner, leaf = _resolve(module, name)
            for store in ("_parameters", "_buffers"):
                table = owner.__dict__.get(store, {})
                if leaf in table:
                    saved.append((table, leaf, table[leaf]))
                    table[leaf] = value
                    break
            else:
                saved.append((owner.__dict__, leaf, owner.__dict__.get(leaf, _MISSING)))
                owner.__dict__[leaf] = value
        yield
    finally:
        for table, leaf, old in reversed(saved):
            if old is _MISSING:
                table.pop(leaf, None)
            else:
                table[leaf] = old


_MISSING = object()


def _tied_names(module):
    """For each parameter or buffer object reachable under several names, every name: a tensor
    given for one of them stands for all (tie_weights=True)."""
    names = {}
    for name, t in list(module.named_parameters(remove_duplicate=False)) + list(
            module.named_buffers(remove_duplicate=False)):
        names.setdefault(id(t), []).append(name)
    return {name: group for group in names.values() if len(group) > 1 for name in group}


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *, tie_weights=True, strict=False):
    """module(*args, **kwargs) with the given tensors (by dotted name) in place of its parameters
    and buffers, which are put back afterwards; names not given keep the module's own."""
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, (list, tuple)):
        merged = {}
        for d in dicts:
            overlap = set(merged) & set(d)
            if overlap:
                raise ValueError(f"{sorted(overlap)} appeared in multiple dictionaries; behavior of functional call "
                                 "is ambiguous")
            merged.update(d)
        dicts = merged
    tensors = dict(dicts)
    if tie_weights:
        for name, group in _tied_names(module).items():
            given = {tensors[n] for n in group if n in tensors}
            if len(given) > 1 and len({id(t) for t in given}) > 1:
                raise ValueError(f"functional_call got multiple values for keys {group}, which are tied")
            if name not in tensors and given:
                tensors[name] = next(iter(given))
    args = () if args is None else (args if isinstance(args, tuple) else (args,))
    with _swapped(module, tensors, strict):
        return module(*args, **(kwargs or {}))


# ---- gradients ----


def _argnums(argnums, n):
    picked = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for a in picked:
        if not -n <= a < n:
            raise RuntimeError(f"Got argnums={argnums}, but only {n} positional inputs")
    return picked, isinstance(argnums, int)


def _leaves(tree):
    if isinstance(tree, loom.Tensor):
        return [tree]
    if isinstance(tree, (tuple, list)):
        return [leaf for t in tree for leaf in _leaves(t)]
    if isinstance(tree, dict):
        return [leaf for k in tree for leaf in _leaves(tree[k])]
    return []


def _rebuild(tree, leaves):
    """tree with its tensors replaced, in order, by the next ones of the iterator `leaves`."""
    if isinstance(tree, loom.Tensor):
        return next(leaves)
    if isinstance(tree, (tuple, list)):
        return type(tree)(_rebuild(t, leaves) for t in tree)
    if isinstance(tree, dict):
        return {k: _rebuild(v, leaves) for k, v in tree.items()}
    return tree


def _outer(trees):
    """Whether any tensor of trees already required grad: then an enclosing transform or autograd
    differentiates the result, which keeps its history; else it is returned detached, as
    torch.func returns it. (A function whose closure holds tensors that require grad, with none of
    its differentiated arguments requiring grad, loses that history here.)"""
    return any(t.requires_grad for tree in trees for t in _leaves(tree))


def _finish(tree, keep):
    return tree if keep else _rebuild(tree, iter([t.detach() for t in _leaves(tree)]))


def _tracked(tree):
    """tree's tensors, each as a tensor that requires grad and whose gradient is taken from here:
    the tensor itself where it already requires grad (so an outer transform sees through), else a
    detached copy that does."""
    return _rebuild(tree, iter([t if t.requires_grad else t.detach().requires_grad_(True) for t in _leaves(tree)]))


def _traced_call(func, args, kwargs, argnums, has_aux):
    """func called with the arguments at argnums tracked for differentiation. Returns the
    arguments as passed, the picked positions, whether argnums was one int, whether the results
    keep their history (_outer), func's output and its aux (None without has_aux)."""
    picked, single = _argnums(argnums, len(args))
    keep = _outer([args[a] for a in picked])
    args = list(args)
    with autograd.enable_grad():
        for a in picked:
            args[a] = _tracked(args[a])
        result = func(*args, **kwargs)
    output, aux = result if has_aux else (result, None)
    return args, picked, single, keep, output, aux


def grad_and_value(func, argnums=0, has_aux=False):
    """A function returning (gradient of func's scalar output with respect to the arguments at
    argnums, func's output) (with has_aux, func returns (output, aux), and so does the value)."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        args, picked, single, keep, output, aux = _traced_call(func, args, kwargs, argnums, has_aux)
        if not isinstance(output, loom.Tensor) or output.numel() != 1:
            raise RuntimeError(f"grad_and_value(f)(*args): Expected f(*args) to return a scalar Tensor, got "
                               f"{type(output).__name__}" + (f" of shape {tuple(output.shape)}"
                                                             if isinstance(output, loom.Tensor) else ""))
        inputs = [leaf for a in picked for leaf in _leaves(args[a])]
        with autograd.enable_grad():
            got = autograd.grad(output, inputs, create_graph=True, allow_unused=True) if output.requires_grad \
                else [None] * len(inputs)
        grads = iter([loom.zeros_like(x) if g is None else g for g, x in zip(got, inputs)])
        per_arg = [_finish(_rebuild(args[a], grads), keep) for a in picked]
        gradient = per_arg[0] if single else tuple(per_arg)
        output = _finish(output, keep)
        return (gradient, (output, aux)) if has_aux else (gradient, output)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of func's scalar output with respect to the arguments at argnums (with
    has_aux: (gradient, aux))."""
    transformed = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        gradient, value = transformed(*args, **kwargs)
        return (gradient, value[1]) if has_aux else gradient
    return wrapper


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn): vjp_fn(cotangents) gives the vector-Jacobian product for each
    primal (with has_aux, func returns (output, aux) and aux comes third)."""
    keep = _outer(primals)
    with autograd.enable_grad():
        primals = [_tracked(p) for p in primals]
        result = func(*primals)
    output, aux = result if has_aux else (result, None)
    inputs = [leaf for p in primals for leaf in _leaves(p)]

    def vjp_fn(cotangents):
        outs = _leaves(output)
        cots = _leaves(cotangents)
        if len(outs) != len(cots):
            raise RuntimeError(f"Expected cotangents of the same structure as the output: {len(outs)} tensors, got "
                               f"{len(cots)}")
        pairs = [(o, c) for o, c in zip(outs, cots) if o.requires_grad]
        got = autograd.grad([o for o, _ in pairs], inputs, [c for _, c in pairs], retain_graph=True,
                            create_graph=True, allow_unused=True) if pairs else [None] * len(inputs)
        grads = iter([loom.zeros_like(x) if g is None else g for g, x in zip(got, inputs)])
        return tuple(_finish(_rebuild(p, grads), keep) for p in primals)

    shown = _finish(output, keep)
    return (shown, vjp_fn, aux) if has_aux else (shown, vjp_fn)


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of func (one tensor output) with respect to the tensor arguments at argnums,
    of shape output.shape + argument.shape, by one reverse pass per output element."""
    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        for a in _argnums(argnums, len(args))[0]:
            if not isinstance(args[a], loom.Tensor):
                raise NotImplementedError("loom's jacrev differentiates tensor arguments only")
        args, picked, single, keep, output, aux = _traced_call(func, args, kwargs, argnums, has_aux)
        inputs = [args[a] for a in picked]
        with autograd.enable_grad():
            flat = output.reshape(-1)
            rows = [[] for _ in inputs]
            for j in range(flat.numel()):
                got = autograd.grad(flat[j], inputs, retain_graph=True, create_graph=True, allow_unused=True) \
                    if output.requires_grad else [None] * len(inputs)
                for k, (g, x) in enumerate(zip(got, inputs)):
                    rows[k].append(loom.zeros_like(x) if g is None else g)
        jac = [(loom.stack(r) if r else loom.zeros(0, *x.shape, dtype=x.dtype, device=x.device)).reshape(
            *output.shape, *x.shape) for r, x in zip(rows, inputs)]
        jac = [_finish(j, keep) for j in jac]
        jac = jac[0] if single else tuple(jac)
        return (jac, aux) if has_aux else jac
    return wrapper


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian, as jacrev (loom computes it in reverse mode; the values are the same)."""
    return jacrev(func, argnums, has_aux=has_aux)


def hessian(func, argnums=0):
    return jacrev(jacrev(func, argnums), argnums)


# ---- vmap ----


def _batch_size(args, in_dims):
    sizes = set()
    for arg, dims in zip(args, in_dims):
        for leaf, dim in _leaf_dims(arg, dims):
            if dim is not None:
                sizes.add(leaf.shape[dim])
    if not sizes:
        raise ValueError("vmap: at least one input must be batched (an in_dim that is not None for a Tensor)")
    if len(sizes) > 1:
        raise ValueError(f"vmap: Expected all tensors to have the same size in the mapped dimension, got sizes "
                         f"{sorted(sizes)} for the mapped dimension")
    return sizes.pop()


def _leaf_dims(arg, dims):
    """(tensor, its in_dim) for each tensor of arg, with dims an int / None for all of them or a
    structure matching arg's."""
    if isinstance(arg, loom.Tensor):
        if dims is not None and not isinstance(dims, int):
            raise ValueError(f"vmap: in_dim for a Tensor must be an int or None, got {dims!r}")
        return [(arg, None if dims is None else dims % max(arg.dim(), 1))]
    if isinstance(arg, (tuple, list)):
        parts = dims if isinstance(dims, (tuple, list)) else [dims] * len(arg)
        return [pair for a, d in zip(arg, parts) for pair in _leaf_dims(a, d)]
    if isinstance(arg, dict):
        parts = dims if isinstance(dims, dict) else {k: dims for k in arg}
        return [pair for k in arg for pair in _leaf_dims(arg[k], parts[k])]
    return []


def _slice(arg, dims, i):
    leaves = iter([t if d is None else t.select(d, i) for t, d in _leaf_dims(arg, dims)])
    return _rebuild(arg, leaves)


def _stack(results, out_dims):
    first = results[0]
    if isinstance(first, loom.Tensor):
        return loom.stack(results, out_dims if isinstance(out_dims, int) else 0)
    if isinstance(first, (tuple, list)):
        dims = out_dims if isinstance(out_dims, (tuple, list)) else [out_dims] * len(first)
        return type(first)(_stack([r[k] for r in results], dims[k]) for k in range(len(first)))
    if isinstance(first, dict):
        dims = out_dims if isinstance(out_dims, dict) else {k: out_dims for k in first}
        return {k: _stack([r[k] for r in results], dims[k]) for k in first}
    if isinstance(first, (int, float, bool)):
        return loom.tensor(results)
    raise ValueError(f"vmap: the function must return tensors (or nested tuples, lists, dicts of them), got "
                     f"{type(first).__name__}")


def vmap(func, in_dims=0, out_dims=0, randomness="error", *, chunk_size=None):
    """func mapped over dimension in_dims of its inputs, the results stacked along out_dims (see
    the module's note). randomness: "error" raises if func draws random numbers, "different"
    draws independently per element, "same" gives every element the same draws."""
    if randomness not in ("error", "different", "same"):
        raise RuntimeError(f"Only allowed values for randomness are 'error', 'different', or 'same'. Got {randomness}")

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        dims = in_dims if isinstance(in_dims, tuple) else (in_dims,) * len(args)
        if len(dims) != len(args):
            raise ValueError(f"vmap: in_dims is not compatible with the structure of inputs: {len(dims)} in_dims for "
                             f"{len(args)} positional inputs")
        n = _batch_size(args, dims)
        generator = loom.random.default_generator
        start = generator.get_state()
        results = []
        for i in range(n):
            if randomness == "same":
                generator.set_state(start)
            before = generator.get_state()
            results.append(func(*[_slice(a, d, i) for a, d in zip(args, dims)], **kwargs))
            if randomness == "error" and not loom.equal(generator.get_state(), before):
                generator.set_state(start)
                raise RuntimeError("vmap: called random operation while in randomness error mode. Please either use "
                                   "the 'same' or 'different' randomness flags on vmap or perform the randomness "
                                   "operation out of vmap")
        return _stack(results, out_dims)
    return wrapper


__all__ = ["functional_call", "grad", "grad_and_value", "hessian", "jacfwd", "jacrev", "vjp", "vmap"]
