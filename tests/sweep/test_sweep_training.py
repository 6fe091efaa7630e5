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


def _names(module, *names):
    """Attributes of ``module`` (``from torch.utils.data import ...`` would import real torch
    in the gradviz run)."""
    return tuple(getattr(module, n) for n in names) if len(names) > 1 else getattr(module, names[0])


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
    # dir() lists what is registered under a module (tab completion, `"fc" in dir(net)`),
    # and never a name that is not a Python identifier (a Sequential's "0", "1")
    registered = ["features", "head", "scale", "tmp", "extra", "training", "forward"]
    o("dir", [name for name in registered if name in dir(net)])
    o("dir of a Sequential", [name for name in ("0", "1", "append") if name in dir(net.features)])
    o("dir sorted", dir(net.head) == sorted(dir(net.head)))


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



# ---- module hooks -----------------------------------------------------------------------------

@program
def tr_forward_hooks_feature_extraction(torch, o):
    nn = torch.nn
    net = _net(torch).eval()
    activations = {}

    def save(name):
        def hook(module, inputs, output):
            activations[name] = output.detach()
        return hook

    handles = [m.register_forward_hook(save(n)) for n, m in net.named_modules()
               if isinstance(m, nn.Linear)]
    net(torch.tensor(X_DATA))
    o("captured", sorted(activations))
    o("values", [activations[k] for k in sorted(activations)])
    for h in handles:
        h.remove()
    activations.clear()
    net(torch.tensor(X_DATA))
    o("after remove", len(activations))

    calls = []

    def pre(module, args):
        calls.append(("pre", type(args).__name__, len(args)))
        return (args[0] * 2,)

    def pre_kwargs(module, args, kwargs):
        calls.append(("pre_kwargs", sorted(kwargs)))
        return args, kwargs

    def post_kwargs(module, args, kwargs, output):
        calls.append(("post_kwargs", sorted(kwargs)))
        return output + 1

    lin = _fill(torch, nn.Linear(3, 2))
    h1 = lin.register_forward_pre_hook(pre)
    h2 = lin.register_forward_pre_hook(pre_kwargs, with_kwargs=True)
    h3 = lin.register_forward_hook(post_kwargs, with_kwargs=True)
    h4 = lin.register_forward_hook(lambda m, a, out: calls.append("first") or None, prepend=True)
    o("out", lin(torch.tensor(X_DATA)))
    o("calls", calls)
    o("handle id", type(h1.id).__name__)
    for h in (h1, h2, h3, h4):
        h.remove()
    o("plain", lin(torch.tensor(X_DATA)))

    def failing(x):
        raise ValueError("boom")

    seen = []
    bad = nn.Module()
    bad.forward = failing
    bad.register_forward_hook(lambda m, a, out: seen.append("always"), always_call=True)
    bad.register_forward_hook(lambda m, a, out: seen.append("normal"))
    o.raises("forward raises", lambda: bad(torch.ones(1)), "boom")
    o("always_call ran", seen)


@program
def tr_full_backward_hooks_order_and_replacement(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    events = []

    def bhook(name):
        def hook(module, grad_input, grad_output):
            events.append((name, type(grad_input).__name__, len(grad_input), len(grad_output)))
            o(f"{name} grad_output", list(grad_output))
            o(f"{name} grad_input", [None if g is None else g for g in grad_input])
        return hook

    def pre_hook(module, grad_output):
        events.append(("pre", len(grad_output)))
        return (grad_output[0] * 0.5,)

    h0 = model[0].register_full_backward_hook(bhook("lin0"))
    h2 = model[2].register_full_backward_hook(bhook("lin2"))
    hp = model[2].register_full_backward_pre_hook(pre_hook)
    x = torch.tensor(X_DATA, requires_grad=True)
    out = model(x)
    out.register_hook(lambda g: events.append("tensor hook") or None)
    out.sum().backward()
    o("events", events)
    o("x grad", x.grad)
    o("w grads", [p.grad for p in model.parameters()])
    for h in (h0, h2, hp):
        h.remove()

    def double_input(module, grad_input, grad_output):
        return tuple(None if g is None else g * 2 for g in grad_input)

    model.zero_grad()
    h = model[1].register_full_backward_hook(double_input)
    x2 = torch.tensor(X_DATA, requires_grad=True)
    model(x2).pow(2).sum().backward()
    o("replaced x grad", x2.grad)
    o("replaced w grads", [p.grad for p in model.parameters()])
    h.remove()

    def wrong_len(module, grad_input, grad_output):
        return (grad_input[0], grad_input[0])

    model[1].register_full_backward_hook(wrong_len)
    x3 = torch.tensor(X_DATA, requires_grad=True)
    y3 = model(x3).sum()
    o.raises("wrong number", lambda: y3.backward(), "got 2, but expected 1")


@program
def tr_global_module_hooks(torch, o):
    nn = torch.nn
    seen = []
    h = nn.modules.module.register_module_forward_hook(
        lambda m, a, out: seen.append(type(m).__name__))
    hp = nn.modules.module.register_module_forward_pre_hook(
        lambda m, a: seen.append("pre " + type(m).__name__))
    try:
        make_mlp(torch)(torch.tensor(X_DATA))
    finally:
        h.remove()
        hp.remove()
    o("seen", seen)
    make_mlp(torch)(torch.tensor(X_DATA))
    o("after remove", len(seen))


# ---- optimisers -------------------------------------------------------------------------------

def _train(torch, opt_factory, steps=8, loss="mse"):
    model = make_mlp(torch, "Tanh")
    opt = opt_factory(model.parameters())
    x = torch.tensor(X_DATA)
    losses = []
    for _ in range(steps):
        opt.zero_grad()
        out = model(x)
        if loss == "mse":
            value = torch.nn.functional.mse_loss(out, torch.tensor(Y_REG))
        else:
            value = torch.nn.functional.cross_entropy(out, torch.tensor(Y_CLS))
        value.backward()
        opt.step()
        losses.append(value.item())
    return model, opt, losses


@program(1e-5, atol=1e-6)
def tr_sgd_variants(torch, o):
    SGD = torch.optim.SGD
    for name, kw in [("plain", {}), ("momentum", {"momentum": 0.9}),
                     ("dampening", {"momentum": 0.9, "dampening": 0.5}),
                     ("nesterov", {"momentum": 0.8, "nesterov": True, "weight_decay": 1e-2}),
                     ("maximize", {"momentum": 0.5, "maximize": True}),
                     ("wd", {"weight_decay": 0.1})]:
        model, opt, losses = _train(torch, lambda p: SGD(p, lr=0.05, **kw))
        o(f"{name} losses", losses)
        o(f"{name} params", list(model.parameters()))
        o(f"{name} state", [sorted(s.keys()) for s in opt.state.values()])
    o.raises("nesterov without momentum", lambda: SGD([torch.zeros(1, requires_grad=True)], lr=0.1, nesterov=True),
             "Nesterov momentum requires a momentum and zero dampening")
    o.raises("negative lr", lambda: SGD([torch.zeros(1, requires_grad=True)], lr=-0.1), "Invalid learning rate: -0.1")
    o.raises("negative momentum", lambda: SGD([torch.zeros(1, requires_grad=True)], lr=0.1, momentum=-1),
             "Invalid momentum value: -1")
    o.raises("negative wd", lambda: SGD([torch.zeros(1, requires_grad=True)], lr=0.1, weight_decay=-1),
             "Invalid weight_decay value: -1")
    o.raises("empty", lambda: SGD([], lr=0.1), "optimizer got an empty parameter list")
    o.raises("tensor not iterable", lambda: SGD(torch.zeros(2, requires_grad=True), lr=0.1),
             "params argument given to the optimizer should be an iterable of Tensors or dicts")


@program(1e-5, atol=1e-6)
def tr_adaptive_optimizers(torch, o):
    optim = torch.optim
    cases = [
        ("adam", lambda p: optim.Adam(p, lr=0.01)),
        ("adam amsgrad wd", lambda p: optim.Adam(p, lr=0.01, amsgrad=True, weight_decay=0.1)),
        ("adam maximize", lambda p: optim.Adam(p, lr=0.01, maximize=True, betas=(0.8, 0.9))),
        ("adamw", lambda p: optim.AdamW(p, lr=0.01)),
        ("adamw amsgrad", lambda p: optim.AdamW(p, lr=0.01, weight_decay=0.5, amsgrad=True)),
        ("rmsprop", lambda p: optim.RMSprop(p, lr=0.01)),
        ("rmsprop centered momentum", lambda p: optim.RMSprop(p, lr=0.01, centered=True, momentum=0.9,
                                                              weight_decay=0.01)),
        ("adagrad", lambda p: optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.01,
                                            initial_accumulator_value=0.1)),
        ("adadelta", lambda p: optim.Adadelta(p, lr=1.0, rho=0.8, weight_decay=0.01)),
        ("adamax", lambda p: optim.Adamax(p, lr=0.02, weight_decay=0.01)),
        ("nadam", lambda p: optim.NAdam(p, lr=0.01, momentum_decay=0.004)),
        ("nadam decoupled", lambda p: optim.NAdam(p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
        ("radam", lambda p: optim.RAdam(p, lr=0.01)),
        ("radam decoupled", lambda p: optim.RAdam(p, lr=0.01, weight_decay=0.1, decoupled_weight_decay=True)),
    ]
    for name, factory in cases:
        model, opt, losses = _train(torch, factory, steps=10, loss="ce")
        o(f"{name} losses", losses)
        o(f"{name} params", list(model.parameters()))
        first = opt.state[next(iter(model.parameters()))]
        o(f"{name} state keys", sorted(first.keys()))
        o(f"{name} state", [first[k] for k in sorted(first.keys())])
        o(f"{name} defaults", sorted(opt.defaults.keys()))


@program
def tr_optimizer_param_groups_and_lr_edits(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    opt = torch.optim.SGD([
        {"params": model[0].parameters()},
        {"params": model[2].parameters(), "lr": 1e-3, "momentum": 0.5},
    ], lr=0.1, momentum=0.9)
    o("groups", len(opt.param_groups))
    o("group keys", [sorted(g.keys()) for g in opt.param_groups])
    o("lrs", [g["lr"] for g in opt.param_groups])
    o("momenta", [g["momentum"] for g in opt.param_groups])
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)
    for step in range(4):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if step == 1:
            for g in opt.param_groups:
                g["lr"] *= 0.1
    o("params", list(model.parameters()))
    extra = nn.Parameter(torch.tensor([1.0, 2.0]))
    opt.add_param_group({"params": extra, "lr": 0.5})
    o("after add", [(g["lr"], g["momentum"], len(g["params"])) for g in opt.param_groups])
    o.raises("duplicate", lambda: opt.add_param_group({"params": [extra]}),
             "some parameters appear in more than one parameter group")
    o.raises("missing params", lambda: opt.add_param_group({"lr": 0.1}), "params")
    sd = opt.state_dict()
    o("sd keys", sorted(sd.keys()))
    o("sd groups params", [g["params"] for g in sd["param_groups"]])
    o("sd state keys", sorted(sd["state"].keys()))
    o("sd state entry", sorted(sd["state"][0].keys()))
    o("sd momentum", sd["state"][0]["momentum_buffer"])
    o("repr", repr(opt))


@program
def tr_optimizer_state_dict_resume(torch, o):
    nn = torch.nn
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)

    def steps(model, opt, n):
        for _ in range(n):
            opt.zero_grad()
            nn.functional.mse_loss(model(x), y).backward()
            opt.step()

    model = make_mlp(torch)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    steps(model, opt, 3)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ck.pt")
        torch.save({"model": model.state_dict(), "opt": opt.state_dict(), "epoch": 3}, path)
        ck = torch.load(path)
    steps(model, opt, 3)
    o("continuous", list(model.parameters()))
    model2 = make_mlp(torch)
    opt2 = torch.optim.Adam(model2.parameters(), lr=0.5)
    model2.load_state_dict(ck["model"])
    opt2.load_state_dict(ck["opt"])
    o("restored lr", opt2.param_groups[0]["lr"])
    o("restored step", opt2.state[model2[0].weight]["step"])
    steps(model2, opt2, 3)
    o("resumed", list(model2.parameters()))
    bad = opt.state_dict()
    bad["param_groups"] = bad["param_groups"] + bad["param_groups"]
    o.raises("group count", lambda: opt2.load_state_dict(bad),
             "loaded state dict has a different number of parameter groups")
    bad2 = opt.state_dict()
    bad2["param_groups"][0]["params"] = bad2["param_groups"][0]["params"][:2]
    o.raises("group size", lambda: opt2.load_state_dict(bad2),
             "loaded state dict contains a parameter group that doesn't match the size of optimizer's group")


@program
def tr_optimizer_skips_none_grads_and_zero_grad(torch, o):
    nn = torch.nn
    a = nn.Parameter(torch.tensor([1.0, 2.0]))
    b = nn.Parameter(torch.tensor([3.0]))
    for name, opt in [("sgd", torch.optim.SGD([a, b], lr=0.1, momentum=0.9)),
                      ("adam", torch.optim.Adam([a, b], lr=0.1))]:
        (a * a).sum().backward()
        opt.step()
        o(f"{name} a", a)
        o(f"{name} b untouched", b)
        o(f"{name} state of b", len(opt.state[b]))
        o(f"{name} state size", len(opt.state))
        opt.zero_grad()
        o(f"{name} grads none", a.grad is None)
        (a * b).sum().backward()
        opt.zero_grad(set_to_none=False)
        o(f"{name} zeros", [a.grad, b.grad])
        opt.zero_grad()
    o("state type", type(torch.optim.SGD([a], lr=0.1).state).__name__)



# ---- learning-rate schedulers -----------------------------------------------------------------

def _schedule(torch, make, steps=30, lr=0.1, groups=1, opt="sgd", metric=None):
    params = [torch.nn.Parameter(torch.tensor([1.0])) for _ in range(groups)]
    if opt == "sgd":
        optimizer = torch.optim.SGD([{"params": [p]} for p in params], lr=lr, momentum=0.9)
    else:
        optimizer = torch.optim.Adam([{"params": [p]} for p in params], lr=lr)
    scheduler = make(optimizer)
    seen = [scheduler.get_last_lr()]
    for step in range(steps):
        optimizer.step()
        if metric is None:
            scheduler.step()
        else:
            scheduler.step(metric(step))
        seen.append(scheduler.get_last_lr())
    return seen, optimizer, scheduler


@program(1e-9, atol=1e-12)
def tr_schedulers_thirty_steps(torch, o):
    S = torch.optim.lr_scheduler
    cases = {
        "step": lambda opt: S.StepLR(opt, step_size=7, gamma=0.5),
        "multistep": lambda opt: S.MultiStepLR(opt, milestones=[5, 12, 12, 20], gamma=0.3),
        "exponential": lambda opt: S.ExponentialLR(opt, gamma=0.9),
        "cosine": lambda opt: S.CosineAnnealingLR(opt, T_max=10, eta_min=0.001),
        "warm restarts": lambda opt: S.CosineAnnealingWarmRestarts(opt, T_0=4, T_mult=2, eta_min=0.01),
        "lambda": lambda opt: S.LambdaLR(opt, lr_lambda=lambda e: 0.95 ** e),
        "lambda list": lambda opt: S.LambdaLR(opt, lr_lambda=[lambda e: 1 / (e + 1), lambda e: 0.5]),
        "multiplicative": lambda opt: S.MultiplicativeLR(opt, lr_lambda=lambda e: 0.9),
        "linear": lambda opt: S.LinearLR(opt, start_factor=0.25, total_iters=8),
        "constant": lambda opt: S.ConstantLR(opt, factor=0.5, total_iters=4),
        "polynomial": lambda opt: S.PolynomialLR(opt, total_iters=12, power=2.0),
        "sequential": lambda opt: S.SequentialLR(
            opt, [S.LinearLR(opt, start_factor=0.1, total_iters=5), S.CosineAnnealingLR(opt, T_max=20)],
            milestones=[5]),
        "chained": lambda opt: S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=3),
                                                   S.ExponentialLR(opt, gamma=0.9)]),
        "onecycle": lambda opt: S.OneCycleLR(opt, max_lr=0.5, total_steps=31),
        "onecycle linear": lambda opt: S.OneCycleLR(opt, max_lr=[0.5, 0.2], epochs=3, steps_per_epoch=11,
                                                    anneal_strategy="linear", three_phase=True,
                                                    pct_start=0.2),
        "cyclic": lambda opt: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4),
        "cyclic tri2": lambda opt: S.CyclicLR(opt, base_lr=[0.01, 0.02], max_lr=0.1, step_size_up=3,
                                              step_size_down=5, mode="triangular2"),
        "cyclic exp": lambda opt: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=4,
                                             mode="exp_range", gamma=0.95),
        "cyclic scale_fn": lambda opt: S.CyclicLR(opt, base_lr=0.01, max_lr=0.1, step_size_up=2,
                                                  scale_fn=lambda x: 1 / (1 + x) ** 0.5, scale_mode="iterations"),
    }
    for name, make in cases.items():
        seen, opt, sched = _schedule(torch, make, groups=2)
        o(name, seen)
        if name.startswith("onecycle") or name.startswith("cyclic"):
            o(f"{name} momentum", opt.param_groups[0]["momentum"])
        o(f"{name} last_epoch", getattr(sched, "last_epoch", None))
    seen, opt, _ = _schedule(torch, lambda opt: S.OneCycleLR(opt, max_lr=0.05, total_steps=30,
                                                              cycle_momentum=True), steps=29, opt="adam")
    o("onecycle adam", seen)
    o("onecycle adam betas", opt.param_groups[0]["betas"])
    o.raises("onecycle past end", lambda: _schedule(torch, lambda opt: S.OneCycleLR(opt, max_lr=0.5, total_steps=5),
                                                    steps=6), "Tried to step 6 times. The specified number of total steps is 5")
    o.raises("cyclic adam", lambda: _schedule(torch, lambda opt: S.CyclicLR(opt, 0.01, 0.1), opt="adam"),
             "optimizer must support momentum or beta1 with `cycle_momentum` option enabled")


