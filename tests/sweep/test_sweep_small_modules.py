"""Conformance sweep, the small modules and losses of teaching code: a CycleGAN residual block
(ReflectionPad2d), Siamese and triplet embeddings (cosine / triplet / margin-ranking losses),
regression with predicted uncertainty (Gaussian and Poisson NLL), a gated CNN text classifier
(GLU, AdaptiveMaxPool1d, multi-label soft margin), and a segmentation head (Dropout2d,
Softmax2d, Unfold/Fold, padding modes), with the errors these raise.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Weights are filled with fixed values in both
libraries; random draws (dropout masks) only feed properties that do not depend on them.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_harness import check, registry

program = registry()


def _fill(torch, module, scale=0.3):
    """Every parameter set to a scrambled sine (the same values in both libraries)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            values = np.sin(np.arange(p.numel()) * 0.7 + i) * scale
            p.copy_(torch.tensor(values.reshape(tuple(p.shape)), dtype=p.dtype))
    return module


def _data(torch, *shape, shift=0.0):
    n = math.prod(shape)
    return torch.tensor(np.cos(np.arange(n) * 1.3 + shift).reshape(shape), dtype=torch.float32)


@program(1e-5, atol=1e-6)
def cyclegan_residual_block(torch, o):
    """The ResnetBlock of CycleGAN / fast style transfer: reflection padding keeps the border
    statistics, then conv -> instance norm -> ReLU, twice, plus the skip connection."""
    nn = torch.nn
    block = nn.Sequential(nn.ReflectionPad2d(1), nn.Conv2d(3, 3, 3), nn.InstanceNorm2d(3), nn.ReLU(True),
                          nn.ReflectionPad2d(1), nn.Conv2d(3, 3, 3), nn.InstanceNorm2d(3))
    _fill(torch, block)
    o("repr", repr(block))
    x = _data(torch, 2, 3, 5, 6).requires_grad_()
    y = x + block(x)
    o("y", y)
    loss = (y ** 2).mean()
    loss.backward()
    o("loss", loss)
    o("x.grad", x.grad)
    o("conv grad", block[1].weight.grad)
    o("edge pad", nn.ReplicationPad2d((1, 0, 0, 2))(_data(torch, 1, 1, 2, 3)))
    o("circular", nn.CircularPad1d(2)(_data(torch, 1, 2, 3)))
    o("zero pad", nn.ZeroPad2d((1, 1, 0, 0))(_data(torch, 1, 2, 2)))
    o("constant pad", torch.nn.functional.pad(_data(torch, 2, 3), (1, 2), "constant", 0.5))
    o.raises("too much reflection", lambda: nn.ReflectionPad2d(3)(_data(torch, 1, 1, 3, 3)),
             "Padding size should be less than the corresponding input dimension")
    o.raises("bad mode", lambda: torch.nn.functional.pad(_data(torch, 1, 2, 3), (1, 1), "mirror"),
             "Unrecognised padding mode mirror")


@program(1e-5, atol=1e-6)
def siamese_and_triplet_embeddings(torch, o):
    """Metric learning: a shared embedding net trained with the cosine-embedding, triplet and
    margin-ranking losses, one SGD step each."""
    nn = torch.nn
    net = _fill(torch, nn.Sequential(nn.Linear(4, 6), nn.Tanh(), nn.Linear(6, 3)))
    opt = torch.optim.SGD(net.parameters(), lr=0.1)
    a, p, n = _data(torch, 5, 4), _data(torch, 5, 4, shift=0.3), _data(torch, 5, 4, shift=2.0)
    same = torch.tensor([1, -1, 1, 1, -1])
    losses = [nn.CosineEmbeddingLoss(margin=0.2), nn.TripletMarginLoss(margin=1.0, swap=True),
              nn.MarginRankingLoss(margin=0.1)]
    o("reprs", [repr(loss_fn) for loss_fn in losses])
    for step, loss_fn in enumerate(losses):
        opt.zero_grad()
        ea, ep, en = net(a), net(p), net(n)
        if step == 0:
            loss = loss_fn(ea, ep, same)
        elif step == 1:
            loss = loss_fn(ea, ep, en)
        else:
            d_pos, d_neg = (ea - ep).norm(dim=1), (ea - en).norm(dim=1)
            loss = loss_fn(d_neg, d_pos, torch.ones(5))
        loss.backward()
        o(f"loss {step}", loss)
        o(f"grad {step}", net[0].weight.grad)
        opt.step()
    o("weights", net[2].weight)
    o("per pair", torch.nn.functional.triplet_margin_loss(a, p, n, p=1, reduction="none"))
    o("hinge", nn.HingeEmbeddingLoss(margin=0.5, reduction="sum")((a - p).norm(dim=1), same.float()))
    o.raises("triplet dims", lambda: losses[1](a, p, n[0]), "the same number of dimensions")
    o.raises("cosine target", lambda: losses[0](a, p, same.view(5, 1)), "0D or 1D target tensor expected")


