"""RNN, LSTM, GRU and their cells (torch.nn.modules.rnn), written in loom ops.

The sequence is unrolled in Python: each layer projects every time step's input with one
matrix product, then runs one small step per time step (a product with the hidden state and the
gate arithmetic, which fuses). In lazy mode the whole unrolled sequence, forward and backward, is
one trace, and a replay of it compiles nothing: the time steps' structure depends only on the
sequence length. A PackedSequence input runs padded, each sequence's state held past its own
length by a where() (so the reverse direction starts at each sequence's last step), and comes
back packed as PyTorch's does. Parameters, their names (weight_ih_l0, bias_hh_l1_reverse, weight_hr_l0, ...),
shapes, gate order (LSTM: i f g o; GRU: r z n) and initialization are PyTorch's, so state dicts
load either way.
"""

import math
import numbers
import warnings

import loom
from loom.nn import functional as F
from loom.nn import init
from loom.nn.modules.linear import _factory
from loom.nn.modules.module import Module
from loom.nn.parameter import Parameter
from loom.nn.utils.rnn import PackedSequence, pack_padded_sequence, pad_packed_sequence

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


# ---- one time step of each kind; `x` is the input's projection x W_ih^T + b_ih ----

def _rnn_step(activation):
    def step(x, state, w_hh, b_hh, w_hr):
        return (activation(x + F.linear(state[0], w_hh, b_hh)),)
    return step


def _lstm_step(x, state, w_hh, b_hh, w_hr):
    h, c = state
    i, f, g, o = (x + F.linear(h, w_hh, b_hh)).chunk(4, -1)
    c = f.sigmoid() * c + i.sigmoid() * g.tanh()
    h = o.sigmoid() * c.tanh()
    if w_hr is not None:
        h = F.linear(h, w_hr)
    return h, c


def _gru_step(x, state, w_hh, b_hh, w_hr, b_hn=None):
    h = state[0]
    x_r, x_z, x_n = x.chunk(3, -1)
    h_r, h_z, h_n = F.linear(h, w_hh, b_hh).chunk(3, -1)
    if b_hn is not None:
        h_n = h_n + b_hn
    r = (x_r + h_r).sigmoid()
    z = (x_z + h_z).sigmoid()
    n = (x_n + r * h_n).tanh()
    return (n + z * (h - n),)


_STEPS = {"RNN_TANH": _rnn_step(loom.tanh), "RNN_RELU": _rnn_step(loom.relu), "LSTM": _lstm_step,
          "GRU": _gru_step}


def _fold_recurrent_bias(mode, projected, b_hh):
    """The input's projection for every step with what of b_hh can be added there once, and the
    keyword arguments of each step for what cannot. Added per step, b_hh's gradient would be a
    reduction per step (an unrolled sequence of 35 steps: 35 reductions fused into one kernel of
    35 stages); added once, it is one reduction over every step's rows. All of b_hh for RNN and
    LSTM (it is added to the gates with x's projection); GRU's reset and update parts only, its
    new-gate part being multiplied by r first."""
    if b_hh is None:
        return projected, {}
    if mode != "GRU":
        return projected + b_hh, {}
    hidden = b_hh.shape[0] // 3
    return projected + F.pad(b_hh[:2 * hidden], (0, hidden)), {"b_hn": b_hh[2 * hidden:]}