@program(1e-9, atol=1e-12)
def tr_reduce_on_plateau_and_state(torch, o):
    S = torch.optim.lr_scheduler
    losses = [1.0, 0.9, 0.95, 0.96, 0.97, 0.98, 0.85, 0.86, 0.87, 0.88, 0.89, 0.9, 0.91, 0.92] * 2
    seen, opt, sched = _schedule(torch, lambda opt: S.ReduceLROnPlateau(opt, mode="min", factor=0.5, patience=2,
                                                                         threshold=0.01, cooldown=1, min_lr=0.01),
                                 steps=len(losses), metric=lambda i: losses[i])
    o("plateau", seen)
    o("num_bad_epochs", sched.num_bad_epochs)
    o("best", sched.best)
    seen, _, _ = _schedule(torch, lambda opt: S.ReduceLROnPlateau(opt, mode="max", patience=0, threshold_mode="abs",
                                                                   threshold=0.1),
                           steps=10, metric=lambda i: float(i % 3))
    o("plateau max abs", seen)
    seen, opt, sched = _schedule(torch, lambda opt: S.StepLR(opt, step_size=3, gamma=0.5), steps=5)
    sd = sched.state_dict()
    o("state keys", sorted(sd.keys()))
    o("state last_epoch", sd["last_epoch"])
    o("state base_lrs", sd["base_lrs"])
    o("initial_lr", opt.param_groups[0]["initial_lr"])
    fresh_opt = torch.optim.SGD([torch.nn.Parameter(torch.tensor([1.0]))], lr=0.1)
    fresh = S.StepLR(fresh_opt, step_size=3, gamma=0.5)
    fresh.load_state_dict(sd)
    fresh_opt.step()
    fresh.step()
    o("resumed", fresh.get_last_lr())
    o("resumed opt lr", fresh_opt.param_groups[0]["lr"])
    o.raises("plateau bad mode", lambda: S.ReduceLROnPlateau(fresh_opt, mode="avg"), "mode avg is unknown!")
    o.raises("plateau factor", lambda: S.ReduceLROnPlateau(fresh_opt, factor=1.0), "Factor should be < 1.0.")
    o.raises("not optimizer", lambda: S.StepLR([1], step_size=2), "is not an Optimizer")


@program
def tr_scheduler_order_warnings(torch, o):
    S = torch.optim.lr_scheduler
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = S.StepLR(opt, step_size=1, gamma=0.5)
    o.warns("scheduler before optimizer", lambda: sched.step(), "lr_scheduler.step()")
    o("lr", sched.get_last_lr())
    o.warns("then in order", lambda: (opt.step(), sched.step()))
    o.warns("get_lr outside", lambda: sched.get_lr(), "get_last_lr()")
    o.warns("epoch argument", lambda: (opt.step(), sched.step(5)), "epoch")
    o("after epoch", sched.get_last_lr())
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.tensor([1.0]))], lr=0.1)
    s2 = S.ExponentialLR(opt2, gamma=0.5)
    o.warns("in order from the start", lambda: (opt2.step(), s2.step()))
    o("s2", s2.get_last_lr())


# ---- nn.utils ---------------------------------------------------------------------------------

