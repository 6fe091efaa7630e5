"""Conformance sweep, tutorial-style programs written fresh for the sweep (not copied from the
other sweep files): the autograd mechanics notes (retain_grad, tensor hooks, walking
``next_functions``, second derivatives with ``autograd.grad``), attention from scratch, gather/
topk/where, a character-level RNN/GRU/LSTM with gradient clipping, a DataLoader loop with
``random_split``, learning-rate schedulers and a state_dict through a BytesIO, BatchNorm and
Dropout in train and eval, d2l's softmax regression, MLP, weight decay and dropout from
scratch, transformer layers, transposed convolutions and interpolation, grad modes, module
introspection, printing tensors, VAE/GAN losses, custom Functions and checkpointing,
packed sequences through a bidirectional GRU, everyday tensor idioms and errors, and the
convolution gradients of ``torch.nn.grad`` in a hand-written backward.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Weights are filled deterministically
(``_fill``), so both libraries see the same numbers.
"""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from sweep_harness import check, node_name, registry

program = registry()


def _fill(torch, model):
    """Deterministic weights for every parameter of ``model``: a scaled sine of its index."""
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            n = p.numel()
            p.copy_((torch.sin(torch.arange(n, dtype=torch.float32) * (1.3 + i)) * 0.3).reshape(p.shape))


@program
def ut_autograd_mechanics(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    y.retain_grad()
    z = y.pow(2).sum()
    seen = []
    h = y.register_hook(lambda g: seen.append(g.clone()))
    z.backward(retain_graph=True)
    o("x.grad", x.grad)
    o("y.grad", y.grad)
    o("seen", seen)
    h.remove()
    o("leaf", [x.is_leaf, y.is_leaf, z.is_leaf])
    o("names", [node_name(z.grad_fn), node_name(y.grad_fn)])
    nf = z.grad_fn.next_functions
    o("nf", [(node_name(n), i) for n, i in nf])
    o("nf2", [(node_name(n), i) for n, i in nf[0][0].next_functions])
    o("nf3", [(node_name(n), i) for n, i in nf[0][0].next_functions[0][0].next_functions])
    o("repr y", repr(y))
    o("repr z", repr(z))
    o("node class", type(z.grad_fn).__name__)
    o("saved exp", z.grad_fn.next_functions[0][0]._saved_exponent)
    o("saved self", z.grad_fn.next_functions[0][0]._saved_self)
    o("saved other", y.grad_fn._saved_other)
    o("saved self_sizes", z.grad_fn._saved_self_sym_sizes)
    w = torch.ones(3)
    o("rg", w.requires_grad_() is w)
    o("w", w)
    v = x * x
    v.backward(gradient=torch.tensor([0.1, 1.0, 0.0001]))
    o("x.grad2", x.grad)
    o.raises("nonscalar", lambda: (x * 3).backward(), "grad can be implicitly created only for scalar outputs")
    o.warns(".grad of a non-leaf", lambda: (x * 3).grad, "is not a leaf Tensor")


@program
def ut_autograd_grad_second_derivatives(torch, o):
    x = torch.tensor([0.5, -1.0, 2.0], requires_grad=True)
    y = (x**3).sum()
    (g,) = torch.autograd.grad(y, x, create_graph=True)
    o("g", g)
    o("g.gf", node_name(g.grad_fn))
    (g2,) = torch.autograd.grad(g.sum(), x)
    o("g2", g2)
    o("grad() leaves x.grad", x.grad is None)
    y = torch.sin(x).sum()
    gs = torch.autograd.grad(y, [x], create_graph=True)
    o("gs type", type(gs).__name__)
    h = torch.autograd.grad(gs[0], x, grad_outputs=torch.ones_like(x))
    o("h", h)
    a = torch.tensor(2.0, requires_grad=True)
    b = torch.tensor(3.0, requires_grad=True)
    out = a * b
    o.raises(
        "unused",
        lambda: torch.autograd.grad(out, [a, torch.tensor(1.0, requires_grad=True)]),
        "appears to not have been used in the graph",
    )
    out = a * b
    o("allow_unused", torch.autograd.grad(out, [a, torch.tensor(1.0, requires_grad=True)], allow_unused=True))
    out = a * b
    o(
        "materialize",
        torch.autograd.grad(out, [a, torch.tensor(1.0, requires_grad=True)], allow_unused=True, materialize_grads=True),
    )
    out = a * b
    out.backward()
    o.raises("twice", lambda: out.backward(), "Trying to backward through the graph a second time")
    o.raises("no grad req", lambda: torch.tensor(1.0).backward(), "element 0 of tensors does not require grad")
    o("hessian", torch.autograd.functional.hessian(lambda t: (t**3).sum(), torch.tensor([1.0, 2.0])))


@program
def ut_attention_from_scratch(torch, o):
    F = torch.nn.functional
    B, T, C = 2, 4, 3
    q = torch.linspace(-1, 1, B * T * C).reshape(B, T, C).requires_grad_()
    k = torch.linspace(1, -0.5, B * T * C).reshape(B, T, C)
    v = torch.arange(B * T * C, dtype=torch.float32).reshape(B, T, C) / 10
    s = torch.bmm(q, k.transpose(1, 2)) / math.sqrt(C)
    mask = torch.triu(torch.ones(T, T, dtype=torch.bool), diagonal=1)
    o("mask", mask)
    s = s.masked_fill(mask, float("-inf"))
    o("s", s)
    o("s gf", node_name(s.grad_fn))
    a = F.softmax(s, dim=-1)
    o("a", a)
    o("a gf", node_name(a.grad_fn))
    o("a dim", a.grad_fn._saved_dim)  # -1 as passed, read as PyTorch's binding reads an int64
    o("k.T dims", [k.transpose(-2, -1).grad_fn is None, q.transpose(-2, -1).grad_fn._saved_dim0])
    out = torch.bmm(a, v)
    out.sum().backward()
    o("q.grad", q.grad)
    o("tril", torch.tril(torch.ones(3, 3)))
    o("triu neg", torch.triu(torch.arange(9.0).reshape(3, 3), diagonal=-1))
    o("einsum", torch.einsum("bij,bjk->bik", q.detach(), k.transpose(1, 2)))
    o("einsum2", torch.einsum("ii", torch.arange(9.0).reshape(3, 3)))
    o("einsum3", torch.einsum("i,j->ij", torch.arange(3.0), torch.arange(2.0)))
    o("einsum4", torch.einsum("bhqd,bhkd->bhqk", torch.ones(1, 2, 3, 4), torch.ones(1, 2, 5, 4)).shape)
    o.raises("bmm err2", lambda: torch.bmm(torch.ones(2, 3), torch.ones(3, 2)), "batch1 must be a 3D tensor")
    sdpa = F.scaled_dot_product_attention(q.detach(), k, v, is_causal=True)
    o("sdpa", sdpa)


@program
def ut_gather_topk_argmax_where(torch, o):
    x = torch.tensor([[0.1, 0.7, 0.2], [0.5, 0.3, 0.9], [0.4, 0.4, 0.1]], requires_grad=True)
    o("argmax", x.argmax(dim=1))
    o("argmax kd", x.argmax(dim=1, keepdim=True))
    o("argmax all", x.argmax())
    o("argmin", torch.argmin(x, 0))
    vals, idx = x.topk(2, dim=1)
    o("topk", (vals, idx))
    o("topk gf", node_name(vals.grad_fn))
    t = torch.topk(x, 2, largest=False)
    o("topk type", type(t).__name__)
    o("topk repr", repr(t))
    o("topk fields", (t.values, t.indices))
    m = x.max(dim=1)
    o("max repr", repr(m))
    g = torch.gather(x, 1, torch.tensor([[0], [2], [1]]))
    o("gather", g)
    o("gather gf", node_name(g.grad_fn))
    o("gsd", g.grad_fn._saved_dim)
    g.sum().backward()
    o("x.grad", x.grad)
    o("where", torch.where(x > 0.35, x, torch.zeros_like(x)))
    o("where scalar", torch.where(x > 0.35, x, 0.0))
    o("where1", torch.where(x > 0.35))
    o("where int", torch.where(torch.tensor([True, False]), 1, 0))
    o("where int2", torch.where(torch.tensor([True, False]), 1.5, 0))
    o("sort", torch.sort(x.detach(), dim=0, descending=True))
    o("kth", torch.kthvalue(x.detach(), 2, dim=1))
    o("scatter", torch.zeros(3, 3).scatter(1, torch.tensor([[0], [2], [1]]), 1.0))
    o("one_hot", torch.nn.functional.one_hot(torch.tensor([0, 2, 1]), 4))
    o("print", str(x))
    o("print d", str(x.detach()))
    o("print big", str(torch.arange(2000.0)))
    o("print int", str(torch.arange(12).reshape(3, 4)))
    o("print sci", str(torch.tensor([1e-8, 1.0, 1e6])))
    o("print bool", str(torch.tensor([True, False])))
    o("print double", str(torch.tensor([1.5, 2.25], dtype=torch.float64)))
    o("print empty", str(torch.empty(0, 3)))
    o("print scalar", str(torch.tensor(3.14159)))
    o("print grad", str(x * 2))
    o("print nan", str(torch.tensor([float("nan"), float("inf"), -float("inf"), 1.0])))


@program(1e-4, atol=1e-6)
def ut_char_rnn_gru_clip(torch, o):
    text = "hello world hello gradients "
    chars = sorted(set(text))
    stoi = {c: i for i, c in enumerate(chars)}
    data = torch.tensor([stoi[c] for c in text])
    V = len(chars)

    class CharRNN(torch.nn.Module):
        def __init__(self, cell):
            super().__init__()
            self.emb = torch.nn.Embedding(V, 5)
            self.rnn = getattr(torch.nn, cell)(5, 6, batch_first=True, num_layers=2)
            self.fc = torch.nn.Linear(6, V)

        def forward(self, x, h=None):
            out, h = self.rnn(self.emb(x), h)
            return self.fc(out), h

    for cell in ("RNN", "GRU", "LSTM"):
        m = CharRNN(cell)
        _fill(torch, m)
        o(f"{cell} print", str(m))
        o(f"{cell} names", [(n, tuple(p.shape)) for n, p in m.named_parameters()])
        opt = torch.optim.Adam(m.parameters(), lr=0.01)
        x = data[:-1].reshape(3, 9)
        y = data[1:].reshape(3, 9)
        for step in range(5):
            logits, h = m(x)
            loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), y.reshape(-1))
            opt.zero_grad()
            loss.backward()
            tn = torch.nn.utils.clip_grad_norm_(m.parameters(), 0.5)
            o(f"{cell} loss {step}", loss.item())
            o(f"{cell} tn {step}", tn)
        o(f"{cell} h", h)
        tv = torch.nn.utils.clip_grad_value_(m.parameters(), 0.01)
        o(f"{cell} clipv", tv)
        o(f"{cell} grad", m.fc.weight.grad)
        idx = torch.tensor([[stoi["h"]]])
        hh = None
        out = []
        with torch.no_grad():
            for _ in range(5):
                lg, hh = m(idx, hh)
                idx = lg[:, -1].argmax(-1, keepdim=True)
                out.append(chars[idx.item()])
        o(f"{cell} sample", "".join(out))


