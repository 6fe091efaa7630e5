"""Small real PyTorch models (``torch.nn`` only) with the structures people bring to the
debugger, beyond tests/browser/torch_models.py: a ``TransformerEncoder`` with a causal mask and
a key padding mask, a 2-layer bidirectional batch-first ``GRU``, a U-Net with
``ConvTranspose2d`` and skip concatenations, a ViT-style patch embedding with a cls token and a
learned positional parameter, a custom ``torch.autograd.Function`` inside a model, weight tying,
a submodule called twice in one forward, ``BatchNorm`` in train and in eval mode, and parameters
in a ``ModuleDict``, a ``ParameterList`` and a ``ParameterDict``.

``make(name)`` returns a :class:`Case`: the seeded model, its forward + loss on a fixed batch,
the submodule whose output is the non-leaf the tests compare with a torch hook, and the
parameter the tests search for by name.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

NAMES = ("encoder", "deep_encoder", "gru", "unet", "vit", "custom_function", "tied", "called_twice", "batchnorm_train",
         "batchnorm_eval", "containers")


@dataclass
class Case:
    model: nn.Module
    forward_and_loss: Callable[[], torch.Tensor]
    #: the submodule (a dotted path in ``named_modules()``) whose first output tensor is the
    #: non-leaf compared with what a torch hook on it receives
    probe: str
    #: a parameter searched for by its full name and compared with torch's ``.grad``
    parameter: str
    #: the top-level modules the first view shows folded, for a graph too big to draw whole
    folded: frozenset[str] = frozenset()


class Encoder(nn.Module):
    """Token embedding, a 2-layer ``nn.TransformerEncoder`` (``nn.MultiheadAttention`` inside)
    run with a causal mask and a key padding mask, and a linear head."""

    def __init__(self, vocab: int = 50, width: int = 32, layers: int = 2) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, width)
        layer = nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
        self.head = nn.Linear(width, vocab)

    def forward(self, tokens: torch.Tensor, padding: torch.Tensor) -> torch.Tensor:
        length = tokens.shape[1]
        causal = torch.triu(torch.ones(length, length, dtype=torch.bool), 1)
        return self.head(self.encoder(self.embed(tokens), mask=causal, src_key_padding_mask=padding))


class GRUClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(8, 16, num_layers=2, bidirectional=True, batch_first=True)
        self.out = nn.Linear(32, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        outputs, _ = self.rnn(x)
        return self.out(outputs[:, -1])


class UNet(nn.Module):
    """Two levels down (conv, max pool), two up (``ConvTranspose2d``), each up step
    concatenated with the matching down step's output."""

    def __init__(self) -> None:
        super().__init__()
        self.down1 = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.ReLU())
        self.down2 = nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU())
        self.pool = nn.MaxPool2d(2)
        self.bottom = nn.Sequential(nn.Conv2d(16, 16, 3, padding=1), nn.ReLU())
        self.up2 = nn.ConvTranspose2d(16, 16, 2, stride=2)
        self.dec2 = nn.Sequential(nn.Conv2d(32, 8, 3, padding=1), nn.ReLU())
        self.up1 = nn.ConvTranspose2d(8, 8, 2, stride=2)
        self.dec1 = nn.Conv2d(16, 2, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip1 = self.down1(x)
        skip2 = self.down2(self.pool(skip1))
        bottom = self.bottom(self.pool(skip2))
        up = self.dec2(torch.cat([self.up2(bottom), skip2], 1))
        return self.dec1(torch.cat([self.up1(up), skip1], 1))


class ViT(nn.Module):
    """Patch embedding (a strided conv), a cls token and a learned positional embedding (both
    bare ``nn.Parameter``s of the model), two pre-norm encoder layers, a head on the cls token."""

    def __init__(self, width: int = 32, patches: int = 16) -> None:
        super().__init__()
        self.patch_embed = nn.Conv2d(3, width, 4, stride=4)
        self.cls_token = nn.Parameter(torch.randn(1, 1, width) * 0.02)
        self.pos_embed = nn.Parameter(torch.randn(1, patches + 1, width) * 0.02)
        self.blocks = nn.ModuleList(
            [nn.TransformerEncoderLayer(width, 4, 64, dropout=0.0, batch_first=True, norm_first=True) for _ in range(2)])
        self.norm = nn.LayerNorm(width)
        self.head = nn.Linear(width, 10)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.patch_embed(images).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls_token.expand(patches.shape[0], -1, -1), patches], 1) + self.pos_embed
        for block in self.blocks:
            x = block(x)
        return self.head(self.norm(x)[:, 0])