@program
def tr_clip_grad_norm_in_training(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)
    norms = []
    for _ in range(4):
        opt.zero_grad()
        (nn.functional.mse_loss(model(x), y) * 10).backward()
        norms.append(nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0))
        opt.step()
    o("norms", norms)
    o("params", list(model.parameters()))
    model.zero_grad()
    (model(x).pow(3).sum()).backward()
    o("inf norm", nn.utils.clip_grad_norm_(model.parameters(), 0.5, norm_type="inf"))
    o("inf clipped", [p.grad for p in model.parameters()])
    o("norm 1", nn.utils.clip_grad_norm_(model.parameters(), 0.1, norm_type=1.0))
    o("clipped", [p.grad for p in model.parameters()])
    o("single tensor", nn.utils.clip_grad_norm_(model[0].weight, 0.01))
    o("no grads", nn.utils.clip_grad_norm_([nn.Parameter(torch.ones(2))], 1.0))
    nn.utils.clip_grad_value_(model.parameters(), clip_value=0.001)
    o("value clipped", [p.grad for p in model.parameters()])
    bad = nn.Parameter(torch.ones(2))
    bad.grad = torch.tensor([float("nan"), 1.0])
    o.raises("nonfinite", lambda: nn.utils.clip_grad_norm_([bad], 1.0, error_if_nonfinite=True),
             "is non-finite, so it cannot be clipped")
    o("nan norm", nn.utils.clip_grad_norm_([bad], 1.0))
    o("get_total_norm", nn.utils.get_total_norm([torch.tensor([3.0, 4.0]), torch.tensor([12.0])]))
    g = [torch.tensor([3.0, 4.0])]
    nn.utils.clip_grads_with_norm_([nn.Parameter(torch.zeros(2))], 1.0, torch.tensor(5.0))