@program(1e-5, atol=1e-6)
def ut_dataloader_schedulers_save_load(torch, o):
    X = torch.linspace(-1, 1, 40).reshape(20, 2)
    Y = X[:, :1] * 2 - X[:, 1:] + 0.5
    ds = torch.utils.data.TensorDataset(X, Y)
    o("len", len(ds))
    o("item", ds[3])
    g = torch.Generator().manual_seed(0)
    tr, va = torch.utils.data.random_split(ds, [16, 4], generator=g)
    o("split lens", (len(tr), len(va)))
    o("split types", type(tr).__name__)
    tr2, va2 = torch.utils.data.random_split(ds, [0.75, 0.25])
    o("frac lens", (len(tr2), len(va2)))
    dl = torch.utils.data.DataLoader(ds, batch_size=6, shuffle=False)
    o("n batches", len(dl))
    o("batches", [(xb.shape, yb.shape) for xb, yb in dl])
    dl2 = torch.utils.data.DataLoader(ds, batch_size=6, drop_last=True)
    o("n batches drop", len(dl2))
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, 0.2]]))
        model.bias.zero_()
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    lrs = []
    for epoch in range(6):
        for xb, yb in dl:
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
        sched.step()
        lrs.append(sched.get_last_lr())
    o("lrs", lrs)
    o("w", model.weight)
    o("sched sd", sched.state_dict())
    opt2 = torch.optim.SGD(model.parameters(), lr=0.1)
    cos = torch.optim.lr_scheduler.CosineAnnealingLR(opt2, T_max=5, eta_min=0.01)
    l2 = []
    for _ in range(8):
        opt2.step()
        cos.step()
        l2.append(opt2.param_groups[0]["lr"])
    o("cos", l2)
    opt3 = torch.optim.Adam(model.parameters(), lr=0.1)
    one = torch.optim.lr_scheduler.OneCycleLR(opt3, max_lr=0.5, total_steps=10)
    l3 = []
    for _ in range(10):
        opt3.step()
        one.step()
        l3.append((opt3.param_groups[0]["lr"], opt3.param_groups[0]["betas"]))
    o("onecycle", l3)
    o.raises("onecycle over", lambda: (opt3.step(), one.step()), "Tried to step")
    buf = io.BytesIO()
    torch.save(model.state_dict(), buf)
    buf.seek(0)
    sd = torch.load(buf)
    o("sd keys", list(sd.keys()))
    o("sd", sd)
    o("sd type", type(sd).__name__)
    m2 = torch.nn.Linear(2, 1)
    o("load res", str(m2.load_state_dict(sd)))
    o("m2 w", m2.weight)
    buf2 = io.BytesIO()
    torch.save({"opt": opt.state_dict(), "epoch": 6}, buf2)
    buf2.seek(0)
    ck = torch.load(buf2, weights_only=True)
    o("ck", ck["opt"]["param_groups"])
    o("ck state keys", list(ck["opt"]["state"].keys()))
    o("ck mom", ck["opt"]["state"][0])


