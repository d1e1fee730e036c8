"""The DataLoader's internals, at PyTorch's paths (torch.utils.data._utils.collate, .worker)."""