class RNNBase(Module):
    """The parameters and the unrolled forward shared by RNN, LSTM and GRU."""

    def __init__(self, mode, input_size, hidden_size, num_layers=1, bias=True, batch_first=False, dropout=0.0,
                 bidirectional=False, proj_size=0, device=None, dtype=None):
        super().__init__()
        if (not isinstance(dropout, numbers.Number) or isinstance(dropout, bool) or not 0 <= dropout <= 1):
            raise ValueError("dropout should be a number in range [0, 1] representing the probability of an "
                             "element being zeroed")
        if dropout > 0 and num_layers == 1:
            warnings.warn("dropout option adds dropout after all but last recurrent layer, so non-zero dropout "
                          f"expects num_layers greater than 1, but got dropout={dropout} and num_layers={num_layers}")
        if not isinstance(hidden_size, int) or isinstance(hidden_size, bool):
            raise TypeError(f"hidden_size should be of type int, got: {type(hidden_size).__name__}")
        if hidden_size <= 0:
            raise ValueError("hidden_size must be greater than zero")
        if num_layers <= 0:
            raise ValueError("num_layers must be greater than zero")
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        if proj_size and mode != "LSTM":
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        if mode not in _GATES:
            raise ValueError(f"Unrecognized RNN mode: {mode}")
        self.mode, self.input_size, self.hidden_size, self.num_layers = mode, input_size, hidden_size, num_layers
        self.bias, self.batch_first, self.dropout = bias, batch_first, float(dropout)
        self.bidirectional, self.proj_size = bidirectional, proj_size
        directions = 2 if bidirectional else 1
        gate_size = _GATES[mode] * hidden_size
        real_hidden = proj_size if proj_size > 0 else hidden_size
        kw = _factory(device, dtype)
        self._flat_weights_names = []
        for layer in range(num_layers):
            layer_input = input_size if layer == 0 else real_hidden * directions
            for direction in range(directions):
                suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
                shapes = [("weight_ih", (gate_size, layer_input)), ("weight_hh", (gate_size, real_hidden))]
                if bias:
                    shapes += [("bias_ih", (gate_size,)), ("bias_hh", (gate_size,))]
                if proj_size > 0:
                    shapes.append(("weight_hr", (proj_size, hidden_size)))
                for name, shape in shapes:
                    setattr(self, name + suffix, Parameter(loom.empty(*shape, **kw)))
                    self._flat_weights_names.append(name + suffix)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def flatten_parameters(self):
        """Accepted for PyTorch programs (it packs weights for cuDNN there); loom keeps none."""

    @property
    def _flat_weights(self):
        return [getattr(self, name, None) for name in self._flat_weights_names]

    @property
    def all_weights(self):
        """Each layer and direction's parameters, in registration order."""
        per = len(self._flat_weights_names) // (self.num_layers * (2 if self.bidirectional else 1))
        flat = self._flat_weights
        return [flat[i:i + per] for i in range(0, len(flat), per)]

    def _layer_weights(self, layer, direction):
        suffix = f"_l{layer}" + ("_reverse" if direction == 1 else "")
        get = lambda name: getattr(self, name + suffix, None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _state_sizes(self):
        """The size of each hidden state's last dim: (h,) or, for LSTM, (h, c)."""
        h = self.proj_size if self.proj_size > 0 else self.hidden_size
        return (h, self.hidden_size) if self.mode == "LSTM" else (h,)

    def _check_input(self, input):
        if input.dim() not in (2, 3):
            raise ValueError(f"{type(self).__name__}: Expected input to be 2-D or 3-D but received "
                             f"{input.dim()}-D tensor")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected {self.input_size}, "
                               f"got {input.shape[-1]}")
        if not input.is_floating_point():
            raise RuntimeError(f"{type(self).__name__}: expected a floating point input, got {input.dtype}")

    def _initial_states(self, input, hx, batched):
        """The initial states as a tuple of (layers * directions, N, size) tensors: zeros, or hx
        (a tensor, or LSTM's (h0, c0)) with its shape checked. `input` is (L, N, H_in)."""
        directions = 2 if self.bidirectional else 1
        batch = input.shape[1]
        sizes = self._state_sizes()
        if hx is None:
            return tuple(loom.zeros(self.num_layers * directions, batch, s, dtype=input.dtype, device=input.device)
                         for s in sizes)
        states = tuple(hx) if self.mode == "LSTM" else (hx,)
        if self.mode == "LSTM" and len(states) != 2:
            raise RuntimeError("LSTM expects hx to be a tuple (h_0, c_0)")
        out = []
        for which, (state, size) in enumerate(zip(states, sizes)):
            expect_dim = 3 if batched else 2
            if state.dim() != expect_dim:
                kind = "batched 3-D" if batched else "unbatched 2-D"
                name = "hx" if self.mode != "LSTM" else ("h_0" if which == 0 else "c_0")
                raise RuntimeError(f"For {kind} input, {name} should also be {expect_dim}-D but got "
                                   f"{state.dim()}-D tensor")
            if not batched:
                state = state.unsqueeze(1)
            expected = (self.num_layers * directions, batch, size)
            if tuple(state.shape) != expected:
                what = "Expected hidden size" if which == 0 else "Expected hidden[1] size"
                raise RuntimeError(f"{what} {expected}, got {list(state.shape)}")
            out.append(state)
        return tuple(out)

    def forward(self, input, hx=None):
        packed = input if isinstance(input, PackedSequence) else None
        mask = None
        if packed is not None:
            # Padded in the batch's own order; each sequence's steps past its length keep its
            # state (a reverse direction starts at its own last step) and output zeros.
            self._check_input(packed.data)
            input, lengths = pad_packed_sequence(packed)
            steps = loom.arange(input.shape[0], device=input.device).unsqueeze(1)
            mask = (steps < lengths.to(input.device).unsqueeze(0)).unsqueeze(-1)
            batched = True
        else:
            self._check_input(input)
            batched = input.dim() == 3
        if not batched:
            input = input.unsqueeze(1)
        elif self.batch_first and packed is None:
            input = input.transpose(0, 1)
        states = self._initial_states(input, hx, batched)  # input is (L, N, H_in) from here
        step = _STEPS[self.mode]
        directions = 2 if self.bidirectional else 1
        length = input.shape[0]
        layer_input = input
        finals = [[] for _ in states]
        for layer in range(self.num_layers):
            outputs = []
            for direction in range(directions):
                w_ih, w_hh, b_ih, b_hh, w_hr = self._layer_weights(layer, direction)
                projected = F.linear(layer_input, w_ih, b_ih)  # every time step at once
                projected, step_bias = _fold_recurrent_bias(self.mode, projected, b_hh)
                index = layer * directions + direction
                state = tuple(s[index] for s in states)
                steps = range(length - 1, -1, -1) if direction == 1 else range(length)
                hs = [None] * length
                for t in steps:
                    new = step(projected[t], state, w_hh, None, w_hr, **step_bias)
                    if mask is None:
                        state = new
                        hs[t] = new[0]
                    else:
                        state = tuple(loom.where(mask[t], n, old) for n, old in zip(new, state))
                        hs[t] = loom.where(mask[t], new[0], 0.0)
                outputs.append(loom.stack(hs) if length else projected.narrow(-1, 0, 0))
                for final, s in zip(finals, state):
                    final.append(s)
            layer_input = outputs[0] if directions == 1 else loom.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        finals = tuple(loom.stack(f) for f in finals)
        if packed is not None:
            if packed.sorted_indices is not None:
                output = output.index_select(1, packed.sorted_indices)
            data = pack_padded_sequence(output, sorted(lengths.tolist(), reverse=True)).data
            output = PackedSequence(data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices)
            return output, (finals if self.mode == "LSTM" else finals[0])
        if not batched:
            output = output.squeeze(1)
            finals = tuple(f.squeeze(1) for f in finals)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, (finals if self.mode == "LSTM" else finals[0])

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size != 0:
            s += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            s += f", num_layers={self.num_layers}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if self.batch_first is not False:
            s += f", batch_first={self.batch_first}"
        if self.dropout != 0:
            s += f", dropout={self.dropout}"
        if self.bidirectional is not False:
            s += f", bidirectional={self.bidirectional}"
        return s