@program
def ut_bn_dropout_eval_train(torch, o):
    torch.manual_seed(0)
    net = torch.nn.Sequential(
        torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU(), torch.nn.Dropout(0.5), torch.nn.Linear(4, 2)
    )
    _fill(torch, net)
    o("print", str(net))
    o("repr bn", repr(net[1]))
    o("repr do", repr(net[3]))
    o("training", [m.training for m in net.modules()])
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.3, -0.7], [-0.2, 0.8, 1.1], [0.9, -0.4, 0.0]])
    net.train()
    h = net[2](net[1](net[0](x)))
    o("h train", h)
    o("rm", net[1].running_mean)
    o("rv", net[1].running_var)
    o("nbt", net[1].num_batches_tracked)
    net.eval()
    o("training2", [m.training for m in net.modules()])
    o("eval out", net(x))
    o("eval drop identity", torch.equal(net[3](x), x))
    o("sd keys", list(net.state_dict().keys()))
    o("buffers", [n for n, _ in net.named_buffers()])
    o("children", [type(c).__name__ for c in net.children()])
    o("named_modules", [n for n, _ in net.named_modules()])
    o("num params", sum(p.numel() for p in net.parameters() if p.requires_grad))

    def init_fn(m):
        if type(m) == torch.nn.Linear:
            torch.nn.init.constant_(m.weight, 0.01)
            torch.nn.init.zeros_(m.bias)

    o("apply ret", net.apply(init_fn) is net)
    o("w", net[0].weight)
    torch.nn.init.ones_(net[1].weight)
    o("xavier shape", torch.nn.init.xavier_uniform_(torch.empty(3, 5)).shape)
    o("gain", torch.nn.init.calculate_gain("leaky_relu", 0.2))
    o("gain tanh", torch.nn.init.calculate_gain("tanh"))
    o("eye", torch.nn.init.eye_(torch.empty(2, 3)))
    o("dirac", torch.nn.init.dirac_(torch.empty(2, 2, 3)))
    o("normal shape", torch.normal(0, 0.01, size=(3, 2)).shape)
    o("normal t", torch.normal(torch.zeros(3), torch.ones(3)).shape)
    o("normal dtype", torch.normal(0.0, 1.0, (2,)).dtype)
    p = torch.nn.Parameter(torch.ones(2))
    o("param repr", repr(p))
    o("param str", str(p))
    o("np", str(list(net[4].named_parameters())))
    o("bn extra", net[1].extra_repr())
    o.raises("drop p", lambda: torch.nn.Dropout(1.5), "dropout probability has to be between 0 and 1")
    X = torch.ones(4, 3)
    mask = (torch.rand(X.shape) > 0.5).float()
    o("mask dtype", mask.dtype)


@program
def ut_d2l_softmax_mlp_weight_decay(torch, o):
    X = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]])
    o("sum0", X.sum(0, keepdim=True))
    o("sum1", X.sum(1, keepdim=True))

    def softmax(X):
        X_exp = torch.exp(X)
        partition = X_exp.sum(1, keepdim=True)
        return X_exp / partition

    W = torch.tensor([[0.01, -0.02], [0.03, 0.0], [-0.01, 0.02]], requires_grad=True)
    b = torch.zeros(2, requires_grad=True)
    y = torch.tensor([0, 1])
    y_hat = softmax(X @ W + b)
    o("yhat", y_hat)
    o("picked", y_hat[[0, 1], y])
    ce = -torch.log(y_hat[range(len(y_hat)), y])
    o("ce", ce)
    o("ce gf", node_name(ce.grad_fn))
    l = ce.mean() + 0.01 * (W**2).sum() / 2
    l.backward()
    o("W.grad", W.grad)
    o("b.grad", b.grad)

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    o("acc", accuracy(y_hat, y))

    def relu(X):
        a = torch.zeros_like(X)
        return torch.max(X, a)

    Z = torch.tensor([[-1.0, 2.0], [0.0, -0.5]], requires_grad=True)
    r = relu(Z)
    r.sum().backward()
    o("relu", r)
    o("relu gf", node_name(r.grad_fn))
    o("Z.grad", Z.grad)

    def dropout_layer(X, dropout):
        assert 0 <= dropout <= 1
        if dropout == 1:
            return torch.zeros_like(X)
        mask = (torch.arange(X.numel()).reshape(X.shape) % 3 != 0).float()
        return mask * X / (1.0 - dropout)

    o("dropout", dropout_layer(torch.arange(16, dtype=torch.float32).reshape((2, 8)), 0.5))
    o("dropout1", dropout_layer(torch.ones(2, 2), 1.0))
    net = torch.nn.Linear(3, 1)
    trainer = torch.optim.SGD([{"params": net.weight, "weight_decay": 3}, {"params": net.bias}], lr=0.003)
    o("pg", [{k: v for k, v in g.items() if k != "params"} for g in trainer.param_groups])
    o("l2", (W**2).sum() / 2)
    o("norm", torch.norm(W))
    o("norm1", W.norm(p=1))
    o("normfro", torch.linalg.norm(W))
    o("mvn", torch.mv(torch.ones(2, 3), torch.arange(3.0)))
    o("dot", torch.dot(torch.arange(3.0), torch.ones(3)))
    o("cumsum", X.cumsum(axis=0))
    o("numel", X.numel())
    o("A/sum", X / X.sum(axis=1, keepdim=True))