class HalfClip(torch.autograd.Function):
    """``clamp(-1, 1)`` forward; backward passes half the gradient inside the range."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x)
        return x.clamp(-1, 1)

    @staticmethod
    def backward(ctx: Any, grad: torch.Tensor) -> torch.Tensor:
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 1).to(grad.dtype) * 0.5


class Clip(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return HalfClip.apply(x)


class CustomFunctionMLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(6, 12)
        self.clip = Clip()
        self.fc2 = nn.Linear(12, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.clip(self.fc1(x)))


class TiedLanguageModel(nn.Module):
    """The decoder's weight is the embedding's (``decoder.weight = encoder.weight``)."""

    def __init__(self, vocab: int = 20, width: int = 8) -> None:
        super().__init__()
        self.encoder = nn.Embedding(vocab, width)
        self.proj = nn.Linear(width, width)
        self.decoder = nn.Linear(width, vocab, bias=False)
        self.decoder.weight = self.encoder.weight

    def forward(self, tokens: torch.Tensor) -> torch.Tensor:
        return self.decoder(torch.tanh(self.proj(self.encoder(tokens))))


class CalledTwice(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(nn.Linear(8, 8), nn.Tanh())
        self.out = nn.Linear(8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.block(self.block(x)))


class ConvBatchNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.bn(self.conv(x))).mean((2, 3)))


class Containers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "reg": nn.Linear(4, 1)})
        self.scales = nn.ParameterList([nn.Parameter(torch.ones(4)), nn.Parameter(torch.full((4,), 2.0))])
        self.extra = nn.ParameterDict({"bias": nn.Parameter(torch.zeros(4))})
        self.mix = nn.Sequential(nn.Linear(4, 4), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.mix(x * self.scales[0] * self.scales[1] + self.extra["bias"])
        return self.heads["cls"](h).pow(2).sum() + self.heads["reg"](h).sum()


def make(name: str) -> Case:
    """The model (seeded) and its forward + loss on a fixed batch."""
    torch.manual_seed(0)
    if name in ("encoder", "deep_encoder"):
        deep = name == "deep_encoder"
        encoder = Encoder(layers=6 if deep else 2)
        tokens, targets = torch.randint(0, 50, (2, 7)), torch.randint(0, 50, (2, 7))
        padding = torch.zeros(2, 7, dtype=torch.bool)
        padding[1, 5:] = True
        return Case(encoder, lambda: F.cross_entropy(encoder(tokens, padding).reshape(-1, 50), targets.reshape(-1)),
                    "encoder.layers.0", f"encoder.layers.{4 if deep else 0}.self_attn.in_proj_weight",
                    frozenset({"encoder"} if deep else ()))
    if name == "gru":
        gru = GRUClassifier()
        sequences, labels = torch.randn(3, 5, 8), torch.tensor([0, 2, 1])
        return Case(gru, lambda: F.cross_entropy(gru(sequences), labels), "rnn", "rnn.weight_hh_l1_reverse",
                    frozenset({"rnn"}))
    if name == "unet":
        unet = UNet()
        image = torch.randn(1, 3, 16, 16)
        return Case(unet, lambda: unet(image).pow(2).mean(), "up2", "up2.weight")
    if name == "vit":
        vit = ViT()
        images, labels = torch.randn(2, 3, 16, 16), torch.tensor([3, 4])
        return Case(vit, lambda: F.cross_entropy(vit(images), labels), "blocks.1", "cls_token")
    if name == "custom_function":
        mlp = CustomFunctionMLP()
        x = torch.randn(5, 6) * 2
        return Case(mlp, lambda: mlp(x).pow(2).sum(), "clip", "fc1.weight")
    if name == "tied":
        tied = TiedLanguageModel()
        tokens, targets = torch.randint(0, 20, (3, 4)), torch.randint(0, 20, (12,))
        return Case(tied, lambda: F.cross_entropy(tied(tokens).reshape(-1, 20), targets), "proj", "encoder.weight")
    if name == "called_twice":
        twice = CalledTwice()
        x = torch.randn(4, 8)
        return Case(twice, lambda: twice(x).sum(), "block", "block.0.weight")
    if name in ("batchnorm_train", "batchnorm_eval"):
        net = ConvBatchNorm()
        x = torch.randn(2, 3, 6, 6)
        if name == "batchnorm_eval":
            net(x)  # running statistics that differ from the batch's
            net.eval()
        return Case(net, lambda: net(x).pow(2).sum(), "bn", "bn.weight")
    if name == "containers":
        containers = Containers()
        x = torch.randn(3, 4)
        return Case(containers, lambda: containers(x), "mix", "scales.1")
    raise ValueError(f"unknown model {name!r}; expected one of {NAMES}")


def probe_output(case: Case) -> Callable[[], torch.Tensor]:
    """Register a forward hook on ``case.probe`` that keeps its output's ``.grad``
    (``retain_grad``); returns a function giving that output (call it after backward)."""
    module = dict(case.model.named_modules())[case.probe]
    kept: list[torch.Tensor] = []

    def keep(_module: nn.Module, _args: Any, output: Any) -> None:
        tensor = output[0] if isinstance(output, tuple) else output
        if not kept:  # the first call (a module called twice: its first output)
            tensor.retain_grad()
            kept.append(tensor)

    module.register_forward_hook(keep)
    return lambda: kept[0]
