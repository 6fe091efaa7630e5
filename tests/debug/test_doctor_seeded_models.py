"""Seeded bugs for the whole-model doctor inside real-looking models: a transformer block, an
LSTM loop, a CNN with BatchNorm, a VAE, a GAN step, a tied-embedding language model, a residual
MLP. Each bug has a correct twin; each is written once against a library ``lib`` and run on
gradviz and on real PyTorch. Unlike ``test_doctor_model`` (one op on one layer), the bug sits
in a model of several modules, and the doctor must name the kind, the parameter (or, for a
custom Function, the Function and its input) and, where it applies, the node; on every twin it
must report nothing. PyTorch proves each bug's symptom."""

from __future__ import annotations

import contextlib
import math
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch as real_torch

import gradviz

LIBRARIES = {"gradviz": gradviz, "torch": real_torch}


@dataclass
class Model:
    loss: object
    params: object                           # a Module (or (name, tensor) pairs)
    symptom: Callable | None = None          # torch only, after backward: the bug is real
    extra: dict = field(default_factory=dict)


def rng_array(seed, *shape, scale=1.0):
    return np.random.default_rng(seed).standard_normal(shape) * scale


def as_tensor(lib, array, dtype=None):
    return lib.tensor(np.asarray(array), dtype=dtype or lib.float32)


def scoped(lib):
    """PyTorch keeps no record of module calls outside ``torch_scopes`` (docs/doctor.md)."""
    return gradviz.debug.torch_scopes() if lib is real_torch else contextlib.nullcontext()


# ---- custom Functions, written once for both libraries ------------------------------------

def functions(lib):
    Function = lib.autograd.Function

    class Scores(Function):
        """Attention scores q @ k^T * scale."""

        @staticmethod
        def forward(ctx, q, k, scale):
            ctx.save_for_backward(q, k)
            ctx.scale = scale
            return q @ k.transpose(-2, -1) * scale

        @staticmethod
        def backward(ctx, grad):
            q, k = ctx.saved_tensors
            return grad @ k * ctx.scale, grad.transpose(-2, -1) @ q * ctx.scale, None

    class ScoresForgetsScale(Scores):
        @staticmethod
        def backward(ctx, grad):
            q, k = ctx.saved_tensors
            return grad @ k * ctx.scale, grad.transpose(-2, -1) @ q, None

    class Gate(Function):
        """a * sigmoid(b), the gating of an LSTM."""

        @staticmethod
        def forward(ctx, a, b):
            s = lib.sigmoid(b)
            ctx.save_for_backward(a, s)
            return a * s

        @staticmethod
        def backward(ctx, grad):
            a, s = ctx.saved_tensors
            return grad * s, grad * a * s * (1 - s)

    class GateSwapped(Gate):
        @staticmethod
        def backward(ctx, grad):
            a, s = ctx.saved_tensors
            return grad * a * s * (1 - s), grad * s

    class Affine(Function):
        """x * gamma + beta over channels (x [N, C, H, W], gamma and beta [C])."""

        @staticmethod
        def forward(ctx, x, gamma, beta):
            ctx.save_for_backward(x, gamma)
            return x * gamma[:, None, None] + beta[:, None, None]

        @staticmethod
        def backward(ctx, grad):
            x, gamma = ctx.saved_tensors
            return (grad * gamma[:, None, None], (grad * x).sum((0, 2, 3)),
                    grad.sum((0, 2, 3)))

    class AffineWrongInput(Affine):
        """Returns beta's gradient for gamma and gamma's for beta (same shape: no error)."""

        @staticmethod
        def backward(ctx, grad):
            x, gamma = ctx.saved_tensors
            return (grad * gamma[:, None, None], grad.sum((0, 2, 3)),
                    (grad * x).sum((0, 2, 3)))

    class Swish(Function):
        """x * sigmoid(x); backward scales its own copy of grad_output."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * lib.sigmoid(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            s = lib.sigmoid(x)
            return grad * (s * (1 + x * (1 - s)))

    class SwishInPlace(Swish):
        """Scales grad_output in place: the residual branch that shares it sees the change."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            s = lib.sigmoid(x)
            return grad.mul_(s * (1 + x * (1 - s)))

    class Softplus(Function):
        """log(1 + exp(x)), gradient sigmoid(x) written as 1 / (1 + exp(-x))."""

        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return lib.nn.functional.softplus(x)

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad / (1 + lib.exp(-x))

    class SoftplusOverflows(Softplus):
        """exp(x) / (1 + exp(x)): right in float64, inf / inf = NaN in float32 for x > 88."""

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            e = lib.exp(x)
            return grad * e / (1 + e)

    return {cls.__name__: cls for cls in (Scores, ScoresForgetsScale, Gate, GateSwapped, Affine,
                                          AffineWrongInput, Swish, SwishInPlace, Softplus,
                                          SoftplusOverflows)}