@program(1e-5, atol=1e-6)
def ut_transformer_layers(torch, o):
    layer = torch.nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16, dropout=0.0, batch_first=True)
    _fill(torch, layer)
    o("repr", str(layer))
    x = torch.linspace(-1, 1, 2 * 5 * 8).reshape(2, 5, 8)
    y = layer(x)
    o("y", y)
    mask = torch.nn.Transformer.generate_square_subsequent_mask(5)
    o("mask", mask)
    y2 = layer(x, src_mask=mask)
    o("y2", y2)
    enc = torch.nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False)
    o("enc names", [n for n, _ in enc.named_parameters()][:6])
    mha = torch.nn.MultiheadAttention(8, 2, batch_first=True)
    _fill(torch, mha)
    out, w = mha(x, x, x)
    o("mha", (out, w))
    out, w = mha(x, x, x, need_weights=True, average_attn_weights=False)
    o("mha w", w.shape)
    kpm = torch.tensor([[False] * 5, [False, False, False, True, True]])
    out, w = mha(x, x, x, key_padding_mask=kpm)
    o("mha kpm", (out, w))
    out.sum().backward()
    o("grad", mha.in_proj_weight.grad)
    o("mha repr", repr(mha))


@program(1e-5, atol=1e-6)
def ut_conv_upsample_interpolate(torch, o):
    F = torch.nn.functional
    x = torch.linspace(-1, 1, 2 * 3 * 4 * 4).reshape(2, 3, 4, 4).requires_grad_()
    ct = torch.nn.ConvTranspose2d(3, 2, 3, stride=2, padding=1, output_padding=1)
    _fill(torch, ct)
    y = ct(x)
    o("ct", y)
    o("ct gf", node_name(y.grad_fn))
    for mode in ("nearest", "bilinear", "bicubic"):
        kw = {} if mode == "nearest" else {"align_corners": False}
        o(mode, F.interpolate(x, scale_factor=2, mode=mode, **kw))
    o("size", F.interpolate(x, size=(3, 5), mode="bilinear", align_corners=True))
    up = torch.nn.Upsample(scale_factor=2, mode="nearest")
    o("up repr", repr(up))
    z = up(x)
    o("up gf", node_name(z.grad_fn))
    z.sum().backward()
    o("x.grad", x.grad)
    o("pixel", F.pixel_shuffle(torch.arange(16.0).reshape(1, 4, 2, 2), 2))
    o("avgpool", F.adaptive_avg_pool2d(x, (1, 1)).shape)
    o("unfold", F.unfold(x, kernel_size=2).shape)
    o("pad", F.pad(x[:1, :1, :2, :2], (1, 1, 0, 1), mode="constant", value=-1.0))
    o("pad reflect", F.pad(x[:1, :1], (1, 1, 1, 1), mode="reflect"))
    o("pad rep", F.pad(x[:1, :1], (1, 2, 0, 1), mode="replicate"))


@program
def ut_grad_modes_and_data(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)

    @torch.no_grad()
    def f(t):
        return t * 2

    o("deco", f(x))
    with torch.set_grad_enabled(False):
        o("sge", x * 2)
    o("is_enabled", torch.is_grad_enabled())
    with torch.no_grad():
        with torch.enable_grad():
            o("enable", x * 2)
    with torch.inference_mode():
        y = x * 2
    o("inf", y)
    o("is_inf", y.is_inference())
    o.raises("inf bw", lambda: (y * x).sum().backward(), "Inference tensors cannot be saved for backward")
    d = x.data
    o("data", d)
    o("data leaf", d.is_leaf)
    d[0] = 5.0
    o("x after data edit", x)
    (x * x).sum().backward()
    o("grad", x.grad)
    x.grad.zero_()
    o("zeroed", x.grad)
    x.grad = None
    det = x.detach()
    det.add_(1)
    o("x after det", x)
    o.raises(
        "inplace leaf", lambda: x.add_(1), "a leaf Variable that requires grad is being used in an in-place operation."
    )
    with torch.autograd.detect_anomaly():
        z = (x * 3).sum()
        z.backward()
    o("anom grad", x.grad)
    o("version", x._version)
    t = torch.ones(3)
    t.add_(1)
    t.mul_(2)
    o("t version", t._version)
    o("cuda", torch.cuda.is_available())
    o("device", str(torch.device("cpu")))
    o("dev", str(x.device))
    o("to", x.to("cpu") is x)
    o("x.to dtype", x.to(torch.float64))
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    o("dev2", repr(dev))
    n = np.arange(3.0)
    t = torch.from_numpy(n)
    n[0] = 9
    o("shared", t)
    tn = torch.ones(2).numpy()
    o("np", tn)
    o.raises("np rg", lambda: x.numpy(), "Can't call numpy() on Tensor that requires grad")
    o("as_tensor", torch.as_tensor([1, 2]).dtype)
    o("tolist", torch.tensor([[1.5, 2], [3, 4]]).tolist())
    o("item int", torch.tensor([7]).item())
    o.raises("item many", lambda: torch.tensor([1, 2]).item(), "a Tensor with 2 elements cannot be converted to Scalar")


@program
def ut_module_introspection(torch, o):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = torch.nn.Conv2d(1, 4, 3)
            self.pool = torch.nn.MaxPool2d(2, 2)
            self.fc = torch.nn.Linear(4 * 3 * 3, 10)
            self.register_buffer("step", torch.tensor(0))
            self.blocks = torch.nn.ModuleList([torch.nn.Linear(10, 10) for _ in range(2)])
            self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(10, 2), "b": torch.nn.Identity()})
            self.scale = torch.nn.Parameter(torch.ones(1))

        def forward(self, x):
            x = self.pool(torch.relu(self.conv1(x)))
            x = torch.flatten(x, 1)
            x = self.fc(x)
            for b in self.blocks:
                x = b(x)
            return self.heads["a"](x) * self.scale

    net = Net()
    _fill(torch, net)
    o("print", str(net))
    o("names", [(n, tuple(p.shape), p.requires_grad) for n, p in net.named_parameters()])
    o("sd", list(net.state_dict().keys()))
    x = torch.linspace(0, 1, 2 * 64).reshape(2, 1, 8, 8)
    y = net(x)
    o("y", y)
    o("gf", node_name(y.grad_fn))
    o("get_submodule", repr(net.get_submodule("blocks.1")))
    o("get_parameter", net.get_parameter("heads.a.bias"))
    o("count", sum(p.numel() for p in net.parameters()))
    net.requires_grad_(False)
    o("frozen", [p.requires_grad for p in net.parameters()][:3])
    net.zero_grad(set_to_none=True)
    o("half", net.half().fc.weight.dtype)
    o("double", net.double().fc.weight.dtype)
    o("float", net.float().fc.bias.dtype)
    o("extra", net.conv1.extra_repr())
    o("pool extra", net.pool.extra_repr())
    o("dir has", "fc" in dir(net))
    o.raises("missing attr", lambda: net.nope, "'Net' object has no attribute 'nope'")
    o("modules", len(list(net.modules())))
    o("seq slice", str(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.Sigmoid())[1:]))
    from collections import OrderedDict

    s = torch.nn.Sequential(OrderedDict([("lin", torch.nn.Linear(2, 2)), ("act", torch.nn.GELU(approximate="tanh"))]))
    o("od seq", str(s))
    o("od seq attr", repr(s.act))
    s.add_module("out", torch.nn.Softmax(dim=-1))
    o("add", str(s))
    s.append(torch.nn.Flatten())
    o("append", str(s))
    o("len", len(s))
    o("insert repr", repr(torch.nn.ModuleList([torch.nn.ReLU()] * 3)))
    o("emb", repr(torch.nn.Embedding(10, 3, padding_idx=0)))
    o("ln", repr(torch.nn.LayerNorm([4, 5], elementwise_affine=False)))
    o("lstm", repr(torch.nn.LSTM(3, 4, num_layers=2, dropout=0.1, bidirectional=True)))
    o(
        "conv",
        repr(torch.nn.Conv2d(3, 8, (3, 5), stride=2, padding="same" if False else 1, bias=False, groups=1, dilation=2)),
    )
    o("convpad", repr(torch.nn.Conv1d(3, 6, 3, padding="same", groups=3, padding_mode="reflect")))
    o("loss", repr(torch.nn.CrossEntropyLoss(label_smoothing=0.1, ignore_index=3)))
    o("bce", repr(torch.nn.BCEWithLogitsLoss(pos_weight=torch.ones(2))))


