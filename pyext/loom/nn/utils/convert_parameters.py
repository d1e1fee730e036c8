"""Parameters as one vector and back (torch.nn.utils.convert_parameters)."""

import loom


def _check_same_device(param, device):
    if device is not None and param.device != device:
        raise TypeError("Found two parameters on different devices, this is currently not supported.")
    return param.device


def parameters_to_vector(parameters):
    """Every parameter flattened and concatenated, in order (a new tensor with their history)."""
    device, flat = None, []
    for p in parameters:
        device = _check_same_device(p, device)
        flat.append(p.reshape(-1))
    return loom.cat(flat)


def vector_to_parameters(vec, parameters):
    """Copies consecutive slices of `vec` into the parameters, in order. The parameters keep
    their storage (PyTorch re-points their data at the vector instead: loom keeps parameter
    addresses fixed, so that compiled steps replay over them)."""
    if not isinstance(vec, loom.Tensor):
        raise TypeError(f"expected torch.Tensor, but got: {type(vec).__name__}")
    device, offset = None, 0
    with loom.no_grad():
        for p in parameters:
            device = _check_same_device(p, device)
            n = p.numel()
            p.copy_(vec[offset:offset + n].reshape(p.shape))
            offset += n
