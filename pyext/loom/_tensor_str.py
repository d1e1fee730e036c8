"""repr() of tensors, in PyTorch's format.

Users compare printed tensors with PyTorch's all the time, so the layout rules are PyTorch's:
one width for every element, integers printed as "1." when a float tensor holds only integral
values, scientific notation when magnitudes span more than 1000x (or exceed 1e8, or go below
1e-4), summarization with "..." beyond `threshold` elements, and `dtype=` shown only when it is
not the default for the values.
"""

import builtins
import math
from dataclasses import dataclass


@dataclass
class _PrintOptions:
    precision: int = 4
    threshold: float = 1000
    edgeitems: int = 3
    linewidth: int = 80
    sci_mode: object = None


_OPTIONS = _PrintOptions()


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None, sci_mode=None):
    """As torch.set_printoptions."""
    if profile == "default":
        _OPTIONS.__init__()
    elif profile == "short":
        _OPTIONS.precision, _OPTIONS.threshold, _OPTIONS.edgeitems, _OPTIONS.linewidth = 2, 1000, 2, 80
    elif profile == "full":
        _OPTIONS.precision, _OPTIONS.threshold, _OPTIONS.edgeitems, _OPTIONS.linewidth = 4, math.inf, 3, 80
    for name, value in (("precision", precision), ("threshold", threshold), ("edgeitems", edgeitems),
                        ("linewidth", linewidth)):
        if value is not None:
            setattr(_OPTIONS, name, value)
    _OPTIONS.sci_mode = sci_mode


def _edge_values(t, summarize):
    """The values the formatter must fit: all of them, or only the edges that will be printed."""
    if t.dim() == 0:
        return [t.item()]
    n = t.shape[0]
    edge = _OPTIONS.edgeitems
    # Only the printed rows are listed: a huge (expanded) tensor has too many to enumerate.
    rows = [*range(edge), *range(n - edge, n)] if summarize and n > 2 * edge else range(n)
    if t.dim() == 1:
        return [t[i].item() for i in rows]
    return [v for i in rows for v in _edge_values(t[i], summarize)]


class _Formatter:
    def __init__(self, values, floating):
        self.floating = floating
        self.int_mode = True
        self.sci_mode = False
        self.max_width = 1
        p = _OPTIONS.precision
        if not floating:
            self.max_width = builtins.max((len(str(v)) for v in values), default=1)
            return
        finite = [v for v in values if math.isfinite(v) and v != 0]
        if finite:
            magnitudes = [abs(v) for v in finite]
            lo, hi = builtins.min(magnitudes), builtins.max(magnitudes)
            self.int_mode = all(v == math.ceil(v) for v in finite)
            if self.int_mode:
                if hi / lo > 1000.0 or hi > 1.0e8:
                    self.sci_mode = True
                    self.max_width = builtins.max(len(f"{v:.{p}e}") for v in finite)
                else:
                    self.max_width = builtins.max(len(f"{v:.0f}") + 1 for v in finite)
            elif hi / lo > 1000.0 or hi > 1.0e8 or lo < 1.0e-4:
                self.sci_mode = True
                self.max_width = builtins.max(len(f"{v:.{p}e}") for v in finite)
            else:
                self.max_width = builtins.max(len(f"{v:.{p}f}") for v in finite)
        if _OPTIONS.sci_mode is not None:
            self.sci_mode = _OPTIONS.sci_mode

    def _plain(self, v):
        if not math.isfinite(v):
            return "nan" if math.isnan(v) else ("inf" if v > 0 else "-inf")
        p = _OPTIONS.precision
        if self.sci_mode:
            return f"{v:.{p}e}"
        if self.int_mode:
            return f"{v:.0f}."
        return f"{v:.{p}f}"

    def width(self):
        return self.max_width

    def format(self, v):
        text = self._plain(v) if self.floating else str(v)
        return " " * (self.max_width - len(text)) + text


def _vector_str(t, indent, summarize, formatter):
    element_length = formatter.width() + 2
    per_line = builtins.max(1, int((_OPTIONS.linewidth - indent) // element_length))
    n = t.shape[0]
    edge = _OPTIONS.edgeitems
    if summarize and n > 2 * edge:
        data = [formatter.format(t[i].item()) for i in range(edge)] + [" ..."]
        data += [formatter.format(t[i].item()) for i in range(n - edge, n)]
    else:
        data = [formatter.format(v) for v in t.tolist()]
    lines = [", ".join(data[i:i + per_line]) for i in range(0, len(data), per_line)]
    return "[" + ("," + "\n" + " " * (indent + 1)).join(lines) + "]"


def _tensor_str_with_formatter(t, indent, summarize, formatter):
    dim = t.dim()
    if dim == 0:
        return formatter.format(t.item())
    if dim == 1:
        return _vector_str(t, indent, summarize, formatter)
    n = t.shape[0]
    edge = _OPTIONS.edgeitems
    if summarize and n > 2 * edge:
        slices = [_tensor_str_with_formatter(t[i], indent + 1, summarize, formatter) for i in range(edge)]
        slices.append("...")
        slices += [_tensor_str_with_formatter(t[i], indent + 1, summarize, formatter) for i in range(n - edge, n)]
    else:
        slices = [_tensor_str_with_formatter(t[i], indent + 1, summarize, formatter) for i in range(n)]
    return "[" + ("," + "\n" * (dim - 1) + " " * (indent + 1)).join(slices) + "]"


def _tensor_str(t, indent):
    if t.numel() == 0:
        return "[]"
    summarize = t.numel() > _OPTIONS.threshold
    if t.dtype.itemsize == 2 and t.dtype.is_floating_point:
        t = t.float()  # float16 / bfloat16 print as their float32 values
    if not t.is_cpu:
        t = t.cpu()
    formatter = _Formatter(_edge_values(t, summarize), t.dtype.is_floating_point)
    return _tensor_str_with_formatter(t, indent, summarize, formatter)


def _add_suffixes(text, suffixes, indent):
    parts = [text]
    last_line_len = len(text) - text.rfind("\n") + 1
    for suffix in suffixes:
        if last_line_len + len(suffix) + 2 > _OPTIONS.linewidth:
            parts.append(",\n" + " " * indent + suffix)
            last_line_len = indent + len(suffix)
        else:
            parts.append(", " + suffix)
            last_line_len += len(suffix) + 2
    parts.append(")")
    return "".join(parts)


def tensor_repr(t):
    import loom

    prefix = "tensor("
    indent = len(prefix)
    suffixes = []
    if not t.is_cpu:
        suffixes.append(f"device='{t.device}'")
    default_dtypes = (loom.get_default_dtype(), loom.int64, loom.bool)
    if t.numel() == 0:
        if t.dim() != 1:
            suffixes.append(f"size={tuple(t.shape)}")
        if t.dtype is not loom.get_default_dtype():
            suffixes.append(f"dtype={t.dtype}")
        body = "[]"
    else:
        if t.dtype not in default_dtypes:
            suffixes.append(f"dtype={t.dtype}")
        body = _tensor_str(t.detach(), indent)
    if t.grad_fn is not None:
        suffixes.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t.requires_grad:
        suffixes.append("requires_grad=True")
    return _add_suffixes(prefix + body, suffixes, indent)