def _split_args(args, kwargs, names):
    """RNN classes take their constructor arguments positionally or by name, as PyTorch's."""
    if len(args) > len(names):
        raise TypeError(f"expected at most {len(names)} positional arguments, got {len(args)}")
    for name, value in zip(names, args):
        if name in kwargs:
            raise TypeError(f"got multiple values for argument '{name}'")
        kwargs[name] = value
    return kwargs


_RNN_ARGS = ("input_size", "hidden_size", "num_layers", "nonlinearity", "bias", "batch_first", "dropout",
             "bidirectional")
_ARGS = ("input_size", "hidden_size", "num_layers", "bias", "batch_first", "dropout", "bidirectional")


class RNN(RNNBase):
    """Elman RNN: h_t = nonlinearity(x_t W_ih^T + b_ih + h_{t-1} W_hh^T + b_hh), tanh or relu."""

    def __init__(self, *args, **kwargs):
        kwargs = _split_args(args, kwargs, _RNN_ARGS)
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        nonlinearity = kwargs.pop("nonlinearity", "tanh")
        if nonlinearity == "tanh":
            mode = "RNN_TANH"
        elif nonlinearity == "relu":
            mode = "RNN_RELU"
        else:
            raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
        self.nonlinearity = nonlinearity
        super().__init__(mode, **kwargs)


class LSTM(RNNBase):
    """Long short-term memory; proj_size > 0 projects each hidden state with weight_hr."""

    def __init__(self, *args, **kwargs):
        super().__init__("LSTM", **_split_args(args, kwargs, _ARGS + ("proj_size",)))