@program
def ut_tensor_basics_printing(torch, o):
    x = torch.arange(12, dtype=torch.float32).reshape(3, 4)
    o("stride", x.stride())
    o("T stride", x.T.stride())
    o("contig", x.T.is_contiguous())
    o("offset", x[1:, 2:].storage_offset())
    o("esize", x.element_size())
    o("nbytes", x.nbytes)
    o("itemsize", x.itemsize)
    o("shape repr", repr(x.shape))
    o("size", x.size(-1))
    o("ndim", x.ndim)
    o("dim", x.dim())
    o.raises("view err", lambda: x.T.view(12), "view size is not compatible with input tensor's size and stride")
    o("expand stride", x[:1].expand(5, 4).stride())
    o("repr i32", repr(torch.tensor([1, 2], dtype=torch.int32)))
    o("repr f64", repr(torch.tensor([1.0, 2.0], dtype=torch.float64)))
    o("repr half", repr(torch.tensor([1.0, 2.0], dtype=torch.half)))
    o("repr u8", repr(torch.tensor([1, 2], dtype=torch.uint8)))
    o("repr empty i", repr(torch.tensor([], dtype=torch.long)))
    o("repr empty", repr(torch.tensor([])))
    o("repr rg", repr(torch.ones(2, requires_grad=True)))
    o("repr gf", repr(torch.ones(2, requires_grad=True) * 2))
    o("repr f64 rg", repr(torch.ones(2, dtype=torch.float64, requires_grad=True).sum()))
    o("repr 3d", repr(torch.arange(24.0).reshape(2, 3, 4) / 7))
    o("repr wide", repr(torch.linspace(0, 1, 30)))
    o("repr large", repr(torch.tensor([123456789.0, 1.0])))
    o("repr ints float", repr(torch.tensor([1.0, 2.0, 300.0])))
    o("repr neg zero", repr(torch.tensor([-0.0, 0.0])))
    o("repr small", repr(torch.tensor([0.0001, 0.001])))
    o("repr longs", repr(torch.tensor([10**12, -5])))
    o("repr complex?", repr(torch.tensor([[1e-5, 2.5e3], [7.0, 8.0]])))
    torch.set_printoptions(precision=2)
    o("prec2", repr(torch.tensor([1.23456, 2.0])))
    torch.set_printoptions(sci_mode=True)
    o("sci", repr(torch.tensor([1.23456, 2.0])))
    torch.set_printoptions(profile="default")
    o("default", repr(torch.tensor([1.23456, 2.0])))
    torch.set_printoptions(threshold=5, edgeitems=1)
    o("thresh", repr(torch.arange(10.0)))
    torch.set_printoptions(profile="default")
    o("linewidth", repr(torch.arange(40.0)))
    o("fmt", f"{torch.tensor(2.5):.3f}")
    o("fmt int", f"{torch.tensor(3)}")
    o.raises(
        "fmt vec", lambda: f"{torch.tensor([2.5, 1.0]):.3f}", "unsupported format string passed to Tensor.__format__"
    )
    o("max repr", repr(torch.tensor([[1.0, 5.0], [3.0, 2.0]]).max(dim=0)))
    o("size repr", repr(torch.Size([2, 3])))
    o("size str", str(torch.ones(2, 3).size()))
    o("dtype repr", repr(torch.float32))
    o("dtype str", str(torch.long))
    o("bool str", str(torch.ones(2) > 0))
    o("int div", torch.tensor([5, -5]) // 2)
    o("int true div", torch.tensor([5, -5]) / 2)
    o("fmod", torch.fmod(torch.tensor([5.0, -5.0]), 3))
    o("rem", torch.remainder(torch.tensor([5.0, -5.0]), 3))
    o("pow int", torch.tensor([2, 3]) ** 2)
    o("pow neg", torch.tensor([2.0]) ** -1)
    o.raises("int neg pow", lambda: torch.tensor([2, 3]) ** -1, "Integers to negative integer powers are not allowed")
    o("round", torch.round(torch.tensor([0.5, 1.5, 2.5, -0.5])))
    o("round dec", torch.round(torch.tensor([1.2345]), decimals=2))
    o("clamp", torch.tensor([1, 5, 9]).clamp(2, 6))
    o("clamp f", torch.tensor([1, 5, 9]).clamp(2.5))
    o.raises("mean int", lambda: torch.tensor([1, 2]).mean(), "mean(): could not infer output dtype")
    o("sum bool", torch.tensor([True, True]).sum())
    o("sum int8", torch.tensor([100, 100], dtype=torch.int8).sum())
    o("cumsum i8", torch.tensor([100, 100], dtype=torch.int8).cumsum(0))
    o("prod i", torch.tensor([3, 4]).prod())
    o("std", torch.tensor([1.0, 2.0, 4.0]).std())
    o("std unbiased", torch.tensor([1.0, 2.0, 4.0]).std(unbiased=False))
    o("var corr", torch.tensor([1.0, 2.0, 4.0]).var(correction=0))
    o("median even", torch.tensor([1.0, 4.0, 2.0, 3.0]).median())
    o("quantile", torch.quantile(torch.tensor([1.0, 4.0, 2.0, 3.0]), 0.5))
    o("hist", torch.histc(torch.tensor([1.0, 2.0, 1.0]), bins=4, min=0, max=3))
    o("unique", torch.unique(torch.tensor([3, 1, 3, 2]), return_counts=True))
    o("unique_consecutive", torch.unique_consecutive(torch.tensor([1, 1, 2, 2, 1])))
    o("argsort", torch.argsort(torch.tensor([3.0, 1.0, 2.0]), descending=True))
    o("nonzero", torch.nonzero(torch.tensor([[0, 1], [1, 1]])))
    o("nonzero tuple", torch.nonzero(torch.tensor([[0, 1], [1, 1]]), as_tuple=True))
    o("allclose", torch.allclose(torch.tensor([1.0]), torch.tensor([1.0 + 1e-9])))
    o("isclose", torch.isclose(torch.tensor([1.0, float("nan")]), torch.tensor([1.0, float("nan")]), equal_nan=True))
    o("chunk", torch.arange(7).chunk(3))
    o("split", torch.arange(7).split([2, 5]))
    o("tensor_split", torch.tensor_split(torch.arange(7), 3))
    o("meshgrid", torch.meshgrid(torch.arange(2), torch.arange(3), indexing="ij"))
    o("cartesian", torch.cartesian_prod(torch.arange(2), torch.arange(2)))
    o("combinations", torch.combinations(torch.arange(3)))
    o("bucketize", torch.bucketize(torch.tensor([0.5, 1.5]), torch.tensor([0.0, 1.0, 2.0])))
    o("searchsorted", torch.searchsorted(torch.tensor([0.0, 1.0, 2.0]), torch.tensor([0.5, 2.0]), right=True))
    o("flatten", torch.arange(8).reshape(2, 2, 2).flatten(start_dim=1))
    o("rot90", torch.rot90(torch.arange(4).reshape(2, 2)))
    o("block", torch.block_diag(torch.ones(1, 1), torch.ones(2, 2) * 2))
    o("vander", torch.vander(torch.tensor([1, 2, 3]), N=3))
    o("outer", torch.outer(torch.arange(2.0), torch.arange(3.0)))
    o("kron", torch.kron(torch.eye(2), torch.ones(2, 2)))
    o("trace", torch.arange(9.0).reshape(3, 3).trace())
    o("logspace", torch.logspace(0, 2, 3))
    o("arange f", torch.arange(0, 1, 0.1))
    o("full int", torch.full((2,), 7))
    o("full bool", torch.full((2,), True))
    o("full f", torch.full((2,), 7.0))
    o("empty_like dtype", torch.empty_like(torch.ones(2, dtype=torch.int64)).dtype)
    o("randint dtype", torch.randint(0, 5, (3,)).dtype)
    o("randperm", torch.randperm(4).sort().values)
    o("rand_like", torch.rand_like(torch.ones(2, dtype=torch.float64)).dtype)
    o("multinomial shape", torch.multinomial(torch.tensor([0.2, 0.8]), 5, replacement=True).shape)
    o("bernoulli", torch.bernoulli(torch.tensor([0.0, 1.0])))


@program(1e-5, atol=1e-6)
def ut_vae_and_gan_snippets(torch, o):
    F = torch.nn.functional
    enc = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.LeakyReLU(0.2), torch.nn.Linear(6, 4))
    _fill(torch, enc)
    x = torch.linspace(0, 1, 12).reshape(3, 4)
    h = enc(x)
    mu, logvar = h.chunk(2, dim=-1)
    o("mu", mu)
    o("mu gf", node_name(mu.grad_fn))
    eps = torch.ones_like(mu) * 0.5
    z = mu + eps * torch.exp(0.5 * logvar)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    rec = F.binary_cross_entropy(torch.sigmoid(z.repeat(1, 2)), x, reduction="sum")
    loss = rec + kld
    loss.backward()
    o("loss", loss)
    o("grad", enc[0].weight.grad)
    d = torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Sigmoid())
    _fill(torch, d)
    real = torch.ones(3, 1)
    fake = torch.zeros(3, 1)
    bce = torch.nn.BCELoss()
    o("d loss", bce(d(x), real) + bce(d(x.detach() * 0.5), fake))
    o(
        "bce logits",
        F.binary_cross_entropy_with_logits(h, torch.ones_like(h), pos_weight=torch.tensor([1.0, 2.0, 1.0, 1.0])),
    )
    xg = x.clone().requires_grad_()
    o("gp", torch.autograd.grad(d(xg).sum(), xg, create_graph=True)[0].norm(2, dim=1))
    o("clamp_", [p.data.clamp_(-0.01, 0.01).max().item() for p in d.parameters()])
    o("kl_div", F.kl_div(F.log_softmax(h, -1), F.softmax(x, -1), reduction="batchmean"))
    o("smooth_l1", F.smooth_l1_loss(h, x, beta=0.5))
    o("huber", F.huber_loss(h, x, delta=0.5))
    o("cos emb", F.cosine_embedding_loss(h, x, torch.tensor([1, -1, 1])))
    o("margin", F.margin_ranking_loss(h[:, 0], x[:, 0], torch.tensor([1.0, -1.0, 1.0])))
    o("triplet", F.triplet_margin_loss(h, x, x.flip(0)))
    o("nll weight", F.nll_loss(F.log_softmax(h, 1), torch.tensor([0, 3, 1]), weight=torch.tensor([1.0, 2.0, 3.0, 4.0])))
    o("ce probs", F.cross_entropy(h, F.softmax(x, 1)))
    o("ce smooth", F.cross_entropy(h, torch.tensor([0, 3, 1]), label_smoothing=0.1))
    o("ce ignore", F.cross_entropy(h, torch.tensor([0, -100, 1])))
    o("ce 3d", F.cross_entropy(h.reshape(3, 2, 2), torch.tensor([[0, 1], [1, 1], [0, 0]])))
    o("mse none", F.mse_loss(h, x, reduction="none").shape)
    o("l1", torch.nn.L1Loss()(h, x))
    o("poisson", F.poisson_nll_loss(h, x))
    o("gauss", F.gaussian_nll_loss(h, x, torch.ones_like(x)))