@program(1e-5, atol=1e-6)
def uncertainty_and_count_regression(torch, o):
    """Heteroscedastic regression (a mean head and a softplus variance head under
    GaussianNLLLoss) and Poisson regression of counts (PoissonNLLLoss on log-rates)."""
    nn = torch.nn
    body = _fill(torch, nn.Linear(3, 2))
    x = _data(torch, 8, 3)
    y = torch.tensor(np.linspace(-1, 2, 8).reshape(8, 1), dtype=torch.float32)
    gnll = nn.GaussianNLLLoss()
    opt = torch.optim.SGD(body.parameters(), lr=0.05)
    for step in range(3):
        opt.zero_grad()
        out = body(x)
        mean, var = out[:, :1], torch.nn.functional.softplus(out[:, 1:])
        loss = gnll(mean, y, var)
        loss.backward()
        opt.step()
        o(f"gaussian {step}", loss)
    o("bias", body.bias)
    o("full homoscedastic", torch.nn.functional.gaussian_nll_loss(mean, y, var.view(8), full=True, reduction="none"))
    o("float var", torch.nn.functional.gaussian_nll_loss(mean, y, 0.5))
    counts = torch.tensor([0.0, 1.0, 3.0, 2.0, 7.0, 0.0, 4.0, 1.0])
    log_rate = _fill(torch, nn.Linear(3, 1))(x).squeeze(1)
    pnll = nn.PoissonNLLLoss(full=True)
    loss = pnll(log_rate, counts)
    loss.backward()
    o("poisson", loss)
    o("poisson rates", torch.nn.functional.poisson_nll_loss(log_rate.exp(), counts, log_input=False, reduction="sum"))
    o.raises("negative var", lambda: gnll(mean, y, -var), "var has negative entry/entries")
    o.raises("var size", lambda: gnll(mean, y, torch.ones(3, 8)), "var is of incorrect size")


@program(1e-5, atol=1e-6)
def gated_cnn_multilabel(torch, o):
    """A gated convolutional text classifier (Dauphin et al.): Conv1d -> GLU over channels ->
    global AdaptiveMaxPool1d -> Linear, trained on multi-label tags with
    MultiLabelSoftMarginLoss; SoftMarginLoss on a +-1 target; shrink and threshold layers."""
    nn = torch.nn
    conv = _fill(torch, nn.Conv1d(4, 6, 3, padding=1))
    glu, pool = nn.GLU(dim=1), nn.AdaptiveMaxPool1d(1, return_indices=True)
    head = _fill(torch, nn.Linear(3, 5))
    o("layers", [repr(glu), repr(pool)])
    tokens = _data(torch, 2, 4, 7).requires_grad_()
    pooled, where = pool(glu(conv(tokens)))
    o("where", where)
    logits = head(pooled.squeeze(-1))
    tags = torch.tensor([[1.0, 0.0, 1.0, 0.0, 0.0], [0.0, 1.0, 1.0, 1.0, 0.0]])
    loss = nn.MultiLabelSoftMarginLoss(weight=torch.tensor([1.0, 2.0, 1.0, 0.5, 1.0]))(logits, tags)
    loss.backward()
    o("loss", loss)
    o("tokens.grad", tokens.grad)
    o("conv.grad", conv.weight.grad)
    o("soft margin", nn.SoftMarginLoss()(logits[:, 0], torch.tensor([1.0, -1.0])))
    z = torch.linspace(-2, 2, 9)
    o("shrinks", [nn.Hardshrink(0.7)(z), nn.Softshrink(0.7)(z), nn.Threshold(0.3, -1.0)(z)])
    o("reprs", [repr(nn.Hardshrink()), repr(nn.Softshrink(0.2)), repr(nn.Threshold(0.1, 2.0, inplace=True))])
    o("pool2d", nn.AdaptiveMaxPool2d((2, None), return_indices=True)(_data(torch, 1, 5, 3)))
    o.raises("odd channels", lambda: glu(torch.zeros(2, 5, 3)), "Halving dimension must be even")
    o.raises("pool rank", lambda: pool(torch.zeros(5)), "Expected 2 to 3 dimensions")


@program(1e-5, atol=1e-6)
def segmentation_head_channel_dropout(torch, o):
    """A segmentation head: Dropout2d drops whole feature maps in training (checked as a
    property, the masks differ) and is the identity in eval; Softmax2d gives per-pixel class
    probabilities; Unfold/Fold move between images and patches."""
    nn = torch.nn
    head = nn.Sequential(nn.Dropout2d(0.5), _fill(torch, nn.Conv2d(3, 4, 1)), nn.Softmax2d())
    o("repr", repr(head))
    x = _data(torch, 2, 3, 4, 4)
    drop = head[0]
    dropped = drop(torch.ones(8, 16, 3, 3))
    per_channel = dropped.view(8, 16, 9)
    o("whole channels", bool((per_channel == per_channel[:, :, :1]).all()))
    o("values", sorted({float(v) for v in dropped.unique()} - {0.0}))
    head.eval()
    probs = head(x)
    o("probs", probs)
    o("sums to one", probs.sum(1))
    o("eval identity", torch.equal(drop(x), x))
    unfold, fold = nn.Unfold(2, stride=2), nn.Fold((4, 4), 2, stride=2)
    o("reprs", [repr(unfold), repr(fold), repr(nn.Dropout1d(0.2)), repr(nn.AlphaDropout(0.1))])
    patches = unfold(x.requires_grad_())
    o("patches", patches.shape)
    back = fold(patches * 2)
    back.sum().backward()
    o("round trip", torch.allclose(back, 2 * x))
    o("x.grad", x.grad)
    o.raises("p", lambda: nn.Dropout2d(1.5), "dropout probability has to be between 0 and 1")
    o.raises("dropout1d rank", lambda: torch.nn.functional.dropout1d(torch.zeros(2, 3, 4, 5)),
             "dropout1d: Expected 2D or 3D input")
    o.warns("dropout2d 3D", lambda: torch.nn.functional.dropout2d(torch.zeros(2, 3, 4)),
            "assuming that channel-wise 1D dropout behavior is desired")
    o.raises("softmax2d rank", lambda: nn.Softmax2d()(torch.zeros(3, 4)), "expected input to be 3D or 4D")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
