"""Models for the browser tests and bench/widget_scale.py: a 12-block transformer-style model
and an LSTMCell unrolled over many steps (gradviz.nn, so nodes carry module paths), and a long
chain without modules."""

from __future__ import annotations

from typing import Any

import gradviz as torch
import gradviz.nn as nn

#: A module name, class name and parameter name a page must show as text, never as HTML.
HOSTILE = "<img src=x onerror=alert(1)>"


class Block(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.norm1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, batch_first=True)
        self.norm2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x: Any) -> Any:
        h = self.norm1(x)
        x = x + self.attn(h, h, h, need_weights=False)[0]
        return x + self.mlp(self.norm2(x))


class Transformer(nn.Module):
    def __init__(self, blocks: int = 12, width: int = 16, heads: int = 2, vocab: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.blocks = nn.ModuleList([Block(width, heads) for _ in range(blocks)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: Any) -> Any:
        x = self.embed(tokens)
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x))


class Body(nn.Module):
    """Blocks, then one Linear applied ten times: a folded `proj (x10)` box with ten inputs."""

    def __init__(self, blocks: int, width: int) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([Block(width, 2) for _ in range(blocks)])
        self.proj = nn.Linear(width, width)

    def forward(self, x: Any) -> Any:
        for block in self.blocks:
            x = block(x)
        for _ in range(10):
            x = x + self.proj(x) * 0.5
        return x


class Shared(nn.Module):
    def __init__(self, blocks: int = 3, width: int = 8, vocab: int = 16) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        self.body = Body(blocks, width)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: Any) -> Any:
        return self.head(self.body(self.embed(tokens)))


def shared_loss() -> tuple[Any, Any]:
    """(loss, model) of a model whose `body.proj` is used ten times (fan-in copies of its box)."""
    torch.manual_seed(0)
    model = Shared()
    return model(torch.randint(0, 16, (2, 5))).sum(), model


def transformer_loss(blocks: int = 12) -> tuple[Any, Any]:
    """(loss, model) of the transformer on a tiny batch of tokens."""
    torch.manual_seed(0)
    model = Transformer(blocks)
    tokens = torch.randint(0, 32, (2, 5))
    return model(tokens).sum(), model


def _hostile_forward(self: Any, x: Any) -> Any:
    for _ in range(60):  # big enough (> 150 nodes) to open folded
        x = torch.tanh(self.fc(x))
    return x


def hostile_model_loss() -> tuple[Any, Any]:
    """A model whose child module name, class name and parameter name are hostile HTML."""
    cls = type(HOSTILE, (nn.Module,), {
        "__init__": lambda self: (nn.Module.__init__(self), setattr(self, "fc", nn.Linear(3, 3)), None)[-1],
        "forward": _hostile_forward,
    })
    model = nn.Sequential()
    model.add_module(HOSTILE, cls())
    model.add_module("other", nn.Linear(3, 1))
    return model(torch.randn(2, 3)).sum(), model


class Unrolled(nn.Module):
    """An LSTMCell applied `steps` times: one module path ("cell"), `steps` calls."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(width, width)

    def forward(self, x: Any, steps: int) -> Any:
        h = torch.zeros(1, x.shape[1])
        c = torch.zeros(1, x.shape[1])
        for _ in range(steps):
            h, c = self.cell(x, (h, c))
        return h


def lstm_loss(steps: int = 150, width: int = 8) -> tuple[Any, Any]:
    """(loss, model) of an LSTMCell unrolled `steps` times."""
    torch.manual_seed(0)
    model = Unrolled(width)
    return model(torch.randn(1, width), steps).sum(), model


def chain_loss(length: int) -> Any:
    """A chain of `length` multiplications (no modules)."""
    x = torch.ones(2, requires_grad=True)
    y = x
    for _ in range(length - 2):
        y = y * 1.0
    return y.sum()