@program
def tr_parameters_to_vector_round_trip(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    vec = nn.utils.parameters_to_vector(model.parameters())
    o("vec", vec)
    o("numel", vec.numel() == sum(p.numel() for p in model.parameters()))
    nn.utils.vector_to_parameters(vec * 2, model.parameters())
    o("doubled", list(model.parameters()))
    o("still params", [type(p).__name__ for p in model.parameters()])
    o.raises("not a tensor", lambda: nn.utils.vector_to_parameters([1.0], model.parameters()),
             "expected torch.Tensor, but got: list")
    flat = torch.cat([p.grad.flatten() if p.grad is not None else torch.zeros(p.numel())
                      for p in model.parameters()])
    o("flat grads", flat)


@program
def tr_pad_sequence_variants(torch, o):
    rnn_utils = torch.nn.utils.rnn
    seqs = [torch.tensor([1.0, 2.0, 3.0]), torch.tensor([4.0]), torch.tensor([5.0, 6.0])]
    o("time major", rnn_utils.pad_sequence(seqs))
    o("batch first", rnn_utils.pad_sequence(seqs, batch_first=True, padding_value=-1.0))
    o("left", rnn_utils.pad_sequence(seqs, batch_first=True, padding_side="left"))
    feats = [torch.ones(2, 3), torch.zeros(4, 3)]
    o("features", rnn_utils.pad_sequence(feats, batch_first=True).shape)
    lengths = torch.tensor([len(s) for s in seqs])
    o("lengths", lengths)
    padded = rnn_utils.pad_sequence(seqs, batch_first=True)
    mask = torch.arange(padded.size(1))[None, :] < lengths[:, None]
    o("mask", mask)
    o("masked mean", (padded * mask).sum(1) / lengths)



# ---- torch.utils.data -------------------------------------------------------------------------

@program
def tr_tensor_dataset_and_loader_epochs(torch, o):
    DataLoader, TensorDataset = _names(torch.utils.data, 'DataLoader', 'TensorDataset')
    x = torch.arange(30.0).view(10, 3)
    y = torch.arange(10) % 3
    ds = TensorDataset(x, y)
    o("len", len(ds))
    o("item", ds[3])
    o("slice", ds[2:4])
    loader = DataLoader(ds, batch_size=4)
    o("len loader", len(loader))
    o("batches", [b for b in loader])
    o("drop_last", [xb.shape for xb, _ in DataLoader(ds, batch_size=4, drop_last=True)])
    o("len drop_last", len(DataLoader(ds, batch_size=4, drop_last=True)))
    g = torch.Generator().manual_seed(0)
    shuffled = DataLoader(ds, batch_size=3, shuffle=True, generator=g)
    seen = []
    for epoch in range(2):
        got = torch.cat([yb for _, yb in shuffled])
        seen.append(sorted(got.tolist()))
    o("coverage", seen)
    o("shapes", [xb.shape for xb, _ in shuffled])
    o("attrs", (loader.batch_size, loader.drop_last, len(loader.dataset)))
    o.raises("size mismatch", lambda: TensorDataset(torch.zeros(3), torch.zeros(4)), "Size mismatch between tensors")
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    data = TensorDataset(torch.tensor(X_DATA), torch.tensor(Y_REG))
    for epoch in range(3):
        total = 0.0
        for xb, yb in DataLoader(data, batch_size=4):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * len(xb)
        o(f"epoch {epoch}", total / len(data))
    o("trained", list(model.parameters()))


@program
def tr_custom_dataset_dict_samples_and_collate(torch, o):
    DataLoader, Dataset, default_collate = _names(torch.utils.data, 'DataLoader', 'Dataset', 'default_collate')

    class Squares(Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return {"x": torch.tensor([float(i), float(i) ** 2]), "label": i % 2, "name": f"s{i}",
                    "w": 0.5 * i}

    loader = DataLoader(Squares(5), batch_size=2)
    batches = list(loader)
    o("batch0", batches[0])
    o("last", batches[-1])
    o("types", [type(v).__name__ for v in batches[0].values()])
    o("tuples", default_collate([(1, 2.0), (3, 4.0)]))
    o("nested", default_collate([{"a": (torch.tensor(1), [2, 3])}, {"a": (torch.tensor(4), [5, 6])}]))
    o("numpy", default_collate([np.array([1.0, 2.0]), np.array([3.0, 4.0])]))
    o("no batch", list(DataLoader(Squares(2), batch_size=None))[1]["x"])

    def pad_collate(batch):
        xs = [torch.ones(int(i) + 1) * i for i in batch]
        return torch.nn.utils.rnn.pad_sequence(xs, batch_first=True), torch.tensor([len(x) for x in xs])

    o("custom collate", list(DataLoader([0, 1, 2, 3], batch_size=3, collate_fn=pad_collate)))
    o.raises("ragged", lambda: default_collate([torch.zeros(2), torch.zeros(3)]),
             "stack expects each tensor to be equal size")
    o.raises("unequal lists", lambda: default_collate([[1, 2], [3]]),
             "each element in list of batch should be of equal size")


@program
def tr_random_split_subset_and_concat(torch, o):
    ConcatDataset, Subset, TensorDataset, random_split = _names(torch.utils.data, 'ConcatDataset', 'Subset', 'TensorDataset', 'random_split')
    ds = TensorDataset(torch.arange(10.0), torch.arange(10))
    g = torch.Generator().manual_seed(42)
    train, val = random_split(ds, [0.8, 0.2], generator=g)
    o("lengths", (len(train), len(val)))
    o("types", type(train).__name__)
    o("disjoint", sorted(train.indices + val.indices) == list(range(10)))
    a, b, c = random_split(ds, [0.34, 0.33, 0.33])
    o("fractions", [len(a), len(b), len(c)])
    o("ints", [len(s) for s in random_split(ds, [3, 7])])
    o.raises("bad sum", lambda: random_split(ds, [3, 3]),
             "Sum of input lengths does not equal the length of the input dataset!")
    sub = Subset(ds, [9, 0, 4])
    o("subset", [sub[i] for i in range(len(sub))])
    o("subset of subset", Subset(sub, [2])[0])
    cat = ConcatDataset([Subset(ds, [0, 1]), Subset(ds, [5, 6, 7])])
    o("concat len", len(cat))
    o("concat items", [cat[i] for i in range(len(cat))])
    o("concat negative", cat[-1])
    o("cumulative", cat.cumulative_sizes)
    o("add", len(Subset(ds, [1]) + Subset(ds, [2, 3])))


@program
def tr_chain_dataset_and_worker_info(torch, o):
    ChainDataset, DataLoader, IterableDataset, get_worker_info = _names(torch.utils.data, 'ChainDataset', 'DataLoader', 'IterableDataset', 'get_worker_info')

    class Shards(IterableDataset):   # the sharding pattern: split by worker when there are any
        def __init__(self, start, end):
            self.start, self.end = start, end

        def __iter__(self):
            info = get_worker_info()
            if info is None:
                return iter(range(self.start, self.end))
            return iter(range(self.start + info.id, self.end, info.num_workers))

        def __len__(self):
            return self.end - self.start

    chain = ChainDataset([Shards(0, 3), Shards(10, 12)])
    o("worker info", get_worker_info())
    o("chain", list(chain))
    o("chain len", len(chain))
    o("batches", list(DataLoader(chain, batch_size=2)))


@program
def tr_samplers_and_iterable_dataset(torch, o):
    BatchSampler, DataLoader, IterableDataset, RandomSampler, SequentialSampler, SubsetRandomSampler, TensorDataset, WeightedRandomSampler = _names(torch.utils.data, 'BatchSampler', 'DataLoader', 'IterableDataset', 'RandomSampler', 'SequentialSampler', 'SubsetRandomSampler', 'TensorDataset', 'WeightedRandomSampler')
    ds = TensorDataset(torch.arange(10.0))
    o("sequential", list(SequentialSampler(ds)))
    o("batch sampler", list(BatchSampler(SequentialSampler(range(7)), batch_size=3, drop_last=False)))
    o("batch sampler drop", list(BatchSampler(range(7), batch_size=3, drop_last=True)))
    o("len batch sampler", len(BatchSampler(range(7), batch_size=3, drop_last=False)))
    rs = RandomSampler(ds)
    o("random covers", sorted(rs) == list(range(10)))
    o("random len", len(rs))
    rs2 = RandomSampler(ds, replacement=True, num_samples=25)
    o("replacement len", (len(list(rs2)), len(rs2)))
    sub = SubsetRandomSampler(list(range(6)))
    o("subset random", sorted(sub))
    loader = DataLoader(ds, batch_size=4, sampler=SubsetRandomSampler(range(8)))
    o("cs231n loader", sorted(torch.cat([b[0] for b in loader]).tolist()))
    o("cs231n len", len(loader))
    o("sampler module", len(torch.utils.data.sampler.SubsetRandomSampler(range(3))))
    o("dataloader module", torch.utils.data.dataloader.default_collate([1, 2]))
    w = WeightedRandomSampler([0.0, 0.0, 1.0, 0.0], num_samples=5, replacement=True)
    o("weighted", list(w))
    bl = DataLoader(ds, batch_sampler=BatchSampler(SequentialSampler(ds), batch_size=4, drop_last=False))
    o("batch_sampler loader", [b[0] for b in bl])
    o.raises("shuffle and sampler", lambda: DataLoader(ds, sampler=SequentialSampler(ds), shuffle=True),
             "sampler option is mutually exclusive with shuffle")

    class Stream(IterableDataset):
        def __init__(self, n):
            self.n = n

        def __iter__(self):
            return iter(torch.tensor([float(i)]) for i in range(self.n))

    o("iterable", list(DataLoader(Stream(5), batch_size=2)))
    o.raises("iterable shuffle", lambda: DataLoader(Stream(5), shuffle=True),
             "DataLoader with IterableDataset: expected unspecified shuffle option, but got shuffle=True")


# ---- initialisation ---------------------------------------------------------------------------

@program
def tr_init_statistics_and_gain(torch, o):
    nn = torch.nn
    init = nn.init
    o("gains", [init.calculate_gain(n) for n in ["linear", "conv2d", "sigmoid", "tanh", "relu", "selu"]])
    o("leaky gain", [init.calculate_gain("leaky_relu"), init.calculate_gain("leaky_relu", 0.2)])
    o.raises("bad gain", lambda: init.calculate_gain("swish"), "Unsupported nonlinearity swish")
    torch.manual_seed(0)
    w = torch.empty(400, 300)

    def std_of(fn, **kw):
        r = fn(w, **kw)
        o(f"{fn.__name__} {sorted(kw.items())} returns", r is w)
        return round(float(w.std()), 2), round(float(w.mean()), 1)

    o("xavier uniform", std_of(init.xavier_uniform_))
    o("xavier normal gain", std_of(init.xavier_normal_, gain=init.calculate_gain("tanh")))
    o("kaiming uniform", std_of(init.kaiming_uniform_, nonlinearity="relu"))
    o("kaiming normal fan_out", std_of(init.kaiming_normal_, mode="fan_out", nonlinearity="relu"))
    o("kaiming a", std_of(init.kaiming_normal_, a=math.sqrt(5)))
    o("normal", std_of(init.normal_, mean=0.0, std=0.02))
    o("uniform", std_of(init.uniform_, a=-0.1, b=0.1))
    o("trunc", std_of(init.trunc_normal_, std=0.02))
    init.trunc_normal_(w, mean=0.0, std=1.0, a=-0.5, b=0.5)
    o("trunc bounds", (bool(w.min() >= -0.5), bool(w.max() <= 0.5)))
    conv_w = torch.empty(16, 8, 3, 3)
    init.kaiming_normal_(conv_w, mode="fan_out", nonlinearity="relu")
    o("conv fan_out std", round(float(conv_w.std()), 2))
    o.raises("1d fan", lambda: init.xavier_uniform_(torch.empty(5)),
             "Fan in and fan out can not be computed for tensor with fewer than 2 dimensions")
    q = init.orthogonal_(torch.empty(5, 3))
    o("orthogonal", torch.allclose(q.T @ q, torch.eye(3), atol=1e-5))
    e = init.eye_(torch.empty(3, 4))
    o("eye", e)
    d = init.dirac_(torch.empty(2, 2, 3))
    o("dirac", d)
    sp = init.sparse_(torch.empty(10, 4), sparsity=0.5)
    o("sparse zeros per column", (sp == 0).sum(0))
    lin = nn.Linear(3, 2)
    y = lin(torch.ones(1, 3, requires_grad=True)).sum()
    init.constant_(lin.weight, 0.5)
    o("init leaves leaf", (lin.weight.is_leaf, lin.weight.requires_grad, lin.weight.grad_fn is None))
    o("version bump", lin.weight._version > 0)
    o.raises("backward after in-place init", lambda: y.backward(), "modified by an inplace operation")
    o.warns("deprecated name", lambda: init.xavier_uniform(torch.empty(2, 2)), "is now deprecated in favor of")
    o.warns("zero-element", lambda: init.kaiming_uniform_(torch.empty(0, 3)), "no-op")
    o.warns("trunc far", lambda: init.trunc_normal_(torch.empty(3), mean=5.0, a=-1.0, b=1.0, std=0.5),
            "mean is more than 2 std")
    o.raises("bad slope", lambda: init.calculate_gain("leaky_relu", "x"), "negative_slope x not a valid number")



# ---- tutorial training loops ------------------------------------------------------------------

def _tiny_gpt(torch, vocab=7, n_embd=8, block=4):
    nn = torch.nn
    F = nn.functional

    class Head(nn.Module):
        def __init__(self):
            super().__init__()
            self.key = nn.Linear(n_embd, n_embd, bias=False)
            self.query = nn.Linear(n_embd, n_embd, bias=False)
            self.value = nn.Linear(n_embd, n_embd, bias=False)
            self.register_buffer("tril", torch.tril(torch.ones(block, block)))

        def forward(self, x):
            B, T, C = x.shape
            k, q = self.key(x), self.query(x)
            wei = q @ k.transpose(-2, -1) * C ** -0.5
            wei = wei.masked_fill(self.tril[:T, :T] == 0, float("-inf"))
            return F.softmax(wei, dim=-1) @ self.value(x)

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tok = nn.Embedding(vocab, n_embd)
            self.pos = nn.Embedding(block, n_embd)
            self.head = Head()
            self.ln = nn.LayerNorm(n_embd)
            self.lm_head = nn.Linear(n_embd, vocab)
            self.apply(self._init_weights)

        def _init_weights(self, module):
            if isinstance(module, nn.Linear) and module.bias is not None:
                nn.init.zeros_(module.bias)

        def forward(self, idx, targets=None):
            B, T = idx.shape
            x = self.tok(idx) + self.pos(torch.arange(T))
            logits = self.lm_head(self.ln(x + self.head(x)))
            loss = None
            if targets is not None:
                loss = F.cross_entropy(logits.view(B * T, -1), targets.view(B * T))
            return logits, loss

    return _fill(torch, GPT(), scale=0.2)


@program(1e-4, atol=1e-6)
def tr_nanogpt_configure_optimizers(torch, o):
    model = _tiny_gpt(torch)
    param_dict = {pn: p for pn, p in model.named_parameters() if p.requires_grad}
    decay = [p for n, p in param_dict.items() if p.dim() >= 2]
    nodecay = [p for n, p in param_dict.items() if p.dim() < 2]
    o("decay names", [n for n, p in param_dict.items() if p.dim() >= 2])
    o("counts", (sum(p.numel() for p in decay), sum(p.numel() for p in nodecay)))
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": nodecay, "weight_decay": 0.0}], lr=3e-3, betas=(0.9, 0.95))
    data = torch.tensor([[1, 2, 3, 4, 5], [2, 3, 4, 5, 6], [0, 1, 2, 3, 4], [6, 5, 4, 3, 2]])
    xb, yb = data[:, :4].contiguous(), data[:, 1:].contiguous()
    max_iters, warmup = 12, 3

    def get_lr(it):
        if it < warmup:
            return 3e-3 * (it + 1) / warmup
        ratio = (it - warmup) / (max_iters - warmup)
        return 3e-4 + 0.5 * (1.0 + math.cos(math.pi * ratio)) * (3e-3 - 3e-4)

    losses = []
    for it in range(max_iters):
        for g in opt.param_groups:
            g["lr"] = get_lr(it)
        _, loss = model(xb, yb)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        norm = torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        losses.append(round(loss.item(), 5))
    o("losses", losses)
    o("last norm", norm)
    o("lm_head", model.lm_head.weight)

    @torch.no_grad()
    def estimate_loss():
        model.eval()
        out = model(xb, yb)[1].item()
        model.train()
        return out

    o("estimate", estimate_loss())
    o("training", model.training)
    logits, _ = model(xb[:, -2:])
    o("generate step", torch.argmax(logits[:, -1, :], dim=-1))


@program(1e-5, atol=1e-6)
def tr_gradient_accumulation_and_early_stopping(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)
    accum = 3
    best, best_state, patience, bad = float("inf"), None, 2, 0
    history = []
    for epoch in range(6):
        opt.zero_grad()
        for i in range(accum):
            xb, yb = x[2 * i:2 * i + 2], y[2 * i:2 * i + 2]
            loss = nn.functional.mse_loss(model(xb), yb) / accum
            loss.backward()
        opt.step()
        with torch.no_grad():
            val = nn.functional.mse_loss(model(x), y).item()
        history.append(val)
        if val < best - 1e-3:
            best, bad = val, 0
            best_state = copy.deepcopy(model.state_dict())
        else:
            bad += 1
            if bad >= patience:
                break
    o("history", history)
    o("best", best)
    model.load_state_dict(best_state)
    o("restored", list(model.parameters()))
    o("grad after step", [p.grad for p in model.parameters()])


@program(1e-5, atol=1e-6)
def tr_d2l_train_epoch_accumulator(torch, o):
    nn = torch.nn

    class Accumulator:
        def __init__(self, n):
            self.data = [0.0] * n

        def add(self, *args):
            self.data = [a + float(b) for a, b in zip(self.data, args)]

        def __getitem__(self, idx):
            return self.data[idx]

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    net = nn.Sequential(nn.Flatten(), nn.Linear(3, 2))
    net[1].weight.data.normal_(0, 0.01)

    def init_weights(m):
        if type(m) == nn.Linear:
            nn.init.constant_(m.weight, 0.01)
            nn.init.zeros_(m.bias)

    net.apply(init_weights)
    loss = nn.CrossEntropyLoss(reduction="none")
    trainer = torch.optim.SGD(net.parameters(), lr=0.1)
    data = torch.utils.data.TensorDataset(torch.tensor(X_DATA), torch.tensor(Y_CLS))
    for epoch in range(3):
        net.train()
        metric = Accumulator(3)
        for X, y in torch.utils.data.DataLoader(data, batch_size=4):
            y_hat = net(X)
            l = loss(y_hat, y)
            trainer.zero_grad()
            l.mean().backward()
            trainer.step()
            metric.add(float(l.sum()), accuracy(y_hat, y), y.numel())
        o(f"epoch {epoch}", (metric[0] / metric[2], metric[1] / metric[2]))
    net.eval()
    with torch.no_grad():
        o("eval acc", accuracy(net(torch.tensor(X_DATA)), torch.tensor(Y_CLS)))
    o("params", [p for p in net.parameters()])


@program(1e-5, atol=1e-6)
def tr_fastai_learner_style_loop(torch, o):
    nn = torch.nn

    class Learner:
        def __init__(self, model, lr, loss_func, opt_func=torch.optim.SGD):
            self.model, self.lr, self.loss_func = model, lr, loss_func
            self.opt = opt_func(model.parameters(), lr)
            self.recorder = []

        def one_batch(self, xb, yb):
            self.preds = self.model(xb)
            self.loss = self.loss_func(self.preds, yb)
            if self.model.training:
                self.loss.backward()
                self.opt.step()
                self.opt.zero_grad()
            self.recorder.append((self.model.training, round(self.loss.item(), 6)))

        def fit(self, n_epochs, train, valid):
            for _ in range(n_epochs):
                self.model.train()
                for xb, yb in train:
                    self.one_batch(xb, yb)
                self.model.eval()
                with torch.no_grad():
                    for xb, yb in valid:
                        self.one_batch(xb, yb)

    x, y = torch.tensor(X_DATA), torch.tensor(Y_CLS)
    train = list(zip(x[:4].split(2), y[:4].split(2)))
    valid = [(x[4:], y[4:])]
    # no bias before the batch norm: its gradient is rounding noise, which Adam would amplify
    model = nn.Sequential(nn.Linear(3, 5, bias=False), nn.BatchNorm1d(5), nn.ReLU(), nn.Dropout(0.0), nn.Linear(5, 2))
    _fill(torch, model)
    learn = Learner(model, 0.1, nn.CrossEntropyLoss())
    learn.fit(3, train, valid)
    o("recorder", learn.recorder)
    o("running stats", [model[1].running_mean, model[1].running_var, model[1].num_batches_tracked])
    o("grads cleared", [p.grad for p in model.parameters()])


@program(1e-5, atol=1e-6)
def tr_transfer_learning_freeze_and_replace_head(torch, o):
    nn = torch.nn
    backbone = nn.Sequential(nn.Conv2d(1, 3, 3), nn.BatchNorm2d(3), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                             nn.Flatten(), nn.Linear(3, 5))
    _fill(torch, backbone)
    for param in backbone.parameters():
        param.requires_grad = False
    backbone[5] = nn.Linear(3, 2)
    _fill(torch, backbone[5])
    o("trainable", [n for n, p in backbone.named_parameters() if p.requires_grad])
    opt = torch.optim.SGD(filter(lambda p: p.requires_grad, backbone.parameters()), lr=0.1, momentum=0.9)
    o("opt params", sum(len(g["params"]) for g in opt.param_groups))
    x = torch.linspace(-1, 1, 2 * 1 * 5 * 5).view(2, 1, 5, 5)
    y = torch.tensor([0, 1])
    backbone.train()
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(backbone(x), y)
        loss.backward()
        opt.step()
    o("loss", loss)
    o("frozen grads", [p.grad is None for p in backbone[0].parameters()])
    o("bn stats moved", backbone[1].running_mean)
    o("head", list(backbone[5].parameters()))
    backbone.eval()
    o("eval out", backbone(x))
    o("repr head", repr(backbone))


@program(1e-5, atol=1e-6)
def tr_checkpoint_resume_with_scheduler(torch, o):
    nn = torch.nn
    x, y = torch.tensor(X_DATA), torch.tensor(Y_CLS)

    def build():
        model = make_mlp(torch)
        opt = torch.optim.SGD(model.parameters(), lr=0.2, momentum=0.9, nesterov=True)
        sched = torch.optim.lr_scheduler.MultiStepLR(opt, milestones=[2, 4], gamma=0.5)
        return model, opt, sched

    def epoch(model, opt, sched):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        sched.step()
        return loss.item()

    model, opt, sched = build()
    losses = [epoch(model, opt, sched) for _ in range(3)]
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "checkpoint.pth")
        torch.save({"epoch": 3, "model_state_dict": model.state_dict(),
                    "optimizer_state_dict": opt.state_dict(), "scheduler": sched.state_dict(),
                    "losses": losses}, path)
        losses += [epoch(model, opt, sched) for _ in range(3)]
        ck = torch.load(path, weights_only=False)
    m2, o2, s2 = build()
    m2.load_state_dict(ck["model_state_dict"])
    o2.load_state_dict(ck["optimizer_state_dict"])
    s2.load_state_dict(ck["scheduler"])
    resumed = ck["losses"] + [epoch(m2, o2, s2) for _ in range(3)]
    o("continuous", losses)
    o("resumed", resumed)
    o("lr", (sched.get_last_lr(), s2.get_last_lr()))
    o("params", list(m2.parameters()))
    o("milestones", sorted(s2.state_dict()["milestones"].items()))


@program(1e-5, atol=1e-6)
def tr_manual_sgd_with_parameters_and_no_grad(torch, o):
    nn = torch.nn
    model = make_mlp(torch, "Sigmoid")
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)
    lr = 0.5
    for t in range(5):
        loss = ((model(x) - y) ** 2).sum()
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= lr * param.grad
        o(f"loss {t}", loss.item())
    o("params", list(model.parameters()))
    o("leaf", [p.is_leaf for p in model.parameters()])
    for p in model.parameters():
        p.data.add_(p.grad.data, alpha=-lr)
    o("data update", list(model.parameters()))
    o("versions positive", all(p._version > 0 for p in model.parameters()))
    o.raises("in-place on leaf", lambda: model[0].weight.sub_(1.0),
             "a leaf Variable that requires grad is being used in an in-place operation.")



