"""Conformance sweep, programs recreated from popular courses: Karpathy's "Neural Networks: Zero
to Hero" (micrograd, makemore parts 1-5), d2l.ai chapters, fast.ai lesson 4, CS231n gradient
checks, and the beginner errors those courses run into.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Random draws only feed shapes and dtypes;
values come from fixed tensors.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from sweep_harness import check, node_name, registry

program = registry()

WORDS = ["emma", "olivia", "ava", "isabella", "sophia", "mia", "amelia", "ella", "ada"]
CHARS = sorted(set("".join(WORDS)))


def _stoi():
    stoi = {s: i + 1 for i, s in enumerate(CHARS)}
    stoi["."] = 0
    return stoi


def _fixed(torch, *shape, scale=1.0, shift=0.0):
    """Deterministic weights standing in for ``torch.randn(*shape)``: a scrambled sine."""
    n = math.prod(shape)
    return (torch.sin(torch.arange(n, dtype=torch.float32) * 1.7 + shift) * scale).view(*shape)


# ---- micrograd ------------------------------------------------------------------------------

class Value:
    """micrograd's scalar autograd value (the lecture's version, unchanged)."""

    def __init__(self, data, _children=(), _op=""):
        self.data = data
        self.grad = 0.0
        self._backward = lambda: None
        self._prev = set(_children)
        self._op = _op

    def __add__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data + other.data, (self, other), "+")

        def _backward():
            self.grad += out.grad
            other.grad += out.grad
        out._backward = _backward
        return out

    def __mul__(self, other):
        other = other if isinstance(other, Value) else Value(other)
        out = Value(self.data * other.data, (self, other), "*")

        def _backward():
            self.grad += other.data * out.grad
            other.grad += self.data * out.grad
        out._backward = _backward
        return out

    def __pow__(self, other):
        out = Value(self.data ** other, (self,), f"**{other}")

        def _backward():
            self.grad += other * self.data ** (other - 1) * out.grad
        out._backward = _backward
        return out

    def tanh(self):
        t = (math.exp(2 * self.data) - 1) / (math.exp(2 * self.data) + 1)
        out = Value(t, (self,), "tanh")

        def _backward():
            self.grad += (1 - t ** 2) * out.grad
        out._backward = _backward
        return out

    def backward(self):
        topo, visited = [], set()

        def build(v):
            if v not in visited:
                visited.add(v)
                for child in v._prev:
                    build(child)
                topo.append(v)
        build(self)
        self.grad = 1.0
        for node in reversed(topo):
            node._backward()

    def __neg__(self):
        return self * -1

    def __radd__(self, other):
        return self + other

    def __sub__(self, other):
        return self + (-other)

    def __rmul__(self, other):
        return self * other


@program
def micrograd_mlp_against_torch(torch, o):
    xs = [[2.0, 3.0, -1.0], [3.0, -1.0, 0.5], [0.5, 1.0, 1.0], [1.0, 1.0, -1.0]]
    ys = [1.0, -1.0, -1.0, 1.0]
    w1 = [[0.1 * ((i * 3 + j) % 5) - 0.2 for j in range(3)] for i in range(4)]
    w2 = [0.3, -0.2, 0.1, 0.25]
    # micrograd
    vw1 = [[Value(w) for w in row] for row in w1]
    vw2 = [Value(w) for w in w2]
    for _ in range(3):
        preds = []
        for x in xs:
            h = [sum((wi * xi for wi, xi in zip(row, x)), Value(0.0)).tanh() for row in vw1]
            preds.append(sum((wi * hi for wi, hi in zip(vw2, h)), Value(0.0)).tanh())
        vloss = sum(((yout - ygt) ** 2 for ygt, yout in zip(ys, preds)), Value(0.0))
        for p in [w for row in vw1 for w in row] + vw2:
            p.grad = 0.0
        vloss.backward()
        for p in [w for row in vw1 for w in row] + vw2:
            p.data += -0.05 * p.grad
    # the same network in torch, float64 as in the lecture
    W1 = torch.tensor(w1).double()
    W1.requires_grad = True
    W2 = torch.tensor(w2, dtype=torch.float64, requires_grad=True)
    X = torch.Tensor(xs).double()
    Y = torch.tensor(ys).double()
    for _ in range(3):
        ypred = torch.tanh(torch.tanh(X @ W1.T) @ W2)
        loss = ((ypred - Y) ** 2).sum()
        W1.grad = None
        W2.grad = None
        loss.backward()
        W1.data += -0.05 * W1.grad
        W2.data += -0.05 * W2.grad
    o("loss", loss.data.item())
    o("agree", [abs(loss.item() - vloss.data) < 1e-9,
                all(abs(a - b.data) < 1e-9 for a, b in zip(W2.tolist(), vw2))])
    o("W", [W1, W2])
    o("dtype", [X.dtype, torch.Tensor([1, 2]).dtype, type(torch.Tensor([1])).__name__])


@program
def micrograd_lecture_single_neuron_printing(torch, o):
    x1 = torch.Tensor([2.0]).double()
    x1.requires_grad = True
    x2 = torch.Tensor([0.0]).double()
    x2.requires_grad = True
    w1 = torch.Tensor([-3.0]).double()
    w1.requires_grad = True
    w2 = torch.Tensor([1.0]).double()
    w2.requires_grad = True
    b = torch.Tensor([6.8813735870195432]).double()
    b.requires_grad = True
    n = x1 * w1 + x2 * w2 + b
    out = torch.tanh(n)
    lines = [str(out.data.item())]
    out.backward()
    lines += ["---", f"x2 {x2.grad.item()}", f"w2 {w2.grad.item()}", f"x1 {x1.grad.item()}",
              f"w1 {w1.grad.item()}"]
    o("printed", "\n".join(lines))
    o("repr", [repr(out), repr(x1.grad), n.grad_fn.name()])
    o("item types", [type(x1.grad.item()).__name__, x1.data.dtype, x1.grad.dtype, x1.is_leaf, n.is_leaf])
    o("single element", [torch.Tensor([2.0]).shape, torch.Tensor(2).shape, torch.Tensor(2, 3).shape])


# ---- makemore part 1: bigrams -----------------------------------------------------------------

@program
def makemore_bigram_counts_full_alphabet(torch, o):
    stoi = _stoi()
    itos = {i: s for s, i in stoi.items()}
    n = len(stoi)
    N = torch.zeros((n, n), dtype=torch.int32)
    for w in WORDS:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            ix1 = stoi[ch1]
            ix2 = stoi[ch2]
            N[ix1, ix2] += 1
    o("N", N)
    o("N[0]", [N[0], N[0, :].dtype, N[3, 1].item(), type(N[3, 1].item()).__name__])
    p = N[0].float()
    p = p / p.sum()
    o("p", p)
    o("row max", [N.max(), N.argmax(), N.sum(), N.sum(0), N.sum(1, keepdim=True).shape])
    g = torch.Generator().manual_seed(2147483647)
    ix = torch.multinomial(p, num_samples=20, replacement=True, generator=g)
    o("multinomial", [ix.shape, ix.dtype, bool(((ix >= 0) & (ix < n)).all()), bool((p[ix] > 0).all())])
    one = torch.multinomial(p, num_samples=1, replacement=True, generator=g).item()
    o("sample type", [type(one).__name__, one in [stoi[w[0]] for w in WORDS]])
    P = (N + 1).float()
    o("keepdims shape", [P.sum(1, keepdims=True).shape, P.sum(1).shape])
    wrong = P / P.sum(1)
    P /= P.sum(1, keepdims=True)
    o("normalized rows", [P.sum(1), P[0].sum().item()])
    o("broadcast pitfall", [wrong.sum(1), wrong.sum(0), torch.allclose(wrong.sum(0), torch.ones(n))])
    log_likelihood = 0.0
    count = 0
    lines = []
    for w in WORDS[:2]:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            prob = P[stoi[ch1], stoi[ch2]]
            logprob = torch.log(prob)
            log_likelihood += logprob
            count += 1
            lines.append(f"{ch1}{ch2}: {prob:.4f} {logprob:.4f}")
    nll = -log_likelihood
    lines.append(f"{log_likelihood=}")
    lines.append(f"{nll=}")
    lines.append(f"{nll/count}")
    o("printed", "\n".join(lines))
    o("nll type", [type(log_likelihood).__name__, nll.dtype, nll.shape])
    o("itos", "".join(itos[i] for i in range(n)))


@program
def makemore_int_count_pitfalls(torch, o):
    N = torch.zeros((3, 3), dtype=torch.int32)
    N[0, 1] += 1
    N[0, 1] += 1
    N[2, 0] += 3
    o("N", N)
    o.raises("divide int in place", lambda: N.__itruediv__(N.sum(1, keepdim=True)),
             "result type Float can't be cast to the desired output type Int")
    o("divide int", N / N.sum(1, keepdim=True))
    o("floor divide", N // 2)
    o.raises("multinomial int", lambda: torch.multinomial(N[0], 1),
             "multinomial only supports floating-point dtypes for input, got: Int")
    o.raises("multinomial zeros", lambda: torch.multinomial(N[1].float(), 1),
             "invalid multinomial distribution (sum of probabilities <= 0)")
    o.raises("multinomial negative", lambda: torch.multinomial(torch.tensor([0.5, -0.1]), 1),
             "probability tensor contains either `inf`, `nan` or element < 0")
    o.raises("without replacement", lambda: torch.multinomial(torch.tensor([0.5, 0.5]), 3),
             "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    N[0] += 0.7 if False else 1
    o("row add", N)
    M = N.clone()
    M[1] = torch.tensor([1.9, -1.9, 2.5])
    o("float into int", M)
    o("int + float", [(N + 0.5).dtype, (N * 2).dtype, (N + True).dtype, (N.float() + 1).dtype])
    o("int add_", N.add_(torch.tensor([1, 2, 3], dtype=torch.int64)))
    o.raises("int add_ float", lambda: N.add_(torch.tensor([0.5, 0.5, 0.5])),
             "result type Float can't be cast to the desired output type Int")


@program(rtol=1e-5, atol=1e-6)
def makemore_bigram_one_hot_network(torch, o):
    F = torch.nn.functional
    stoi = _stoi()
    n = len(stoi)
    xs, ys = [], []
    for w in WORDS[:3]:
        chs = ["."] + list(w) + ["."]
        for ch1, ch2 in zip(chs, chs[1:]):
            xs.append(stoi[ch1])
            ys.append(stoi[ch2])
    xs = torch.tensor(xs)
    ys = torch.tensor(ys)
    num = xs.nelement()
    xenc = F.one_hot(xs, num_classes=n).float()
    o("xenc", [xenc.shape, xenc.dtype, F.one_hot(xs).shape, F.one_hot(xs).dtype])
    W = _fixed(torch, n, n, scale=0.5).requires_grad_()
    g = torch.Generator().manual_seed(2147483647)
    Wr = torch.randn((n, n), generator=g, requires_grad=True)
    o("randn with generator", [Wr.shape, Wr.requires_grad, Wr.is_leaf])
    for k in range(10):
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W ** 2).mean()
        W.grad = None
        loss.backward()
        W.data += -50 * W.grad
        if k in (0, 9):
            o(f"loss {k}", loss.item())
    o("probs", [probs.shape, probs[0].sum(), probs[torch.arange(5), ys[:5]]])
    o("W", W)
    o("equivalent to row pick", torch.allclose(xenc @ W, W[xs]))
    o("cross entropy", [F.cross_entropy(xenc @ W, ys), -probs[torch.arange(num), ys].log().mean()])
    nlls = torch.zeros(5)
    for i in range(5):
        x = xs[i].item()
        y = ys[i].item()
        p = probs[i, y]
        nlls[i] = -torch.log(p)
    o("nlls", [nlls, nlls.mean().item()])


# ---- makemore part 2: MLP -------------------------------------------------------------------

def _build_dataset(torch, words, block_size=3):
    stoi = _stoi()
    X, Y = [], []
    for w in words:
        context = [0] * block_size
        for ch in w + ".":
            ix = stoi[ch]
            X.append(context)
            Y.append(ix)
            context = context[1:] + [ix]
    return torch.tensor(X), torch.tensor(Y)


@program(rtol=1e-5, atol=1e-6)
def makemore_mlp_embedding_table_tricks(torch, o):
    F = torch.nn.functional
    X, Y = _build_dataset(torch, WORDS[:4])
    o("dataset", [X.shape, X.dtype, Y.shape, Y.dtype, X[:6], Y[:6]])
    C = _fixed(torch, 27, 2)
    o("C[5]", [C[5], F.one_hot(torch.tensor(5), num_classes=27).float() @ C])
    o("C[list]", [C[[5, 6, 7]], C[torch.tensor([5, 6, 7, 7, 7])]])
    emb = C[X]
    o("emb", [emb.shape, emb[13, 2], C[X[13, 2]], X[13, 2]])
    cat1 = torch.cat([emb[:, 0, :], emb[:, 1, :], emb[:, 2, :]], 1)
    cat2 = torch.cat(torch.unbind(emb, 1), 1)
    o("cat ways", [cat1.shape, torch.equal(cat1, cat2), (emb.view(-1, 6) == cat1).all()])
    o("unbind", [type(torch.unbind(emb, 1)).__name__, len(torch.unbind(emb, 1))])
    a = torch.arange(18)
    o("views", [a.view(2, 9), a.view(9, 2).shape, a.view(3, 3, 2)[1], a.view(3, -1).shape])
    o("view is contiguous", [emb.is_contiguous(), emb.view(emb.shape[0], 6).shape])
    W1 = _fixed(torch, 6, 100, scale=0.3)
    b1 = _fixed(torch, 100, shift=1.0) * 0.1
    h = torch.tanh(emb.view(-1, 6) @ W1 + b1)
    o("h", [h.shape, h[:2, :5], (h + b1).shape])
    W2 = _fixed(torch, 100, 27, scale=0.1, shift=2.0)
    b2 = torch.zeros(27)
    logits = h @ W2 + b2
    counts = logits.exp()
    prob = counts / counts.sum(1, keepdims=True)
    loss = -prob[torch.arange(X.shape[0]), Y].log().mean()
    o("losses", [loss, F.cross_entropy(logits, Y)])
    big = torch.tensor([-2.0, -3.0, 0.0, 5.0]) + 100
    o("overflow", [big.exp(), big.exp() / big.exp().sum(), F.cross_entropy(big.view(1, 4), torch.tensor([3]))])
    lre = torch.linspace(-3, 0, 1000)
    lrs = 10 ** lre
    o("lrs", [lrs[:3], lrs[-1], lrs.shape, lre[500]])
    ix = torch.randint(0, X.shape[0], (32,))
    o("minibatch", [ix.shape, ix.dtype, C[X[ix]].shape, Y[ix].shape])


@program(rtol=1e-4, atol=1e-5)
def makemore_mlp_training_with_splits(torch, o):
    import random

    F = torch.nn.functional
    words = list(WORDS)
    random.Random(42).shuffle(words)
    n1 = int(0.8 * len(words))
    Xtr, Ytr = _build_dataset(torch, words[:n1])
    Xdev, Ydev = _build_dataset(torch, words[n1:])
    o("splits", [Xtr.shape, Xdev.shape])
    C = _fixed(torch, 27, 4, scale=0.5)
    W1 = _fixed(torch, 12, 16, scale=(5 / 3) / 12 ** 0.5, shift=0.3)
    b1 = _fixed(torch, 16, shift=0.6) * 0.01
    W2 = _fixed(torch, 16, 27, shift=0.9) * 0.01
    b2 = torch.zeros(27)
    parameters = [C, W1, b1, W2, b2]
    o("n params", sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True
    lossi, stepi = [], []
    for i in range(30):
        ix = torch.arange(i % 4, Xtr.shape[0], 4)
        emb = C[Xtr[ix]]
        h = torch.tanh(emb.view(-1, 12) @ W1 + b1)
        logits = h @ W2 + b2
        loss = F.cross_entropy(logits, Ytr[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1 if i < 20 else 0.01
        for p in parameters:
            p.data += -lr * p.grad
        stepi.append(i)
        lossi.append(loss.log10().item())
    o("lossi", lossi[::5])
    with torch.no_grad():
        emb = C[Xdev]
        h = torch.tanh(emb.view(-1, 12) @ W1 + b1)
        dev_loss = F.cross_entropy(h @ W2 + b2, Ydev)
    o("dev loss", [dev_loss, dev_loss.requires_grad])
    o("saturation", [(h.abs() > 0.99).float().mean(), (h.abs() > 0.99).sum(), h.shape])
    o("params", parameters)
    out = []
    context = [0] * 3
    for _ in range(6):
        emb = C[torch.tensor([context])]
        h = torch.tanh(emb.view(1, -1) @ W1 + b1)
        probs = F.softmax(h @ W2 + b2, dim=1)
        ix = torch.argmax(probs).item()
        context = context[1:] + [ix]
        out.append(ix)
        if ix == 0:
            break
    o("greedy sample", out)


# ---- makemore part 3: initialization, batch norm ------------------------------------------------

@program(rtol=1e-5, atol=1e-6)
def makemore_kaiming_init_and_tanh_saturation(torch, o):
    x = _fixed(torch, 1000, 10)
    w = _fixed(torch, 10, 200, shift=0.5)
    y = x @ w
    o("std before", [x.mean(), x.std(), y.mean(), y.std()])
    w = w / 10 ** 0.5
    y = x @ w
    o("std after", [y.std(), torch.tensor(5 / 3) / 10 ** 0.5])
    o("gain", [torch.nn.init.calculate_gain("tanh"), torch.nn.init.calculate_gain("relu"),
               torch.nn.init.calculate_gain("linear"), torch.nn.init.calculate_gain("leaky_relu", 0.2)])
    W1 = _fixed(torch, 30, 200, shift=0.1) * (5 / 3) / (30 ** 0.5)
    hpre = _fixed(torch, 32, 30) @ W1
    h = torch.tanh(hpre)
    o("saturation", [(h.abs() > 0.97).float().mean() * 100, h.std(), hpre.std()])
    dead = (h.abs() > 0.99).all(0)
    o("dead neurons", [dead.shape, dead.sum(), dead.any()])
    k = torch.empty(200, 30)
    torch.nn.init.kaiming_normal_(k, mode="fan_in", nonlinearity="tanh")
    o("kaiming", [k.shape, bool(torch.isfinite(k).all()), k.requires_grad])
    t = torch.zeros(3, 4)
    res = torch.nn.init.kaiming_uniform_(t, a=math.sqrt(5))
    o("kaiming uniform", [res is t, bool((t.abs() <= 1 / math.sqrt(4) + 1e-6).all())])
    o.raises("fan of 1d", lambda: torch.nn.init.kaiming_normal_(torch.empty(5)),
             "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")


@program(rtol=1e-5, atol=1e-6)
def makemore_batchnorm_running_stats_no_grad(torch, o):
    F = torch.nn.functional
    X, Y = _build_dataset(torch, WORDS[:5])
    C = _fixed(torch, 27, 3, scale=0.8).requires_grad_()
    W1 = (_fixed(torch, 9, 12, shift=0.4) * (5 / 3) / 9 ** 0.5).requires_grad_()
    W2 = (_fixed(torch, 12, 27, shift=0.8) * 0.01).requires_grad_()
    b2 = torch.zeros(27, requires_grad=True)
    bngain = torch.ones((1, 12), requires_grad=True)
    bnbias = torch.zeros((1, 12), requires_grad=True)
    bnmean_running = torch.zeros((1, 12))
    bnstd_running = torch.ones((1, 12))
    parameters = [C, W1, W2, b2, bngain, bnbias]
    for i in range(12):
        ix = torch.arange(i % 3, X.shape[0], 3)
        emb = C[X[ix]]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        bnmeani = hpreact.mean(0, keepdim=True)
        bnstdi = hpreact.std(0, keepdim=True)
        hpreact = bngain * (hpreact - bnmeani) / bnstdi + bnbias
        with torch.no_grad():
            bnmean_running = 0.9 * bnmean_running + 0.1 * bnmeani
            bnstd_running = 0.9 * bnstd_running + 0.1 * bnstdi
        h = torch.tanh(hpreact)
        loss = F.cross_entropy(h @ W2 + b2, Y[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -0.1 * p.grad
    o("running", [bnmean_running, bnstd_running, bnmean_running.requires_grad, bnmean_running.is_leaf])
    o("params", parameters)

    with torch.no_grad():
        emb = C[X]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        bnmean = hpreact.mean(0, keepdim=True)
        bnstd = hpreact.std(0, keepdim=True)
    o("calibrated", [bnmean, bnstd, bnmean.requires_grad])

    @torch.no_grad()
    def split_loss(x, y):
        emb = C[x]
        embcat = emb.view(emb.shape[0], -1)
        hpreact = embcat @ W1
        hpreact = bngain * (hpreact - bnmean_running) / bnstd_running + bnbias
        h = torch.tanh(hpreact)
        return F.cross_entropy(h @ W2 + b2, y)

    result = split_loss(X, Y)
    o("split loss", [result, result.requires_grad, torch.is_grad_enabled()])


class _Linear:
    def __init__(self, torch, fan_in, fan_out, bias=True, shift=0.0):
        self.weight = _fixed(torch, fan_in, fan_out, shift=shift) / fan_in ** 0.5
        self.bias = torch.zeros(fan_out) if bias else None

    def __call__(self, x):
        self.out = x @ self.weight
        if self.bias is not None:
            self.out += self.bias
        return self.out

    def parameters(self):
        return [self.weight] + ([] if self.bias is None else [self.bias])


class _BatchNorm1d:
    def __init__(self, torch, dim, eps=1e-5, momentum=0.1):
        self.torch = torch
        self.eps = eps
        self.momentum = momentum
        self.training = True
        self.gamma = torch.ones(dim)
        self.beta = torch.zeros(dim)
        self.running_mean = torch.zeros(dim)
        self.running_var = torch.ones(dim)

    def __call__(self, x):
        if self.training:
            if x.ndim == 2:
                dim = 0
            elif x.ndim == 3:
                dim = (0, 1)
            xmean = x.mean(dim, keepdim=True)
            xvar = x.var(dim, keepdim=True)
        else:
            xmean = self.running_mean
            xvar = self.running_var
        xhat = (x - xmean) / self.torch.sqrt(xvar + self.eps)
        self.out = self.gamma * xhat + self.beta
        if self.training:
            with self.torch.no_grad():
                self.running_mean = (1 - self.momentum) * self.running_mean + self.momentum * xmean
                self.running_var = (1 - self.momentum) * self.running_var + self.momentum * xvar
        return self.out

    def parameters(self):
        return [self.gamma, self.beta]


class _Tanh:
    def __init__(self, torch):
        self.torch = torch

    def __call__(self, x):
        self.out = self.torch.tanh(x)
        return self.out

    def parameters(self):
        return []


@program(rtol=1e-4, atol=1e-5)
def makemore_layer_classes_and_diagnostics(torch, o):
    F = torch.nn.functional
    X, Y = _build_dataset(torch, WORDS)
    n_embd, n_hidden, vocab = 4, 20, 27
    C = _fixed(torch, vocab, n_embd, scale=0.7)
    layers = [
        _Linear(torch, n_embd * 3, n_hidden, bias=False, shift=0.1), _BatchNorm1d(torch, n_hidden), _Tanh(torch),
        _Linear(torch, n_hidden, n_hidden, bias=False, shift=0.2), _BatchNorm1d(torch, n_hidden), _Tanh(torch),
        _Linear(torch, n_hidden, vocab, bias=False, shift=0.3), _BatchNorm1d(torch, vocab),
    ]
    with torch.no_grad():
        layers[-1].gamma *= 0.1
        for layer in layers[:-1]:
            if isinstance(layer, _Linear):
                layer.weight *= 5 / 3
    parameters = [C] + [p for layer in layers for p in layer.parameters()]
    o("n params", sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True
    ud = []
    for i in range(8):
        ix = torch.arange(i % 2, X.shape[0], 2)
        emb = C[X[ix]]
        x = emb.view(emb.shape[0], -1)
        for layer in layers:
            x = layer(x)
        loss = F.cross_entropy(x, Y[ix])
        for layer in layers:
            layer.out.retain_grad()
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.1
        for p in parameters:
            p.data += -lr * p.grad
        with torch.no_grad():
            ud.append([((lr * p.grad).std() / p.data.std()).log10().item() for p in parameters])
    o("loss", loss)
    o("update ratios", ud[-1])
    lines = []
    for i, layer in enumerate(layers[:-1]):
        if isinstance(layer, _Tanh):
            t = layer.out
            lines.append(f"layer {i} ({layer.__class__.__name__}): mean {t.mean():+.2f}, std {t.std():.2f}, "
                         f"saturated: {(t.abs() > 0.97).float().mean() * 100:.2f}%")
            g = layer.out.grad
            lines.append(f"layer {i} grad: std {g.std():.4e}")
    for p in parameters:
        if p.ndim == 2:
            lines.append(f"weight {tuple(p.shape)!s:10s} | mean {p.mean():+.4f} | std {p.std():.4e} | "
                         f"grad:data ratio {p.grad.std() / p.std():.4e}")
    o("diagnostics", "\n".join(lines))
    for layer in layers:
        layer.training = False
    emb = C[X]
    x = emb.view(emb.shape[0], -1)
    for layer in layers:
        x = layer(x)
    o("eval loss", F.cross_entropy(x, Y))
    o("running", [layers[1].running_mean, layers[1].running_var, layers[1].running_var.requires_grad])


# ---- makemore part 4: becoming a backprop ninja ---------------------------------------------------

def _ninja_forward(torch, n=8):
    X, Y = _build_dataset(torch, WORDS)
    Xb, Yb = X[:n], Y[:n]
    n_embd, n_hidden, vocab = 3, 16, 27
    C = _fixed(torch, vocab, n_embd)
    W1 = _fixed(torch, n_embd * 3, n_hidden, shift=0.1) * (5 / 3) / (n_embd * 3) ** 0.5
    b1 = _fixed(torch, n_hidden, shift=0.2) * 0.1
    W2 = _fixed(torch, n_hidden, vocab, shift=0.3) * 0.1
    b2 = _fixed(torch, vocab, shift=0.4) * 0.1
    bngain = _fixed(torch, 1, n_hidden, shift=0.5) * 0.1 + 1.0
    bnbias = _fixed(torch, 1, n_hidden, shift=0.6) * 0.1
    parameters = [C, W1, b1, W2, b2, bngain, bnbias]
    for p in parameters:
        p.requires_grad = True
    emb = C[Xb]
    embcat = emb.view(emb.shape[0], -1)
    hprebn = embcat @ W1 + b1
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff ** 2
    bnvar = 1 / (n - 1) * (bndiff2).sum(0, keepdim=True)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    h = torch.tanh(hpreact)
    logits = h @ W2 + b2
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum ** -1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    for p in parameters:
        p.grad = None
    for t in [logprobs, probs, counts, counts_sum, counts_sum_inv, norm_logits, logit_maxes, logits, h,
              hpreact, bnraw, bnvar_inv, bnvar, bndiff2, bndiff, hprebn, bnmeani, embcat, emb]:
        t.retain_grad()
    loss.backward()
    return dict(locals())


@program(rtol=1e-5, atol=1e-6)
def backprop_ninja_exercise_1_every_op(torch, o):
    F = torch.nn.functional
    v = _ninja_forward(torch)
    n, Xb, Yb = v["n"], v["Xb"], v["Yb"]
    (C, W1, b1, W2, b2, bngain, bnbias) = v["parameters"]
    (emb, embcat, hprebn, bnmeani, bndiff, bndiff2, bnvar, bnvar_inv, bnraw, hpreact, h, logits, logit_maxes,
     norm_logits, counts, counts_sum, counts_sum_inv, probs, logprobs) = (
        v[k] for k in ["emb", "embcat", "hprebn", "bnmeani", "bndiff", "bndiff2", "bnvar", "bnvar_inv", "bnraw",
                       "hpreact", "h", "logits", "logit_maxes", "norm_logits", "counts", "counts_sum",
                       "counts_sum_inv", "probs", "logprobs"])
    lines = []

    def cmp(s, dt, t):
        ex = torch.all(dt == t.grad).item()
        app = torch.allclose(dt, t.grad)
        maxdiff = (dt - t.grad).abs().max().item()
        lines.append(f"{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s} | small: {maxdiff < 1e-6}")

    dlogprobs = torch.zeros_like(logprobs)
    dlogprobs[range(n), Yb] = -1.0 / n
    dprobs = (1.0 / probs) * dlogprobs
    dcounts_sum_inv = (counts * dprobs).sum(1, keepdim=True)
    dcounts = counts_sum_inv * dprobs
    dcounts_sum = (-counts_sum ** -2) * dcounts_sum_inv
    dcounts += torch.ones_like(counts) * dcounts_sum
    dnorm_logits = counts * dcounts
    dlogits = dnorm_logits.clone()
    dlogit_maxes = (-dnorm_logits).sum(1, keepdim=True)
    dlogits += F.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes
    dh = dlogits @ W2.T
    dW2 = h.T @ dlogits
    db2 = dlogits.sum(0)
    dhpreact = (1.0 - h ** 2) * dh
    dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
    dbnraw = bngain * dhpreact
    dbnbias = dhpreact.sum(0, keepdim=True)
    dbndiff = bnvar_inv * dbnraw
    dbnvar_inv = (bndiff * dbnraw).sum(0, keepdim=True)
    dbnvar = (-0.5 * (bnvar + 1e-5) ** -1.5) * dbnvar_inv
    dbndiff2 = (1.0 / (n - 1)) * torch.ones_like(bndiff2) * dbnvar
    dbndiff += (2 * bndiff) * dbndiff2
    dhprebn = dbndiff.clone()
    dbnmeani = (-dbndiff).sum(0)
    dhprebn += 1.0 / n * (torch.ones_like(hprebn) * dbnmeani)
    dembcat = dhprebn @ W1.T
    dW1 = embcat.T @ dhprebn
    db1 = dhprebn.sum(0)
    demb = dembcat.view(emb.shape)
    dC = torch.zeros_like(C)
    for k in range(Xb.shape[0]):
        for j in range(Xb.shape[1]):
            ix = Xb[k, j]
            dC[ix] += demb[k, j]

    for name, dt, t in [("logprobs", dlogprobs, logprobs), ("probs", dprobs, probs),
                        ("counts_sum_inv", dcounts_sum_inv, counts_sum_inv), ("counts_sum", dcounts_sum, counts_sum),
                        ("counts", dcounts, counts), ("norm_logits", dnorm_logits, norm_logits),
                        ("logit_maxes", dlogit_maxes, logit_maxes), ("logits", dlogits, logits), ("h", dh, h),
                        ("W2", dW2, W2), ("b2", db2, b2), ("hpreact", dhpreact, hpreact),
                        ("bngain", dbngain, bngain), ("bnbias", dbnbias, bnbias), ("bnraw", dbnraw, bnraw),
                        ("bnvar_inv", dbnvar_inv, bnvar_inv), ("bnvar", dbnvar, bnvar),
                        ("bndiff2", dbndiff2, bndiff2), ("bndiff", dbndiff, bndiff), ("bnmeani", dbnmeani, bnmeani),
                        ("hprebn", dhprebn, hprebn), ("embcat", dembcat, embcat), ("W1", dW1, W1),
                        ("b1", db1, b1), ("emb", demb, emb), ("C", dC, C)]:
        cmp(name, dt, t)
    o("cmp", [line.split(" | exact")[0].strip() + " " + line.split("approximate: ")[1] for line in lines])
    o("exact", [line.split("exact: ")[1][:5].strip() for line in lines])
    o("loss", v["loss"])
    o("grads", [C.grad, W1.grad, b1.grad, bngain.grad, bnbias.grad, W2.grad, b2.grad])
    o("logit_maxes grad tiny", (logit_maxes.grad.abs() < 1e-7).all())
    o("shapes", [dbnmeani.shape, bnmeani.shape, db1.shape, b1.shape, dbngain.shape])


@program(rtol=1e-5, atol=1e-6)
def backprop_ninja_exercises_2_to_4_fused(torch, o):
    F = torch.nn.functional
    v = _ninja_forward(torch)
    n, Yb = v["n"], v["Yb"]
    logits, hprebn, hpreact, bnraw, bnvar_inv = v["logits"], v["hprebn"], v["hpreact"], v["bnraw"], v["bnvar_inv"]
    bngain = v["bngain"]
    loss_fast = F.cross_entropy(logits, Yb)
    o("loss fast", [loss_fast.item(), (loss_fast - v["loss"]).item() < 1e-6])
    dlogits = F.softmax(logits, 1)
    dlogits[range(n), Yb] -= 1
    dlogits /= n
    o("dlogits", [torch.allclose(dlogits, logits.grad), dlogits.requires_grad, dlogits.is_leaf])
    o("dlogits rows sum to zero", dlogits.sum(1).abs().max() < 1e-7)
    hpreact_fast = bngain * (hprebn - hprebn.mean(0, keepdim=True)) / torch.sqrt(hprebn.var(0, keepdim=True, unbiased=True) + 1e-5) + v["bnbias"]
    o("bn fast", [(hpreact_fast - hpreact).abs().max() < 1e-6])
    dhpreact = hpreact.grad
    dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
    o("dhprebn", [torch.allclose(dhprebn, hprebn.grad, atol=1e-7), dhprebn.shape])
    # exercise 4: train with the manual backward, no loss.backward()
    C, W1, b1, W2, b2, bngain, bnbias = [p.detach().clone() for p in v["parameters"]]
    Xb = v["Xb"]
    with torch.no_grad():
        for step in range(5):
            emb = C[Xb]
            embcat = emb.view(emb.shape[0], -1)
            hprebn = embcat @ W1 + b1
            bnmean = hprebn.mean(0, keepdim=True)
            bnvar = hprebn.var(0, keepdim=True, unbiased=True)
            bnvar_inv = (bnvar + 1e-5) ** -0.5
            bnraw = (hprebn - bnmean) * bnvar_inv
            hpreact = bngain * bnraw + bnbias
            h = torch.tanh(hpreact)
            logits = h @ W2 + b2
            loss = F.cross_entropy(logits, Yb)
            dlogits = F.softmax(logits, 1)
            dlogits[range(n), Yb] -= 1
            dlogits /= n
            dh = dlogits @ W2.T
            dW2 = h.T @ dlogits
            db2 = dlogits.sum(0)
            dhpreact = (1.0 - h ** 2) * dh
            dbngain = (bnraw * dhpreact).sum(0, keepdim=True)
            dbnbias = dhpreact.sum(0, keepdim=True)
            dhprebn = bngain * bnvar_inv / n * (n * dhpreact - dhpreact.sum(0) - n / (n - 1) * bnraw * (dhpreact * bnraw).sum(0))
            dembcat = dhprebn @ W1.T
            dW1 = embcat.T @ dhprebn
            db1 = dhprebn.sum(0)
            demb = dembcat.view(emb.shape)
            dC = torch.zeros_like(C)
            dC.index_add_(0, Xb.view(-1), demb.view(-1, C.shape[1]))
            grads = [dC, dW1, db1, dW2, db2, dbngain, dbnbias]
            for p, grad in zip([C, W1, b1, W2, b2, bngain, bnbias], grads):
                p.data += -0.1 * grad
            o(f"loss {step}", loss.item())
    o("trained", [C, W1, bngain, b2])


# ---- makemore part 5: WaveNet ----------------------------------------------------------------

class _Embedding:
    def __init__(self, torch, num_embeddings, embedding_dim):
        self.weight = _fixed(torch, num_embeddings, embedding_dim, scale=0.8)

    def __call__(self, IX):
        self.out = self.weight[IX]
        return self.out

    def parameters(self):
        return [self.weight]


class _FlattenConsecutive:
    def __init__(self, n):
        self.n = n

    def __call__(self, x):
        B, T, C = x.shape
        x = x.view(B, T // self.n, C * self.n)
        if x.shape[1] == 1:
            x = x.squeeze(1)
        self.out = x
        return self.out

    def parameters(self):
        return []


class _Sequential:
    def __init__(self, layers):
        self.layers = layers

    def __call__(self, x):
        for layer in self.layers:
            x = layer(x)
        self.out = x
        return self.out

    def parameters(self):
        return [p for layer in self.layers for p in layer.parameters()]


@program(rtol=1e-4, atol=1e-5)
def makemore_wavenet_flatten_consecutive(torch, o):
    F = torch.nn.functional
    X, Y = _build_dataset(torch, WORDS, block_size=8)
    o("data", [X.shape, X[:3]])
    e = torch.arange(4 * 8 * 10, dtype=torch.float32).view(4, 8, 10)
    explicit = torch.cat([e[:, ::2, :], e[:, 1::2, :]], dim=2)
    o("explicit", [explicit.shape, (e.view(4, 4, 20) == explicit).all(), e[:, ::2, :].is_contiguous()])
    o.raises("view of strided slice", lambda: e[:, ::2, :].view(4, 40), "view size is not compatible with input tensor's size and stride")
    o("reshape of strided slice", e[:, ::2, :].reshape(4, 40)[0, :12])
    n_embd, n_hidden, vocab = 4, 12, 27
    model = _Sequential([
        _Embedding(torch, vocab, n_embd),
        _FlattenConsecutive(2), _Linear(torch, n_embd * 2, n_hidden, bias=False, shift=0.1), _BatchNorm1d(torch, n_hidden), _Tanh(torch),
        _FlattenConsecutive(2), _Linear(torch, n_hidden * 2, n_hidden, bias=False, shift=0.2), _BatchNorm1d(torch, n_hidden), _Tanh(torch),
        _FlattenConsecutive(2), _Linear(torch, n_hidden * 2, n_hidden, bias=False, shift=0.3), _BatchNorm1d(torch, n_hidden), _Tanh(torch),
        _Linear(torch, n_hidden, vocab, shift=0.4),
    ])
    with torch.no_grad():
        model.layers[-1].weight *= 0.1
    parameters = model.parameters()
    o("n params", sum(p.nelement() for p in parameters))
    for p in parameters:
        p.requires_grad = True
    ix = torch.arange(0, X.shape[0], 3)
    Xb, Yb = X[ix], Y[ix]
    logits = model(Xb)
    o("shapes", [f"{layer.__class__.__name__.lstrip('_')} : {tuple(layer.out.shape)}" for layer in model.layers])
    o("bn 3d stats", [model.layers[3].running_mean.shape, model.layers[3].running_var[:4]])
    for step in range(6):
        logits = model(X[ix])
        loss = F.cross_entropy(logits, Y[ix])
        for p in parameters:
            p.grad = None
        loss.backward()
        for p in parameters:
            p.data += -0.1 * p.grad
        o(f"loss {step}", loss.item())
    lossi = torch.tensor([0.5, 0.4, 0.45, 0.3, 0.35, 0.2, 0.25, 0.1])
    o("smoothed", lossi.view(-1, 4).mean(1))
    for layer in model.layers:
        layer.training = False
    with torch.no_grad():
        o("eval", F.cross_entropy(model(X), Y))
    o("mean over two dims", [e.mean((0, 1), keepdim=True).shape, e.var((0, 1), keepdim=True)[0, 0, :3]])


# ---- d2l.ai --------------------------------------------------------------------------------

@program(rtol=1e-5, atol=1e-6)
def d2l_data_iter_squared_loss_and_sgd(torch, o):
    import random

    def synthetic_data(w, b, num_examples):
        X = torch.normal(0, 1, (num_examples, len(w)))
        y = torch.matmul(X, w) + b
        y += torch.normal(0, 0.01, y.shape)
        return X, y.reshape((-1, 1))

    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    Xr, yr = synthetic_data(true_w, true_b, 20)
    o("synthetic", [Xr.shape, yr.shape, Xr.dtype, torch.normal(0, 1, (2,)).shape])
    features = torch.linspace(-1, 1, 40).reshape(20, 2)
    labels = (torch.matmul(features, true_w) + true_b).reshape((-1, 1))
    o("features[0]", [features[0], labels[0]])

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        random.Random(0).shuffle(indices)
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    batch_size = 6
    for X, y in data_iter(batch_size, features, labels):
        o("first batch", [X, y, X.shape])
        break
    w = torch.zeros(size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)

    def linreg(X, w, b):
        return torch.matmul(X, w) + b

    def squared_loss(y_hat, y):
        return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    lr, num_epochs = 0.5, 4
    lines = []
    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels):
            l = squared_loss(linreg(X, w, b), y)
            l.sum().backward()
            sgd([w, b], lr, batch_size)
        with torch.no_grad():
            train_l = squared_loss(linreg(features, w, b), labels)
            lines.append(f"epoch {epoch + 1}, loss {float(train_l.mean()):f}")
    o("printed", "\n".join(lines))
    o("params", [w, b, w.is_leaf, w.grad])
    o("errors", [true_w - w.reshape(true_w.shape), true_b - b])


@program(rtol=1e-5, atol=1e-6)
def d2l_weight_decay_scratch_and_concise(torch, o):
    nn = torch.nn
    n_train, num_inputs = 10, 8
    true_w, true_b = torch.ones((num_inputs, 1)) * 0.01, 0.05
    X = _fixed(torch, n_train, num_inputs)
    y = torch.matmul(X, true_w) + true_b

    def init_params():
        w = (_fixed(torch, num_inputs, 1, shift=1.0) * 0.1).requires_grad_(True)
        b = torch.zeros(1, requires_grad=True)
        return [w, b]

    def l2_penalty(w):
        return torch.sum(w.pow(2)) / 2

    def train(lambd):
        w, b = init_params()
        for epoch in range(10):
            for i in range(0, n_train, 5):
                Xb, yb = X[i:i + 5], y[i:i + 5]
                l = (torch.matmul(Xb, w) + b - yb) ** 2 / 2 + lambd * l2_penalty(w)
                l.sum().backward()
                with torch.no_grad():
                    for param in (w, b):
                        param -= 0.1 * param.grad / 5
                        param.grad.zero_()
        return w, b

    for lambd in (0, 3):
        w, b = train(lambd)
        o(f"L2 norm of w (lambda={lambd})", torch.norm(w).item())

    def train_concise(wd):
        net = nn.Sequential(nn.Linear(num_inputs, 1))
        for param in net.parameters():
            param.data.normal_()
        o("normal_ shapes", [p.shape for p in net.parameters()])
        with torch.no_grad():
            net[0].weight.copy_(_fixed(torch, 1, num_inputs, shift=1.0) * 0.1)
            net[0].bias.zero_()
        loss = nn.MSELoss(reduction="none")
        trainer = torch.optim.SGD([{"params": net[0].weight, "weight_decay": wd}, {"params": net[0].bias}], lr=0.1)
        for epoch in range(10):
            for i in range(0, n_train, 5):
                trainer.zero_grad()
                l = loss(net(X[i:i + 5]), y[i:i + 5])
                l.mean().backward()
                trainer.step()
        return net

    net = train_concise(3)
    o("concise", [net[0].weight.norm().item(), net[0].bias])
    o("groups", [sorted(k for k in g if k != "params") for g in torch.optim.SGD([{"params": net[0].weight, "weight_decay": 3}], lr=0.1).param_groups])


@program
def d2l_dropout_from_scratch(torch, o):
    def dropout_layer(X, dropout):
        assert 0 <= dropout <= 1
        if dropout == 1:
            return torch.zeros_like(X)
        if dropout == 0:
            return X
        mask = (torch.rand(X.shape) > dropout).float()
        return mask * X / (1.0 - dropout)

    X = torch.arange(16, dtype=torch.float32).reshape((2, 8))
    o("p=0", dropout_layer(X, 0.))
    o("p=1", dropout_layer(X, 1.))
    half = dropout_layer(X, 0.5)
    o("p=0.5", [half.shape, half.dtype, bool(((half == 0) | (half == 2 * X)).all())])
    mask = torch.rand(X.shape) > 0.5
    o("mask", [mask.dtype, mask.float().dtype, (mask.float() * X).shape])
    net = torch.nn.Sequential(torch.nn.Flatten(), torch.nn.Linear(8, 4), torch.nn.ReLU(), torch.nn.Dropout(0.5),
                              torch.nn.Linear(4, 2))
    net.eval()
    o("eval is deterministic", torch.equal(net(X), net(X)))
    o("repr", repr(net))
    o("flatten", [torch.nn.Flatten()(torch.zeros(2, 3, 4)).shape, torch.nn.Flatten(0)(torch.zeros(2, 3)).shape])


@program
def d2l_parameter_access_and_init(torch, o):
    nn = torch.nn
    net = nn.Sequential(nn.LazyLinear(8) if False else nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 1))
    X = torch.linspace(-1, 1, 8).reshape(2, 4)

    def init_constant(m):
        if type(m) == nn.Linear:
            nn.init.constant_(m.weight, 1)
            nn.init.zeros_(m.bias)

    net.apply(init_constant)
    o("constant", [net[0].weight.data[0], net[0].bias.data[0]])
    o("output", net(X))
    o("state dict str", str(net[2].state_dict()))
    o("types", [type(net[2].bias).__name__, type(net[2].bias.data).__name__, net[2].weight.grad is None])
    o("named", [(name, param.shape) for name, param in net.named_parameters()])
    o("by key", net.state_dict()["2.bias"].data)

    def init_normal(m):
        if type(m) == nn.Linear:
            nn.init.normal_(m.weight, mean=0, std=0.01)
            nn.init.zeros_(m.bias)

    net.apply(init_normal)
    o("normal", [net[0].weight.shape, net[0].bias.data[0], bool((net[0].weight.abs() < 0.1).all())])

    def init_xavier(m):
        if type(m) == nn.Linear:
            nn.init.xavier_uniform_(m.weight)

    def init_42(m):
        if type(m) == nn.Linear:
            nn.init.constant_(m.weight, 42)

    net[0].apply(init_xavier)
    net[2].apply(init_42)
    bound = math.sqrt(6 / (4 + 8))
    o("xavier", [bool((net[0].weight.abs() <= bound).all()), net[2].weight.data[0]])

    def my_init(m):
        if type(m) == nn.Linear:
            nn.init.uniform_(m.weight, -10, 10)
            m.weight.data *= m.weight.data.abs() >= 5

    net.apply(my_init)
    w = net[0].weight
    o("my init", [w.dtype, bool(((w == 0) | (w.abs() >= 5)).all())])
    net[0].weight.data[:] += 1
    net[0].weight.data[0, 0] = 42
    o("edit", [net[0].weight.data[0, 0], net[0].weight.requires_grad, net[0].weight.is_leaf])

    def block1():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU())

    def block2():
        net = nn.Sequential()
        for i in range(2):
            net.add_module(f"block {i}", block1())
        return net

    rgnet = nn.Sequential(block2(), nn.Linear(4, 1))
    o("nested repr", repr(rgnet))
    o("nested access", [rgnet[0][1][0].bias.shape, list(rgnet.state_dict().keys())[:3]])


@program(rtol=1e-5, atol=1e-6)
def d2l_parameter_sharing_and_custom_layers(torch, o):
    nn = torch.nn
    F = torch.nn.functional
    shared = nn.Linear(8, 8)
    net = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), shared, nn.ReLU(), shared, nn.ReLU(), nn.Linear(8, 1))
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(_fixed(torch, *p.shape, scale=0.5, shift=i))
    X = torch.linspace(-1, 1, 8).reshape(2, 4)
    net(X).sum().backward()
    o("same", net[2].weight.data[0] == net[4].weight.data[0])
    net[2].weight.data[0, 0] = 100
    o("still same", [net[2].weight.data[0] == net[4].weight.data[0], net[2] is net[4]])
    o("shared params counted once", [len(list(net.parameters())), len(net.state_dict())])
    o("shared grad", net[2].weight.grad[:2, :3])

    class CenteredLayer(nn.Module):
        def __init__(self):
            super().__init__()

        def forward(self, X):
            return X - X.mean()

    layer = CenteredLayer()
    o("centered", layer(torch.tensor([1.0, 2, 3, 4, 5])))
    net2 = nn.Sequential(nn.Linear(8, 128), CenteredLayer())
    Y = net2(torch.linspace(0, 1, 32).reshape(4, 8))
    o("mean ~ 0", [Y.mean().abs().item() < 1e-6, Y.shape])

    class MyLinear(nn.Module):
        def __init__(self, in_units, units):
            super().__init__()
            self.weight = nn.Parameter(_fixed(torch, in_units, units))
            self.bias = nn.Parameter(_fixed(torch, units, shift=3.0))

        def forward(self, X):
            linear = torch.matmul(X, self.weight.data) + self.bias.data
            return F.relu(linear)

    linear = MyLinear(5, 3)
    o("weight", linear.weight)
    o("forward", linear(torch.linspace(-1, 1, 10).reshape(2, 5)))
    o("no graph via .data", linear(torch.ones(2, 5)).requires_grad)
    o("repr", [repr(linear), [n for n, _ in linear.named_parameters()]])


@program
def d2l_file_io_tensors_dicts_and_params(torch, o):
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        x = torch.arange(4)
        torch.save(x, os.path.join(d, "x-file"))
        x2 = torch.load(os.path.join(d, "x-file"))
        o("x2", [x2, x2.dtype])
        y = torch.zeros(4)
        torch.save([x, y], os.path.join(d, "x-files"))
        x2, y2 = torch.load(os.path.join(d, "x-files"))
        o("list", [x2, y2])
        mydict = {"x": x, "y": y}
        torch.save(mydict, os.path.join(d, "mydict"))
        mydict2 = torch.load(os.path.join(d, "mydict"))
        o("dict", mydict2)

        class MLP(torch.nn.Module):
            def __init__(self):
                super().__init__()
                self.hidden = torch.nn.Linear(4, 6)
                self.output = torch.nn.Linear(6, 2)

            def forward(self, x):
                return self.output(torch.nn.functional.relu(self.hidden(x)))

        net = MLP()
        with torch.no_grad():
            for i, p in enumerate(net.parameters()):
                p.copy_(_fixed(torch, *p.shape, shift=i))
        X = torch.linspace(-1, 1, 8).reshape(2, 4)
        Y = net(X)
        torch.save(net.state_dict(), os.path.join(d, "mlp.params"))
        clone = MLP()
        clone.load_state_dict(torch.load(os.path.join(d, "mlp.params")))
        o("eval repr", repr(clone.eval()))
        o("same", [clone(X) == Y, clone.training, net.training])
        t = torch.tensor([1.0, 2.0], requires_grad=True)
        torch.save(t * 2, os.path.join(d, "nonleaf"))
        back = torch.load(os.path.join(d, "nonleaf"))
        o("nonleaf", [back, back.requires_grad, back.is_leaf, back.grad_fn is None])
        p = torch.nn.Parameter(torch.ones(2))
        torch.save(p, os.path.join(d, "param"))
        o("param", [type(torch.load(os.path.join(d, "param"))).__name__])
        view = torch.arange(10)[2:5]
        torch.save(view, os.path.join(d, "view"))
        o("view", torch.load(os.path.join(d, "view")))
        torch.save([view, view], os.path.join(d, "views"))
        a, b = torch.load(os.path.join(d, "views"))
        o("same object", a is b)


@program
def d2l_autograd_chapter(torch, o):
    x = torch.arange(4.0)
    o("x", x)
    x.requires_grad_(True)
    o("grad None", x.grad)
    y = 2 * torch.dot(x, x)
    o("y", y)
    y.backward()
    o("grad", [x.grad, x.grad == 4 * x])
    x.grad.zero_()
    y = x.sum()
    y.backward()
    o("sum grad", x.grad)
    x.grad.zero_()
    y = x * x
    y.backward(gradient=torch.ones(len(y)))
    o("vector grad", x.grad)
    x.grad.zero_()
    y = x * x
    u = y.detach()
    z = u * x
    z.sum().backward()
    o("detach", [x.grad == u, u.requires_grad, u.is_leaf])
    x.grad.zero_()
    y.sum().backward()
    o("y grad", [x.grad == 2 * x])

    def f(a):
        b = a * 2
        while b.norm() < 1000:
            b = b * 2
        if b.sum() > 0:
            c = b
        else:
            c = 100 * b
        return c

    for value in (0.37, -1.3):
        a = torch.tensor(value, requires_grad=True)
        d = f(a)
        d.backward()
        o(f"control flow {value}", [d, a.grad, a.grad == d / a])
    a = torch.tensor([0.5, -0.2, 0.1], requires_grad=True)
    d = f(a)
    d.sum().backward()
    o("vector control flow", [a.grad, d.norm()])


@program(rtol=1e-5, atol=1e-6)
def d2l_softmax_concise_and_accuracy_helpers(torch, o):
    nn = torch.nn
    net = nn.Sequential(nn.Flatten(), nn.Linear(6, 3))

    def init_weights(m):
        if type(m) == nn.Linear:
            nn.init.normal_(m.weight, std=0.01)

    net.apply(init_weights)
    with torch.no_grad():
        net[1].weight.copy_(_fixed(torch, 3, 6, scale=0.1))
        net[1].bias.fill_(0.01)
    loss = nn.CrossEntropyLoss(reduction="none")
    trainer = torch.optim.SGD(net.parameters(), lr=0.1)
    X = _fixed(torch, 8, 2, 3, shift=0.5)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    class Accumulator:
        def __init__(self, n):
            self.data = [0.0] * n

        def add(self, *args):
            self.data = [a + float(b) for a, b in zip(self.data, args)]

        def __getitem__(self, idx):
            return self.data[idx]

    for epoch in range(4):
        metric = Accumulator(3)
        for i in range(0, 8, 4):
            y_hat = net(X[i:i + 4])
            l = loss(y_hat, y[i:i + 4])
            trainer.zero_grad()
            l.mean().backward()
            trainer.step()
            metric.add(float(l.sum()), accuracy(y_hat, y[i:i + 4]), y[i:i + 4].numel())
        o(f"epoch {epoch}", [metric[0] / metric[2], metric[1] / metric[2]])
    o("type conversions", [y.type(torch.float32), y.type(), y.float().type(), y.type("torch.DoubleTensor").dtype])
    o("argmax axis", [X.view(8, 6).argmax(axis=1), X.sum(axis=0).shape, X.mean(axis=(1, 2)).shape])
    o("l", [l, l.shape])


@program(rtol=1e-5, atol=1e-6)
def d2l_mlp_from_scratch_relu_max(torch, o):
    nn = torch.nn
    num_inputs, num_outputs, num_hiddens = 6, 3, 5
    W1 = nn.Parameter(_fixed(torch, num_inputs, num_hiddens) * 0.5)
    b1 = nn.Parameter(torch.zeros(num_hiddens, requires_grad=True))
    W2 = nn.Parameter(_fixed(torch, num_hiddens, num_outputs, shift=1.0) * 0.5)
    b2 = nn.Parameter(torch.zeros(num_outputs, requires_grad=True))
    params = [W1, b1, W2, b2]

    def relu(X):
        a = torch.zeros_like(X)
        return torch.max(X, a)

    def net(X):
        X = X.reshape((-1, num_inputs))
        H = relu(X @ W1 + b1)
        return H @ W2 + b2

    loss = nn.CrossEntropyLoss(reduction="none")
    updater = torch.optim.SGD(params, lr=0.1)
    X = _fixed(torch, 8, 2, 3, shift=0.5)
    y = torch.tensor([0, 1, 2, 0, 1, 2, 0, 1])
    for epoch in range(5):
        updater.zero_grad()
        l = loss(net(X), y)
        l.mean().backward()
        updater.step()
        o(f"loss {epoch}", l.mean())
    o("params", params)
    o("relu", [relu(torch.tensor([-1.0, 0.0, 2.0])), type(W1).__name__, W1.is_leaf])
    o("max grad tie", torch.autograd.grad(relu(torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)).sum(),
                                          [b1 if False else W1], allow_unused=True))
    z = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    relu(z).sum().backward()
    o("relu via max grad at 0", z.grad)


# ---- fast.ai lesson 4 ---------------------------------------------------------------------------

@program(rtol=1e-5, atol=1e-6)
def fastai_sgd_quadratic_and_basic_optim(torch, o):
    def f(x):
        return x ** 2

    xt = torch.tensor(3.).requires_grad_()
    yt = f(xt)
    o("yt", yt)
    yt.backward()
    o("xt.grad", xt.grad)

    def f2(x):
        return (x ** 2).sum()

    xt = torch.tensor([3., 4., 10.]).requires_grad_()
    yt = f2(xt)
    yt.backward()
    o("vector grad", [yt, xt.grad])

    time = torch.arange(0, 20).float()
    speed = torch.sin(time) * 3 + 0.75 * (time - 9.5) ** 2 + 1
    o("time", [time.dtype, time[:3], speed[:3]])

    def quad(t, params):
        a, b, c = params
        return a * (t ** 2) + (b * t) + c

    def mse(preds, targets):
        return ((preds - targets) ** 2).mean()

    params = torch.tensor([0.5, -0.3, 0.8]).requires_grad_()
    orig_params = params.clone()
    lr = 1e-5

    def apply_step(params, prn=True):
        preds = quad(time, params)
        loss = mse(preds, speed)
        loss.backward()
        params.data -= lr * params.grad.data
        params.grad = None
        return preds, loss

    losses = [apply_step(params)[1].item() for _ in range(10)]
    o("losses", losses)
    o("params", [params, orig_params, orig_params.requires_grad, orig_params.grad_fn is not None])
    a, b, c = params
    o("unpacked", [a, a.requires_grad, a.grad_fn is not None, type(a).__name__])

    class BasicOptim:
        def __init__(self, params, lr):
            self.params, self.lr = list(params), lr

        def step(self, *args, **kwargs):
            for p in self.params:
                p.data -= p.grad.data * self.lr

        def zero_grad(self, *args, **kwargs):
            for p in self.params:
                p.grad = None

    linear_model = torch.nn.Linear(4, 1)
    with torch.no_grad():
        linear_model.weight.copy_(torch.tensor([[0.1, -0.2, 0.3, -0.4]]))
        linear_model.bias.fill_(0.0)
    w, b = linear_model.parameters()
    o("param shapes", [w.shape, b.shape])
    opt = BasicOptim(linear_model.parameters(), 1.0)
    xs = torch.linspace(0, 1, 24).view(6, 4)
    ys = torch.tensor([1, 0, 1, 0, 1, 1]).unsqueeze(1)

    def mnist_loss(predictions, targets):
        predictions = predictions.sigmoid()
        return torch.where(targets == 1, 1 - predictions, predictions).mean()

    def batch_accuracy(xb, yb):
        preds = xb.sigmoid()
        correct = (preds > 0.5) == yb
        return correct.float().mean()

    def validate_epoch(model):
        accs = [batch_accuracy(model(xb), yb) for xb, yb in zip(xs.split(3), ys.split(3))]
        return round(torch.stack(accs).mean().item(), 4)

    for epoch in range(4):
        for xb, yb in zip(xs.split(2), ys.split(2)):
            loss = mnist_loss(linear_model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
        o(f"epoch {epoch}", validate_epoch(linear_model))
    o("trained", [w, b])
    prds = torch.tensor([0.9, 0.4, 0.2])
    trgts = torch.tensor([1, 0, 1])
    o("where", [torch.where(trgts == 1, 1 - prds, prds), mnist_loss(prds, trgts)])


@program(rtol=1e-5, atol=1e-6)
def fastai_init_params_linear1_and_simple_net(torch, o):
    F = torch.nn.functional

    def init_params(size, std=1.0):
        return (torch.randn(size) * std).requires_grad_()

    weights = init_params((16, 1))
    o("init_params", [weights.shape, weights.requires_grad, weights.is_leaf, init_params(1).shape])
    stacked_threes = torch.stack([torch.arange(16, dtype=torch.uint8).view(4, 4) * (i + 1) for i in range(3)]).float() / 255
    stacked_sevens = torch.stack([torch.arange(16, dtype=torch.uint8).view(4, 4).flip(0) * (i + 2) for i in range(3)]).float() / 255
    o("stacks", [stacked_threes.shape, stacked_threes.ndim, len(stacked_threes.shape), stacked_threes.dtype,
                 stacked_threes[2, 3]])
    o("uint8 arithmetic", [torch.tensor([200], dtype=torch.uint8) * 2, (torch.tensor([200], dtype=torch.uint8) / 255).dtype])
    train_x = torch.cat([stacked_threes, stacked_sevens]).view(-1, 4 * 4)
    train_y = torch.tensor([1] * 3 + [0] * 3).unsqueeze(1)
    with torch.no_grad():
        weights.copy_(_fixed(torch, 16, 1, scale=0.5))
    bias = torch.tensor([0.1]).requires_grad_()
    o("one prediction", (train_x[0] * weights.T).sum() + bias)

    def linear1(xb):
        return xb @ weights + bias

    preds = linear1(train_x)
    o("preds", preds)
    corrects = (preds > 0.0).float() == train_y
    o("corrects", [corrects, corrects.float().mean().item()])
    with torch.no_grad():
        weights[0] *= 1.0001
    o("after tiny change", [weights.is_leaf, weights.requires_grad, weights._version > 0])

    def calc_grad(xb, yb, model):
        preds = model(xb)
        loss = torch.where(yb == 1, 1 - preds.sigmoid(), preds.sigmoid()).mean()
        loss.backward()

    calc_grad(train_x[:4], train_y[:4], linear1)
    g1 = weights.grad.mean()
    calc_grad(train_x[:4], train_y[:4], linear1)
    o("accumulated", [g1, weights.grad.mean(), bias.grad])
    weights.grad.zero_()
    bias.grad.zero_()
    o("zeroed", [weights.grad.sum(), bias.grad])
    w1 = _fixed(torch, 16, 30, shift=0.2) * 0.3
    b1 = torch.zeros(30)
    w2 = _fixed(torch, 30, 1, shift=0.3) * 0.3
    b2 = torch.zeros(1)

    def simple_net(xb):
        res = xb @ w1 + b1
        res = res.max(torch.tensor(0.0))
        res = res @ w2 + b2
        return res

    o("simple net", simple_net(train_x))
    net = torch.nn.Sequential(torch.nn.Linear(16, 30), torch.nn.ReLU(), torch.nn.Linear(30, 1))
    with torch.no_grad():
        net[0].weight.copy_(w1.T)
        net[0].bias.copy_(b1)
        net[2].weight.copy_(w2.T)
        net[2].bias.copy_(b2)
    o("same as module", torch.allclose(net(train_x), simple_net(train_x)))
    o("F.relu", [F.relu(torch.tensor([-1.0, 2.0])), torch.tensor([-1.0, 2.0]).max(torch.tensor(0.0))])


# ---- CS231n: numeric gradient checks; numpy two-layer net ---------------------------------------

@program
def cs231n_eval_numerical_gradient_nditer(torch, o):
    def eval_numerical_gradient(f, x, h=1e-5):
        fx = f(x)
        grad = np.zeros(x.shape)
        it = np.nditer(x.numpy(), flags=["multi_index"], op_flags=[["readwrite"]])
        while not it.finished:
            ix = it.multi_index
            oldval = x[ix].item()
            x[ix] = oldval + h
            fxph = f(x)
            x[ix] = oldval - h
            fxmh = f(x)
            x[ix] = oldval
            grad[ix] = (fxph - fxmh) / (2 * h)
            it.iternext()
        return grad

    W = (torch.arange(12, dtype=torch.float64).view(3, 4) / 10 - 0.5)
    X = torch.tensor([[1.0, -2.0, 0.5], [0.3, 0.8, -1.2]], dtype=torch.float64)
    y = torch.tensor([2, 0])

    def loss_fn(W):
        scores = X.mm(W)
        return torch.nn.functional.cross_entropy(scores, y).item()

    num_grad = eval_numerical_gradient(loss_fn, W)
    Wt = W.clone().requires_grad_()
    torch.nn.functional.cross_entropy(X.mm(Wt), y).backward()
    analytic = Wt.grad.numpy()

    def rel_error(x, y):
        return np.max(np.abs(x - y) / (np.maximum(1e-8, np.abs(x) + np.abs(y))))

    o("rel error small", rel_error(num_grad, analytic) < 1e-7)
    o("analytic", Wt.grad)
    o("num grad dtype", [str(num_grad.dtype), type(rel_error(num_grad, analytic)).__name__])
    o("W restored", W)
    o("index with tuple", [W[(1, 2)], W[np.int64(1), np.int64(2)], W[np.int64(1)].shape])

    def grad_check_sparse(f, x, analytic_grad, num_checks=4, h=1e-5):
        out = []
        for i in range(num_checks):
            ix = tuple([i % m for m in x.shape])
            oldval = x[ix].item()
            x[ix] = oldval + h
            fxph = f(x)
            x[ix] = oldval - h
            fxmh = f(x)
            x[ix] = oldval
            grad_numerical = (fxph - fxmh) / (2 * h)
            grad_analytic = analytic_grad[ix]
            rel = abs(grad_numerical - grad_analytic) / (abs(grad_numerical) + abs(grad_analytic))
            out.append(rel < 1e-6)
        return out

    o("sparse", grad_check_sparse(loss_fn, W, Wt.grad))
    o("gradcheck", torch.autograd.gradcheck(lambda w: torch.nn.functional.cross_entropy(X.mm(w), y), (Wt,)))


@program(rtol=1e-5, atol=1e-6)
def two_layer_net_numpy_vs_torch(torch, o):
    N, D_in, H, D_out = 8, 5, 6, 3
    x_np = np.sin(np.arange(N * D_in).reshape(N, D_in) * 0.7).astype(np.float32)
    y_np = np.cos(np.arange(N * D_out).reshape(N, D_out) * 0.3).astype(np.float32)
    w1_np = (np.sin(np.arange(D_in * H).reshape(D_in, H) * 1.3) * 0.5).astype(np.float32)
    w2_np = (np.cos(np.arange(H * D_out).reshape(H, D_out) * 1.1) * 0.5).astype(np.float32)
    learning_rate = 1e-2
    # numpy version
    w1, w2 = w1_np.copy(), w2_np.copy()
    for t in range(5):
        h = x_np.dot(w1)
        h_relu = np.maximum(h, 0)
        y_pred = h_relu.dot(w2)
        loss_np = np.square(y_pred - y_np).sum()
        grad_y_pred = 2.0 * (y_pred - y_np)
        grad_w2 = h_relu.T.dot(grad_y_pred)
        grad_h_relu = grad_y_pred.dot(w2.T)
        grad_h = grad_h_relu.copy()
        grad_h[h < 0] = 0
        grad_w1 = x_np.T.dot(grad_h)
        w1 -= learning_rate * grad_w1
        w2 -= learning_rate * grad_w2
    # tensors, manual gradients
    dtype = torch.float
    device = torch.device("cpu")
    x = torch.from_numpy(x_np)
    y = torch.from_numpy(y_np)
    tw1 = torch.from_numpy(w1_np.copy()).to(device=device, dtype=dtype)
    tw2 = torch.tensor(w2_np, device=device, dtype=dtype)
    for t in range(5):
        h = x.mm(tw1)
        h_relu = h.clamp(min=0)
        y_pred = h_relu.mm(tw2)
        loss = (y_pred - y).pow(2).sum().item()
        grad_y_pred = 2.0 * (y_pred - y)
        grad_w2 = h_relu.t().mm(grad_y_pred)
        grad_h_relu = grad_y_pred.mm(tw2.t())
        grad_h = grad_h_relu.clone()
        grad_h[h < 0] = 0
        grad_w1 = x.t().mm(grad_h)
        tw1 -= learning_rate * grad_w1
        tw2 -= learning_rate * grad_w2
    o("manual", [loss, tw1, tw2])
    o("agrees with numpy", [np.allclose(tw1.numpy(), w1, atol=1e-6), abs(loss - float(loss_np)) < 1e-4])
    # autograd
    aw1 = torch.tensor(w1_np, requires_grad=True)
    aw2 = torch.tensor(w2_np, requires_grad=True)
    for t in range(5):
        y_pred = x.mm(aw1).clamp(min=0).mm(aw2)
        loss = (y_pred - y).pow(2).sum()
        loss.backward()
        with torch.no_grad():
            aw1 -= learning_rate * aw1.grad
            aw2 -= learning_rate * aw2.grad
            aw1.grad.zero_()
            aw2.grad.zero_()
    o("autograd", [loss, aw1, aw2])
    o("same as manual", [torch.allclose(aw1, tw1, atol=1e-6), torch.allclose(aw2, tw2, atol=1e-6)])
    o("from_numpy shares", [str(x_np.dtype), x.dtype, torch.from_numpy(np.arange(3)).dtype,
                            torch.from_numpy(np.array([1.0, 2.0])).dtype])
    shared = torch.from_numpy(x_np)
    x_np[0, 0] = 42.0
    o("shared memory", shared[0, 0])
    o("numpy back", [type(aw1.detach().numpy()).__name__, str(aw1.detach().numpy().dtype)])


# ---- beginner errors ----------------------------------------------------------------------

@program
def beginner_errors_shapes_and_matmul(torch, o):
    o.raises("mm shapes", lambda: torch.ones(2, 3) @ torch.ones(4, 5), "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)")
    o.raises("vector dot sizes", lambda: torch.ones(3) @ torch.ones(4), "inconsistent tensor size, expected tensor [3] and src [4]")
    o.raises("matrix @ wrong vector", lambda: torch.ones(3, 4) @ torch.ones(3), "size mismatch, got input (3), mat (3x4), vec (3)")
    o.raises("batched inner sizes", lambda: torch.ones(2, 3, 4) @ torch.ones(2, 5, 6),
             "Expected size for first two dimensions of batch2 tensor to be: [2, 4] but got: [2, 5].")
    o.raises("batched 4d", lambda: torch.matmul(torch.ones(2, 2, 3, 4), torch.ones(2, 5, 6)),
             "Expected size for first two dimensions of batch2 tensor to be: [4, 4] but got: [4, 5].")
    o.raises("batched @ matrix", lambda: torch.ones(2, 3, 4) @ torch.ones(5, 6), "mat1 and mat2 shapes cannot be multiplied (6x4 and 5x6)")
    o.raises("batched @ vector", lambda: torch.ones(2, 3, 4) @ torch.ones(5), "size mismatch, got input (6), mat (6x4), vec (5)")
    w = torch.ones(3, 4, requires_grad=True)
    o.raises("matrix with grad @ batch", lambda: w @ torch.ones(2, 5, 6), "mat1 and mat2 shapes cannot be multiplied (12x5 and 4x3)")
    o.raises("batch sizes", lambda: torch.ones(2, 3, 4) @ torch.ones(3, 4, 5), "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0")
    o.raises("broadcast add", lambda: torch.ones(2, 3) + torch.ones(2, 4), "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1")
    o.raises("bmm 2d", lambda: torch.bmm(torch.ones(3, 4), torch.ones(4, 5)), "batch1 must be a 3D tensor")
    o.raises("view size", lambda: torch.arange(12).view(-1, 7), "shape '[-1, 7]' is invalid for input of size 12")
    o.raises("emb view", lambda: torch.zeros(32, 3, 10).view(-1, 20), "shape '[-1, 20]' is invalid for input of size 960")
    o.raises("view non-contiguous", lambda: torch.ones(2, 3).t().view(-1), "view size is not compatible with input tensor's size and stride")
    o("reshape non-contiguous", torch.arange(6.0).view(2, 3).t().reshape(-1))
    o.raises("two inferred", lambda: torch.ones(2, 3).view(3, -1, -1), "only one dimension can be inferred")
    o.raises("cat sizes", lambda: torch.cat([torch.ones(2, 3), torch.ones(3, 2)]), "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 2 for tensor number 1 in the list.")
    o.raises("expand", lambda: torch.ones(2, 3).expand(3, 3), "The expanded size of the tensor (3) must match the existing size (2) at non-singleton dimension 0")
    o.raises("dim out of range", lambda: torch.ones(3).mean(1), "Dimension out of range (expected to be in range of [-1, 0], but got 1)")
    o.raises("softmax dim", lambda: torch.nn.functional.softmax(torch.ones(2, 3), dim=2), "Dimension out of range")
    o.raises("permute duplicates", lambda: torch.ones(2, 3).permute(0, 0), "duplicate dims are not allowed")
    o.raises("conv channels", lambda: torch.nn.Conv2d(3, 4, 3)(torch.ones(1, 2, 5, 5)),
             "Given groups=1, weight of size [4, 3, 3, 3], expected input[1, 2, 5, 5] to have 3 channels, but got 2 channels instead")
    o.raises("pool too small", lambda: torch.nn.functional.max_pool2d(torch.ones(1, 2, 3, 5), (4, 2)),
             "Given input size: (2x3x5). Calculated output size: (2x0x2). Output size is too small")
    o.raises("avg pool 1d too small", lambda: torch.nn.functional.avg_pool1d(torch.ones(1, 2, 1), 2), "Output size is too small")
    o.raises("max pool 1d too small", lambda: torch.nn.functional.max_pool1d(torch.ones(2, 3), 4), "max_pool1d() Invalid computed output size: 0")
    o.raises("lstm input size", lambda: torch.nn.LSTM(3, 4)(torch.ones(5, 2, 4)), "input.size(-1) must be equal to input_size. Expected 3, got 4")


@program
def beginner_errors_dtypes(torch, o):
    F = torch.nn.functional
    o.raises("float @ long", lambda: torch.ones(2, 3) @ torch.ones(3, 2, dtype=torch.long), "expected m1 and m2 to have the same dtype, but got: float != long int")
    o.raises("float mm double", lambda: torch.ones(2, 3).mm(torch.ones(3, 2, dtype=torch.float64)), "expected m1 and m2 to have the same dtype, but got: float != double")
    o.raises("dot long float", lambda: torch.tensor([1, 2]).dot(torch.tensor([1.0, 2.0])), "dot : expected both vectors to have same dtype, but found Long and Float")
    o.raises("linear on numpy", lambda: torch.nn.Linear(3, 2)(np.ones((1, 3), dtype=np.float32)), "linear(): argument 'input' (position 1) must be Tensor, not numpy.ndarray")
    o.raises("linear on list", lambda: F.linear([1.0, 2.0, 3.0], torch.ones(2, 3)), "linear(): argument 'input' (position 1) must be Tensor, not list")
    o.raises("linear on double", lambda: torch.nn.Linear(3, 2)(torch.from_numpy(np.ones((1, 3)))), "mat1 and mat2 must have the same dtype, but got Double and Float")
    o.raises("ce int32 target", lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([0, 1], dtype=torch.int32)), "expected target dtype to be Long or Byte, but got Int")
    o.raises("ce float target", lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([0.0, 1.0])), "expected target dtype to be Long or Byte, but got Float")
    o.raises("ce same shape long", lambda: torch.nn.CrossEntropyLoss()(torch.ones(3), torch.tensor([0, 1, 2])), "Expected floating point type for target with class probabilities, got Long")
    o.raises("ce one-hot long target", lambda: F.cross_entropy(torch.ones(2, 3), F.one_hot(torch.tensor([0, 2]), 3)), "Expected floating point type for target with class probabilities, got Long")
    o("ce one-hot float target", F.cross_entropy(torch.tensor([[1.0, 2.0, 0.5], [0.1, 0.2, 3.0]]), F.one_hot(torch.tensor([0, 2]), 3).float()))
    o.raises("ce probs wrong width", lambda: F.cross_entropy(torch.ones(2, 3), torch.ones(2, 4)), "0D or 1D target tensor expected, multi-target not supported")
    o.raises("ce batch", lambda: F.cross_entropy(torch.ones(2, 3), torch.tensor([0.0, 1.0, 2.0])), "Expected input batch_size (2) to match target batch_size (3).")
    o.raises("nll 1d target size", lambda: F.nll_loss(torch.ones(3), torch.tensor([0, 1])), "For 1D input, 1D target must have size 1, but got target size: 2")
    o("nll 1d one target", [F.nll_loss(torch.tensor([-1.0, -2.0, -3.0]), torch.tensor([1])),
                             F.cross_entropy(torch.tensor([1.0, 2.0, 3.0]), torch.tensor(2))])
    o.raises("one_hot float", lambda: F.one_hot(torch.tensor([0.0, 1.0])), "one_hot is only applicable to index tensor of type LongTensor.")
    o.raises("embedding float", lambda: F.embedding(torch.tensor([1.0]), torch.ones(3, 2)), "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int")
    o.raises("where long", lambda: torch.where(torch.tensor([1, 0]), torch.ones(2), torch.zeros(2)), "where expected condition to be a boolean tensor, but got a tensor with dtype Long")
    o.raises("masked_fill long mask", lambda: torch.ones(3).masked_fill(torch.tensor([1, 0, 1]), 0.0), "masked_fill_ only supports boolean masks, but got mask with dtype long int")
    o.raises("masked_fill uint8 mask", lambda: torch.ones(3).masked_fill(torch.tensor([1, 0, 1], dtype=torch.uint8), 0.0), "masked_fill_ only supports boolean masks, but got mask with dtype unsigned char")
    o.raises("masked_fill_ shapes", lambda: torch.ones(3).masked_fill_(torch.tensor([True, False]), 0.0), "must match the size of tensor")
    o.raises("index_add_ dtype", lambda: torch.zeros(3, dtype=torch.long).index_add_(0, torch.tensor([0]), torch.ones(1)), "index_add_(): self (Long) and source (Float) must have the same scalar type")
    o.raises("index_add dtype", lambda: torch.zeros(3).index_add(0, torch.tensor([0]), torch.ones(1, dtype=torch.float64)), "index_add_(): self (Float) and source (Double) must have the same scalar type")
    o.raises("scatter_ dtype", lambda: torch.zeros(2, 3).scatter_(1, torch.tensor([[0], [1]]), torch.ones(2, 1, dtype=torch.long)), "scatter(): Expected self.dtype to be equal to src.dtype")
    o.raises("scatter_add_ dtype", lambda: torch.zeros(2, 3).scatter_add_(1, torch.tensor([[0], [1]]), torch.ones(2, 1, dtype=torch.float64)), "scatter(): Expected self.dtype to be equal to src.dtype")
    o.raises("mean of long", lambda: torch.arange(5).mean(), "mean(): could not infer output dtype")
    o.raises("requires grad long", lambda: torch.arange(5).requires_grad_(), "only Tensors of floating point dtype can require gradients")
    o.raises("arange step sign", lambda: torch.arange(0, 10, -1), "upper bound and lower bound inconsistent with step sign")
    o("arange empty", [torch.arange(5, 5), torch.arange(3, 3, -1), torch.arange(10, 0, -3)])
    o("mse int target warns", o.warns("warning", lambda: F.mse_loss(torch.ones(4, 1), torch.ones(4)), "Using a target size"))
    o.raises("mse sizes", lambda: torch.nn.MSELoss()(torch.ones(2), torch.ones(3)), "The size of tensor a (2) must match the size of tensor b (3) at non-singleton dimension 0")


@program
def beginner_errors_indexing(torch, o):
    x = torch.arange(6.0).view(2, 3)
    o.raises("int out of range", lambda: x[2], "index 2 is out of bounds for dimension 0 with size 2")
    o.raises("column out of range", lambda: x[:, 3], "index 3 is out of bounds for dimension 1 with size 3")
    o.raises("list out of range", lambda: x[[0, 5]], "index 5 is out of bounds for dimension 0 with size 2")
    o.raises("negative list", lambda: x[[0, -3]], "index -3 is out of bounds for dimension 0 with size 2")
    o.raises("tensor pair", lambda: x[torch.tensor([0, 1]), torch.tensor([0, 4])], "index 4 is out of bounds for dimension 1 with size 3")
    o.raises("tensor column", lambda: x[:, torch.tensor([0, 3])], "is out of bounds for dimension")
    o.raises("setitem out of range", lambda: x.__setitem__(torch.tensor([5]), 1.0), "index 5 is out of bounds for dimension 0 with size 2")
    o.raises("mask shape", lambda: x[torch.tensor([True, False, True])], "The shape of the mask [3] at index 0 does not match the shape of the indexed tensor [2, 3] at index 0")
    o.raises("mask on dim 1", lambda: x[:, torch.tensor([True, False])], "The shape of the mask [2] at index 0 does not match the shape of the indexed tensor [2, 3] at index 1")
    o.raises("2d mask", lambda: x[torch.ones(2, 2, dtype=torch.bool)], "The shape of the mask [2, 2] at index 1 does not match the shape of the indexed tensor [2, 3] at index 1")
    o.raises("setitem mask", lambda: x.__setitem__(torch.tensor([True, False, True]), 0.0), "The shape of the mask [3] at index 0")
    o.raises("index broadcast", lambda: x[torch.tensor([0, 1]), torch.tensor([0, 1, 2])], "shape mismatch: indexing tensors could not be broadcast together with shapes [2], [3]")
    o.raises("value broadcast", lambda: x.__setitem__(torch.tensor([0, 1]), torch.ones(3, 3)), "shape mismatch: value tensor of shape [3, 3] cannot be broadcast to indexing result of shape [2, 3]")
    o.raises("embedding range", lambda: torch.nn.Embedding(5, 2)(torch.tensor([5])), "index out of range in self")
    o.raises("C[X] range", lambda: torch.zeros(27, 2)[torch.tensor([[0, 27]])], "index 27 is out of bounds for dimension 0 with size 27")
    o.raises("index_select range", lambda: x.index_select(0, torch.tensor([2])), "index out of range in self")
    o.raises("gather range", lambda: torch.gather(x, 1, torch.tensor([[3]])), "index 3 is out of bounds for dimension 1 with size 3")
    o.raises("float index", lambda: x[torch.tensor([0.0])], "tensors used as indices must be long, int, byte or bool tensors")
    o.raises("one_hot classes", lambda: torch.nn.functional.one_hot(torch.tensor([0, 5]), 3), "Class values must be smaller than num_classes.")
    o.raises("nll target", lambda: torch.nn.functional.nll_loss(torch.ones(2, 3), torch.tensor([0, 3])), "Target 3 is out of bounds.")
    o("good masks", [x[x > 2], x[torch.tensor([True, False])], x[:, torch.tensor([True, False, True])], x[[]].shape,
                     x[torch.tensor([], dtype=torch.long)].shape, x[..., torch.tensor([True, False, True])]])
    y = x.clone()
    y[y > 2] = 0.0
    y[torch.tensor([0, 1]), torch.tensor([2, 0])] = -1.0
    o("good setitems", y)


@program
def beginner_errors_autograd(torch, o):
    x = torch.ones(3, requires_grad=True)
    o.raises("non-scalar backward", lambda: (x * 2).backward(), "grad can be implicitly created only for scalar outputs")
    o.raises("no grad tensor", lambda: torch.ones(3).sum().backward(), "element 0 of tensors does not require grad and does not have a grad_fn")

    def under_no_grad():
        with torch.no_grad():
            y = x * 2
        y.sum().backward()

    o.raises("made under no_grad", under_no_grad, "element 0 of tensors does not require grad and does not have a grad_fn")

    def detached():
        (x * 2).detach().sum().backward()

    o.raises("detached", detached, "element 0 of tensors does not require grad")

    def twice():
        loss = (x * x).sum()
        loss.backward()
        loss.backward()

    o.raises("backward twice", twice, "Trying to backward through the graph a second time")

    def twice_through_shared():
        h = (x * x).exp()
        h.sum().backward()
        (h * 2).sum().backward()

    o.raises("second loss through a freed graph", twice_through_shared, "Trying to backward through the graph a second time")
    o.raises("inplace on leaf", lambda: x.add_(1), "a leaf Variable that requires grad is being used in an in-place operation.")
    o.raises("setitem on leaf", lambda: x.__setitem__(0, 5.0), "a view of a leaf Variable that requires grad is being used in an in-place operation.")

    def relu_inplace_after_tanh():
        h = torch.tanh(x * 2)
        torch.nn.functional.relu(h, inplace=True)
        h.sum().backward()

    o.raises("inplace relu after tanh", relu_inplace_after_tanh, "one of the variables needed for gradient computation has been modified by an inplace operation")

    def exp_plus_equals():
        y = x.exp()
        y += 1
        y.sum().backward()

    o.raises("exp then +=", exp_plus_equals, "is at version 1; expected version 0 instead")

    def sigmoid_mul():
        y = x.sigmoid()
        y.mul_(2)
        y.sum().backward()

    o.raises("sigmoid then mul_", sigmoid_mul, "which is output 0 of Sigmoid, is at version 1; expected version 0 instead")

    def weight_update_between():
        w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
        loss = (w * w).sum()
        with torch.no_grad():
            w -= 0.1
        loss.backward()

    o.raises("update before backward", weight_update_between, "modified by an inplace operation")
    o.raises("numpy with grad", lambda: x.numpy(), "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    o("numpy detached", x.detach().numpy())
    o.raises("grad of None", lambda: torch.ones(2, requires_grad=True).grad.zero_(), "'NoneType' object has no attribute 'zero_'")
    o.raises("item then backward", lambda: (x * 2).sum().item().backward(), "'float' object has no attribute 'backward'")
    o.raises("unused input", lambda: torch.autograd.grad((x * 2).sum(), [x, torch.ones(1, requires_grad=True)]),
             "appears to not have been used in the graph. Set allow_unused=True if this is the desired behavior.")
    o.raises("grad shape", lambda: torch.tensor(3.0, requires_grad=True).mul(2).backward(torch.ones(2)),
             "Mismatch in shape: grad_output[0] has a shape of torch.Size([2]) and output[0] has a shape of torch.Size([]).")
    o.raises("requires_grad on non-leaf", lambda: setattr(x * 2, "requires_grad", False),
             "you can only change requires_grad flags of leaf variables.")
    o.raises("batchnorm one sample", lambda: torch.nn.BatchNorm1d(3)(torch.ones(1, 3)), "Expected more than 1 value per channel when training, got input size torch.Size([1, 3])")
    o.raises("bce sizes", lambda: torch.nn.functional.binary_cross_entropy(torch.full((4, 1), 0.5), torch.ones(4)),
             "Using a target size (torch.Size([4])) that is different to the input size (torch.Size([4, 1])) is deprecated. Please ensure they have the same size.")
    o.raises("bce logits sizes", lambda: torch.nn.BCEWithLogitsLoss()(torch.zeros(4, 1), torch.ones(4)), "Target size (torch.Size([4])) must be the same as input size (torch.Size([4, 1]))")
    o("after errors", [x.grad, x.requires_grad, x.is_leaf, x._version])


@program
def makemore_activation_histograms(torch, o):
    x = _fixed(torch, 32, 30)
    w = (_fixed(torch, 30, 100, shift=0.7) * (5 / 3) / 30 ** 0.5).requires_grad_()
    t = torch.tanh(x @ w)
    hy, hx = torch.histogram(t, density=True)
    o("histogram", [hy, hx, node_name(hy.grad_fn), hy.requires_grad, hx.is_leaf])
    o("detached", [hx[:-1].detach().shape, hy.detach().sum() * (hx[1] - hx[0]).detach()])
    o.raises("no derivative", lambda: hy.sum().backward(), "derivative for aten::histogram is not implemented")
    result = torch.histogram(t.detach(), bins=10, range=(-1.0, 1.0))
    o("fields", [result.hist, result.bin_edges, len(result), result.n_fields])
    o("repr", repr(torch.histogram(torch.tensor([0.0, 0.1, 0.5, 1.0]), bins=2)))
    o("explicit edges", torch.histogram(t.detach(), bins=torch.tensor([-1.0, -0.97, 0.97, 1.0])))
    o("weighted", torch.histogram(torch.tensor([0.0, 0.2, 0.9]), 2, weight=torch.tensor([1.0, 2.0, 4.0])))
    o("histc", [torch.histc(t.detach(), bins=20), t.detach().histc(5, min=-0.5, max=0.5), torch.histc(torch.ones(3), 2)])
    o("constant input", torch.histogram(torch.ones(3), bins=2))
    o.raises("integer input", lambda: torch.histogram(torch.arange(4), 2), "not implemented for 'Long'")
    o.raises("histc integer", lambda: torch.histc(torch.arange(4), 2), "not implemented for 'Long'")
    o.raises("bins", lambda: torch.histogram(t, bins=0), "bins must be > 0, but got 0 for dimension 0")
    o.raises("range", lambda: torch.histogram(t, bins=2, range=(1.0, 0.0)), "min should not exceed max")
    o.raises("histc range", lambda: torch.histc(t, 2, min=1, max=0), "torch.histc: max must be larger than min")
    o.raises("histc inf", lambda: torch.histc(torch.tensor([0.0, float("inf")]), 2), "torch.histc: range of [0, inf] is not finite")


@program
def old_tutorial_variable_wrapper(torch, o):
    Variable = torch.autograd.Variable

    x = Variable(torch.ones(2, 2), requires_grad=True)
    o("x", [x, x.requires_grad, x.is_leaf, isinstance(x, Variable), isinstance(torch.ones(1), Variable)])
    y = x + 2
    z = y * y * 3
    out = z.mean()
    out.backward()
    o("grad", [x.grad, out, x.data])
    base = torch.tensor([1.0, 2.0], requires_grad=True)
    v = Variable(base * 2)
    o("from non-leaf", [v.requires_grad, v.is_leaf, v.grad_fn])
    shared = torch.zeros(2)
    w = Variable(shared, requires_grad=True)
    shared[0] = 5.0
    o("shares data", [w, w is shared])
    o.raises("not a tensor", lambda: Variable([1.0, 2.0]), "Variable data has to be a tensor, but got list")
    o.warns("volatile", lambda: Variable(torch.ones(1), volatile=True), "volatile was removed and now has no effect")


@program
def d2l_ndarray_preliminaries(torch, o):
    x = torch.arange(12, dtype=torch.float32)
    o("x", [x, x.numel(), x.shape, len(x)])
    X = x.reshape(3, 4)
    o("reshape", [X, x.reshape(-1, 4).shape, x.reshape(3, -1).shape])
    o("creation", [torch.zeros((2, 3, 4)).shape, torch.ones((2, 3, 4)).sum(), torch.tensor([[2, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])])
    o("slicing", [X[-1], X[1:3]])
    X[1, 2] = 17
    X[:2, :] = 12
    o("assigned", X)
    o("exp", torch.exp(x))
    x2 = torch.tensor([1.0, 2, 4, 8])
    y2 = torch.tensor([2, 2, 2, 2])
    o("elementwise", [x2 + y2, x2 - y2, x2 * y2, x2 / y2, x2 ** y2])
    X = torch.arange(12, dtype=torch.float32).reshape((3, 4))
    Y = torch.tensor([[2.0, 1, 4, 3], [1, 2, 3, 4], [4, 3, 2, 1]])
    o("cat", [torch.cat((X, Y), dim=0), torch.cat((X, Y), dim=1)])
    o("compare", [X == Y, X.sum()])
    a = torch.arange(3).reshape((3, 1))
    b = torch.arange(2).reshape((1, 2))
    o("broadcast", [a, b, a + b])
    before = id(Y)
    Y = Y + X
    o("new memory", id(Y) == before)
    Z = torch.zeros_like(Y)
    before_z = id(Z)
    Z[:] = X + Y
    o("in place", [id(Z) == before_z, Z])
    before = id(X)
    X += Y
    o("augmented", [id(X) == before, X])
    A = X.numpy()
    B = torch.from_numpy(A)
    o("numpy types", [type(A).__name__, type(B).__name__, str(A.dtype)])
    a = torch.tensor([3.5])
    o("scalars", [a, a.item(), float(a), int(a)])


@program
def d2l_linear_algebra(torch, o):
    x = torch.tensor(3.0)
    y = torch.tensor(2.0)
    o("scalars", [x + y, x * y, x / y, x ** y])
    x = torch.arange(3)
    o("vector", [x, x[2], len(x), x.shape])
    A = torch.arange(6).reshape(3, 2)
    o("transpose", [A.T, A.T.T == A])
    A = torch.tensor([[1, 2, 3], [2, 0, 4], [3, 4, 5]])
    o("symmetric", A == A.T)
    o("tensor3", torch.arange(24).reshape(2, 3, 4))
    A = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    B = A.clone()
    o("hadamard", [A, A + B, A * B])
    a = 2
    X = torch.arange(24).reshape(2, 3, 4)
    o("scalar ops", [a + X, (a * X).shape])
    x = torch.arange(3, dtype=torch.float32)
    o("sums", [x, x.sum(), A.shape, A.sum()])
    o("axis sums", [A.sum(axis=0), A.sum(axis=0).shape, A.sum(axis=1), A.sum(axis=[0, 1]) == A.sum()])
    o("means", [A.mean(), A.sum() / A.numel(), A.mean(axis=0), A.sum(axis=0) / A.shape[0]])
    sum_A = A.sum(axis=1, keepdims=True)
    o("keepdims", [sum_A, sum_A.shape, A / sum_A, A.cumsum(axis=0)])
    y = torch.ones(3, dtype=torch.float32)
    o("dot", [torch.dot(x, y), torch.sum(x * y)])
    o("mv", [A.shape, x.shape, torch.mv(A, x), A @ x])
    B = torch.ones(3, 4)
    o("mm", [torch.mm(A, B), A @ B])
    u = torch.tensor([3.0, -4.0])
    o("norms", [torch.norm(u), torch.abs(u).sum(), torch.norm(torch.ones((4, 9)))])
    o.raises("dot of long and float", lambda: torch.dot(torch.arange(3), y), "dot : expected both vectors to have same dtype")


@program(rtol=1e-5, atol=1e-6)
def d2l_calculus_numerical_limit_and_tangent(torch, o):
    def f(x):
        return 3 * x ** 2 - 4 * x

    lines = []
    for h in 10.0 ** torch.arange(-1, -6, -1):
        lines.append(f"h={h:.5f}, numerical limit={(f(1 + h) - f(1)) / h:.5f}")
    o("limits", "\n".join(lines))
    o("powers", 10.0 ** torch.arange(-1, -6, -1))
    x = torch.arange(0, 3, 0.1)
    o("grid", [x.shape, x.dtype, x[-1]])
    o("tangent", [f(x)[:5], (2 * x - 3)[:5]])
    xg = x.clone().requires_grad_()
    f(xg).sum().backward()
    o("autograd derivative", [xg.grad[:5], torch.allclose(xg.grad, 6 * x - 4)])


@program(rtol=1e-5, atol=1e-6)
def d2l_lazy_initialization(torch, o):
    nn = torch.nn
    net = nn.Sequential(nn.LazyLinear(8), nn.ReLU(), nn.LazyLinear(1))
    o("before", [repr(net), repr(net[0].weight), type(net[0].weight).__name__, net[0].in_features,
                 net[0].has_uninitialized_params(), list(net.state_dict().keys())])
    o.raises("shape before forward", lambda: net[0].weight.shape, "Can't access the shape of an uninitialized parameter or buffer")
    o.raises("count before forward", lambda: sum(p.numel() for p in net.parameters()), "Attempted to use an uninitialized parameter in")
    trainer = torch.optim.SGD(net.parameters(), lr=0.1)
    X = torch.linspace(-1, 1, 40).reshape(2, 20)
    o("output shape", net(X).shape)
    o("after", [repr(net), type(net[0]).__name__, type(net[0].weight).__name__, net[0].weight.shape,
                [p.shape for p in net.parameters()], sum(p.numel() for p in net.parameters())])

    def init_weights(module):
        if type(module) == nn.Linear:
            nn.init.constant_(module.weight, 0.05)
            nn.init.zeros_(module.bias)

    net.apply(init_weights)
    y = torch.tensor([[1.0], [-1.0]])
    for _ in range(3):
        trainer.zero_grad()
        loss = ((net(X) - y) ** 2).mean()
        loss.backward()
        trainer.step()
        o("loss", loss)
    o("trained", [net[0].weight[:2, :4], net[2].weight, net[2].bias])
    o("optimizer holds the materialized params", [p is q for p, q in zip(trainer.param_groups[0]["params"], net.parameters())])
    no_bias = nn.LazyLinear(3, bias=False)
    o("no bias", [repr(no_bias), no_bias.bias, no_bias(torch.ones(1, 4)).shape, repr(no_bias)])


# ---- Karpathy "Let's build GPT"; the PyTorch blitz --------------------------------------------

@program(rtol=1e-4, atol=1e-5)
def gpt_from_scratch_bigram_to_attention(torch, o):
    nn = torch.nn
    F = nn.functional
    text = "first citizen: before we proceed any further, hear me speak. all: speak, speak."
    chars = sorted(list(set(text)))
    vocab_size = len(chars)
    stoi = {ch: i for i, ch in enumerate(chars)}
    itos = {i: ch for i, ch in enumerate(chars)}

    def encode(s):
        return [stoi[c] for c in s]

    def decode(l):
        return "".join([itos[i] for i in l])

    data = torch.tensor(encode(text), dtype=torch.long)
    o("data", [data.shape, data.dtype, data[:10], decode(encode("hear me"))])
    block_size, batch_size, n_embd, head_size = 8, 4, 16, 8
    n = int(0.9 * len(data))
    train_data, val_data = data[:n], data[n - block_size:]
    x = train_data[:block_size]
    y = train_data[1:block_size + 1]
    o("context", [f"when input is {x[:t + 1].tolist()} the target: {y[t]}" for t in range(3)])

    def get_batch(split, offsets):
        d = train_data if split == "train" else val_data
        ix = torch.tensor(offsets)
        xb = torch.stack([d[i:i + block_size] for i in ix])
        yb = torch.stack([d[i + 1:i + block_size + 1] for i in ix])
        return xb, yb

    xb, yb = get_batch("train", [0, 7, 20, 33])
    o("batch", [xb.shape, yb[1]])
    # the mathematical trick in self-attention
    B, T, C = 4, 8, 2
    xs = _fixed(torch, B, T, C)
    xbow = torch.zeros((B, T, C))
    for b in range(B):
        for t in range(T):
            xprev = xs[b, :t + 1]
            xbow[b, t] = torch.mean(xprev, 0)
    wei = torch.tril(torch.ones(T, T))
    wei = wei / wei.sum(1, keepdim=True)
    xbow2 = wei @ xs
    tril = torch.tril(torch.ones(T, T))
    wei3 = torch.zeros((T, T)).masked_fill(tril == 0, float("-inf"))
    wei3 = F.softmax(wei3, dim=-1)
    xbow3 = wei3 @ xs
    o("averages agree", [torch.allclose(xbow, xbow2), torch.allclose(xbow, xbow3), xbow[0, :3]])
    o("masked", [wei3[:3, :3], torch.zeros((3, 3)).masked_fill(torch.tril(torch.ones(3, 3)) == 0, float("-inf"))])

    class Head(nn.Module):
        def __init__(self, head_size):
            super().__init__()
            self.key = nn.Linear(n_embd, head_size, bias=False)
            self.query = nn.Linear(n_embd, head_size, bias=False)
            self.value = nn.Linear(n_embd, head_size, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(block_size, block_size)))

        def forward(self, x):
            B, T, C = x.shape
            k = self.key(x)
            q = self.query(x)
            wei = q @ k.transpose(-2, -1) * k.shape[-1] ** -0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            wei = F.softmax(wei, dim=-1)
            v = self.value(x)
            return wei @ v

    class MultiHeadAttention(nn.Module):
        def __init__(self, num_heads, head_size):
            super().__init__()
            self.heads = nn.ModuleList([Head(head_size) for _ in range(num_heads)])
            self.proj = nn.Linear(head_size * num_heads, n_embd)

        def forward(self, x):
            out = torch.cat([h(x) for h in self.heads], dim=-1)
            return self.proj(out)

    class Block(nn.Module):
        def __init__(self, n_embd, n_head):
            super().__init__()
            self.sa = MultiHeadAttention(n_head, n_embd // n_head)
            self.ffwd = nn.Sequential(nn.Linear(n_embd, 4 * n_embd), nn.ReLU(), nn.Linear(4 * n_embd, n_embd))
            self.ln1 = nn.LayerNorm(n_embd)
            self.ln2 = nn.LayerNorm(n_embd)

        def forward(self, x):
            x = x + self.sa(self.ln1(x))
            return x + self.ffwd(self.ln2(x))

    class GPTLanguageModel(nn.Module):
        def __init__(self):
            super().__init__()
            self.token_embedding_table = nn.Embedding(vocab_size, n_embd)
            self.position_embedding_table = nn.Embedding(block_size, n_embd)
            self.blocks = nn.Sequential(Block(n_embd, n_head=2))
            self.ln_f = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab_size)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            tok_emb = self.token_embedding_table(idx)
            pos_emb = self.position_embedding_table(torch.arange(T))
            x = tok_emb + pos_emb
            x = self.blocks(x)
            logits = self.lm_head(self.ln_f(x))
            if targets is None:
                loss = None
            else:
                B, T, C = logits.shape
                logits = logits.view(B * T, C)
                targets = targets.view(B * T)
                loss = F.cross_entropy(logits, targets)
            return logits, loss

        def generate(self, idx, max_new_tokens):
            for _ in range(max_new_tokens):
                idx_cond = idx[:, -block_size:]
                logits, loss = self(idx_cond)
                logits = logits[:, -1, :]
                probs = F.softmax(logits, dim=-1)
                idx_next = torch.argmax(probs, dim=-1, keepdim=True)
                idx = torch.cat((idx, idx_next), dim=1)
            return idx

    model = GPTLanguageModel()
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            if ".ln" in name or name.startswith("ln_f"):
                continue
            if name.endswith("bias"):
                p.fill_(0.01)
            else:
                p.copy_(_fixed(torch, *p.shape, scale=0.3, shift=i))
    o("param count", [f"{sum(p.numel() for p in model.parameters()) / 1e6} M parameters",
                      list(model.state_dict().keys())[:6], [n for n, _ in model.named_buffers()]])
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)

    @torch.no_grad()
    def estimate_loss():
        out = {}
        model.eval()
        for split in ["train", "val"]:
            X, Y = get_batch(split, [0, 0] if split == "val" else [3, 9])
            logits, loss = model(X, Y)
            out[split] = loss.item()
        model.train()
        return out

    for it in range(4):
        if it % 2 == 0:
            losses = estimate_loss()
            o(f"step {it}", f"step {it}: train loss {losses['train']:.4f}, val loss {losses['val']:.4f}")
        xb, yb = get_batch("train", [it, it + 5, it + 11, it + 17])
        logits, loss = model(xb, yb)
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
    o("logits", [logits.shape, loss])
    context = torch.zeros((1, 1), dtype=torch.long)
    o("generated", model.generate(context, max_new_tokens=12)[0].tolist())
    o("training flags", [model.training, model.blocks[0].sa.heads[0].training])


@program(rtol=1e-5, atol=1e-6)
def blitz_lenet_grad_fn_chain_and_freezing(torch, o):
    nn = torch.nn
    F = nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 6, 5)
            self.conv2 = nn.Conv2d(6, 16, 5)
            self.fc1 = nn.Linear(16 * 5 * 5, 120)
            self.fc2 = nn.Linear(120, 84)
            self.fc3 = nn.Linear(84, 10)

        def forward(self, input):
            c1 = F.relu(self.conv1(input))
            s2 = F.max_pool2d(c1, (2, 2))
            c3 = F.relu(self.conv2(s2))
            s4 = F.max_pool2d(c3, 2)
            s4 = torch.flatten(s4, 1)
            f5 = F.relu(self.fc1(s4))
            f6 = F.relu(self.fc2(f5))
            return self.fc3(f6)

    net = Net()
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(_fixed(torch, *p.shape, scale=0.1, shift=i))
    o("repr", repr(net))
    params = list(net.parameters())
    o("params", [len(params), params[0].size()])
    input = _fixed(torch, 1, 1, 32, 32, shift=0.3)
    out = net(input)
    o("out", out)
    net.zero_grad()
    out.backward(torch.linspace(-1, 1, 10).view(1, 10))
    o("conv1 bias grad", net.conv1.bias.grad)
    output = net(input)
    target = torch.arange(10.0).view(1, -1)
    criterion = nn.MSELoss()
    loss = criterion(output, target)
    o("loss", loss)
    o("grad_fn chain", [node_name(loss.grad_fn), node_name(loss.grad_fn.next_functions[0][0]),
                        node_name(loss.grad_fn.next_functions[0][0].next_functions[0][0])])
    net.zero_grad()
    o("bias grad before", net.conv1.bias.grad)
    loss.backward()
    o("bias grad after", net.conv1.bias.grad)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01)
    optimizer.zero_grad()
    loss = criterion(net(input), target)
    loss.backward()
    optimizer.step()
    o("after step", [net.fc3.bias, criterion(net(input), target)])
    # "A Gentle Introduction to torch.autograd"
    a = torch.tensor([2.0, 3.0], requires_grad=True)
    b = torch.tensor([6.0, 4.0], requires_grad=True)
    Q = 3 * a ** 3 - b ** 2
    external_grad = torch.tensor([1.0, 1.0])
    Q.backward(gradient=external_grad)
    o("gentle", [9 * a ** 2 == a.grad, -2 * b == b.grad])
    x = torch.ones(5, 5)
    y = torch.ones(5, 5)
    z = torch.ones((5, 5), requires_grad=True)
    o("requires", [f"Does `a` require gradients?: {(x + y).requires_grad}", f"Does `b` require gradients?: {(x + z).requires_grad}"])
    for param in net.parameters():
        param.requires_grad = False
    net.fc3 = nn.Linear(84, 2)
    with torch.no_grad():
        net.fc3.weight.copy_(_fixed(torch, 2, 84, scale=0.1))
        net.fc3.bias.zero_()
    o("trainable", [n for n, p in net.named_parameters() if p.requires_grad])
    optimizer = torch.optim.SGD(net.parameters(), lr=1e-2, momentum=0.9)
    loss = net(input).sum()
    loss.backward()
    optimizer.step()
    o("frozen grads", [net.conv1.weight.grad is None if False else net.conv1.bias.grad, net.fc3.bias.grad, net.fc3.bias])


@program
def blitz_tensors_tutorial(torch, o):
    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)
    x_ones = torch.ones_like(x_data)
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    o("creation", [x_data, x_np, x_ones, x_rand.shape, x_rand.dtype])
    shape = (2, 3,)
    o("from shape", [torch.ones(shape), torch.zeros(shape), torch.rand(shape).shape])
    tensor = torch.rand(3, 4)
    o("attributes", [f"Shape of tensor: {tensor.shape}", f"Datatype of tensor: {tensor.dtype}",
                     f"Device tensor is stored on: {tensor.device}"])
    tensor = torch.ones(4, 4)
    o("indexing", [f"First row: {tensor[0]}", f"First column: {tensor[:, 0]}", f"Last column: {tensor[..., -1]}"])
    tensor[:, 1] = 0
    o("assigned", tensor)
    t1 = torch.cat([tensor, tensor, tensor], dim=1)
    o("cat", t1)
    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = torch.rand_like(y1)
    torch.matmul(tensor, tensor.T, out=y3)
    z1 = tensor * tensor
    z2 = tensor.mul(tensor)
    z3 = torch.rand_like(tensor)
    torch.mul(tensor, tensor, out=z3)
    o("arithmetic", [y1, y2, y3, z1, z2, z3])
    agg = tensor.sum()
    agg_item = agg.item()
    o("agg", [agg_item, type(agg_item).__name__])
    o("add_", [f"{tensor} \n", tensor.add_(5)])
    result = torch.empty(4, 4)
    torch.add(tensor, tensor, out=result)
    o("out=", result)
    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    o("bridge tensor to numpy", [f"t: {t}", f"n: {n}"])
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    o("bridge numpy to tensor", [f"t: {t}", f"n: {n}"])
    x = torch.ones(5, 3, dtype=torch.double)
    o("new_*", [x.new_ones(5, 3), x.new_ones(2, dtype=torch.float32), x.new_zeros(2).dtype, x.new_tensor([1, 2]),
                torch.randn_like(x, dtype=torch.float).dtype, x.size(), x.size(1)])
    o.raises("out wrong dtype", lambda: torch.add(torch.ones(2), torch.ones(2), out=torch.empty(2, dtype=torch.long)),
             "result type Float can't be cast to the desired output type Long")


@program(rtol=1e-5, atol=1e-6)
def sequence_cross_entropy_batch_time_classes(torch, o):
    F = torch.nn.functional
    B, T, C = 3, 4, 5
    logits = _fixed(torch, B, T, C).requires_grad_()
    targets = torch.arange(B * T).view(B, T) % C
    o.raises("B, T, C passed directly", lambda: F.cross_entropy(logits, targets), "Expected target size [3, 5], got [3, 4]")
    loss_bct = F.cross_entropy(logits.transpose(1, 2), targets)
    loss_flat = F.cross_entropy(logits.view(B * T, C), targets.view(B * T))
    o("same loss", [loss_bct, loss_flat, torch.allclose(loss_bct, loss_flat)])
    per_token = F.cross_entropy(logits.permute(0, 2, 1), targets, reduction="none")
    o("per token", [per_token, per_token.shape])
    loss_bct.backward()
    g1 = logits.grad.clone()
    logits.grad = None
    loss_flat.backward()
    o("same grads", [torch.allclose(g1, logits.grad), g1[0]])
    masked = F.cross_entropy(logits.transpose(1, 2), targets.masked_fill(targets == 0, -100))
    weighted = F.cross_entropy(logits.transpose(1, 2), targets, weight=torch.tensor([1.0, 2.0, 0.5, 1.0, 1.5]),
                               label_smoothing=0.1)
    o("ignore and weights", [masked, weighted])
    o("nll 4d", F.nll_loss(F.log_softmax(_fixed(torch, 2, 3, 2, 2), 1), torch.tensor([[[0, 1], [2, 0]], [[1, 1], [2, 2]]])))
    o.raises("bad target", lambda: F.cross_entropy(logits.transpose(1, 2), targets[:, :3]), "Expected target size [3, 4], got [3, 3]")


@program
def module_and_optimizer_setup_mistakes(torch, o):
    nn = torch.nn

    class NoSuper(nn.Module):
        def __init__(self):
            self.fc = nn.Linear(2, 2)

    class ListOfLayers(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = [nn.Linear(2, 2), nn.Linear(2, 1)]

        def forward(self, x):
            for layer in self.layers:
                x = layer(x)
            return x

    class NoForward(nn.Module):
        def __init__(self):
            super().__init__()

    o.raises("no super().__init__()", NoSuper, "cannot assign module before Module.__init__() call")
    o("plain list hides parameters", [len(list(ListOfLayers().parameters())), repr(ListOfLayers())])
    o.raises("empty parameter list", lambda: torch.optim.SGD(ListOfLayers().parameters(), lr=0.1), "optimizer got an empty parameter list")
    o.raises("no forward", lambda: NoForward()(torch.ones(1)), 'Module [NoForward] is missing the required "forward" function')
    o.raises("tensor as params", lambda: torch.optim.SGD(torch.ones(2, requires_grad=True), lr=0.1),
             "params argument given to the optimizer should be an iterable of Tensors or dicts, but got torch.FloatTensor")
    o.raises("non-leaf param", lambda: torch.optim.SGD([torch.ones(1, requires_grad=True) * 2], lr=0.1), "can't optimize a non-leaf Tensor")
    o.raises("negative lr", lambda: torch.optim.Adam([torch.ones(1, requires_grad=True)], lr=-1), "Invalid learning rate: -1")
    o.raises("Sequential of a list", lambda: nn.Sequential([nn.Linear(2, 2)]), "list is not a Module subclass")
    o.raises("ModuleList called", lambda: nn.ModuleList([nn.Linear(2, 2)])(torch.ones(2)), "missing the required \"forward\" function")
    o.raises("state dict of another size", lambda: nn.Linear(2, 3).load_state_dict(nn.Linear(3, 3).state_dict()),
             "size mismatch for weight: copying a param with shape torch.Size([3, 3]) from checkpoint, the shape in current model is torch.Size([3, 2]).")
    o.raises("dropout p", lambda: nn.Dropout(1.5), "dropout probability has to be between 0 and 1, but got 1.5")
    o.raises("batchnorm on B, T, C", lambda: nn.BatchNorm1d(10)(torch.ones(4, 8, 10)), "running_mean should contain 8 elements not 10")
    o.raises("reshape negative", lambda: torch.ones(6).reshape(-2, 3), "invalid shape dimension -2 at index 0 of shape [-2, 3]")
    w = torch.ones(2, requires_grad=True)
    o.raises("np.array of a parameter", lambda: np.array(w), "Can't call numpy() on Tensor that requires grad")
    o.raises("numpy ufunc on a parameter", lambda: np.exp(w), "Can't call numpy() on Tensor that requires grad")
    o("np.array detached", [np.array(w.detach()), np.asarray(torch.ones(2)).dtype.name])
    o("item and tolist work with grad", [w.sum().item(), w.tolist()])


@program(rtol=1e-5, atol=1e-6)
def old_blog_post_typed_tensors_iris_style(torch, o):
    X_train = np.array([[5.1, 3.5, 1.4, 0.2], [4.9, 3.0, 1.4, 0.2], [6.2, 3.4, 5.4, 2.3], [5.9, 3.0, 5.1, 1.8],
                        [5.5, 2.3, 4.0, 1.3], [6.5, 2.8, 4.6, 1.5]])
    y_train = np.array([0, 0, 2, 2, 1, 1])
    X = torch.FloatTensor(X_train)
    y = torch.LongTensor(y_train)
    o("typed", [X, y, torch.FloatTensor(2, 3).shape, torch.FloatTensor().shape, torch.LongTensor([1.7, -2.7]),
                torch.IntTensor([1, 2]), torch.ByteTensor([1, 0]), torch.BoolTensor([1, 0]), torch.DoubleTensor([0.5])])
    o("isinstance", [isinstance(X, torch.FloatTensor), isinstance(y, torch.FloatTensor), isinstance(y, torch.LongTensor),
                     isinstance(torch.nn.Parameter(torch.ones(1)), torch.FloatTensor), isinstance(X, torch.Tensor)])
    o("type conversions", [torch.ones(2).type(torch.LongTensor), torch.tensor([1, 2]).type(torch.DoubleTensor),
                           X.type(), y.type(), torch.FloatTensor.dtype, repr(torch.FloatTensor), torch.LongTensor.__name__])
    o.raises("scalar", lambda: torch.FloatTensor(2.5), "new(): data must be a sequence (got float)")
    o.raises("other dtype tensor", lambda: torch.FloatTensor(torch.tensor([1, 2])), "expected TensorOptions(dtype=float, device=cpu")
    same = torch.FloatTensor(X)
    same[0, 0] = 9.0
    o("shares data", X[0, 0])

    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 6)
            self.fc2 = torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.fc2(torch.relu(self.fc1(x)))

    net = Net()
    with torch.no_grad():
        net.fc1.weight.copy_(_fixed(torch, 6, 4, scale=0.4))
        net.fc1.bias.fill_(0.1)
        net.fc2.weight.copy_(_fixed(torch, 3, 6, scale=0.4, shift=1.0))
        net.fc2.bias.zero_()
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.01, momentum=0.9)
    for epoch in range(6):
        optimizer.zero_grad()
        out = net(X)
        loss = criterion(out, y)
        loss.backward()
        optimizer.step()
        if epoch % 2 == 0:
            o(f"epoch {epoch}", f"number of epoch {epoch} loss {loss.data.item():.5f}")
    _, predicted = torch.max(net(X).data, 1)
    o("accuracy", [predicted, (predicted == y).sum().item() / y.size(0), 100 * torch.sum(y == predicted) / y.size(0)])
    o("to numpy", [predicted.numpy().dtype.name, net(X).detach().numpy().shape])


@program
def pre_1_0_tutorial_idioms(torch, o):
    nn = torch.nn
    F = nn.functional
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = torch.zeros(2, 2)
    loss = ((x - y) ** 2).sum()
    o.raises("loss.data[0]", lambda: loss.data[0], "invalid index of a 0-dim tensor. Use `tensor.item()` in Python")
    o.raises("scalar[0]", lambda: torch.tensor(3.0)[0], "invalid index of a 0-dim tensor")
    o("loss.item()", [loss.item(), loss.data.item(), loss[()], loss[None].shape, loss[...]])
    legacy = "size_average and reduce args will be deprecated"
    o("MSELoss(size_average=False)", o.warns("w1", lambda: nn.MSELoss(size_average=False), legacy).reduction)
    o("sum", nn.MSELoss(size_average=False)(x, y))
    o("reduce=False", o.warns("w2", lambda: nn.MSELoss(reduce=False)(x, y), legacy))
    o("functional", o.warns("w3", lambda: F.mse_loss(x, y, size_average=False), legacy))
    o("cross entropy", o.warns("w4", lambda: nn.CrossEntropyLoss(size_average=True)(x, torch.tensor([0, 1])), legacy))
    o("nll reduce", o.warns("w5", lambda: F.nll_loss(x, torch.tensor([0, 1]), reduce=False), legacy))
    o("bce", o.warns("w6", lambda: nn.BCELoss(size_average=False)(torch.sigmoid(x), torch.ones(2, 2)), legacy))
    o("l1", o.warns("w7", lambda: nn.L1Loss(size_average=False)(x, y), legacy))
    o("bce logits", o.warns("w8", lambda: F.binary_cross_entropy_with_logits(x, torch.ones(2, 2), reduce=False), legacy))
    o("reduction names", [nn.NLLLoss(size_average=False, reduce=True).reduction, nn.L1Loss(reduce=False).reduction])
    w = torch.tensor([3.0, 4.0], requires_grad=True)
    (w * w).sum().backward()
    o("clip_grad_norm", o.warns("w9", lambda: nn.utils.clip_grad_norm([w], 1.0), "is now deprecated in favor of"))
    o("clipped", w.grad)
    o("torch.range", o.warns("w10", lambda: torch.range(0, 4), "torch.range is deprecated"))
    o("range values", [torch.range(1, 2, 0.3), torch.range(0, 1, 0.1).shape, torch.range(5, 1, -2), torch.range(0, 3, dtype=torch.long)])
    o.raises("range sign", lambda: torch.range(0, 4, -1), "upper bound and lower bound inconsistent with step sign")
    t = torch.tensor([1.0, 2.0, 3.0])
    o("byte mask", o.warns("w11", lambda: t[torch.tensor([1, 0, 1], dtype=torch.uint8)], "indexing with dtype torch.uint8 is now deprecated"))
    o("byte comparison mask", t[(t > 1.5).byte() if hasattr(t, "byte") else t > 1.5])
    o("clamp int to float bound", [torch.tensor([1, 5]).clamp(min=2.5), torch.tensor([1, 5]).clamp(2, 3.5),
                                   torch.tensor([1, 5]).clamp_max(2.5), torch.tensor([1, 5]).clamp_min(2.5),
                                   torch.tensor([1, 5]).clamp(max=3), torch.tensor([1, 5], dtype=torch.uint8).clamp(max=3)])
    o.raises("clamp_ int to float", lambda: torch.tensor([1, 5]).clamp_(min=2.5), "result type Float can't be cast to the desired output type")


@program(rtol=1e-5, atol=1e-6)
def rnn_hidden_state_not_detached_between_batches(torch, o):
    W = (_fixed(torch, 2, 3) * 0.5).requires_grad_()
    U = (_fixed(torch, 3, 3, shift=1.0) * 0.5).requires_grad_()
    batches = [_fixed(torch, 4, 2, shift=float(i)) for i in range(3)]

    def train(detach, retain=False):
        h = torch.zeros(4, 3)
        losses = []
        for x in batches:
            if detach:
                h = h.detach()
            h = torch.tanh(x @ W + h @ U)
            loss = (h ** 2).mean()
            W.grad = None
            U.grad = None
            loss.backward(retain_graph=retain)
            losses.append(loss.item())
        return losses, W.grad.clone(), U.grad.clone()

    o.raises("second batch", lambda: train(detach=False), "Trying to backward through the graph a second time")
    o("detached", train(detach=True))
    o("retained (full BPTT)", train(detach=False, retain=True))
    h = torch.zeros(4, 3, requires_grad=False)
    h = torch.tanh(batches[0] @ W + h @ U)
    h.detach_()
    o("detach_ in place", [h.requires_grad, h.is_leaf, h.grad_fn])
    o.raises("device", lambda: torch.ones(2).cuda(), "Torch not compiled with CUDA enabled")
    o.raises("model device", lambda: torch.nn.Linear(2, 2).to("cuda"), "Torch not compiled with CUDA enabled")
    o("cpu fallback", [str(torch.device("cuda" if torch.cuda.is_available() else "cpu")), torch.ones(2).cpu().device.type])


@program
def saving_and_loading_models_tutorial(torch, o):
    import collections

    model = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(_fixed(torch, *p.shape, shift=i))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    model(torch.ones(2, 3)).sum().backward()
    optimizer.step()

    def roundtrip(obj, **kwargs):
        buffer = io.BytesIO()
        torch.save(obj, buffer)
        buffer.seek(0)
        return torch.load(buffer, **kwargs)

    o.raises("whole model, default weights_only", lambda: roundtrip(model), "Weights only load failed")
    whole = roundtrip(model, weights_only=False)
    o("whole model, weights_only=False", [type(whole).__name__, whole(torch.ones(1, 3)), repr(whole)])
    checkpoint = roundtrip({"epoch": 5, "model_state_dict": model.state_dict(),
                            "optimizer_state_dict": optimizer.state_dict(), "loss": 0.25,
                            "history": [1.0, 0.5], "tags": {"a", "b"}, "counts": collections.Counter("aab"),
                            "shape": torch.Size([2, 3]), "dtype": torch.float64, "device": torch.device("cpu")})
    o("checkpoint", [sorted(checkpoint), checkpoint["epoch"], checkpoint["loss"], sorted(checkpoint["tags"]),
                     checkpoint["counts"]["a"], checkpoint["shape"], checkpoint["dtype"], str(checkpoint["device"])])
    model2 = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.ReLU(), torch.nn.Linear(2, 1))
    optimizer2 = torch.optim.SGD(model2.parameters(), lr=0.5)
    model2.load_state_dict(checkpoint["model_state_dict"])
    optimizer2.load_state_dict(checkpoint["optimizer_state_dict"])
    model2.eval()
    o("restored", [model2(torch.ones(1, 3)), optimizer2.param_groups[0]["lr"], optimizer2.param_groups[0]["momentum"]])
    o.raises("numpy array", lambda: roundtrip({"x": np.ones(2)}), "Weights only load failed")
    o.raises("numpy scalar", lambda: roundtrip({"acc": np.float64(0.5)}), "Weights only load failed")
    o.raises("max result", lambda: roundtrip(torch.ones(2, 2).max(0)), "Weights only load failed")
    o.raises("frozenset", lambda: roundtrip(frozenset([1])), "Weights only load failed")
    o("numpy with weights_only=False", roundtrip({"x": np.ones(2)}, weights_only=False)["x"])
    o("tensors", [roundtrip(torch.arange(3)), roundtrip(torch.nn.Parameter(torch.ones(2))), roundtrip([torch.ones(1), (1, "x", None, True, 2.5, 1.5)]), type(roundtrip(b"raw")).__name__, str(roundtrip(1 + 2j))])


@program(rtol=1e-5, atol=1e-6)
def old_optimizer_code_with_the_alpha_overload(torch, o):
    model = torch.nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.2, -0.4, 0.1]]))
        model.bias.fill_(0.05)
    x = torch.linspace(-1, 1, 12).view(4, 3)
    y = torch.tensor([[0.5], [-0.5], [1.0], [0.0]])
    learning_rate = 0.1
    for step in range(4):
        model.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        for p in model.parameters():
            p.data.add_(-learning_rate, p.grad.data)
        o(f"loss {step}", loss.item())
    o("params", [model.weight, model.bias])
    a = torch.ones(2)
    g = torch.full((2,), 0.5)
    o("overloads", [a.add(2, g), a.sub(2, g), torch.add(a, 2, g), a.clone().sub_(2, g), a.add(g, alpha=2)])
    o.raises("alpha twice", lambda: a.add(2, g, alpha=3), "")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
