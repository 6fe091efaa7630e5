"""Recurrent layers: ``RNN``, ``LSTM``, ``GRU`` and their one-step cells ``RNNCell``,
``LSTMCell``, ``GRUCell``, with torch's parameter names, shapes, gate order and
initialisation (U(-1/sqrt(hidden_size), 1/sqrt(hidden_size)), from gradviz's generator).

The steps are written with ``linear`` and pointwise ops, so their graphs (and gradients of
any order) are those of the formulas in torch's documentation; a float32 LSTM without
``proj_size`` is one node per layer and direction instead, as torch's oneDNN layers (Note [One
node per LSTM layer] in ``ops/_lstm_layer.py``). A cell's step is written as
torch's ``lstm_cell``/``gru_cell`` (the same nodes in the same order); the layers run the
cell step by step, where torch projects the whole input sequence first, so their graphs
differ from torch's in that part.
"""

from __future__ import annotations

import math

from .. import dtypes as _dtypes
from .. import ops as _ops
from ..ops._lstm_layer import lstm_layer as _lstm_layer
from . import functional as F
from ._module import Module, Parameter
from .init import _uniform_
from .utils.rnn import PackedSequence

__all__ = ["RNNCell", "LSTMCell", "GRUCell", "RNN", "LSTM", "GRU"]

_GATES = {"RNN_TANH": 1, "RNN_RELU": 1, "LSTM": 4, "GRU": 3}


def _rnn_step(mode, x, state, w_ih, w_hh, b_ih, b_hh, w_hr=None):
    """One step of ``mode`` from input ``x`` (N, I) and state: ``h`` (N, H), or ``(h, c)``
    for an LSTM (``h`` projected by ``w_hr`` when the LSTM has ``proj_size``); returns the
    new state."""
    if mode == "LSTM":
        h, c = state
        gates = F.linear(h, w_hh, b_hh) + F.linear(x, w_ih, b_ih)  # torch's lstm_cell
        i, f, g, o = _ops.unsafe_chunk(gates, 4, -1)
        c = _ops.sigmoid(f) * c + _ops.sigmoid(i) * _ops.tanh(g)
        h = _ops.sigmoid(o) * _ops.tanh(c)
        return (h if w_hr is None else _ops.matmul(h, w_hr.t())), c
    if mode == "GRU":
        h = state
        r_x, z_x, n_x = _ops.unsafe_chunk(F.linear(x, w_ih, b_ih), 3, -1)  # torch's gru_cell
        r_h, z_h, n_h = _ops.unsafe_chunk(F.linear(h, w_hh, b_hh), 3, -1)
        r = _ops.sigmoid(r_x + r_h)
        z = _ops.sigmoid(z_x + z_h)
        n = _ops.tanh(n_x + r * n_h)
        return (h - n) * z + n
    pre = F.linear(x, w_ih, b_ih) + F.linear(state, w_hh, b_hh)
    return _ops.tanh(pre) if mode == "RNN_TANH" else _ops.relu(pre)


# Note [Recurrent layers project the input once]
# ~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~~
# A layer over a padded sequence computes the input's share of every gate for all time steps
# in one product, ``linear(x, w_ih, b_ih)`` over the (T, N, I) input, unbinds it into the
# steps, and transposes ``w_hh`` (and ``w_hr``) once: each step is then one product
# ``h @ w_hh.T + b_hh`` plus the step's slice, as torch's CPU layers run (``FullLayer`` in
# ATen's RNN.cpp precomputes ``linear_ih`` over the sequence and its cells add
# ``linear_hh(h)`` to it). Per step that is five recorded ops fewer (an index, a second product
# and three transposes) and one product for the whole input, where the per-step form cost a
# third of an LSTM step in op overhead. The cells (``LSTMCell``, ...) and packed sequences
# still run ``_rnn_step``, both products per step, as torch's ``lstm_cell`` does.