# ---- the models ---------------------------------------------------------------------------

def transformer_custom_scores(lib, buggy):
    """A pre-norm transformer block whose attention scores are a custom Function that forgets
    the 1/sqrt(d) scale in k's gradient."""
    nn, F = lib.nn, lib.nn.functional
    fns = functions(lib)
    scores_fn = fns["ScoresForgetsScale" if buggy else "Scores"]
    lib.manual_seed(0)

    class Block(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
            self.qkv, self.proj = nn.Linear(d, 3 * d), nn.Linear(d, d)
            self.fc1, self.fc2 = nn.Linear(d, 16), nn.Linear(16, d)

        def forward(self, x):
            q, k, v = self.qkv(self.ln1(x)).chunk(3, dim=-1)
            weights = F.softmax(scores_fn.apply(q, k, 1 / math.sqrt(q.shape[-1])), dim=-1)
            x = x + self.proj(weights @ v)
            return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))

    block = Block().double()
    out = block(as_tensor(lib, rng_array(1, 2, 5, 8), lib.float64))
    return Model((out ** 2).mean(), block, extra={"function": "ScoresForgetsScale", "input": 1})


def lstm_custom_gate(lib, buggy):
    """An LSTM cell unrolled over four steps whose output gate is a custom Function returning
    its two gradients swapped."""
    nn = lib.nn
    gate = functions(lib)["GateSwapped" if buggy else "Gate"]
    lib.manual_seed(1)

    class Cell(nn.Module):
        def __init__(self, n_in=3, hidden=4):
            super().__init__()
            self.hidden = hidden
            self.ih, self.hh = nn.Linear(n_in, 4 * hidden), nn.Linear(hidden, 4 * hidden)
            self.head = nn.Linear(hidden, 1)

        def forward(self, xs):
            h = c = lib.zeros(xs.shape[1], self.hidden, dtype=xs.dtype)
            for x in xs:
                i, f, g, o = (self.ih(x) + self.hh(h)).chunk(4, dim=1)
                c = lib.sigmoid(f) * c + lib.sigmoid(i) * lib.tanh(g)
                h = gate.apply(lib.tanh(c), o)
            return self.head(h)

    cell = Cell().double()
    out = cell(as_tensor(lib, rng_array(2, 4, 5, 3), lib.float64))
    return Model(((out - 1) ** 2).mean(), cell, extra={"function": "GateSwapped", "input": 0})


def cnn_custom_affine(lib, buggy):
    """A CNN whose normalization's affine part is a custom Function returning gamma's and
    beta's gradients in each other's place."""
    nn, F = lib.nn, lib.nn.functional
    affine = functions(lib)["AffineWrongInput" if buggy else "Affine"]
    lib.manual_seed(2)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(2, 3, 3, padding=1)
            self.bn = nn.BatchNorm2d(3, affine=False)
            self.gamma = nn.Parameter(lib.ones(3) + 0.1 * lib.randn(3))
            self.beta = nn.Parameter(0.1 * lib.randn(3))
            self.head = nn.Linear(3, 2)

        def forward(self, x):
            h = F.relu(affine.apply(self.bn(self.conv(x)), self.gamma, self.beta))
            return self.head(h.mean((2, 3)))

    net = Net().double()
    out = net(as_tensor(lib, rng_array(3, 4, 2, 5, 5), lib.float64))
    loss = F.cross_entropy(out, lib.tensor([0, 1, 1, 0]))
    return Model(loss, net, extra={"function": "AffineWrongInput", "input": 1})