@program(1e-5, atol=1e-6)
def tr_packed_sequences_through_lstm_and_gru(torch, o):
    nn = torch.nn
    rnn_utils = nn.utils.rnn
    seqs = [torch.linspace(-1, 1, 3 * 2).view(3, 2), torch.linspace(0, 2, 2).view(1, 2),
            torch.linspace(1, -1, 4 * 2).view(4, 2)]
    lengths = torch.tensor([3, 1, 4])
    padded = rnn_utils.pad_sequence(seqs, batch_first=True).requires_grad_()
    packed = rnn_utils.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
    o("packed", (packed.data, packed.batch_sizes, packed.sorted_indices, packed.unsorted_indices))
    o("type", type(packed).__name__)
    for kind, extra in [("LSTM", {}), ("GRU", {"bidirectional": True}), ("RNN", {"num_layers": 2})]:
        layer = _fill(torch, getattr(nn, kind)(2, 3, batch_first=True, **extra))
        packed = rnn_utils.pack_padded_sequence(padded, lengths, batch_first=True, enforce_sorted=False)
        out, state = layer(packed)
        o(f"{kind} out type", type(out).__name__)
        unpacked, out_lengths = rnn_utils.pad_packed_sequence(out, batch_first=True, total_length=5)
        o(f"{kind} unpacked", unpacked)
        o(f"{kind} lengths", out_lengths)
        o(f"{kind} state", list(state) if isinstance(state, tuple) else state)
        h = state[0] if isinstance(state, tuple) else state
        (unpacked.pow(2).sum() + h.sum()).backward()
        o(f"{kind} input grad", padded.grad)
        o(f"{kind} weight grad", layer.weight_hh_l0.grad)
        padded.grad = None
    lstm = _fill(torch, nn.LSTM(2, 3))
    h0 = (torch.linspace(-0.5, 0.5, 9).view(1, 3, 3), torch.linspace(0.5, -0.5, 9).view(1, 3, 3))
    out, (h, c) = lstm(packed_t := rnn_utils.pack_sequence(seqs, enforce_sorted=False), h0)
    o("with h0", (h, c))
    o("pack_sequence", packed_t.batch_sizes)
    o("unpack", rnn_utils.unpack_sequence(packed_t))
    o.raises("unsorted", lambda: rnn_utils.pack_padded_sequence(padded, lengths, batch_first=True),
             "`lengths` array must be sorted in decreasing order when `enforce_sorted` is True")
    o.raises("zero length", lambda: rnn_utils.pack_padded_sequence(padded, [4, 0, 0], batch_first=True),
             "Length of all samples has to be greater than 0")
    o.raises("total_length", lambda: rnn_utils.pad_packed_sequence(packed, total_length=2),
             "Expected total_length to be at least the length of the longest sequence in input")
    # the common pattern: last hidden state of each sequence as features for a classifier
    gru = _fill(torch, nn.GRU(2, 3, batch_first=True))
    _, h_n = gru(rnn_utils.pack_padded_sequence(padded.detach(), lengths, batch_first=True,
                                                enforce_sorted=False))
    out, _ = gru(padded.detach())
    o("last steps", (h_n[-1], out[torch.arange(3), lengths - 1]))



@program(1e-5, atol=1e-6)
def tr_weight_norm_and_parametrizations(torch, o):
    nn = torch.nn
    P = nn.utils.parametrize
    layer = _fill(torch, nn.Linear(3, 2))
    opt = torch.optim.SGD(layer.parameters(), lr=0.1)
    nn.utils.parametrizations.weight_norm(layer)
    o("names", [n for n, _ in layer.named_parameters()])
    o("class", type(layer).__name__)
    o("repr", repr(layer))
    o("g", layer.parametrizations.weight.original0)
    o("v", layer.parametrizations.weight.original1)
    o("weight", layer.weight)
    o("state keys", list(layer.state_dict().keys()))
    o("is_parametrized", (P.is_parametrized(layer), P.is_parametrized(layer, "weight"),
                          P.is_parametrized(layer, "bias")))
    x = torch.tensor(X_DATA)
    opt2 = torch.optim.SGD(layer.parameters(), lr=0.1)
    for _ in range(3):
        opt2.zero_grad()
        layer(x).pow(2).mean().backward()
        opt2.step()
    o("trained g", layer.parametrizations.weight.original0)
    o("trained v", layer.parametrizations.weight.original1)
    o("grad v", layer.parametrizations.weight.original1.grad)
    P.remove_parametrizations(layer, "weight")
    o("removed", ([n for n, _ in layer.named_parameters()], type(layer).__name__, layer.weight))

    class Symmetric(nn.Module):
        def forward(self, X):
            return X.triu() + X.triu(1).transpose(-1, -2)

        def right_inverse(self, A):
            return A.triu()

    sq = _fill(torch, nn.Linear(3, 3))
    w_param = sq.weight
    P.register_parametrization(sq, "weight", Symmetric())
    o("same parameter object", sq.parametrizations.weight.original is w_param)
    o("original", sq.parametrizations.weight.original)
    o("symmetric", sq.weight)
    sq.weight = torch.tensor([[1.0, 2.0, 3.0], [2.0, 4.0, 5.0], [3.0, 5.0, 6.0]])
    o("after assign original", sq.parametrizations.weight.original)
    with P.cached():
        o("cached same", sq.weight is sq.weight)
    o("uncached differs", sq.weight is sq.weight)
    class Flat(nn.Module):
        def forward(self, X):
            return X.reshape(-1)

    o.raises("shape change", lambda: P.register_parametrization(nn.Linear(3, 2), "weight", Flat()),
             "Registering a parametrization may not change the shape of the tensor")
    o.raises("missing name", lambda: P.register_parametrization(nn.Linear(3, 2), "foo", Symmetric()),
             "does not have a parameter, a buffer, or a parametrized element with name 'foo'")

    old = _fill(torch, nn.Linear(3, 2))
    o.warns("old weight_norm", lambda: nn.utils.weight_norm(old), "is deprecated in favor of")
    o("old names", [n for n, _ in old.named_parameters()])
    o("old g", old.weight_g)
    o("old out", old(x))
    old(x).sum().backward()
    o("old grads", (old.weight_g.grad, old.weight_v.grad))
    conv = nn.utils.weight_norm(_fill(torch, nn.Conv1d(2, 3, 2)), dim=None)
    o("dim None g", conv.weight_g)
    o.raises("twice", lambda: nn.utils.weight_norm(old), "Cannot register two weight_norm hooks on the same parameter weight")
    nn.utils.remove_weight_norm(old)
    o("old removed", ([n for n, _ in old.named_parameters()], old.weight))



# ---- more of the Module and optimiser APIs ----------------------------------------------------