@program(1e-5, atol=1e-6)
def ut_custom_function_and_checkpoint(torch, o):
    class MyReLU(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return input.clamp(min=0)

        @staticmethod
        def backward(ctx, grad_output):
            (input,) = ctx.saved_tensors
            grad_input = grad_output.clone()
            grad_input[input < 0] = 0
            return grad_input

    x = torch.tensor([-1.0, 0.5, 2.0], requires_grad=True)
    y = MyReLU.apply(x)
    o("y", y)
    o("gf", type(y.grad_fn).__name__)
    o("name", y.grad_fn.name())
    y.sum().backward()
    o("grad", x.grad)
    o(
        "gradcheck",
        torch.autograd.gradcheck(
            MyReLU.apply, (torch.tensor([-1.0, 0.5, 2.0], dtype=torch.float64, requires_grad=True),)
        ),
    )

    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, k):
            ctx.k = k
            return x * k

        @staticmethod
        def backward(ctx, g):
            return g * ctx.k, None

    x.grad = None
    z = Scale.apply(x, 3.0)
    z.sum().backward()
    o("scale grad", x.grad)

    class Bad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g, g

    o.raises(
        "wrong count",
        lambda: torch.autograd.grad(Bad.apply(x).sum(), x),
        "returned an incorrect number of gradients (expected 1, got 2)",
    )
    lin = torch.nn.Linear(3, 3)
    _fill(torch, lin)
    cp = torch.utils.checkpoint.checkpoint(lin, x.unsqueeze(0), use_reentrant=False)
    o("checkpoint", cp)
    cp.sum().backward()
    o("cp grad", lin.weight.grad)
    o(
        "seq cp",
        torch.utils.checkpoint.checkpoint_sequential(
            torch.nn.Sequential(lin, torch.nn.ReLU()), 2, x.unsqueeze(0), use_reentrant=False
        ),
    )
    with torch.autograd.graph.saved_tensors_hooks(lambda t: t * 1, lambda t: t):
        w = (x * x).sum()
    w.backward()
    o("hooks grad", x.grad)
    o(
        "functional vjp",
        torch.autograd.functional.vjp(lambda t: t**2, torch.tensor([1.0, 2.0]), torch.tensor([1.0, 1.0])),
    )
    o(
        "functional jvp",
        torch.autograd.functional.jvp(lambda t: t**2, torch.tensor([1.0, 2.0]), torch.tensor([1.0, 0.0])),
    )
    o(
        "jacobian",
        torch.autograd.functional.jacobian(lambda a, b: a * b, (torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]))),
    )
    o("func.grad", torch.func.grad(lambda t: (t**3).sum())(torch.tensor([1.0, 2.0])))
    o("vmap", torch.vmap(lambda t: t.dot(t))(torch.arange(6.0).reshape(3, 2)))