def residual_custom_swish_in_place(lib, buggy):
    """A residual MLP whose activation is a custom Function that scales grad_output in place;
    the skip connection shares that gradient, so the layers below get a wrong one."""
    nn = lib.nn
    swish = functions(lib)["SwishInPlace" if buggy else "Swish"]
    lib.manual_seed(3)

    class Net(nn.Module):
        def __init__(self, d=6):
            super().__init__()
            self.stem, self.fc, self.head = nn.Linear(4, d), nn.Linear(d, d), nn.Linear(d, 1)

        def forward(self, x):
            h = self.stem(x)
            h = h + swish.apply(self.fc(h))
            return self.head(h)

    net = Net().double()
    out = net(as_tensor(lib, rng_array(4, 7, 4), lib.float64))
    return Model(out.sum(), net, extra={"function": "SwishInPlace", "input": 0,
                                        "kind": "mutated_grad_output"})


def float32_custom_softplus(lib, buggy):
    """A float32 MLP whose custom softplus backward is right in float64 only: exp overflows
    to inf in float32 for pre-activations above 88, and inf / inf is NaN."""
    nn = lib.nn
    softplus = functions(lib)["SoftplusOverflows" if buggy else "Softplus"]
    lib.manual_seed(4)
    net = nn.Sequential(nn.Linear(4, 6), nn.Linear(6, 1))
    with lib.no_grad():
        net[0].bias.fill_(95.0)        # a pre-activation far out, as after a bad step
    h = softplus.apply(net[0](as_tensor(lib, rng_array(5, 5, 4))))
    return Model(net[1](h).mean(), net, extra={"function": "SoftplusOverflows", "input": 0,
                                               "kind": "nonfinite"})


def layer_norm_data_in_forward(lib, buggy):
    """A transformer MLP block whose LayerNorm is called with ``.data`` of its weight."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(5)

    class Block(nn.Module):
        def __init__(self, d=8):
            super().__init__()
            self.ln = nn.LayerNorm(d)
            self.fc1, self.fc2 = nn.Linear(d, 16), nn.Linear(16, d)

        def forward(self, x):
            weight = self.ln.weight.data if buggy else self.ln.weight
            h = F.layer_norm(x, (x.shape[-1],), weight, self.ln.bias)
            return x + self.fc2(F.gelu(self.fc1(h)))

    block = Block()
    out = block(as_tensor(lib, rng_array(6, 2, 5, 8)))
    return Model((out ** 2).mean(), block, lambda m: block.ln.weight.grad is None,
                 extra={"param": "ln.weight"})


def residual_detached_mid_stack(lib, buggy):
    """A residual MLP that detaches the stream between its blocks ("to save memory"): the
    stem and the first block get no gradient."""
    nn = lib.nn
    lib.manual_seed(6)

    class Block(nn.Module):
        def __init__(self, d=6):
            super().__init__()
            self.fc1, self.fc2 = nn.Linear(d, 12), nn.Linear(12, d)

        def forward(self, x):
            return x + self.fc2(lib.relu(self.fc1(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.stem = nn.Linear(4, 6)
            self.blocks = nn.ModuleList([Block(), Block()])
            self.head = nn.Linear(6, 1)

        def forward(self, x):
            h = self.blocks[0](self.stem(x))
            if buggy:
                h = h.detach()
            return self.head(self.blocks[1](h))

    net = Net()
    with scoped(lib):
        out = net(as_tensor(lib, rng_array(7, 8, 4)))
    return Model(((out - 1) ** 2).mean(), net, lambda m: net.stem.weight.grad is None,
                 extra={"param": "stem.weight", "also": ["blocks.0.fc1.weight"]})


def loss_rebuilt_from_item(lib, buggy):
    """A training step that logs the loss and rebuilds it from the number: ``tensor(loss.item(),
    requires_grad=True)`` is a new leaf, and nothing reaches the model."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(7)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    loss = F.mse_loss(net(as_tensor(lib, rng_array(8, 6, 4))), as_tensor(lib, rng_array(9, 6, 1)))
    if buggy:
        loss = lib.tensor(loss.item(), requires_grad=True)
    return Model(loss, net, lambda m: net[0].weight.grad is None, extra={"param": "0.weight"})