def _projected_step(mode, projected, state, w_hh_t, b_hh, w_hr_t=None):
    """One step of a layer (Note [Recurrent layers project the input once]) from this step's
    ``linear(x, w_ih, b_ih)`` (N, G), the state, and ``w_hh.t()`` (``w_hr.t()``)."""
    hidden = state[0] if mode == "LSTM" else state
    recurrent = (_ops.matmul(hidden, w_hh_t) if b_hh is None
                 else _ops.addmm(b_hh, hidden, w_hh_t))
    if mode == "LSTM":
        c = state[1]
        i, f, g, o = _ops.unsafe_chunk(recurrent + projected, 4, -1)
        c = _ops.sigmoid(f) * c + _ops.sigmoid(i) * _ops.tanh(g)
        h = _ops.sigmoid(o) * _ops.tanh(c)
        return (h if w_hr_t is None else _ops.matmul(h, w_hr_t)), c
    if mode == "GRU":
        r_x, z_x, n_x = _ops.unsafe_chunk(projected, 3, -1)
        r_h, z_h, n_h = _ops.unsafe_chunk(recurrent, 3, -1)
        r = _ops.sigmoid(r_x + r_h)
        z = _ops.sigmoid(z_x + z_h)
        n = _ops.tanh(n_x + r * n_h)
        return (hidden - n) * z + n
    pre = recurrent + projected
    return _ops.tanh(pre) if mode == "RNN_TANH" else _ops.relu(pre)


def _mode(kind, nonlinearity):
    if kind != "RNN":
        return kind
    if nonlinearity not in ("tanh", "relu"):
        raise ValueError(f"Unknown nonlinearity '{nonlinearity}'. Select from 'tanh' or 'relu'.")
    return "RNN_TANH" if nonlinearity == "tanh" else "RNN_RELU"


class _CellBase(Module):
    """The base of ``RNNCell``, ``LSTMCell`` and ``GRUCell``: one time step's weights
    (``weight_ih``, ``weight_hh`` and biases). Mirrors ``torch.nn.RNNCellBase``."""

    kind = "RNN"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True,
                 nonlinearity: str = "tanh", device=None, dtype=None):
        super().__init__()
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.bias = bias
        self.nonlinearity = nonlinearity
        self.mode = _mode(self.kind, nonlinearity)
        gates = _GATES[self.mode] * hidden_size
        self.weight_ih = Parameter(_ops.empty(gates, input_size, dtype=dtype))
        self.weight_hh = Parameter(_ops.empty(gates, hidden_size, dtype=dtype))
        if bias:
            self.bias_ih = Parameter(_ops.empty(gates, dtype=dtype))
            self.bias_hh = Parameter(_ops.empty(gates, dtype=dtype))
        else:
            self.bias_ih = None
            self.bias_hh = None
        bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0
        for p in self.parameters():
            _uniform_(p, bound)

    def _zeros_state(self, batch_shape, input):
        return _ops.zeros(*batch_shape, self.hidden_size, dtype=input.dtype)

    def forward(self, input, hx=None):
        if input.dim() not in (1, 2):
            raise ValueError(f"{type(self).__name__}: Expected input to be 1D or 2D, got "
                             f"{input.dim()}D instead")
        unbatched = input.dim() == 1
        x = input.unsqueeze(0) if unbatched else input
        if hx is None:
            zeros = self._zeros_state((x.shape[0],), x)
            hx = (zeros, zeros) if self.mode == "LSTM" else zeros
        elif unbatched:
            hx = tuple(h.unsqueeze(0) for h in hx) if self.mode == "LSTM" else hx.unsqueeze(0)
        state = _rnn_step(self.mode, x, hx, self.weight_ih, self.weight_hh, self.bias_ih,
                          self.bias_hh)
        if unbatched:
            state = tuple(s.squeeze(0) for s in state) if self.mode == "LSTM" else state.squeeze(0)
        return state

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if not self.bias:
            text += ", bias=False"
        if self.nonlinearity != "tanh":
            text += f", nonlinearity={self.nonlinearity}"
        return text


class RNNCell(_CellBase):
    """One step of an Elman RNN: ``h' = tanh(W_ih x + b_ih + W_hh h + b_hh)``."""


class LSTMCell(_CellBase):
    """One LSTM step; the state is ``(h, c)``, gates in torch's order (i, f, g, o)."""

    kind = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)


class GRUCell(_CellBase):
    """One GRU step, gates in torch's order (r, z, n)."""

    kind = "GRU"

    def __init__(self, input_size: int, hidden_size: int, bias: bool = True, device=None,
                 dtype=None):
        super().__init__(input_size, hidden_size, bias, device=device, dtype=dtype)