@program(1e-5, atol=1e-6)
def ut_seq2seq_embeddings_packing(torch, o):
    nn = torch.nn
    emb = nn.Embedding(10, 4, padding_idx=0)
    _fill(torch, emb)
    o("emb pad row", emb.weight[0])
    seqs = [torch.tensor([3, 4, 5]), torch.tensor([6, 7]), torch.tensor([8])]
    padded = nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    o("padded", padded)
    lengths = torch.tensor([3, 2, 1])
    packed = nn.utils.rnn.pack_padded_sequence(emb(padded), lengths, batch_first=True, enforce_sorted=True)
    o("packed data shape", packed.data.shape)
    o("batch sizes", packed.batch_sizes)
    gru = nn.GRU(4, 5, batch_first=True, bidirectional=True)
    _fill(torch, gru)
    out, h = gru(packed)
    unpacked, lens = nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    o("unpacked", unpacked)
    o("lens", lens)
    o("h", h)
    (unpacked.sum() + h.sum()).backward()
    o("emb grad", emb.weight.grad)
    o("emb grad pad", emb.weight.grad[0])
    dec = nn.LSTMCell(4, 5)
    _fill(torch, dec)
    hx, cx = torch.zeros(3, 5), torch.zeros(3, 5)
    outs = []
    for t in range(2):
        hx, cx = dec(emb(padded[:, t]), (hx, cx))
        outs.append(hx)
    o("cell outs", torch.stack(outs, 1))
    att = torch.bmm(torch.stack(outs, 1), unpacked[:, :, :5].transpose(1, 2))
    o("att", torch.softmax(att.masked_fill(padded[:, None, :] == 0, -1e9), dim=-1))
    o("emb from_pretrained", nn.Embedding.from_pretrained(torch.eye(3), freeze=True).weight.requires_grad)
    o("embbag", nn.functional.embedding_bag(torch.tensor([1, 2, 4, 5]), torch.eye(6), torch.tensor([0, 2]), mode="sum"))
    o("one_hot", nn.functional.one_hot(padded).shape)


@program
def ut_misc_tensor_idioms(torch, o):
    x = torch.arange(12.0).reshape(3, 4)
    o("x[None]", x[None].shape)
    o("x[..., None]", x[..., None].shape)
    o("bool idx set", (lambda t: (t.__setitem__(t > 5, 0.0), t)[1])(x.clone()))
    o("index_put", x.clone().index_put_((torch.tensor([0, 2]), torch.tensor([1, 3])), torch.tensor(-1.0)))
    o("masked_select", torch.masked_select(x, x > 8))
    o("take", torch.take(x, torch.tensor([0, 5, 11])))
    o("take_along", torch.take_along_dim(x, torch.tensor([[0], [1], [2]]), dim=1))
    o("repeat", x[:1].repeat(2, 2))
    o("tile", torch.tile(x[:1], (2,)))
    o("expand_as", x[:1].expand_as(x).sum())
    o("new_ones", x.new_ones(2).dtype)
    o("new_tensor", x.new_tensor([1, 2]).dtype)
    o("new_full", x.new_full((2,), 3))
    o("type_as", torch.tensor([1, 2]).type_as(x))
    o("view_as", x.view_as(torch.ones(4, 3)).shape)
    o("chunk uneven", [c.shape for c in torch.arange(10).chunk(4)])
    o("diag", torch.diag(torch.tensor([1.0, 2.0])))
    o("diag_embed", torch.diag_embed(torch.ones(2, 2)).shape)
    o("tril_indices", torch.tril_indices(3, 3))
    o("triu_indices", torch.triu_indices(3, 3, 1))
    o("clone contig", x.t().clone().is_contiguous())
    o("addmm", torch.addmm(torch.ones(3), x[:, :2], torch.ones(2, 3)))
    o("baddbmm", torch.baddbmm(torch.zeros(2, 2, 2), torch.ones(2, 2, 3), torch.ones(2, 3, 2), alpha=0.5).sum())
    o("lerp", torch.lerp(torch.zeros(2), torch.ones(2), 0.3))
    o("addcdiv", torch.addcdiv(torch.zeros(2), torch.ones(2), torch.tensor([2.0, 4.0]), value=2))
    o("sign", torch.sign(torch.tensor([-2.0, 0.0, 3.0])))
    o("sgn", torch.tensor([-0.0]).sign())
    o("floor_divide", torch.floor_divide(torch.tensor([-7, 7]), 2))
    o(
        "div modes",
        (
            torch.div(torch.tensor([-7.0, 7.0]), 2, rounding_mode="trunc"),
            torch.div(torch.tensor([-7, 7]), 2, rounding_mode="floor"),
        ),
    )
    o("bitwise", torch.tensor([5]) & 3)
    o("shift", torch.tensor([1]) << 3)
    o("logical", torch.logical_and(torch.tensor([True, False]), torch.tensor([True, True])))
    o("any all", (torch.tensor([0, 1]).any(), torch.tensor([0, 1]).all()))
    o("count_nonzero", torch.count_nonzero(x, dim=0))
    o("nan_to_num", torch.nan_to_num(torch.tensor([float("nan"), float("inf")]), nan=0.0, posinf=9.0))
    o("isnan", torch.isnan(torch.tensor([float("nan"), 1.0])))
    o("numel", torch.numel(x))
    o("is_tensor", torch.is_tensor(x))
    o("is_fp", torch.is_floating_point(x))
    o("std_mean", torch.std_mean(x, dim=1))
    o("aminmax", torch.aminmax(x))
    o("cummax", torch.cummax(torch.tensor([1, 3, 2]), 0))
    o("heaviside", torch.heaviside(torch.tensor([-1.0, 0.0, 2.0]), torch.tensor(0.5)))
    o("clip", torch.clip(x, 2, 5))
    o("frac", torch.frac(torch.tensor([1.5, -1.5])))
    o("atan2", torch.atan2(torch.tensor([1.0]), torch.tensor([-1.0])))
    o("hypot", torch.hypot(torch.tensor([3.0]), torch.tensor([4.0])))
    o("xlogy", torch.xlogy(torch.tensor([0.0, 2.0]), torch.tensor([0.0, 3.0])))
    o("erf", torch.erf(torch.tensor([0.5])))
    o("lgamma", torch.lgamma(torch.tensor([3.5])))
    o("sigmoid int", torch.sigmoid(torch.tensor([0, 1])))
    o("mean of ints via float", torch.tensor([1, 2]).float().mean())
    o("max of two", torch.max(torch.tensor([1, 5]), torch.tensor([3, 2])))
    o("min all int", torch.tensor([4, 2]).min())
    o("sum dtype", torch.tensor([1, 2], dtype=torch.int32).sum().dtype)
    o("prod dtype", torch.tensor([True, True]).prod().dtype)
    o("mean dim tuple", x.mean((0, 1)))
    o("tensor of tensors", torch.tensor([torch.tensor(1.0), torch.tensor(2.0)]))
    o.raises(
        "stack err", lambda: torch.stack([torch.ones(2), torch.ones(3)]), "stack expects each tensor to be equal size"
    )
    o.raises(
        "cat err",
        lambda: torch.cat([torch.ones(2, 2), torch.ones(3, 3)], dim=1),
        "Sizes of tensors must match except in dimension 1",
    )
    o.raises(
        "matmul err",
        lambda: torch.ones(2, 3) @ torch.ones(2, 3),
        "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)",
    )
    o.raises("idx err", lambda: x[5], "index 5 is out of bounds for dimension 0 with size 3")
    o.raises("reshape err", lambda: x.reshape(5, -1), "shape '[5, -1]' is invalid for input of size 12")
    o.raises("dim err", lambda: x.sum(3), "Dimension out of range (expected to be in range of [-2, 1], but got 3)")