def total_loss_from_item(lib, buggy):
    """A VAE-style sum of two terms where the reconstruction term goes through ``.item()``:
    only the regularizer's parameters are reached."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(8)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder, self.decoder = nn.Linear(4, 3), nn.Linear(3, 4)

        def forward(self, x):
            z = self.encoder(x)
            recon = F.mse_loss(self.decoder(z), x)
            penalty = (z ** 2).mean()
            if buggy:
                recon = lib.tensor(recon.item())
            return recon + 0.1 * penalty

    net = Net()
    with scoped(lib):
        loss = net(as_tensor(lib, rng_array(10, 6, 4)))
    return Model(loss, net, lambda m: net.decoder.weight.grad is None,
                 extra={"param": "decoder.weight"})


def lstm_cells_in_a_list(lib, buggy):
    """A two-layer LSTM whose cells are kept in a plain Python list: ``model.parameters()``
    (what the optimizer gets) does not hold them, so they are never trained."""
    nn = lib.nn
    lib.manual_seed(9)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            cells = [nn.LSTMCell(3, 5), nn.LSTMCell(5, 5)]
            self.cells = cells if buggy else nn.ModuleList(cells)
            self.head = nn.Linear(5, 1)

        def forward(self, xs):
            state = [None, None]
            for x in xs:
                for index, cell in enumerate(self.cells):
                    state[index] = cell(x, state[index])
                    x = state[index][0]
            return self.head(x)

    net = Net()
    out = net(as_tensor(lib, rng_array(11, 4, 2, 3)))
    return Model((out ** 2).mean(), net,
                 lambda m: all(p is not net.cells[0].weight_ih for p in net.parameters()),
                 extra={"param": "cells.0.weight_ih"})


def state_tensor_not_a_parameter(lib, buggy):
    """An RNN whose learned initial state is a plain tensor with requires_grad (not an
    nn.Parameter): it gets a gradient, but the optimizer never sees it."""
    nn = lib.nn
    lib.manual_seed(10)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            h0 = lib.zeros(1, 5)
            self.h0 = h0.requires_grad_() if buggy else nn.Parameter(h0)
            self.cell, self.head = nn.RNNCell(3, 5), nn.Linear(5, 1)

        def forward(self, xs):
            h = self.h0.expand(xs.shape[1], 5)
            for x in xs:
                h = self.cell(x, h)
            return self.head(h)

    net = Net()
    out = net(as_tensor(lib, rng_array(12, 3, 2, 3)))
    return Model((out ** 2).mean(), net,
                 lambda m: all(p is not net.h0 for p in net.parameters()),
                 extra={"param": "h0"})


def parameter_created_in_forward(lib, buggy):
    """A model that makes its output scale as a new Parameter on every call: a fresh random
    value each step, never in ``model.parameters()``."""
    nn = lib.nn
    lib.manual_seed(11)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(4, 3)
            if not buggy:
                self.scale = nn.Parameter(lib.ones(3))

        def forward(self, x):
            scale = nn.Parameter(lib.ones(3)) if buggy else self.scale
            return self.fc(x) * scale

    net = Net()
    with scoped(lib):
        out = net(as_tensor(lib, rng_array(13, 5, 4)))
    return Model((out ** 2).mean(), net, lambda m: len(list(net.parameters())) == 2,
                 extra={"param": "<Parameter [3] made in Net's forward>"})


def gan_generator_step_detached(lib, buggy):
    """A GAN's generator step that kept the discriminator step's ``fake.detach()``: the
    generator gets no gradient."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(12)
    generator = nn.Sequential(nn.Linear(2, 8), nn.ReLU(), nn.Linear(8, 4))
    discriminator = nn.Sequential(nn.Linear(4, 8), nn.LeakyReLU(0.2), nn.Linear(8, 1))
    z = as_tensor(lib, rng_array(14, 6, 2))
    with scoped(lib):
        fake = generator(z)
        # the discriminator step: detaching fake is right here
        d_fake = discriminator(fake.detach())
        d_loss = F.binary_cross_entropy_with_logits(d_fake, lib.zeros(6, 1))
        d_loss.backward()
        discriminator.zero_grad()
        # the generator step
        scores = discriminator(fake.detach() if buggy else fake)
        g_loss = F.binary_cross_entropy_with_logits(scores, lib.ones(6, 1))
    return Model(g_loss, generator, lambda m: generator[0].weight.grad is None,
                 extra={"param": "0.weight"})


