"""``gradviz.nn.modules.rnn``: the recurrent layers and cells, with torch's base names ``RNNBase``
and ``RNNCellBase``, where torch code imports them from ``torch.nn.modules.rnn``."""

from .. import (  # noqa: F401  (re-exported)
    GRU,
    LSTM,
    RNN,
    GRUCell,
    LSTMCell,
    RNNCell,
)
from .._rnn import _CellBase as RNNCellBase
from .._rnn import _RNNBase as RNNBase

__all__ = ["RNNBase", "RNNCellBase", "RNN", "LSTM", "GRU", "RNNCell", "LSTMCell", "GRUCell"]