@program
def ut_modern_training_script_idioms(torch, o):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.GELU(), torch.nn.Linear(4, 2))
    _fill(torch, model)
    o("compile returns", model.compile())
    o("compile with options", model.compile(mode="reduce-overhead"))
    x = torch.linspace(-1, 1, 6).reshape(2, 3)
    o("still runs", model(x))
    params = {name: p.detach() * 2 for name, p in model.named_parameters()}
    o.warns(
        "stateless",
        lambda: torch.nn.utils.stateless.functional_call(model, params, (x,)),
        "is deprecated as of PyTorch 2.0",
    )
    o("stateless value", torch.nn.utils.stateless.functional_call(model, params, (x,)))
    o("func value", torch.func.functional_call(model, params, (x,)))
    o("bit flags", (torch.tensor([1, 2, 4]) << 2) >> torch.tensor([0, 1, 2]))
    o("mask from bits", (torch.arange(8) >> 1) & 1)


@program(1e-4, atol=1e-5)
def ut_fused_conv_bn_custom_function(torch, o):
    # PyTorch's "Fusing Convolution and Batch Norm using Custom Function" tutorial: backward
    # by hand with torch.nn.grad's convolution gradients
    F = torch.nn.functional

    def convolution_backward(grad_out, X, weight):
        grad_input = F.conv2d(X.transpose(0, 1), grad_out.transpose(0, 1)).transpose(0, 1)
        grad_X = F.conv_transpose2d(grad_out, weight)
        return grad_X, grad_input

    class Conv2D(torch.autograd.Function):
        @staticmethod
        def forward(ctx, X, weight):
            ctx.save_for_backward(X, weight)
            return F.conv2d(X, weight)

        @staticmethod
        def backward(ctx, grad_out):
            X, weight = ctx.saved_tensors
            return convolution_backward(grad_out, X, weight)

    weight = torch.linspace(-1, 1, 5 * 3 * 3 * 3).reshape(5, 3, 3, 3).double().requires_grad_()
    X = torch.linspace(-2, 2, 2 * 3 * 6 * 6).reshape(2, 3, 6, 6).double().requires_grad_()
    out = Conv2D.apply(X, weight)
    g = torch.cos(torch.arange(out.numel(), dtype=torch.float64)).reshape(out.shape)
    gx, gw = torch.autograd.grad(out, (X, weight), g)
    o("hand-written", (gx, gw))
    o("nn.grad input", torch.nn.grad.conv2d_input(X.shape, weight, g))
    o("nn.grad weight", torch.nn.grad.conv2d_weight(X, weight.shape, g))
    o("F.grad is nn.grad", F.grad is torch.nn.grad)
    for stride, padding, dilation, groups in ((2, 1, 1, 1), (1, 2, 2, 1)):
        w = weight.detach()[:, : 3 // groups]
        y = F.conv2d(X, w, None, stride, padding, dilation, groups)
        gy = torch.ones_like(y)
        o(
            f"input s{stride} p{padding} d{dilation}",
            torch.nn.grad.conv2d_input(X.shape, w, gy, stride, padding, dilation, groups),
        )
        o(
            f"weight s{stride} p{padding} d{dilation}",
            torch.nn.grad.conv2d_weight(X.detach(), w.shape, gy, stride, padding, dilation, groups),
        )
    x1 = torch.linspace(-1, 1, 2 * 4 * 9).reshape(2, 4, 9)
    w1 = torch.linspace(1, -1, 6 * 2 * 3).reshape(6, 2, 3)
    g1 = torch.ones(2, 6, 4)
    o("conv1d input", torch.nn.grad.conv1d_input(x1.shape, w1, g1, stride=2, groups=2))
    o("conv1d weight", torch.nn.grad.conv1d_weight(x1, w1.shape, g1, stride=2, groups=2))
    r = torch.nn.grad.conv2d_input(X.shape, weight, g.requires_grad_())
    o("differentiable", [r.requires_grad, r.is_leaf])
    with torch.no_grad():
        o("under no_grad", torch.nn.grad.conv2d_weight(X, weight.shape, g).requires_grad)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