def padding_mask_in_the_wrong_dtype(lib, buggy):
    """An embedding + LSTM-style encoder that zeroes the padded steps with an int64 mask
    built from the tokens, casting the activations to the mask's dtype: the embedding gets
    no gradient (and the values are truncated)."""
    nn = lib.nn
    lib.manual_seed(13)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.fc, self.head = nn.Embedding(10, 4), nn.Linear(4, 4), nn.Linear(4, 1)

        def forward(self, tokens):
            mask = (tokens != 0).long().unsqueeze(-1)
            h = self.emb(tokens) * 3
            h = (h.to(mask.dtype) * mask).float() if buggy else h * mask.to(h.dtype)
            return self.head(lib.tanh(self.fc(h)).sum(1))

    net = Net()
    tokens = lib.tensor(np.array([[3, 4, 0, 0], [5, 1, 2, 0], [7, 8, 9, 6]]))
    with scoped(lib):
        out = net(tokens)
    return Model((out ** 2).mean(), net, lambda m: net.emb.weight.grad is None,
                 extra={"param": "emb.weight"})


def log_of_softmax_underflows(lib, buggy):
    """A classifier head trained with ``log(softmax(logits))`` and nll_loss: with confident
    logits a probability underflows to 0, its log is -inf and the gradient NaN."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(14)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 3))
    with lib.no_grad():
        net[2].weight.mul_(200.0)      # confident logits, as late in training
    logits = net(as_tensor(lib, rng_array(15, 6, 4)))
    logp = lib.log(F.softmax(logits, dim=1)) if buggy else F.log_softmax(logits, dim=1)
    loss = F.nll_loss(logp, lib.tensor([0, 1, 2, 0, 1, 2]))
    return Model(loss, net, lambda m: not bool(net[2].weight.grad.isfinite().all()),
                 extra={"param": "2.weight", "node": "Log"})


def normalized_embedding_of_zero(lib, buggy):
    """A contrastive embedding normalized as ``x / x.norm()``: a ReLU embedding that is all
    zero for one example gives 0 / 0."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(15)
    net = nn.Sequential(nn.Linear(4, 5), nn.ReLU())
    x = rng_array(16, 6, 4)
    x[3] = 0.0                        # with no bias: an all-zero embedding
    with lib.no_grad():
        net[0].bias.zero_()
    e = net(as_tensor(lib, x))
    e = e / e.norm(dim=1, keepdim=True) if buggy else F.normalize(e, dim=1)
    loss = -(e @ e.T).mean()
    return Model(loss, net, lambda m: not bool(net[0].weight.grad.isfinite().all()),
                 extra={"param": "0.weight", "node": "Div"})


def vae_std_sqrt_of_square(lib, buggy):
    """A VAE whose encoder makes its std positive as ``sqrt(s ** 2)``: an example whose s is
    exactly 0 (an all-zero input row, zero biases) has an infinite sqrt derivative times 0 from
    pow, a NaN."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(16)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.mu, self.std = nn.Linear(4, 6), nn.Linear(6, 2), nn.Linear(6, 2)
            self.dec = nn.Linear(2, 4)

        def forward(self, x, eps):
            h = lib.tanh(self.enc(x))
            mu, s = self.mu(h), self.std(h)
            std = lib.sqrt(s ** 2) if buggy else F.softplus(s)
            z = mu + std * eps
            kl = 0.5 * (std ** 2 + mu ** 2 - 1).sum(1).mean()
            return F.mse_loss(self.dec(z), x) + kl

    vae = VAE()
    with lib.no_grad():
        vae.enc.bias.zero_()
        vae.std.bias.zero_()
    x = rng_array(17, 6, 4)
    x[2] = 0.0
    loss = vae(as_tensor(lib, x), as_tensor(lib, rng_array(18, 6, 2)))
    return Model(loss, vae, lambda m: not bool(vae.std.weight.grad.isfinite().all()),
                 extra={"param": "std.weight", "node": "Sqrt"})


def vae_sample_not_reparameterized(lib, buggy):
    """A VAE that samples z with ``normal(mu, std)`` instead of ``mu + std * eps``: no
    gradient of the reconstruction reaches the encoder's mean head through the sample."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(17)

    class VAE(nn.Module):
        def __init__(self):
            super().__init__()
            self.enc, self.mu, self.logvar = nn.Linear(4, 6), nn.Linear(6, 2), nn.Linear(6, 2)
            self.dec = nn.Linear(2, 4)

        def forward(self, x):
            h = lib.tanh(self.enc(x))
            mu, std = self.mu(h), lib.exp(0.5 * self.logvar(h))
            z = lib.normal(mu, std) if buggy else mu + std * lib.randn_like(std)
            return F.mse_loss(self.dec(z), x)

    vae = VAE()
    loss = vae(as_tensor(lib, rng_array(19, 6, 4)))
    return Model(loss, vae, lambda m: vae.mu.weight.grad is None or not vae.mu.weight.grad.any(),
                 extra={"param": "mu.weight"})