class _RNNBase(Module):
    """The base of ``RNN``, ``LSTM`` and ``GRU``: stacked, optionally bidirectional recurrent
    layers over a whole sequence. Mirrors ``torch.nn.RNNBase``."""

    kind = "RNN"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1,
                 nonlinearity: str = "tanh", bias: bool = True, batch_first: bool = False,
                 dropout: float = 0.0, bidirectional: bool = False, device=None, dtype=None,
                 proj_size: int = 0):
        super().__init__()
        if not 0 <= dropout <= 1 or isinstance(dropout, bool):
            raise ValueError("dropout should be a number in range [0, 1] representing the "
                             "probability of an element being zeroed")
        for name, size in (("input_size", input_size), ("hidden_size", hidden_size),
                           ("num_layers", num_layers)):  # torch's checks, in its order
            if not isinstance(size, int) or isinstance(size, bool):
                raise TypeError(f"{name} should be of type int, got: {type(size).__name__}")
            if size <= 0:
                raise ValueError(f"{name} must be greater than zero")
        self.input_size = input_size
        self.hidden_size = hidden_size
        self.num_layers = num_layers
        self.nonlinearity = nonlinearity
        self.mode = _mode(self.kind, nonlinearity)
        self.bias = bias
        self.batch_first = batch_first
        self.dropout = float(dropout)
        self.bidirectional = bidirectional
        if proj_size < 0:
            raise ValueError("proj_size should be a positive integer or zero to disable "
                             "projections")
        if proj_size >= hidden_size:
            raise ValueError("proj_size has to be smaller than hidden_size")
        self.proj_size = proj_size
        out_size = proj_size or hidden_size  # the size of h (of c: hidden_size)
        gates = _GATES[self.mode] * hidden_size
        directions = 2 if bidirectional else 1
        bound = 1.0 / math.sqrt(hidden_size) if hidden_size > 0 else 0
        for layer in range(num_layers):
            width = input_size if layer == 0 else out_size * directions
            for suffix in ("", "_reverse")[:directions]:
                names = [f"weight_ih_l{layer}{suffix}", f"weight_hh_l{layer}{suffix}"]
                shapes = [(gates, width), (gates, out_size)]
                if bias:
                    names += [f"bias_ih_l{layer}{suffix}", f"bias_hh_l{layer}{suffix}"]
                    shapes += [(gates,), (gates,)]
                if proj_size:
                    names.append(f"weight_hr_l{layer}{suffix}")
                    shapes.append((proj_size, hidden_size))
                for name, shape in zip(names, shapes):
                    setattr(self, name, Parameter(_uniform_(_ops.empty(*shape, dtype=dtype),
                                                            bound)))

    def _weights(self, layer, suffix):
        get = lambda name: getattr(self, f"{name}_l{layer}{suffix}", None)  # noqa: E731
        return get("weight_ih"), get("weight_hh"), get("bias_ih"), get("bias_hh"), get("weight_hr")

    def _check_hidden(self, h, expected, which=""):
        if tuple(h.shape) != expected:
            raise RuntimeError(f"Expected hidden{which} size {expected}, got {list(h.shape)}")

    def _check_states(self, hx, expected):
        """torch's checks of the initial state: ``hidden`` for one tensor, ``hidden[0]``
        (h, of the projected size with ``proj_size``) and ``hidden[1]`` (c) for an LSTM."""
        if self.mode != "LSTM":
            self._check_hidden(hx, expected)
            return
        h_expected = expected[:-1] + (self.proj_size or self.hidden_size,)
        self._check_hidden(hx[0], h_expected, "[0]")
        self._check_hidden(hx[1], expected, "[1]")

    def _zero_states(self, expected, dtype):
        zeros = _ops.zeros(*expected, dtype=dtype)
        if self.mode != "LSTM":
            return zeros
        if self.proj_size:
            return _ops.zeros(*expected[:-1], self.proj_size, dtype=dtype), zeros
        return zeros, zeros

    def forward(self, input, hx=None):
        if isinstance(input, PackedSequence):
            return self._forward_packed(input, hx)
        if input.dim() not in (2, 3):
            noun = "D tensor" if self.kind == "RNN" else "D"  # torch's wording differs
            raise ValueError(f"{type(self).__name__}: Expected input to be 2D or 3D, got "
                             f"{input.dim()}{noun} instead")
        weight = self.weight_ih_l0
        if input.dtype != weight.dtype:
            raise ValueError(
                f"RNN input dtype ({_torch_name(input.dtype)}) does not match weight dtype "
                f"({_torch_name(weight.dtype)}). Convert input: "
                f"input.to({_torch_name(weight.dtype)}), or convert model: "
                f"model.to({_torch_name(input.dtype)})")
        unbatched = input.dim() == 2
        x = input.unsqueeze(1) if unbatched else (input.transpose(0, 1) if self.batch_first
                                                  else input)
        if x.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {x.shape[-1]}")
        directions = 2 if self.bidirectional else 1
        batch = x.shape[1]
        expected = (self.num_layers * directions, batch, self.hidden_size)
        lstm = self.mode == "LSTM"
        if hx is None:
            hx = self._zero_states(expected, x.dtype)
        elif unbatched:
            hx = tuple(h.unsqueeze(1) for h in hx) if lstm else hx.unsqueeze(1)
        self._check_states(hx, expected)
        if lstm and not self.proj_size and x.dtype is _dtypes.float32:
            # Note [One node per LSTM layer] (ops/_lstm_layer.py): torch's oneDNN layers
            output, state = self._forward_layers(x.contiguous(), hx, directions)
            if unbatched:
                return output.squeeze(1), tuple(s.squeeze(1) for s in state)
            return (output.transpose(0, 1) if self.batch_first else output), state
        finals_h, finals_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:directions]):
                index = layer * directions + direction
                state = (hx[0][index], hx[1][index]) if lstm else hx[index]
                steps = range(x.shape[0]) if direction == 0 else range(x.shape[0] - 1, -1, -1)
                seen = [None] * x.shape[0]
                w_ih, w_hh, b_ih, b_hh, w_hr = self._weights(layer, suffix)
                # Note [Recurrent layers project the input once]
                projected = _ops.unbind(F.linear(layer_input, w_ih, b_ih), 0)
                w_hh_t, w_hr_t = w_hh.t(), None if w_hr is None else w_hr.t()
                for t in steps:
                    state = _projected_step(self.mode, projected[t], state, w_hh_t, b_hh,
                                            w_hr_t)
                    seen[t] = state[0] if lstm else state
                outputs.append(_ops.stack(seen, 0))
                finals_h.append(state[0] if lstm else state)
                if lstm:
                    finals_c.append(state[1])
            layer_input = outputs[0] if directions == 1 else _ops.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        output = layer_input
        h_n = _ops.stack(finals_h, 0)
        state = (h_n, _ops.stack(finals_c, 0)) if lstm else h_n
        if unbatched:
            output = output.squeeze(1)
            state = tuple(s.squeeze(1) for s in state) if lstm else state.squeeze(1)
        elif self.batch_first:
            output = output.transpose(0, 1)
        return output, state

    def _forward_layers(self, x, hx, directions):
        """A float32 LSTM as torch runs it on the CPU: each layer and direction one
        ``MkldnnRnnLayerBackward0`` node, the directions concatenated, dropout between layers
        a product with a mask (``MulBackward0``), and ``h_n``/``c_n`` stacked from the
        nodes' last states (Note [One node per LSTM layer])."""
        finals_h, finals_c = [], []
        layer_input = x
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:directions]):
                index = layer * directions + direction
                w_ih, w_hh, b_ih, b_hh, _ = self._weights(layer, suffix)
                output, h_n, c_n = _lstm_layer(layer_input, w_ih, w_hh, b_ih, b_hh, hx[0][index],
                                               hx[1][index], reverse=direction == 1,
                                               bidirectional=directions == 2,
                                               train=self.training)
                outputs.append(output)
                finals_h.append(h_n)
                finals_c.append(c_n)
            layer_input = outputs[0] if directions == 1 else _ops.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                keep = 1.0 - self.dropout
                mask = (_ops.rand(*layer_input.shape) < keep).to(layer_input.dtype) / keep
                layer_input = layer_input * mask
        return layer_input, (_ops.stack(finals_h, 0), _ops.stack(finals_c, 0))

    def _forward_packed(self, packed, hx):
        """The layers over a :class:`PackedSequence`: at step ``t`` only the first
        ``batch_sizes[t]`` sequences advance, the others keep their state (the final state of
        a sequence is that of its last step; the reverse direction starts each sequence at its
        own last step). Returns a PackedSequence and the final states in the batch's order."""
        data, batch_sizes, sorted_indices, unsorted_indices = packed
        if data.dtype != self.weight_ih_l0.dtype:
            weight = self.weight_ih_l0
            raise ValueError(
                f"RNN input dtype ({_torch_name(data.dtype)}) does not match weight dtype "
                f"({_torch_name(weight.dtype)}). Convert input: "
                f"input.to({_torch_name(weight.dtype)}), or convert model: "
                f"model.to({_torch_name(data.dtype)})")
        if data.shape[-1] != self.input_size:
            raise RuntimeError(f"input.size(-1) must be equal to input_size. Expected "
                               f"{self.input_size}, got {data.shape[-1]}")
        sizes = [int(b) for b in batch_sizes.numpy()]
        directions = 2 if self.bidirectional else 1
        batch = sizes[0]
        expected = (self.num_layers * directions, batch, self.hidden_size)
        lstm = self.mode == "LSTM"
        if hx is None:
            hx = self._zero_states(expected, data.dtype)
        elif sorted_indices is not None:  # the states follow the batch into length order
            hx = (tuple(h.index_select(1, sorted_indices) for h in hx) if lstm
                  else hx.index_select(1, sorted_indices))
        self._check_states(hx, expected)
        bounds = [0]
        for b in sizes:
            bounds.append(bounds[-1] + b)
        layer_input = data
        finals_h, finals_c = [], []
        for layer in range(self.num_layers):
            outputs = []
            for direction, suffix in enumerate(("", "_reverse")[:directions]):
                index = layer * directions + direction
                state = (hx[0][index], hx[1][index]) if lstm else hx[index]
                steps = range(len(sizes)) if direction == 0 else range(len(sizes) - 1, -1, -1)
                seen = [None] * len(sizes)
                weights = self._weights(layer, suffix)
                for t in steps:
                    b = sizes[t]
                    x_t = layer_input[bounds[t]:bounds[t + 1]]
                    running = tuple(s[:b] for s in state) if lstm else state[:b]
                    new = _rnn_step(self.mode, x_t, running, *weights)
                    seen[t] = new[0] if lstm else new
                    if b == batch:
                        state = new
                    elif lstm:
                        state = tuple(_ops.cat([n, s[b:]], 0) for n, s in zip(new, state))
                    else:
                        state = _ops.cat([new, state[b:]], 0)
                outputs.append(_ops.cat(seen, 0))
                finals_h.append(state[0] if lstm else state)
                if lstm:
                    finals_c.append(state[1])
            layer_input = outputs[0] if directions == 1 else _ops.cat(outputs, -1)
            if self.dropout and self.training and layer < self.num_layers - 1:
                layer_input = F.dropout(layer_input, self.dropout, True)
        states = [_ops.stack(finals_h, 0)] + ([_ops.stack(finals_c, 0)] if lstm else [])
        if unsorted_indices is not None:
            states = [h.index_select(1, unsorted_indices) for h in states]
        output = PackedSequence(layer_input, batch_sizes, sorted_indices, unsorted_indices)
        return output, (tuple(states) if lstm else states[0])

    def extra_repr(self) -> str:
        text = f"{self.input_size}, {self.hidden_size}"
        if self.proj_size:
            text += f", proj_size={self.proj_size}"
        if self.num_layers != 1:
            text += f", num_layers={self.num_layers}"
        if not self.bias:  # (torch does not show an RNN's nonlinearity)
            text += ", bias=False"
        if self.batch_first:
            text += ", batch_first=True"
        if self.dropout:
            text += f", dropout={self.dropout}"
        if self.bidirectional:
            text += ", bidirectional=True"
        return text