@program(1e-5, atol=1e-6)
def tr_tied_weights_and_shared_modules(torch, o):
    nn = torch.nn

    class TiedLM(nn.Module):
        def __init__(self):
            super().__init__()
            self.wte = nn.Embedding(5, 3)
            self.block = nn.Linear(3, 3)
            self.lm_head = nn.Linear(3, 5, bias=False)
            self.wte.weight = self.lm_head.weight  # nanoGPT's weight tying
            self.shared = self.block

        def forward(self, idx):
            return self.lm_head(self.shared(self.block(self.wte(idx))))

    model = _fill(torch, TiedLM())
    o("named_parameters", [n for n, _ in model.named_parameters()])
    o("with duplicates", [n for n, _ in model.named_parameters(remove_duplicate=False)])
    o("named_modules", [n for n, _ in model.named_modules()])
    o("modules dup", [n for n, _ in model.named_modules(remove_duplicate=False)])
    o("children", [n for n, _ in model.named_children()])
    o("count", sum(p.numel() for p in model.parameters()))
    o("state keys", list(model.state_dict().keys()))
    o("same storage", model.state_dict()["wte.weight"].data_ptr() == model.state_dict()["lm_head.weight"].data_ptr())
    opt = torch.optim.AdamW(model.parameters(), lr=0.01)
    idx = torch.tensor([[0, 1, 2], [3, 4, 0]])
    for _ in range(3):
        opt.zero_grad()
        nn.functional.cross_entropy(model(idx).view(-1, 5), torch.tensor([1, 2, 3, 4, 0, 1])).backward()
        opt.step()
    o("tied still", model.wte.weight is model.lm_head.weight)
    o("weights", list(model.parameters()))
    o("state entries", len(opt.state))


@program
def tr_batchnorm_old_checkpoint_and_assign(torch, o):
    nn = torch.nn
    model = _fill(torch, nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4)))
    old = {k: v for k, v in model.state_dict().items() if not k.endswith("num_batches_tracked")}
    fresh = nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4))
    res = fresh.load_state_dict(old)
    o("plain dict without num_batches_tracked", repr(res))
    o("loaded", list(fresh.state_dict().values()))
    from collections import OrderedDict
    with_meta = model.state_dict()
    del with_meta["1.num_batches_tracked"]
    o.raises("with metadata", lambda: fresh.load_state_dict(with_meta), 'Missing key(s) in state_dict: "1.num_batches_tracked"')
    target = nn.Linear(3, 4)
    w = target.weight
    target.load_state_dict(OrderedDict(weight=torch.ones(4, 3), bias=torch.zeros(4)), assign=True)
    o("assign replaces", target.weight is w)
    o("assign type", type(target.weight).__name__)
    o("assign requires_grad", target.weight.requires_grad)
    o.raises("not a dict", lambda: target.load_state_dict([1, 2]), "Expected state_dict to be dict-like")
    o.raises("wrong value type", lambda: target.load_state_dict({"weight": [1.0], "bias": torch.zeros(4)}),
             'While copying the parameter named "weight", expected torch.Tensor or Tensor-like object from checkpoint but received')


@program
def tr_save_whole_model_and_buffers(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    model.register_buffer("scale", torch.tensor([1.0, 2.0]))
    model.register_buffer("tmp", torch.zeros(2), persistent=False)
    model.register_buffer("nothing", None)
    o("buffers with None", [n for n, _ in model.named_buffers()])
    o("state keys", list(model.state_dict().keys()))
    model.double()
    o("non-persistent moved", model.tmp.dtype)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "whole.pt")
        torch.save(model, path)
        loaded = torch.load(path, weights_only=False)
        o("type", type(loaded).__name__)
        o("params", list(loaded.parameters()))
        o("tmp kept", loaded.tmp)
        o.raises("weights_only refuses modules", lambda: torch.load(path, weights_only=True), "Weights only load failed")
        torch.save([model.state_dict(), {"step": 5}], path)
        o("list", torch.load(path)[1])


@program(1e-6, atol=1e-7)
def tr_custom_optimizer_subclass(torch, o):
    nn = torch.nn

    class MomentumSGD(torch.optim.Optimizer):
        def __init__(self, params, lr=0.1, mom=0.9):
            if lr < 0.0:
                raise ValueError(f"Invalid learning rate: {lr}")
            defaults = dict(lr=lr, mom=mom)
            super().__init__(params, defaults)

        @torch.no_grad()
        def step(self, closure=None):
            loss = None
            if closure is not None:
                with torch.enable_grad():
                    loss = closure()
            for group in self.param_groups:
                for p in group["params"]:
                    if p.grad is None:
                        continue
                    state = self.state[p]
                    if len(state) == 0:
                        state["step"] = 0
                        state["buf"] = torch.zeros_like(p)
                    state["step"] += 1
                    buf = state["buf"]
                    buf.mul_(group["mom"]).add_(p.grad)
                    p.add_(buf, alpha=-group["lr"])
            return loss

    model = make_mlp(torch)
    opt = MomentumSGD(model.parameters(), lr=0.05)
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    o("losses", [opt.step(closure).item() for _ in range(4)])
    o("params", list(model.parameters()))
    o("state", [opt.state[p]["step"] for p in model.parameters()])
    o("defaults", opt.defaults)
    o("groups", [sorted(g.keys()) for g in opt.param_groups])
    o("repr", repr(opt))
    sd = opt.state_dict()
    o("sd", (sorted(sd["state"].keys()), sd["param_groups"]))
    o.raises("bad lr", lambda: MomentumSGD(model.parameters(), lr=-1.0), "Invalid learning rate: -1.0")
    o.raises("group missing required", lambda: torch.optim.SGD([{"params": model[0].parameters()}]),
             "parameter group didn't specify a value of required optimization parameter lr")