def huber_prediction_vs_column_target(lib, buggy):
    """A value head trained with smooth_l1_loss of a squeezed prediction [N] against a target
    kept as a column [N, 1]: every prediction meets every target."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(18)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    value = net(as_tensor(lib, rng_array(20, 6, 4))).squeeze(-1)
    target = as_tensor(lib, rng_array(21, 6, 1))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        loss = F.smooth_l1_loss(value, target if buggy else target.squeeze(-1))
    return Model(loss, net, lambda m: tuple(loss.grad_fn._saved_self.shape) == (6, 6),
                 extra={"param": "2.weight"})


def softmax_into_smoothed_cross_entropy(lib, buggy):
    """A CNN ending in nn.Softmax whose outputs go to CrossEntropyLoss with label smoothing
    (which applies log_softmax itself)."""
    nn = lib.nn
    lib.manual_seed(19)
    layers = [nn.Conv2d(1, 4, 3), nn.BatchNorm2d(4), nn.ReLU(), nn.Flatten(), nn.Linear(36, 3)]
    net = nn.Sequential(*layers, nn.Softmax(dim=1)) if buggy else nn.Sequential(*layers)
    out = net(as_tensor(lib, rng_array(22, 4, 1, 5, 5)))
    loss = nn.CrossEntropyLoss(label_smoothing=0.1)(out, lib.tensor([0, 1, 2, 1]))
    return Model(loss, net, None, extra={"param": "4.weight"})


def two_steps_without_zero_grad(lib, buggy):
    """A training loop with SGD whose zero_grad sits after the loop instead of in it: the
    second step's .grad still holds the first step's gradient."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(20)
    net = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 1))
    optimizer = lib.optim.SGD(net.parameters(), lr=0.1)
    x, y = as_tensor(lib, rng_array(23, 6, 4)), as_tensor(lib, rng_array(24, 6, 1))
    for step in range(2):
        if not buggy:
            optimizer.zero_grad()
        loss = F.mse_loss(net(x * (step + 1)), y)
        if step == 0:
            loss.backward()
            optimizer.step()
    return Model(loss, net, None, extra={"param": "0.weight"})


def squeeze_excite_relu_in_place(lib, buggy):
    """A CNN with BatchNorm and a squeeze-and-excitation gate, whose gate goes through an
    in-place ReLU after the sigmoid (which saved its output for backward)."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(21)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv, self.bn = nn.Conv2d(2, 4, 3, padding=1), nn.BatchNorm2d(4)
            self.squeeze, self.excite = nn.Linear(4, 2), nn.Linear(2, 4)
            self.head = nn.Linear(4, 2)

        def forward(self, x):
            h = F.relu(self.bn(self.conv(x)))
            gate = lib.sigmoid(self.excite(F.relu(self.squeeze(h.mean((2, 3))))))
            gate = F.relu(gate, inplace=True) if buggy else F.relu(gate)
            h = h * gate[:, :, None, None]
            return self.head(h.mean((2, 3)))

    net = Net()
    with lib.no_grad():
        net.squeeze.bias.fill_(1.0)    # no dead ReLU in the squeeze layer
    loss = F.cross_entropy(net(as_tensor(lib, rng_array(25, 3, 2, 4, 4))), lib.tensor([0, 1, 1]))
    return Model(loss, net, None, extra={"param": "excite.weight", "node": "Sigmoid"})


def tied_output_weight_detached(lib, buggy):
    """A language model that ties its output projection to the embedding with ``.detach()``:
    the embedding learns from the lookup only, never from the output layer."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(22)

    class LM(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb, self.rnn = nn.Embedding(12, 6), nn.GRUCell(6, 6)

        def forward(self, tokens):
            h = lib.zeros(tokens.shape[0], 6)
            logits = []
            for t in range(tokens.shape[1]):
                h = self.rnn(self.emb(tokens[:, t]), h)
                tied = self.emb.weight.detach() if buggy else self.emb.weight
                logits.append(h @ tied.T)
            return lib.stack(logits, 1)

    lm = LM()
    tokens = lib.tensor(np.random.default_rng(26).integers(0, 12, (3, 5)))
    logits = lm(tokens[:, :-1])
    loss = F.cross_entropy(logits.reshape(-1, 12), tokens[:, 1:].reshape(-1))
    return Model(loss, lm, None, extra={"param": "emb.weight"})


def frozen_layer_by_mistake(lib, buggy):
    """A fine-tuning script that freezes the backbone with ``requires_grad_(False)`` and, by
    mistake, the new head's first layer too. A frozen parameter is frozen on purpose as far as
    the doctor can tell (docs/doctor.md): nothing is reported, bug or twin."""
    nn, F = lib.nn, lib.nn.functional
    lib.manual_seed(23)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 8), nn.ReLU(), nn.Linear(8, 2))
    net[0].requires_grad_(False)
    if buggy:
        net[2].requires_grad_(False)
    loss = F.cross_entropy(net(as_tensor(lib, rng_array(27, 5, 4))), lib.tensor([0, 1, 1, 0, 1]))
    return Model(loss, net, lambda m: net[2].weight.grad is None, extra={"kind": None})