class RNN(_RNNBase):
    """A multi-layer Elman RNN (``tanh`` or ``relu``) over a sequence (L, N, I), or (N, L, I)
    with ``batch_first``; returns ``(output, h_n)``.

    Examples
    --------
    >>> import gradviz as torch
    >>> rnn = torch.nn.RNN(10, 20, num_layers=2)
    >>> output, h_n = rnn(torch.zeros(5, 3, 10))
    >>> output.shape, h_n.shape
    (gradviz.Size([5, 3, 20]), gradviz.Size([2, 3, 20]))
    """


class LSTM(_RNNBase):
    """A multi-layer LSTM; returns ``(output, (h_n, c_n))``."""

    kind = "LSTM"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 proj_size: int = 0, device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, device, dtype, proj_size)


class GRU(_RNNBase):
    """A multi-layer GRU; returns ``(output, h_n)``."""

    kind = "GRU"

    def __init__(self, input_size: int, hidden_size: int, num_layers: int = 1, bias: bool = True,
                 batch_first: bool = False, dropout: float = 0.0, bidirectional: bool = False,
                 device=None, dtype=None):
        super().__init__(input_size, hidden_size, num_layers, "tanh", bias, batch_first, dropout,
                         bidirectional, device, dtype)


def _torch_name(dtype):
    """``torch.float32`` for gradviz.float32: the name in torch's message, which users search."""
    return "torch." + dtype.name
