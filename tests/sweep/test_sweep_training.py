"""Conformance sweep, training loops and the Module API of teaching code: nested modules and
their parameter/module/buffer listings, ``state_dict``/``load_state_dict`` (strict and not),
``repr`` of nested models, container editing, module hooks, every optimiser with its options
and state, learning-rate schedulers over many steps, ``nn.utils`` (clipping, flattening),
``torch.utils.data`` pipelines and initialisation statistics.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Weights are filled with fixed values in both
libraries; random draws (init, shuffling) only feed properties that do not depend on them.
"""

from __future__ import annotations

import copy
import math
import os
import tempfile

import numpy as np
import pytest

from sweep_harness import X_DATA, Y_CLS, Y_REG, check, make_mlp, registry

program = registry()


def _fill(torch, module, scale=0.3):
    """Every parameter set to a scrambled sine (the same values in both libraries)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            values = np.sin(np.arange(p.numel()) * 0.7 + i) * scale
            p.copy_(torch.tensor(values.reshape(tuple(p.shape)), dtype=p.dtype))
    return module


def _net(torch):
    """A CS231n-style nested model: a feature block, a head, a buffer and a shared layer."""
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self, n_in, n_out):
            super().__init__()
            self.fc = nn.Linear(n_in, n_out)
            self.bn = nn.BatchNorm1d(n_out)
            self.act = nn.ReLU()

        def forward(self, x):
            return self.act(self.bn(self.fc(x)))

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.features = nn.Sequential(Block(3, 5), Block(5, 4))
            self.head = nn.ModuleDict({"reg": nn.Linear(4, 2), "cls": nn.Linear(4, 3)})
            self.register_buffer("scale", torch.tensor([1.0, 2.0]))
            self.register_buffer("tmp", torch.zeros(2), persistent=False)
            self.extra = nn.Parameter(torch.tensor([0.5, -0.5]))

        def forward(self, x):
            h = self.features(x)
            return self.head["reg"](h) * self.scale + self.extra, self.head["cls"](h)

    return _fill(torch, Net())


# ---- the Module API ---------------------------------------------------------------------------

@program
def tr_nested_named_parameters_modules_buffers(torch, o):
    net = _net(torch)
    o("named_parameters", [n for n, _ in net.named_parameters()])
    o("shapes", [tuple(p.shape) for p in net.parameters()])
    o("count", sum(p.numel() for p in net.parameters()))
    o("trainable", sum(p.numel() for p in net.parameters() if p.requires_grad))
    o("named_modules", [n for n, _ in net.named_modules()])
    o("module types", [type(m).__name__ for m in net.modules()])
    o("children", [type(m).__name__ for m in net.children()])
    o("named_children", [n for n, _ in net.named_children()])
    o("named_buffers", [n for n, _ in net.named_buffers()])
    o("buffers", list(net.buffers()))
    o("non-recursive", [n for n, _ in net.named_parameters(recurse=False)])
    o("prefix", [n for n, _ in net.features.named_parameters(prefix="features")])
    o("get_submodule", type(net.get_submodule("features.0.bn")).__name__)
    o("get_parameter", net.get_parameter("head.cls.bias"))
    o("get_buffer", net.get_buffer("features.1.bn.running_var"))
    o.raises("get_submodule missing", lambda: net.get_submodule("features.7"), "has no attribute")
    o("state keys", list(net.state_dict().keys()))
    o("state values", list(net.state_dict().values()))


@program
def tr_repr_of_nested_models(torch, o):
    nn = torch.nn
    o("net", repr(_net(torch)))
    model = nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2, 2),
        nn.Conv2d(6, 16, kernel_size=(3, 3), stride=2, bias=False), nn.BatchNorm2d(16),
        nn.Flatten(), nn.Dropout(p=0.25), nn.Linear(16 * 5, 10, bias=False),
        nn.LogSoftmax(dim=1))
    o("lenet", repr(model))
    o("str", str(model))
    layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    o("modulelist", repr(layers))
    o("moduledict", repr(nn.ModuleDict({"a": nn.Tanh(), "b": nn.LeakyReLU(0.2)})))
    o("empty", repr(nn.Sequential()))
    o("misc", repr(nn.Sequential(nn.Embedding(10, 3, padding_idx=0), nn.LayerNorm(3, eps=1e-6),
                                 nn.GELU(approximate="tanh"), nn.Softmax(dim=-1), nn.Identity(),
                                 nn.LSTM(3, 4, num_layers=2, batch_first=True),
                                 nn.Dropout(0.1, inplace=True), nn.ELU(alpha=0.5))))

    class WithExtra(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(2, 3)

        def extra_repr(self):
            return "custom=1"

    o("extra_repr", repr(WithExtra()))


@program
def tr_containers_edit_and_slice(torch, o):
    nn = torch.nn
    seq = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    o("len", len(seq))
    o("slice type", type(seq[1:]).__name__)
    o("slice repr", repr(seq[1:]))
    o("negative", repr(seq[-1]))
    seq.append(nn.Sigmoid())
    o("after append", repr(seq))
    seq.insert(1, nn.Tanh())
    o("after insert", [type(m).__name__ for m in seq])
    seq.extend([nn.Identity(), nn.Identity()])
    o("after extend", [n for n, _ in seq.named_children()])
    del seq[2]
    o("after del", [n for n, _ in seq.named_children()])
    seq[0] = nn.Linear(2, 3, bias=False)
    o("after set", repr(seq[0]))
    seq.add_module("last", nn.Softplus())
    o("add_module", [n for n, _ in seq.named_children()])
    o("pop", repr(seq.pop(1)))
    o("after pop", [n for n, _ in seq.named_children()])
    o.raises("index", lambda: seq[20], "out of range")

    ml = nn.ModuleList([nn.Linear(1, 1)])
    ml.append(nn.ReLU())
    ml.extend([nn.Tanh(), nn.Sigmoid()])
    ml.insert(0, nn.Identity())
    o("modulelist", [type(m).__name__ for m in ml])
    o("modulelist slice", type(ml[1:3]).__name__)
    o("modulelist slice len", len(ml[1:3]))
    o("modulelist names", [n for n, _ in ml.named_modules()])
    ml += nn.ModuleList([nn.ELU()])
    o("iadd", [type(m).__name__ for m in ml])
    o.raises("modulelist index", lambda: ml[10], "out of range")

    md = nn.ModuleDict({"b": nn.ReLU(), "a": nn.Tanh()})
    md["c"] = nn.Sigmoid()
    md.update({"d": nn.Identity()})
    o("dict keys", list(md.keys()))
    o("dict contains", "a" in md)
    o("dict pop", type(md.pop("b")).__name__)
    o("dict items", [(k, type(v).__name__) for k, v in md.items()])
    o("dict len", len(md))
    o.raises("dict missing", lambda: md["zz"], "zz")

    pl = nn.ParameterList([nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(3))])
    pl.append(nn.Parameter(torch.full((1,), 2.0)))
    o("paramlist", [n for n, _ in pl.named_parameters()])
    pd = nn.ParameterDict({"w": nn.Parameter(torch.ones(2))})
    pd["b"] = nn.Parameter(torch.zeros(1))
    o("paramdict", [n for n, _ in pd.named_parameters()])


@program
def tr_getattr_and_setattr_errors(torch, o):
    nn = torch.nn
    lin = nn.Linear(2, 3)
    o.raises("missing attribute", lambda: lin.foo, "'Linear' object has no attribute 'foo'")
    o.raises("missing in seq", lambda: nn.Sequential(nn.ReLU()).weight, "'Sequential' object has no attribute 'weight'")

    def assign_tensor_to_param():
        lin.weight = torch.zeros(3, 2)

    o.raises("tensor to parameter", assign_tensor_to_param, "cannot assign")

    class Bad(nn.Module):
        def __init__(self):
            self.lin = nn.Linear(1, 1)

    o.raises("no super init", Bad, "cannot assign module before Module.__init__() call")

    def bad_buffer():
        m = nn.Module()
        m.register_buffer("a.b", torch.zeros(1))

    o.raises("dotted buffer", bad_buffer, 'contain "."')

    def dup_buffer():
        m = nn.Linear(1, 1)
        m.register_buffer("weight", torch.zeros(1))

    o.raises("buffer over parameter", dup_buffer, "attribute 'weight' already exists")

    def bad_param():
        m = nn.Module()
        m.register_parameter("p", torch.zeros(1))

    o.raises("register non-parameter", bad_param, "cannot assign")

    def del_param():
        m = nn.Linear(2, 2)
        del m.bias
        return m

    m = del_param()
    o("after del bias", [n for n, _ in m.named_parameters()])
    m.bias = None
    o("bias None", m.bias is None)
    o("bias None params", [n for n, _ in m.named_parameters()])
    o("bias none state", list(m.state_dict().keys()))


@program
def tr_apply_init_fn_and_no_grad(torch, o):
    nn = torch.nn
    net = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Sequential(nn.Linear(4, 4), nn.Linear(4, 2)))
    visited = []

    def init_weights(m):
        visited.append(type(m).__name__)
        if isinstance(m, nn.Linear):
            nn.init.constant_(m.weight, 0.1)
            nn.init.zeros_(m.bias)

    out = net.apply(init_weights)
    o("returns self", out is net)
    o("order", visited)
    o("weights", [p for p in net.parameters()])
    o("forward", net(torch.ones(2, 3)))
    w = nn.Linear(2, 2).weight
    r = nn.init.ones_(w)
    o("returns tensor", r is w)
    o("still leaf", w.is_leaf)
    o("grad_fn", w.grad_fn is None)


@program
def tr_load_state_dict_strict_and_errors(torch, o):
    nn = torch.nn
    a = _fill(torch, nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1)))
    b = nn.Sequential(nn.Linear(2, 3), nn.ReLU(), nn.Linear(3, 1))
    res = b.load_state_dict(a.state_dict())
    o("result type", type(res).__name__)
    o("result repr", repr(res))
    o("missing", res.missing_keys)
    o("unexpected", res.unexpected_keys)
    o("copied", [p for p in b.parameters()])
    sd = a.state_dict()
    sd["extra.weight"] = torch.zeros(1)
    del sd["2.bias"]
    o.raises("strict", lambda: b.load_state_dict(sd), 'Missing key(s) in state_dict: "2.bias"')
    o.raises("strict unexpected", lambda: b.load_state_dict(sd), 'Unexpected key(s) in state_dict: "extra.weight"')
    res = b.load_state_dict(sd, strict=False)
    o("non-strict missing", res.missing_keys)
    o("non-strict unexpected", res.unexpected_keys)
    o("non-strict repr", repr(res))
    sd2 = a.state_dict()
    sd2["0.weight"] = torch.zeros(4, 2)
    o.raises("shape", lambda: b.load_state_dict(sd2), "size mismatch for 0.weight: copying a param with shape torch.Size([4, 2]) from checkpoint, the shape in current model is torch.Size([3, 2])")
    o.raises("shape non-strict", lambda: b.load_state_dict(sd2, strict=False), "size mismatch for 0.weight")
    o("ordered", type(a.state_dict()).__name__)
    o("keep_vars", [type(v).__name__ for v in a.state_dict(keep_vars=True).values()])
    o("detached", [v.requires_grad for v in a.state_dict().values()])
    o("shares memory", a.state_dict()["0.weight"].data_ptr() == a[0].weight.data_ptr())
    o("metadata", getattr(a.state_dict(), "_metadata", {}).get("0", None) is not None)


@program
def tr_state_dict_buffers_and_save_load(torch, o):
    nn = torch.nn
    net = _net(torch)
    net.train()
    net(torch.tensor(X_DATA))
    sd = net.state_dict()
    o("keys", list(sd.keys()))
    o("num_batches", sd["features.0.bn.num_batches_tracked"])
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "model.pt")
        torch.save(sd, path)
        loaded = torch.load(path)
        o("loaded keys", list(loaded.keys()))
        o("loaded values", list(loaded.values()))
        fresh = _net(torch)
        fresh.load_state_dict(loaded)
        fresh.eval()
        net.eval()
        o("same outputs", list(fresh(torch.tensor(X_DATA))))
        torch.save({"epoch": 3, "model": net.state_dict(), "loss": 0.25}, path)
        ck = torch.load(path, weights_only=True)
        o("checkpoint", (ck["epoch"], ck["loss"], sorted(ck["model"].keys())))


@program
def tr_train_eval_flags_and_freezing(torch, o):
    nn = torch.nn
    net = _net(torch)
    o("default", [m.training for m in net.modules()])
    r = net.eval()
    o("eval returns self", r is net)
    o("after eval", [m.training for m in net.modules()])
    net.train()
    net.features[0].eval()
    o("mixed", [m.training for m in net.modules()])
    net.train(False)
    o("train(False)", net.training)
    net.train()
    r = net.features.requires_grad_(False)
    o("requires_grad_ returns self", r is net.features)
    o("frozen", [(n, p.requires_grad) for n, p in net.named_parameters()])
    opt = torch.optim.SGD([p for p in net.parameters() if p.requires_grad], lr=0.1)
    reg, cls = net(torch.tensor(X_DATA))
    (reg.pow(2).mean() + cls.sum() * 0.01).backward()
    o("grads none", [(n, p.grad is None) for n, p in net.named_parameters()])
    opt.step()
    o("after step", [p for p in net.parameters()])
    net.zero_grad()
    o("zero_grad none", [p.grad is None for p in net.parameters()])
    reg, cls = net(torch.tensor(X_DATA))
    reg.sum().backward()
    net.zero_grad(set_to_none=False)
    o("zero_grad zeros", [None if p.grad is None else p.grad for p in net.parameters()])


@program
def tr_to_dtype_double_half_deepcopy(torch, o):
    nn = torch.nn
    net = _fill(torch, nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    r = net.double()
    o("double returns self", r is net)
    o("dtypes", [p.dtype for p in net.parameters()])
    o("buffers", [(n, b.dtype) for n, b in net.named_buffers()])
    o("forward", net(torch.tensor(X_DATA, dtype=torch.float64)))
    net.to(torch.float32)
    o("to float", [p.dtype for p in net.parameters()])
    net.half()
    o("half", [p.dtype for p in net.parameters()])
    o("half leaf", [p.is_leaf for p in net.parameters()])
    net.float()
    clone = copy.deepcopy(net)
    o("deepcopy distinct", clone[0].weight is not net[0].weight)
    o("deepcopy values", [p for p in clone.parameters()])
    o("deepcopy type", type(clone[0].weight).__name__)
    with torch.no_grad():
        clone[0].weight.add_(1.0)
    o("original unchanged", net[0].weight)
    o("to returns self", net.to("cpu") is net)
    o("cpu", net.cpu() is net)
    o.raises("bad dtype", lambda: net.to(torch.int64), "nn.Module.to only accepts floating point or complex dtypes")


@program
def tr_deepcopy_training_with_ema(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    ema = copy.deepcopy(model)
    for p in ema.parameters():
        p.requires_grad_(False)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)
    for _ in range(5):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        with torch.no_grad():
            for pe, pm in zip(ema.parameters(), model.parameters()):
                pe.mul_(0.9).add_(pm, alpha=0.1)
    o("ema", list(ema.parameters()))
    o("model", list(model.parameters()))


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