# name: (build, kind, parameter the finding must name, node op it must point at or None)
CORPUS = {
    "transformer: custom scores forget the scale": (
        transformer_custom_scores, "wrong_gradient", "qkv.weight", "ScoresForgetsScale"),
    "LSTM: custom gate swaps its gradients": (
        lstm_custom_gate, "wrong_gradient", "ih.weight", "GateSwapped"),
    "CNN: custom affine returns gamma's gradient for beta": (
        cnn_custom_affine, "wrong_gradient", "gamma", "AffineWrongInput"),
    "residual MLP: custom swish scales grad_output in place": (
        residual_custom_swish_in_place, "mutated_grad_output", "stem.weight", "SwishInPlace"),
    "float32 MLP: custom softplus right in float64 only": (
        float32_custom_softplus, "nonfinite", "0.weight", "SoftplusOverflows"),
    "transformer: LayerNorm weight through .data": (
        layer_norm_data_in_forward, "no_gradient", "ln.weight", "NativeLayerNorm"),
    "residual MLP: stream detached between blocks": (
        residual_detached_mid_stack, "no_gradient", "stem.weight", "Addmm"),
    "loss rebuilt from loss.item()": (
        loss_rebuilt_from_item, "no_gradient", "0.weight", None),
    "autoencoder: reconstruction term through .item()": (
        total_loss_from_item, "no_gradient", "decoder.weight", None),
    "LSTM: cells in a plain list": (
        lstm_cells_in_a_list, "unregistered_parameter", "cells.0.weight_ih", None),
    "RNN: initial state a tensor, not a Parameter": (
        state_tensor_not_a_parameter, "unregistered_parameter", "h0", None),
    "a Parameter created in forward": (
        parameter_created_in_forward, "unregistered_parameter",
        "<Parameter [3] made in Net's forward>", None),
    # a known limit (docs/doctor.md): the generator's call came before the discriminator's
    # previous call, which ends the window of calls counted for this loss, so the doctor
    # cannot tell it ran; the cause names the cut
    "GAN: generator step on fake.detach()": (
        gan_generator_step_detached, "unused_parameter", "0.weight", None),
    "encoder: padding mask multiplied in int64": (
        padding_mask_in_the_wrong_dtype, "no_gradient", "emb.weight", None),
    "classifier: log(softmax) underflows": (
        log_of_softmax_underflows, "nonfinite_origin", "2.weight", "Log"),
    "contrastive: x / x.norm() of a zero embedding": (
        normalized_embedding_of_zero, "nonfinite_origin", "0.weight", "Div"),
    "VAE: std = sqrt(s ** 2) at s = 0": (
        vae_std_sqrt_of_square, "nonfinite_origin", "std.weight", "Sqrt"),
    "VAE: z = normal(mu, std)": (
        vae_sample_not_reparameterized, "no_gradient", "mu.weight", None),
    "value head: smooth_l1 of [N] vs [N, 1]": (
        huber_prediction_vs_column_target, "broadcast_suspect", "2.weight", "SmoothL1Loss"),
    "CNN: nn.Softmax into CrossEntropyLoss(label_smoothing)": (
        softmax_into_smoothed_cross_entropy, "double_softmax", "4.weight", "Softmax"),
    "training loop: zero_grad after the loop": (
        two_steps_without_zero_grad, "stale_grad", "0.weight", None),
    "CNN: in-place ReLU on a sigmoid gate": (
        squeeze_excite_relu_in_place, "inplace_overwrite", "excite.weight", "Sigmoid"),
    "LM: tied output weight detached": (
        tied_output_weight_detached, "no_gradient", "emb.weight", "Mm"),
}