@program
def tr_optimizer_step_hooks(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    events = []
    h1 = opt.register_step_pre_hook(lambda optimizer, args, kwargs: events.append(("pre", type(optimizer).__name__)))
    h2 = opt.register_step_post_hook(lambda optimizer, args, kwargs: events.append(("post", len(args))))
    nn.functional.mse_loss(model(torch.tensor(X_DATA)), torch.tensor(Y_REG)).backward()
    opt.step()
    h1.remove()
    opt.step()
    h2.remove()
    opt.step()
    o("events", events)
    o("params", list(model.parameters()))
    calls = []
    opt.register_state_dict_post_hook(lambda optimizer, sd: calls.append(sorted(sd.keys())))
    opt.state_dict()
    o("state_dict hook", calls)


@program(1e-5, atol=1e-7)
def tr_fastai_lr_finder(torch, o):
    nn = torch.nn
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x, y = torch.tensor(X_DATA), torch.tensor(Y_CLS)
    start, end, n = 1e-4, 1.0, 12
    mult = (end / start) ** (1 / (n - 1))
    lrs, losses = [], []
    best = float("inf")
    initial = copy.deepcopy(model.state_dict())
    for i in range(n):
        lr = start * mult ** i
        for g in opt.param_groups:
            g["lr"] = lr
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        lrs.append(lr)
        losses.append(loss.item())
        best = min(best, loss.item())
        if loss.item() > 4 * best:
            break
    o("lrs", lrs)
    o("losses", losses)
    model.load_state_dict(initial)
    o("restored", list(model.parameters()))


@program(1e-5, atol=1e-7)
def tr_more_optimizers_rprop_asgd_lbfgs(torch, o):
    nn = torch.nn
    for name, factory in [("rprop", lambda p: torch.optim.Rprop(p, lr=0.01)),
                          ("rprop etas", lambda p: torch.optim.Rprop(p, lr=0.02, etas=(0.4, 1.5), step_sizes=(1e-4, 1.0))),
                          ("asgd", lambda p: torch.optim.ASGD(p, lr=0.05, t0=2, weight_decay=0.01))]:
        model, opt, losses = _train(torch, factory, steps=8)
        o(f"{name} losses", losses)
        o(f"{name} params", list(model.parameters()))


@program(1e-8, atol=1e-10)  # in float64: quasi-Newton steps amplify float32 rounding
def tr_lbfgs_closure_and_strong_wolfe(torch, o):
    nn = torch.nn
    model = make_mlp(torch, "Tanh").double()
    opt = torch.optim.LBFGS(model.parameters(), lr=0.5, max_iter=5, history_size=4)
    x, y = torch.tensor(X_DATA, dtype=torch.float64), torch.tensor(Y_REG, dtype=torch.float64)

    def closure():
        opt.zero_grad()
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        return loss

    o("lbfgs", [opt.step(closure).item() for _ in range(3)])
    o("lbfgs params", list(model.parameters()))
    o("lbfgs state", sorted(k for k in opt.state[model[0].weight].keys()))  # noqa: SIM118 - the .keys() call is checked
    o("lbfgs evals", (opt.state[model[0].weight]["func_evals"], opt.state[model[0].weight]["n_iter"]))
    model2 = make_mlp(torch, "Tanh").double()
    opt2 = torch.optim.LBFGS(model2.parameters(), lr=1, max_iter=10, line_search_fn="strong_wolfe")

    def closure2():
        opt2.zero_grad()
        loss = nn.functional.mse_loss(model2(x), y)
        loss.backward()
        return loss

    o("wolfe", [opt2.step(closure2).item() for _ in range(3)])
    o("wolfe params", list(model2.parameters()))
    o("wolfe evals", opt2.state[model2[0].weight]["func_evals"])
    o.raises("groups", lambda: torch.optim.LBFGS([{"params": model[0].parameters()}, {"params": model[2].parameters()}]),
             "LBFGS doesn't support per-parameter options (parameter groups)")


@program(1e-5, atol=1e-7)
def tr_swa_averaged_model(torch, o):
    nn = torch.nn
    swa_utils = torch.optim.swa_utils
    model = make_mlp(torch)
    swa_model = swa_utils.AveragedModel(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    swa_sched = swa_utils.SWALR(opt, swa_lr=0.05, anneal_epochs=2)
    x, y = torch.tensor(X_DATA), torch.tensor(Y_REG)
    lrs = []
    for epoch in range(5):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        if epoch >= 2:
            swa_model.update_parameters(model)
            swa_sched.step()
        lrs.append(opt.param_groups[0]["lr"])
    o("lrs", lrs)
    o("n_averaged", swa_model.n_averaged)
    o("averaged", list(swa_model.module.parameters()))
    o("names", [n for n, _ in swa_model.named_parameters()])
    o("forward", swa_model(x))
    ema = swa_utils.AveragedModel(model, multi_avg_fn=swa_utils.get_ema_multi_avg_fn(0.9))
    ema.update_parameters(model)
    for _ in range(2):
        opt.zero_grad()
        nn.functional.mse_loss(model(x), y).backward()
        opt.step()
        ema.update_parameters(model)
    o("ema", list(ema.module.parameters()))
    bn_model = _fill(torch, nn.Sequential(nn.Linear(3, 4), nn.BatchNorm1d(4), nn.Linear(4, 2)))
    swa_bn = swa_utils.AveragedModel(bn_model, avg_fn=swa_utils.get_ema_avg_fn(0.5))
    swa_bn.update_parameters(bn_model)
    swa_bn.update_parameters(bn_model)
    loader = torch.utils.data.DataLoader(torch.utils.data.TensorDataset(x, y), batch_size=2)
    swa_utils.update_bn(loader, swa_bn)
    o("update_bn", (swa_bn.module[1].running_mean, swa_bn.module[1].running_var,
                    swa_bn.module[1].num_batches_tracked, swa_bn.module[1].momentum, swa_bn.training))
    o("state keys", list(swa_bn.state_dict().keys()))



@program
def tr_module_call_details(torch, o):
    nn = torch.nn

    class TwoInputs(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(2, 2)
            self.b = nn.Linear(3, 2)

        def forward(self, x, y, scale=1.0, *, mode="sum"):
            out = self.a(x) + self.b(y)
            return out * scale if mode == "sum" else (out, out * scale)

    m = _fill(torch, TwoInputs())
    x, y = torch.linspace(-1, 1, 4).view(2, 2), torch.linspace(0, 1, 6).view(2, 3)
    o("kwargs", m(x, y, scale=2.0))
    o("tuple out", m(x, y, 0.5, mode="pair"))
    o("generator type", type(m.parameters()).__name__)
    o("prefix state", list(m.state_dict(prefix="net.").keys()))

    def pre(module, args, kwargs):
        kwargs = dict(kwargs)
        kwargs["scale"] = 3.0
        return args, kwargs

    h = m.register_forward_pre_hook(pre, with_kwargs=True)
    o("pre kwargs", m(x, y, scale=2.0))
    h.remove()
    o.raises("bad pre return", lambda: (m.register_forward_pre_hook(lambda mod, a, k: 5, with_kwargs=True), m(x, y))[1],
             "forward pre-hook must return None or a tuple of (new_args, new_kwargs)")
    events = []

    def bhook(module, grad_input, grad_output):
        events.append((len(grad_input), len(grad_output), [g is None for g in grad_input]))

    m2 = _fill(torch, TwoInputs())
    m2.register_full_backward_hook(bhook)
    xg = x.clone().requires_grad_()
    out = m2(xg, y.clone().requires_grad_(), 2.0)
    out.sum().backward()
    o("two-input hook", events)
    o("x grad", xg.grad)
    lstm = _fill(torch, nn.LSTM(2, 3))
    seen = []
    lstm.register_forward_hook(lambda mod, args, output: seen.append((type(output).__name__, len(output))))
    lstm(torch.linspace(-1, 1, 8).view(4, 1, 2))
    o("lstm hook", seen)
    o.raises("missing forward", lambda: nn.Module()(x), 'Module [Module] is missing the required "forward" function')
    o.raises("wrong args", lambda: nn.Linear(2, 2)(x, y), "forward() takes 2 positional arguments but 3 were given")


@program(1e-9, atol=1e-12)
def tr_scheduler_details_and_resume(torch, o):
    S = torch.optim.lr_scheduler
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = S.LambdaLR(opt, lambda epoch: 0.5 ** epoch)
    o("initial", sched.get_last_lr())
    o("optimizer attr", sched.optimizer is opt)
    o("base_lrs", sched.base_lrs)
    for _ in range(3):
        opt.step()
        sched.step()
    sd = sched.state_dict()
    o("lambda state", sorted(sd.keys()))
    o("lr_lambdas saved", sd["lr_lambdas"])
    o("last_epoch", sched.last_epoch)
    opt2 = torch.optim.SGD([torch.nn.Parameter(torch.tensor([1.0]))], lr=0.1)
    o.raises("resume without initial_lr", lambda: S.StepLR(opt2, step_size=2, last_epoch=3),
             "param 'initial_lr' is not specified in param_groups[0] when resuming")
    opt3 = torch.optim.SGD([{"params": [torch.nn.Parameter(torch.tensor([1.0]))], "initial_lr": 0.2}], lr=0.1)
    resumed = S.StepLR(opt3, step_size=2, gamma=0.5, last_epoch=3)
    o("resumed", (resumed.get_last_lr(), resumed.last_epoch, opt3.param_groups[0]["lr"]))
    plateau = S.ReduceLROnPlateau(torch.optim.SGD([torch.nn.Parameter(torch.tensor([1.0]))], lr=0.1), patience=0)
    o("plateau initial", plateau.get_last_lr())
    for loss in [1.0, 1.0, 1.0]:
        plateau.step(loss)
    o("plateau after", plateau.get_last_lr())
    o("plateau state keys", sorted(plateau.state_dict().keys()))
    chained = S.ChainedScheduler([S.StepLR(opt, 1, 0.5), S.ExponentialLR(opt, 0.9)])
    opt.step()
    chained.step()
    o("chained", chained.get_last_lr())
    cosine = S.CosineAnnealingLR(opt, T_max=4)
    rates = []
    for _ in range(10):
        opt.step()
        cosine.step()
        rates.append(cosine.get_last_lr()[0])
    o("cosine past T_max", rates)


@program
def tr_data_small_details(torch, o):
    D = torch.utils.data
    ds = D.TensorDataset(torch.arange(5.0))
    o("single tensor item", ds[1])
    o("identity collate", list(D.DataLoader(ds, batch_size=2, collate_fn=lambda b: b)))
    pairs = [(torch.tensor([float(i)]), i % 2 == 0) for i in range(5)]
    o("list of tuples", list(D.DataLoader(pairs, batch_size=3)))
    o("numpy scalars", D.default_collate([np.float32(1.5), np.float32(2.5)]))
    o("bools", D.default_collate([True, False]))
    from collections import namedtuple
    Point = namedtuple("Point", ["x", "y"])
    o("namedtuple", D.default_collate([Point(1, 2.0), Point(3, 4.0)]))
    o("strings", D.default_collate(["a", "b"]))
    loader = D.DataLoader(D.TensorDataset(torch.arange(10.0)), batch_size=3, shuffle=True, drop_last=True)
    o("shuffle drop_last", [b[0].shape for b in loader])
    o("len", len(loader))
    o("sampler type", type(loader.sampler).__name__)
    o("batch_sampler type", type(loader.batch_sampler).__name__)
    o.raises("no len", lambda: len(D.DataLoader(iter([1, 2]))), "has no len()")
    o.raises("batch sampler conflict", lambda: D.DataLoader(ds, batch_size=2, batch_sampler=[[0, 1]]),
             "batch_sampler option is mutually exclusive with batch_size, shuffle, sampler, and drop_last")
    o.raises("bad batch size", lambda: D.BatchSampler(range(3), batch_size=0, drop_last=False),
             "batch_size should be a positive integer value, but got batch_size=0")
    o.raises("persistent workers", lambda: D.DataLoader(ds, persistent_workers=True),
             "persistent_workers option needs num_workers > 0")
    o.raises("prefetch", lambda: D.DataLoader(ds, prefetch_factor=2),
             "prefetch_factor option could only be specified in multiprocessing")
    o("workers accepted", len(D.DataLoader(ds, batch_size=2, num_workers=2, pin_memory=True)))
    o.raises("split fraction", lambda: D.random_split(ds, [0.5, 0.7]),
             "Sum of input lengths does not equal the length of the input dataset!")



@program
def tr_builtin_module_parameter_names_and_counts(torch, o):
    nn = torch.nn
    modules = {
        "lstm": nn.LSTM(3, 4, num_layers=2, bidirectional=True),
        "gru": nn.GRU(3, 4, bias=False),
        "rnn cell": nn.RNNCell(3, 4),
        "mha": nn.MultiheadAttention(8, 2),
        "mha kdim": nn.MultiheadAttention(8, 2, kdim=4, vdim=6, bias=False),
        "encoder layer": nn.TransformerEncoderLayer(8, 2, dim_feedforward=16),
        "encoder": nn.TransformerEncoder(nn.TransformerEncoderLayer(8, 2, dim_feedforward=16), 2),
        "decoder layer": nn.TransformerDecoderLayer(8, 2, dim_feedforward=16, norm_first=True),
        "conv": nn.Conv2d(3, 6, 3, groups=3, bias=False),
        "convT": nn.ConvTranspose2d(6, 3, 2, stride=2),
        "bn": nn.BatchNorm2d(4, affine=False),
        "ln": nn.LayerNorm([4, 5], elementwise_affine=True, bias=False),
        "gn": nn.GroupNorm(2, 4),
        "emb": nn.Embedding(10, 3, padding_idx=1),
        "prelu": nn.PReLU(3),
        "bilinear": nn.Bilinear(2, 3, 4),
    }
    for name, m in modules.items():
        o(f"{name} params", [(n, tuple(p.shape)) for n, p in m.named_parameters()])
        o(f"{name} state", [(k, tuple(v.shape), str(v.dtype)) for k, v in m.state_dict().items()])
        o(f"{name} count", sum(p.numel() for p in m.parameters()))
        o(f"{name} modules", [n for n, _ in m.named_modules()])
    o("encoder repr", repr(modules["encoder"]))
    o("mha repr", repr(modules["mha"]))


@program
def tr_default_initialisation_ranges(torch, o):
    nn = torch.nn
    torch.manual_seed(0)
    lin = nn.Linear(50, 40)
    o("linear weight within 1/sqrt(in)", bool(lin.weight.abs().max() <= 1 / math.sqrt(50)))
    o("linear weight spread", bool(lin.weight.abs().max() > 0.8 / math.sqrt(50)))
    o("linear bias within", bool(lin.bias.abs().max() <= 1 / math.sqrt(50)))
    conv = nn.Conv2d(4, 8, 3)
    fan_in = 4 * 3 * 3
    o("conv weight within", bool(conv.weight.abs().max() <= 1 / math.sqrt(fan_in)))
    o("conv spread", bool(conv.weight.abs().max() > 0.8 / math.sqrt(fan_in)))
    emb = nn.Embedding(2000, 10, padding_idx=0)
    o("embedding std", round(float(emb.weight.std()), 1))
    o("padding row zero", emb.weight[0])
    lstm = nn.LSTM(5, 16)
    o("lstm within", all(bool(p.abs().max() <= 1 / math.sqrt(16)) for p in lstm.parameters()))
    bn = nn.BatchNorm1d(3)
    o("bn", (bn.weight, bn.bias, bn.running_mean, bn.running_var, bn.num_batches_tracked))
    ln = nn.LayerNorm(3)
    o("ln", (ln.weight, ln.bias))
    mha = nn.MultiheadAttention(8, 2)
    o("mha biases zero", (mha.in_proj_bias, mha.out_proj.bias))
    o("prelu", nn.PReLU().weight)
    lazy = nn.LazyLinear(3)
    lazy(torch.ones(2, 7))
    o("lazy shape", lazy.weight.shape)
    o("lazy within", bool(lazy.weight.abs().max() <= 1 / math.sqrt(7)))
    o("requires grad", [p.requires_grad for p in lin.parameters()])



@program(1e-5, atol=1e-6)
def tr_mobilenet_depthwise_separable_block(torch, o):
    nn = torch.nn

    class DepthwiseSeparable(nn.Module):
        def __init__(self, c_in, c_out):
            super().__init__()
            self.depthwise = nn.Conv2d(c_in, c_in, 3, padding=1, groups=c_in, bias=False)
            self.bn1 = nn.BatchNorm2d(c_in)
            self.pointwise = nn.Conv2d(c_in, c_out, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(c_out)
            self.grouped = nn.Conv1d(c_out, c_out, 2, groups=2)

        def forward(self, x):
            x = nn.functional.relu6(self.bn1(self.depthwise(x)))
            x = nn.functional.relu6(self.bn2(self.pointwise(x)))
            return self.grouped(x.flatten(2))

    block = _fill(torch, DepthwiseSeparable(3, 4))
    o("repr", repr(block))
    o("shapes", [(n, tuple(p.shape)) for n, p in block.named_parameters()])
    x = torch.linspace(-2, 2, 2 * 3 * 4 * 4).view(2, 3, 4, 4)
    opt = torch.optim.SGD(block.parameters(), lr=0.05, momentum=0.9)
    for _ in range(3):
        opt.zero_grad()
        out = block(x)
        loss = out.pow(2).mean()
        loss.backward()
        opt.step()
    o("loss", loss)
    o("depthwise grad", block.depthwise.weight.grad)
    o("grouped grad", block.grouped.weight.grad)
    o("params", list(block.parameters()))
    o.raises("channels", lambda: block.depthwise(torch.ones(1, 4, 4, 4)),
             "Given groups=3, weight of size [3, 1, 3, 3], expected input[1, 4, 4, 4] to have 3 channels")
    o.raises("divisible", lambda: nn.Conv2d(3, 4, 3, groups=2), "in_channels must be divisible by groups")



@program(1e-5, atol=1e-6)
def tr_spectral_norm_gan_discriminator(torch, o):
    nn = torch.nn
    disc = _fill(torch, nn.Sequential(nn.Linear(3, 4), nn.LeakyReLU(0.2), nn.Linear(4, 1)))
    nn.utils.spectral_norm(disc[0])
    nn.utils.spectral_norm(disc[2])
    # the power-iteration vectors start random: the same values in both libraries
    with torch.no_grad():
        disc[0].weight_u.copy_(torch.tensor([0.5, -0.5, 0.5, 0.5]))
        disc[0].weight_v.copy_(torch.tensor([0.6, 0.0, 0.8]))
        disc[2].weight_u.copy_(torch.tensor([1.0]))
        disc[2].weight_v.copy_(torch.tensor([0.5, 0.5, -0.5, 0.5]))
    o("names", [n for n, _ in disc.named_parameters()])
    o("buffers", [n for n, _ in disc.named_buffers()])
    o("state keys", list(disc.state_dict().keys()))
    opt = torch.optim.Adam(disc.parameters(), lr=0.01, betas=(0.5, 0.999))
    x = torch.tensor(X_DATA)
    for _ in range(3):
        opt.zero_grad()
        loss = nn.functional.binary_cross_entropy_with_logits(disc(x), torch.ones(6, 1))
        loss.backward()
        opt.step()
    o("loss", loss)
    o("u", disc[0].weight_u)
    o("v", disc[0].weight_v)
    o("weight", disc[0].weight)
    o("orig", disc[0].weight_orig)
    disc.eval()
    before = disc[0].weight_u.clone()
    o("eval out", disc(x))
    o("eval keeps u", torch.equal(before, disc[0].weight_u))
    o.raises("twice", lambda: nn.utils.spectral_norm(disc[0]), "Cannot register two spectral_norm hooks on the same parameter weight")
    nn.utils.remove_spectral_norm(disc[0])
    o("removed", ([n for n, _ in disc[0].named_parameters()], disc[0].weight))



@program
def tr_container_reprs_and_weights_only_checkpoints(torch, o):
    nn = torch.nn
    from collections import OrderedDict
    model = nn.Sequential(OrderedDict([("conv", nn.Conv2d(1, 2, 3)), ("act", nn.ReLU()),
                                       ("heads", nn.ModuleDict({"a": nn.Linear(2, 2), "b": nn.Identity()}))]))
    o("ordered repr", repr(model))
    o("getattr by name", type(model.conv).__name__)
    o("param list repr", repr(nn.ParameterList([nn.Parameter(torch.zeros(2, 3)), nn.Parameter(torch.ones(1))])))
    o("param dict repr", repr(nn.ParameterDict({"w": nn.Parameter(torch.zeros(2)), "b": nn.Parameter(torch.ones(3))})))

    class Multi(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(1, 1)

        def extra_repr(self):
            return "line one\nline two"

    o("multi-line extra_repr", repr(Multi()))
    o("identity args", repr(nn.Identity(54, unused="x")))
    lin = make_mlp(torch)
    opt = torch.optim.Adam(lin.parameters(), lr=0.01)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=5)
    lin(torch.tensor(X_DATA)).sum().backward()
    opt.step()
    sched.step()
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "ck.pt")
        torch.save({"opt": opt.state_dict(), "sched": sched.state_dict(), "model": lin.state_dict()}, path)
        ck = torch.load(path, weights_only=True)
    o("opt state", ck["opt"]["state"][0])
    o("opt groups", ck["opt"]["param_groups"])
    o("sched", sorted(ck["sched"].items()))



@program(1e-9, atol=1e-12)
def tr_warm_restarts_fractional_epochs_and_global_backward_hooks(torch, o):
    S = torch.optim.lr_scheduler
    p = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([p], lr=0.1)
    sched = S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2, eta_min=0.001)
    iters = 4
    rates = []
    for epoch in range(5):
        for i in range(iters):
            opt.step()
            o.warns(f"step {epoch}.{i}", lambda: sched.step(epoch + i / iters))
            rates.append(sched.get_last_lr()[0])
    o("rates", rates)
    o("T_cur", (sched.T_cur, sched.T_i, sched.last_epoch))
    o.raises("negative epoch", lambda: sched.step(-1), "Expected non-negative epoch, but got -1")
    nn = torch.nn
    model = make_mlp(torch)
    seen = []
    h = nn.modules.module.register_module_full_backward_hook(
        lambda m, gi, go: seen.append((type(m).__name__, len(gi))))
    hp = nn.modules.module.register_module_full_backward_pre_hook(
        lambda m, go: seen.append(("pre " + type(m).__name__, len(go))))
    try:
        model(torch.tensor(X_DATA, requires_grad=True)).sum().backward()
    finally:
        h.remove()
        hp.remove()
    o("global backward hooks", seen)
    model.to(device="cpu", dtype=torch.float64)
    o("to device and dtype", [q.dtype for q in model.parameters()])
    model.to(torch.device("cpu"))
    o("to device object", model[0].weight.dtype)
    o("to tensor", model.to(torch.zeros(1, dtype=torch.float32))[0].weight.dtype)


@program
def tr_sparse_adam_refuses_dense_gradients(torch, o):
    emb = torch.nn.Embedding(5, 3)
    _fill(torch, emb)
    opt = torch.optim.SparseAdam(emb.parameters(), lr=0.01)
    o("param_groups", [{k: v for k, v in g.items() if k != "params"} for g in opt.param_groups])
    o("step without gradients", opt.step(lambda: 1.5))
    emb(torch.tensor([0, 2, 2])).sum().backward()
    o.raises("dense gradient", opt.step, "SparseAdam does not support dense gradients, please consider Adam instead")
    o("state untouched", len(opt.state))
    o("weight untouched", emb.weight)
    for name, kwargs, phrase in (("lr", {"lr": 0.0}, "Invalid learning rate: 0.0"),
                                 ("eps", {"eps": -1.0}, "Invalid epsilon value: -1.0"),
                                 ("beta1", {"betas": (1.0, 0.9)}, "Invalid beta parameter at index 0: 1.0"),
                                 ("beta2", {"betas": (0.9, -0.1)}, "Invalid beta parameter at index 1: -0.1")):
        o.raises(name, lambda kwargs=kwargs: torch.optim.SparseAdam(emb.parameters(), **kwargs), phrase)


@program(1e-6, atol=1e-6)
def tr_fuse_conv_and_linear_with_batchnorm_for_inference(torch, o):
    nn = torch.nn
    fuse_conv_bn_eval, fuse_linear_bn_eval = _names(nn.utils, "fuse_conv_bn_eval", "fuse_linear_bn_eval")
    x = torch.linspace(-1.0, 1.0, 2 * 3 * 5 * 5).reshape(2, 3, 5, 5)
    for conv, bn, transpose in ((nn.Conv2d(3, 4, 3, padding=1), nn.BatchNorm2d(4), False),
                                (nn.Conv2d(3, 4, 3, bias=False), nn.BatchNorm2d(4, affine=False), False),
                                (nn.ConvTranspose2d(3, 4, 2, stride=2), nn.BatchNorm2d(4), True)):
        _fill(torch, conv)
        _fill(torch, bn, scale=0.5)
        with torch.no_grad():
            bn.running_mean.copy_(torch.tensor([0.1, -0.2, 0.3, 0.0]))
            bn.running_var.copy_(torch.tensor([0.5, 2.0, 1.0, 0.25]))
        o.raises("in training mode", lambda conv=conv, bn=bn: fuse_conv_bn_eval(conv, bn), "Fusion only for eval!")
        conv.eval()
        bn.eval()
        fused = fuse_conv_bn_eval(conv, bn, transpose=transpose)
        o("fused type", type(fused).__name__)
        o("a copy", fused is not conv and fused.weight is not conv.weight)
        o("weight", fused.weight)
        o("bias", fused.bias)
        o("parameters", [(name, type(p).__name__, p.requires_grad, p.is_leaf) for name, p in fused.named_parameters()])
        o("same output", fused(x))
        o("unfused", bn(conv(x)))
    lin, bn = _fill(torch, nn.Linear(3, 4)), _fill(torch, nn.BatchNorm1d(4), scale=0.5)
    lin.weight.requires_grad_(False)
    lin.eval()
    bn.eval()
    fused = fuse_linear_bn_eval(lin, bn)
    o("linear", [(name, p, p.requires_grad) for name, p in fused.named_parameters()])
    o("linear output", fused(torch.tensor(X_DATA)))
    o("one feature", fuse_linear_bn_eval(nn.Linear(3, 4).eval(), nn.BatchNorm1d(1).eval()).bias.shape)
    o.raises("features differ", lambda: fuse_linear_bn_eval(nn.Linear(3, 4).eval(), nn.BatchNorm1d(3).eval()),
             "got linear.out_features=4 and bn.num_features=3")
    o("float64", fuse_linear_bn_eval(nn.Linear(3, 4).double().eval(), nn.BatchNorm1d(4).eval()).weight.dtype)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
