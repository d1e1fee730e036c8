"""loom.onnx, for the scripts that import torch.onnx for an optional export: loom does not write
ONNX graphs. `export` says so and how to get one: loom.save's files are PyTorch checkpoints, so
the weights load into the same model under PyTorch (torch.load), which exports it."""


def is_in_onnx_export():
    """False: loom never traces a model for ONNX export (model code checks this, as in PyTorch)."""
    return False


def export(model, args=None, f=None, *rest, **kwargs):
    raise NotImplementedError(
        "loom.onnx.export: loom does not export ONNX graphs. Save the weights with loom.save(model.state_dict(), "
        "path); torch.load reads that file, so the same model built with PyTorch can load them and call "
        "torch.onnx.export.")