def build(case, library, buggy):
    build_model, kind, _, _ = CORPUS[case]
    lib = LIBRARIES[library]
    custom = kind in ("wrong_gradient", "mutated_grad_output", "nonfinite")
    # PyTorch keeps no record of a Function's non-tensor arguments outside capture()
    with gradviz.debug.capture() if custom else contextlib.nullcontext():
        return build_model(lib, buggy)


def named(report):
    return {(finding.kind, name) for finding in report.findings for name in finding.params}


def op(node):
    return node.name().rsplit("::", 1)[-1].split("Backward")[0]


@pytest.mark.parametrize("case", [c for c in CORPUS if CORPUS[c][0] is not
                                  softmax_into_smoothed_cross_entropy])
def test_torch_shows_the_symptom_of_each_bug(case):
    model = build(case, "torch", True)
    if model.symptom is None:
        return
    if CORPUS[case][1] == "inplace_overwrite":
        with pytest.raises(RuntimeError, match="modified by an inplace operation"):
            model.loss.backward()
        return
    model.loss.backward(retain_graph=True)
    assert model.symptom(model), case


def test_torch_shows_the_symptom_of_the_gradient_bugs():
    """The stale gradient, the double softmax and the custom Functions' wrong gradients:
    torch's .grad differs between the bug and its twin."""
    for case in ("training loop: zero_grad after the loop",
                 "CNN: nn.Softmax into CrossEntropyLoss(label_smoothing)",
                 "CNN: custom affine returns gamma's gradient for beta",
                 "transformer: custom scores forget the scale"):
        grads = []
        for buggy in (True, False):
            model = build(case, "torch", buggy)
            model.loss.backward()
            weights = [p for name, p in model.params.named_parameters()
                       if name == CORPUS[case][2]]
            grads.append(weights[0].grad.clone())
        assert not real_torch.allclose(*grads), case


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("case", list(CORPUS))
def test_the_doctor_names_the_kind_the_parameter_and_the_node(case, library):
    _, kind, parameter, node = CORPUS[case]
    model = build(case, library, True)
    report = gradviz.debug.doctor(model.loss, params=model.params)
    assert (kind, parameter) in named(report), f"{case} on {library}:\n{report}"
    finding = next(f for f in report.findings if f.kind == kind and parameter in f.params)
    assert finding.summary.endswith(".") and finding.message
    if finding.function is None:
        assert finding.fix and finding.cause, str(report)
    if node is not None:
        assert finding.node is not None and op(finding.node) == node, str(report)
    data = report.to_dict()["findings"]
    assert any(d["kind"] == kind and parameter in d["params"] for d in data)


@pytest.mark.parametrize("library", list(LIBRARIES))
@pytest.mark.parametrize("case", list(CORPUS))
def test_the_correct_twin_has_no_finding(case, library):
    model = build(case, library, False)
    report = gradviz.debug.doctor(model.loss, params=model.params)
    assert report.findings == [], f"{case} twin on {library}:\n{report}"


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_layer_frozen_by_mistake_is_not_reported(library):
    """docs/doctor.md: a parameter frozen with requires_grad=False is never reported."""
    for buggy in (True, False):
        model = frozen_layer_by_mistake(LIBRARIES[library], buggy)
        assert gradviz.debug.doctor(model.loss, params=model.params).findings == []


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_another_models_parameters_and_an_input_requiring_grad_are_not_unregistered(library):
    """A GAN's generator loss reaches the discriminator's parameters, and a saliency map makes
    the input require grad: neither belongs to params=generator."""
    lib = LIBRARIES[library]
    lib.manual_seed(24)
    generator = lib.nn.Sequential(lib.nn.Linear(2, 4), lib.nn.Tanh())
    discriminator = lib.nn.Linear(4, 1)
    z = as_tensor(lib, rng_array(28, 5, 2)).requires_grad_()
    with scoped(lib):
        loss = discriminator(generator(z)).mean()
    report = gradviz.debug.doctor(loss, params=generator)
    assert report.findings == [], str(report)