class GRU(RNNBase):
    """Gated recurrent unit (gates r, z, n as PyTorch: n = tanh(W_in x + b_in + r * (W_hn h +
    b_hn)), h' = (1 - z) * n + z * h)."""

    def __init__(self, *args, **kwargs):
        kwargs = _split_args(args, kwargs, _ARGS)
        if "proj_size" in kwargs:
            raise ValueError("proj_size argument is only supported for LSTM, not RNN or GRU")
        super().__init__("GRU", **kwargs)


class RNNCellBase(Module):
    """One time step: parameters weight_ih, weight_hh (and bias_ih, bias_hh)."""

    _mode = None  # set by each subclass

    def __init__(self, input_size, hidden_size, bias, num_chunks, device=None, dtype=None):
        super().__init__()
        self.input_size, self.hidden_size, self.bias = input_size, hidden_size, bias
        kw = _factory(device, dtype)
        self.weight_ih = Parameter(loom.empty(num_chunks * hidden_size, input_size, **kw))
        self.weight_hh = Parameter(loom.empty(num_chunks * hidden_size, hidden_size, **kw))
        if bias:
            self.bias_ih = Parameter(loom.empty(num_chunks * hidden_size, **kw))
            self.bias_hh = Parameter(loom.empty(num_chunks * hidden_size, **kw))
        else:
            self.register_parameter("bias_ih", None)
            self.register_parameter("bias_hh", None)
        self.reset_parameters()

    def reset_parameters(self):
        stdv = 1.0 / math.sqrt(self.hidden_size) if self.hidden_size > 0 else 0
        for weight in self.parameters():
            init.uniform_(weight, -stdv, stdv)

    def extra_repr(self):
        s = f"{self.input_size}, {self.hidden_size}"
        if self.bias is not True:
            s += f", bias={self.bias}"
        if getattr(self, "nonlinearity", "tanh") != "tanh":
            s += f", nonlinearity={self.nonlinearity}"
        return s

    def _step(self, input, hx, states):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1-D or 2-D but received "
                             f"{input.dim()}-D tensor")
        if input.shape[-1] != self.input_size:
            raise RuntimeError(f"input has inconsistent input_size: got {input.shape[-1]} expected {self.input_size}")
        batched = input.dim() == 2
        if not batched:
            input = input.unsqueeze(0)
        if hx is None:
            hx = tuple(loom.zeros(input.shape[0], self.hidden_size, dtype=input.dtype, device=input.device)
                       for _ in range(states))
        else:
            hx = tuple(hx) if states == 2 else (hx,)
            for h in hx:   # against the input's own rank (an unbatched input is unsqueezed above)
                if h.dim() != (2 if batched else 1):
                    raise RuntimeError(f"{type(self).__name__}: Expected hidden to be 2-D but received "
                                       f"{h.dim()}-D tensor" if batched else
                                       f"{type(self).__name__}: Expected hidden to be 1-D for 1-D input")
            hx = tuple(h if batched else h.unsqueeze(0) for h in hx)
            for h in hx:
                if tuple(h.shape) != (input.shape[0], self.hidden_size):
                    raise RuntimeError(f"hidden has inconsistent size: got {list(h.shape)}, expected "
                                       f"{[input.shape[0], self.hidden_size]}")
        out = _STEPS[self._mode](F.linear(input, self.weight_ih, self.bias_ih), hx, self.weight_hh, self.bias_hh,
                                 None)
        return out if batched else tuple(o.squeeze(0) for o in out)


class RNNCell(RNNCellBase):
    def __init__(self, input_size, hidden_size, bias=True, nonlinearity="tanh", device=None, dtype=None):
        if nonlinearity not in ("tanh", "relu"):
            raise RuntimeError(f"Unknown nonlinearity: {nonlinearity}")
        self.nonlinearity = nonlinearity
        self._mode = "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"
        super().__init__(input_size, hidden_size, bias, 1, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, 1)[0]


class LSTMCell(RNNCellBase):
    _mode = "LSTM"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 4, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, 2)


class GRUCell(RNNCellBase):
    _mode = "GRU"

    def __init__(self, input_size, hidden_size, bias=True, device=None, dtype=None):
        super().__init__(input_size, hidden_size, bias, 3, device, dtype)

    def forward(self, input, hx=None):
        return self._step(input, hx, 1)[0]
