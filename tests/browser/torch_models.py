"""Three real PyTorch models (``torch.nn`` only), as people debug them: a ResNet-18, a
GPT-2-style transformer with weight tying and dropout in train mode, and a 2-layer LSTM
language model unrolled over 35 steps (``LSTMCell`` in a Python loop). Each ``make(name)``
returns the model and a function that runs its forward and loss; the browser tests record
its backward with ``gradviz.debug.record_torch`` and open the trace in the widget's page."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

NAMES = ("resnet18", "gpt", "lstm")

#: Per model: the top-level modules its first view shows folded (when it has more nodes than
#: fit), and a parameter the tests search for and compare with torch's ``.grad``.
CHECKS = {
    "resnet18": ({"layer1", "layer2", "layer3", "layer4"}, "layer3.1.conv2.weight"),
    "gpt": ({"h"}, "h.4.mlp.0.weight"),
    "lstm": ({"cells"}, "cells.1.weight_hh"),
}


class BasicBlock(nn.Module):
    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample: nn.Module | None = None
        if stride != 1 or cin != cout:
            self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = F.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        shortcut = x if self.downsample is None else self.downsample(x)
        return F.relu(out + shortcut)


class ResNet18(nn.Module):
    def __init__(self, classes: int = 10) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 64, 7, 2, 3, bias=False)
        self.bn1 = nn.BatchNorm2d(64)
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        stages = []
        cin = 64
        for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
            stages.append(nn.Sequential(BasicBlock(cin, cout, stride), BasicBlock(cout, cout)))
            cin = cout
        self.layer1, self.layer2, self.layer3, self.layer4 = stages
        self.avgpool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(512, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(F.relu(self.bn1(self.conv1(x))))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(self.avgpool(x), 1))


class GPTBlock(nn.Module):
    def __init__(self, width: int, heads: int) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(width)
        self.attn = nn.MultiheadAttention(width, heads, dropout=0.1, batch_first=True)
        self.ln_2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width), nn.Dropout(0.1))

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        h = self.ln_1(x)
        x = x + self.attn(h, h, h, attn_mask=mask, need_weights=False)[0]
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab: int = 256, width: int = 128, heads: int = 4, blocks: int = 6, context: int = 64) -> None:
        super().__init__()
        self.wte = nn.Embedding(vocab, width)
        self.wpe = nn.Embedding(context, width)
        self.drop = nn.Dropout(0.1)
        self.h = nn.ModuleList([GPTBlock(width, heads) for _ in range(blocks)])
        self.ln_f = nn.LayerNorm(width)
        self.lm_head = nn.Linear(width, vocab, bias=False)
        self.lm_head.weight = self.wte.weight  # weight tying, as GPT-2

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        mask = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
        x = self.drop(self.wte(tokens) + self.wpe(torch.arange(length)))
        for block in self.h:
            x = block(x, mask)
        return self.lm_head(self.ln_f(x))


class LSTMLanguageModel(nn.Module):
    """Two stacked ``LSTMCell`` layers unrolled over the sequence in Python, as char-RNN
    tutorials write them: every step's cell call is its own piece of the graph."""

    def __init__(self, vocab: int = 100, embedding: int = 32, hidden: int = 64) -> None:
        super().__init__()
        self.hidden = hidden
        self.encoder = nn.Embedding(vocab, embedding)
        self.cells = nn.ModuleList([nn.LSTMCell(embedding, hidden), nn.LSTMCell(hidden, hidden)])
        self.decoder = nn.Linear(hidden, vocab)

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        batch = tokens.shape[1]
        states = [(torch.zeros(batch, self.hidden), torch.zeros(batch, self.hidden)) for _ in self.cells]
        outputs = []
        for x in self.encoder(tokens):
            for layer, cell in enumerate(self.cells):
                states[layer] = cell(x, states[layer])
                x = states[layer][0]
            outputs.append(x)
        return self.decoder(torch.stack(outputs))


def make(name: str) -> tuple[nn.Module, Callable[[], Any]]:
    """The model (seeded, train mode) and its forward + loss on a fixed batch."""
    torch.manual_seed(0)
    if name == "resnet18":
        resnet = ResNet18()
        images, labels = torch.randn(2, 3, 64, 64), torch.tensor([1, 7])
        return resnet, lambda: F.cross_entropy(resnet(images), labels)
    if name == "gpt":
        gpt = GPT()
        tokens, targets = torch.randint(0, 256, (2, 64)), torch.randint(0, 256, (2, 64))
        return gpt, lambda: F.cross_entropy(gpt(tokens).view(-1, 256), targets.view(-1))
    if name == "lstm":
        lstm = LSTMLanguageModel()
        tokens, targets = torch.randint(0, 100, (35, 4)), torch.randint(0, 100, (35, 4))
        return lstm, lambda: F.cross_entropy(lstm(tokens).view(-1, 100), targets.view(-1))
    raise ValueError(f"unknown model {name!r}; expected one of {NAMES}")
