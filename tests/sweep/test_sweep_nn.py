"""Conformance sweep, torch.nn, optimizers, schedulers.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import math
from collections import OrderedDict

import numpy as np
import pytest
from sweep_harness import B1, B2, W1, W2, X_DATA, Y_CLS, Y_REG, check, make_mlp, node_name, registry

program = registry()


# ---- nn: Linear, Sequential, losses, optimizers -----------------------------------------------

@program
def linear_layer_forward_backward(torch, o):
    layer = torch.nn.Linear(3, 4)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W1))
        layer.bias.copy_(torch.tensor(B1))
    x = torch.tensor(X_DATA)
    out = layer(x)
    o("out", out)
    o("shapes", [layer.weight.shape, layer.bias.shape, out.shape])
    out.sum().backward()
    o("grads", [layer.weight.grad, layer.bias.grad])
    o("repr", repr(layer))


@program
def linear_layer_parameter_assignment(torch, o):
    layer = torch.nn.Linear(2, 1)
    layer.weight = torch.nn.Parameter(torch.tensor([[2.0, -1.0]]))
    layer.bias = torch.nn.Parameter(torch.tensor([0.5]))
    x = torch.tensor([[1.0, 1.0], [2.0, 3.0]])
    y = layer(x)
    o("y", y)
    o("params", list(layer.parameters()))
    o("names", [n for n, _ in layer.named_parameters()])


@program
def linear_no_bias(torch, o):
    layer = torch.nn.Linear(3, 2, bias=False)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor(W2)[:, :3])
    o("bias", layer.bias)
    x = torch.tensor(X_DATA[:2])
    o("out", layer(x))
    o("repr", repr(layer))
    o("n params", len(list(layer.parameters())))


@program
def sequential_repr_and_params(torch, o):
    model = make_mlp(torch)
    o("repr", repr(model))
    o("str", str(model))
    o("names", [n for n, _ in model.named_parameters()])
    o("shapes", [p.shape for p in model.parameters()])
    o("count", sum(p.numel() for p in model.parameters()))
    o("state_dict keys", list(model.state_dict().keys()))
    o("len", len(model))
    o("item", repr(model[1]))


@program
def mlp_training_sgd(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    loss_fn = torch.nn.MSELoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(8):
        opt.zero_grad()
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()
        o(f"loss {step}", loss.item())
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_sgd_momentum_weight_decay(torch, o):
    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, weight_decay=1e-2)
    for step in range(10):
        opt.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        o(f"loss {step}", loss.item())
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_sgd_nesterov(torch, o):
    model = make_mlp(torch, "Sigmoid")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.8, nesterov=True)
    for step in range(6):
        opt.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        opt.step()
    o("loss", loss)
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_adam(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    losses = []
    for step in range(10):
        opt.zero_grad()
        loss = torch.nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    o("losses", losses)
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def mlp_training_adam_weight_decay_amsgrad(torch, o):
    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    opt = torch.optim.Adam(model.parameters(), lr=0.02, betas=(0.8, 0.99), weight_decay=0.1,
                           amsgrad=True)
    for step in range(8):
        opt.zero_grad()
        loss = torch.nn.MSELoss()(model(x), y)
        loss.backward()
        opt.step()
    o("loss", loss)
    o("params", list(model.parameters()))


@program(rtol=1e-5, atol=1e-6)
def classifier_cross_entropy_training(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_CLS)
    criterion = torch.nn.CrossEntropyLoss()
    opt = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(10):
        logits = model(x)
        loss = criterion(logits, y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        o(f"loss {epoch}", loss.item())
    with torch.no_grad():
        pred = model(x).argmax(dim=1)
    o("pred", pred)
    o("accuracy", (pred == y).float().mean().item())
    o("correct", (pred == y).sum().item())


@program
def cross_entropy_values(torch, o):
    logits = torch.tensor([[2.0, 1.0, 0.1], [0.5, 2.5, 0.3]], requires_grad=True)
    target = torch.tensor([0, 2])
    F = torch.nn.functional
    for reduction in ("mean", "sum", "none"):
        o(reduction, F.cross_entropy(logits, target, reduction=reduction))
    loss = torch.nn.CrossEntropyLoss()(logits, target)
    loss.backward()
    o("grad", logits.grad)
    o("repr loss", repr(loss.detach()))


@program
def nll_loss_with_log_softmax(torch, o):
    logits = torch.tensor([[1.0, 2.0, 3.0], [1.0, -1.0, 0.0]], requires_grad=True)
    target = torch.tensor([2, 0])
    logp = torch.nn.functional.log_softmax(logits, dim=1)
    loss = torch.nn.functional.nll_loss(logp, target)
    loss.backward()
    o("loss", loss)
    o("grad", logits.grad)
    o("module", torch.nn.NLLLoss()(logp, target))


@program
def mse_loss_reductions(torch, o):
    pred = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    target = torch.tensor([[1.5, 2.0], [2.0, 5.0]])
    for reduction in ("mean", "sum", "none"):
        o(reduction, torch.nn.MSELoss(reduction=reduction)(pred, target))
    torch.nn.functional.mse_loss(pred, target, reduction="sum").backward()
    o("grad", pred.grad)


@program
def mse_loss_broadcast_warning(torch, o):
    pred = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    target = torch.tensor([1.0, 2.5, 2.0])
    loss = o.warns("warn", lambda: torch.nn.functional.mse_loss(pred, target),
                   "that is different to the input size")
    o("loss", loss)
    loss.backward()
    o("grad", pred.grad)


@program
def module_zero_grad_and_optimizer_zero_grad(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    model(x).sum().backward()
    o("grad before", model[0].bias.grad)
    model.zero_grad()
    o("after model.zero_grad", model[0].bias.grad)
    model(x).sum().backward()
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    opt.zero_grad(set_to_none=False)
    o("set_to_none False", model[0].bias.grad)
    opt.zero_grad()
    o("default", model[0].bias.grad)


@program
def custom_module_subclass(torch, o):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(3, 4)
            self.fc2 = torch.nn.Linear(4, 2)
            self.scale = torch.nn.Parameter(torch.tensor(2.0))

        def forward(self, x):
            x = torch.relu(self.fc1(x))
            return self.fc2(x) * self.scale

    net = Net()
    with torch.no_grad():
        net.fc1.weight.copy_(torch.tensor(W1))
        net.fc1.bias.copy_(torch.tensor(B1))
        net.fc2.weight.copy_(torch.tensor(W2))
        net.fc2.bias.copy_(torch.tensor(B2))
    x = torch.tensor(X_DATA)
    out = net(x)
    out.pow(2).mean().backward()
    o("out", out)
    o("names", [n for n, _ in net.named_parameters()])
    o("grads", [p.grad for p in net.parameters()])
    o("repr", repr(net))


@program
def parameter_printing(torch, o):
    p = torch.nn.Parameter(torch.tensor([1.0, 2.0]))
    o("repr", repr(p))
    o("str", str(p))
    q = torch.nn.Parameter(torch.tensor([[1.0, 0.5]]), requires_grad=False)
    o("frozen", repr(q))
    o("flags", [p.is_leaf, p.requires_grad, isinstance(p, torch.Tensor)])
    o("times two", repr(p * 2))


@program
def state_dict_and_load(torch, o):
    model = make_mlp(torch)
    sd = model.state_dict()
    o("keys", list(sd.keys()))
    o("values", list(sd.values()))
    other = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    result = other.load_state_dict(sd)
    o("result", [list(result.missing_keys), list(result.unexpected_keys)])
    x = torch.tensor(X_DATA)
    o("same", torch.allclose(model(x), other(x)))


@program
def eval_under_no_grad(torch, o):
    model = make_mlp(torch, "Sigmoid")
    model.eval()
    o("training", model.training)
    with torch.no_grad():
        out = model(torch.tensor(X_DATA))
    o("out", out)
    model.train()
    o("training after", [m.training for m in model])


@program
def functional_activations(torch, o):
    F = torch.nn.functional
    x = torch.tensor([-2.0, -0.5, 0.0, 0.5, 2.0], requires_grad=True)
    outs = [F.relu(x), torch.sigmoid(x), torch.tanh(x), F.softmax(x, dim=0),
            F.log_softmax(x, dim=0), F.leaky_relu(x, 0.1), F.elu(x), F.softplus(x), F.gelu(x),
            F.silu(x)]
    o("outs", outs)
    grads = [torch.autograd.grad(out.sum() if i < 3 else (out * x).sum(), x, retain_graph=True)[0]
             for i, out in enumerate(outs)]
    o("grads", grads)


@program
def activation_modules(torch, o):
    x = torch.tensor([[-1.0, 0.0, 2.0]], requires_grad=True)
    mods = [torch.nn.ReLU(), torch.nn.Tanh(), torch.nn.Sigmoid()]
    o("outs", [m(x) for m in mods])
    o("reprs", [repr(m) for m in mods])


@program
def optimizer_repr_and_state(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    (w ** 2).sum().backward()
    opt.step()
    o("w", w)
    o("buffer", opt.state[w]["momentum_buffer"])
    o("lr", opt.param_groups[0]["lr"])
    opt.param_groups[0]["lr"] = 0.01
    opt.zero_grad()
    (w ** 2).sum().backward()
    opt.step()
    o("w2", w)


@program
def adam_single_param(torch, o):
    w = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = torch.optim.Adam([w], lr=0.1)
    for _ in range(5):
        opt.zero_grad()
        loss = ((w - torch.tensor([0.0, 1.0, 2.0])) ** 2).sum()
        loss.backward()
        opt.step()
        o("w", w)
    o("state step", float(opt.state[w]["step"]))


@program
def sgd_param_groups(torch, o):
    a = torch.tensor([1.0], requires_grad=True)
    b = torch.tensor([1.0], requires_grad=True)
    opt = torch.optim.SGD([{"params": [a]}, {"params": [b], "lr": 0.5}], lr=0.1)
    (3 * a + 3 * b).sum().backward()
    opt.step()
    o("a, b", [a, b])


@program
def optimizer_errors(torch, o):
    o.raises("empty", lambda: torch.optim.SGD([], lr=0.1), "optimizer got an empty parameter list")
    w = torch.tensor([1.0], requires_grad=True)
    o.raises("negative lr", lambda: torch.optim.SGD([w], lr=-1.0), "Invalid learning rate")
    o.raises("adam beta", lambda: torch.optim.Adam([w], betas=(1.5, 0.9)),
             "Invalid beta parameter at index 0")


@program
def closure_step(torch, o):
    w = torch.tensor([2.0], requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)

    def closure():
        opt.zero_grad()
        loss = (w ** 2).sum()
        loss.backward()
        return loss

    loss = opt.step(closure)
    o("loss", loss)
    o("w", w)


# ---- nn, more --------------------------------------------------------------------------------

@program
def polynomial_tutorial_flatten(torch, o):
    x = torch.linspace(-math.pi, math.pi, 200)
    y = torch.sin(x)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    o("xx", [xx.shape, xx.dtype])
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, -0.05, 0.02]]))
        model[0].bias.fill_(0.01)
    loss_fn = torch.nn.MSELoss(reduction="sum")
    learning_rate = 1e-6
    for t in range(30):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    o("loss", loss.item())
    linear_layer = model[0]
    o("weights", [linear_layer.bias.item(), linear_layer.weight[:, 0].item(),
                  linear_layer.weight[:, 1].item(), linear_layer.weight[:, 2].item()])
    o("repr", repr(model))


@program(rtol=1e-5, atol=1e-6)
def polynomial_tutorial_rmsprop(torch, o):
    x = torch.linspace(-math.pi, math.pi, 100)
    y = torch.sin(x)
    xx = x.unsqueeze(-1).pow(torch.tensor([1, 2, 3]))
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, -0.05, 0.02]]))
        model[0].bias.fill_(0.01)
    optimizer = torch.optim.RMSprop(model.parameters(), lr=1e-3)
    for t in range(20):
        loss = torch.nn.MSELoss(reduction="sum")(model(xx), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    o("loss", loss.item())
    o("params", list(model.parameters()))


@program
def two_layer_net_by_hand(torch, o):
    N, D_in, H, D_out = 4, 3, 5, 2
    x = torch.arange(12.0).view(N, D_in) / 10
    y = torch.arange(8.0).view(N, D_out) / 5
    w1 = (torch.arange(15.0).view(D_in, H) / 20 - 0.3).requires_grad_()
    w2 = (torch.arange(10.0).view(H, D_out) / 10 - 0.4).requires_grad_()
    learning_rate = 1e-2
    for t in range(10):
        y_pred = x.mm(w1).clamp(min=0).mm(w2)
        loss = (y_pred - y).pow(2).sum()
        o(f"loss {t}", loss.item())
        loss.backward()
        with torch.no_grad():
            w1 -= learning_rate * w1.grad
            w2 -= learning_rate * w2.grad
            w1.grad.zero_()
            w2.grad.zero_()
    o("w1", w1)
    o("w2", w2)


@program(rtol=1e-5, atol=1e-6)
def logistic_regression_bce(torch, o):
    x = torch.tensor([[0.5, 1.0], [1.5, -0.5], [-1.0, 0.3], [2.0, 2.0], [-0.5, -1.5], [0.1, 0.2]])
    y = torch.tensor([[1.0], [1.0], [0.0], [1.0], [0.0], [0.0]])
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, -0.2]]))
        model.bias.zero_()
    criterion = torch.nn.BCELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for epoch in range(15):
        y_pred = torch.sigmoid(model(x))
        loss = criterion(y_pred, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        o(f"loss {epoch}", loss.item())
    with torch.no_grad():
        predicted = (torch.sigmoid(model(x)) >= 0.5).float()
        acc = predicted.eq(y).sum() / float(y.shape[0])
    o("acc", acc)
    o("params", [model.weight, model.bias])


@program(rtol=1e-5, atol=1e-6)
def bce_with_logits_training(torch, o):
    x = torch.tensor([[0.5, 1.0], [1.5, -0.5], [-1.0, 0.3], [2.0, 2.0]])
    y = torch.tensor([1.0, 1.0, 0.0, 1.0])
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.2, -0.1], [0.4, 0.3], [-0.3, 0.5]]))
        model[0].bias.copy_(torch.tensor([0.1, 0.0, -0.1]))
        model[2].weight.copy_(torch.tensor([[0.3, -0.2, 0.6]]))
        model[2].bias.fill_(0.05)
    loss_fn = torch.nn.BCEWithLogitsLoss(pos_weight=torch.tensor([2.0]))
    opt = torch.optim.Adam(model.parameters(), lr=0.05)
    for _ in range(10):
        opt.zero_grad()
        logits = model(x).squeeze(1)
        loss = loss_fn(logits, y)
        loss.backward()
        opt.step()
    o("loss", loss)
    o("probs", torch.sigmoid(model(x)).squeeze())


@program
def loss_functions_values_and_grads(torch, o):
    F = torch.nn.functional
    pred = torch.tensor([[0.2, 1.5], [-0.7, 3.0]], requires_grad=True)
    target = torch.tensor([[0.0, 1.0], [0.5, 0.5]])
    losses = {
        "l1": F.l1_loss(pred, target), "l1 sum": torch.nn.L1Loss(reduction="sum")(pred, target),
        "smooth": F.smooth_l1_loss(pred, target), "smooth beta": F.smooth_l1_loss(pred, target, beta=0.5),
        "huber": torch.nn.HuberLoss(delta=0.8)(pred, target),
        "bce logits": F.binary_cross_entropy_with_logits(pred, torch.tensor([[0.0, 1.0], [1.0, 0.0]])),
        "bce": F.binary_cross_entropy(torch.sigmoid(pred), torch.tensor([[0.0, 1.0], [1.0, 0.0]])),
        "mse none": F.mse_loss(pred, target, reduction="none"),
    }
    o("losses", losses)
    grads = {k: torch.autograd.grad(v.sum(), pred, retain_graph=True)[0] for k, v in losses.items()}
    o("grads", grads)


@program
def bce_errors(torch, o):
    F = torch.nn.functional
    o.raises("range", lambda: F.binary_cross_entropy(torch.tensor([0.5, 1.5]), torch.tensor([1.0, 0.0])),
             "all elements of input should be between 0 and 1")
    o.raises("shape", lambda: torch.nn.BCELoss()(torch.tensor([[0.5], [0.5]]), torch.tensor([1.0, 0.0])),
             "that is different to the input size")
    o.raises("logits shape", lambda: torch.nn.BCEWithLogitsLoss()(torch.tensor([[0.5], [0.5]]), torch.tensor([1.0, 0.0])),
             "must be the same as input size")
    o.raises("long target", lambda: F.binary_cross_entropy(torch.tensor([0.5, 0.5]), torch.tensor([1, 0])),
             "Found dtype Long but expected Float")


@program
def cross_entropy_errors(torch, o):
    F = torch.nn.functional
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, 2.0]])
    o.raises("out of bounds", lambda: F.cross_entropy(x, torch.tensor([0, 5])), "Target 5 is out of bounds.")
    o.raises("int32", lambda: F.cross_entropy(x, torch.tensor([0, 1], dtype=torch.int32)),
             "expected target dtype to be Long or Byte, but got Int")
    o.raises("float target", lambda: F.cross_entropy(x, torch.tensor([0.0, 1.0])),
             "expected target dtype to be Long or Byte, but got Float")
    o.raises("batch", lambda: F.cross_entropy(x, torch.tensor([0, 1, 2])),
             "Expected input batch_size (2) to match target batch_size (3).")


@program
def cross_entropy_options(torch, o):
    logits = torch.tensor([[1.0, 2.0, 3.0], [1.0, 0.0, 2.0], [0.5, 0.1, -1.0]], requires_grad=True)
    target = torch.tensor([2, 0, 1])
    weight = torch.tensor([1.0, 2.0, 0.5])
    F = torch.nn.functional
    outs = {
        "weight": F.cross_entropy(logits, target, weight=weight),
        "smoothing": F.cross_entropy(logits, target, label_smoothing=0.1),
        "both": torch.nn.CrossEntropyLoss(weight=weight, label_smoothing=0.2)(logits, target),
        "ignore": F.cross_entropy(logits, torch.tensor([2, -100, 1])),
        "probs": F.cross_entropy(logits, torch.tensor([[0.1, 0.2, 0.7], [1.0, 0.0, 0.0], [0.3, 0.3, 0.4]])),
        "none": F.cross_entropy(logits, target, reduction="none", label_smoothing=0.1),
        "nll weight": F.nll_loss(F.log_softmax(logits, 1), target, weight=weight),
        "unbatched": F.cross_entropy(logits[0], target[0]),
    }
    o("outs", outs)
    grads = {k: torch.autograd.grad(v.sum(), logits, retain_graph=True)[0] for k, v in outs.items()}
    o("grads", grads)


@program
def one_hot_and_normalize(torch, o):
    F = torch.nn.functional
    labels = torch.tensor([0, 2, 1, 2])
    o("one_hot", F.one_hot(labels))
    o("one_hot n", F.one_hot(labels, num_classes=4))
    o("one_hot float", F.one_hot(labels).float())
    o.raises("too big", lambda: F.one_hot(torch.tensor([0, 3]), 3), "Class values must be smaller than num_classes.")
    o.raises("float", lambda: F.one_hot(torch.tensor([0.0, 1.0])), "one_hot is only applicable to index tensor")
    x = torch.tensor([[3.0, 4.0], [1.0, 0.0]], requires_grad=True)
    n = F.normalize(x, dim=1)
    o("normalize", n)
    (n * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("grad", x.grad)


@program
def activation_modules_extra(torch, o):
    x = torch.tensor([[-2.0, -0.5, 0.0, 0.5, 2.0]], requires_grad=True)
    mods = [torch.nn.Softmax(dim=1), torch.nn.LogSoftmax(dim=1), torch.nn.LeakyReLU(0.2),
            torch.nn.ELU(), torch.nn.GELU(), torch.nn.SiLU(), torch.nn.Softplus(),
            torch.nn.Identity(), torch.nn.Flatten(0), torch.nn.Dropout(0.0)]
    outs = [m(x) for m in mods]
    o("outs", outs)
    o("reprs", [repr(m) for m in mods])
    sum((out * torch.arange(5.0)).sum() for out in outs).backward()
    o("grad", x.grad)


@program
def dropout_modes(torch, o):
    torch.manual_seed(0)
    d = torch.nn.Dropout(p=0.5)
    x = torch.ones(100)
    y = d(x)
    o("train values", sorted(set(y.tolist())))
    o("train zeros some", bool((y == 0).any()))
    d.eval()
    o("eval", torch.equal(d(x), x))
    o("functional eval", torch.nn.functional.dropout(x, 0.5, training=False))
    o("p=1", torch.nn.functional.dropout(torch.ones(3), p=1.0))
    o.raises("bad p", lambda: torch.nn.Dropout(1.5), "dropout probability has to be between 0 and 1, but got 1.5")


@program
def module_list_and_dict(torch, o):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = torch.nn.ModuleList([torch.nn.Linear(2, 2) for _ in range(3)])
            self.heads = torch.nn.ModuleDict({"a": torch.nn.Linear(2, 1), "b": torch.nn.Linear(2, 1)})

        def forward(self, x):
            for layer in self.layers:
                x = torch.tanh(layer(x))
            return self.heads["a"](x) + self.heads["b"](x)

    net = Net()
    with torch.no_grad():
        for i, p in enumerate(net.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view(p.shape) * (1 + i / 10))
    out = net(torch.tensor([[1.0, -1.0], [0.5, 2.0]]))
    out.sum().backward()
    o("out", out)
    o("names", [n for n, _ in net.named_parameters()])
    o("grads", [p.grad for p in net.parameters()])
    o("repr", repr(net))
    o("len", [len(net.layers), len(net.heads), "a" in net.heads, list(net.heads.keys())])
    o("slice", repr(net.layers[1:]))


@program
def module_forward_hooks(torch, o):
    model = make_mlp(torch)
    activations = {}

    def save(name):
        def hook(module, inputs, output):
            activations[name] = output.detach()
        return hook

    handles = [model[i].register_forward_hook(save(str(i))) for i in range(3)]
    model(torch.tensor(X_DATA))
    o("activations", activations)
    for h in handles:
        h.remove()
    activations.clear()
    model(torch.tensor(X_DATA))
    o("after remove", len(activations))
    h = model[1].register_forward_hook(lambda m, i, out: out * 0)
    o("replaced", model(torch.tensor(X_DATA)))
    h.remove()
    pre = model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    o("pre", model(torch.tensor(X_DATA)))
    pre.remove()


@program
def nn_init_deterministic(torch, o):
    layer = torch.nn.Linear(3, 3)
    torch.nn.init.zeros_(layer.bias)
    torch.nn.init.eye_(layer.weight)
    o("eye", [layer.weight, layer.bias])
    torch.nn.init.constant_(layer.bias, 0.5)
    torch.nn.init.ones_(layer.weight)
    o("const", [layer.weight, layer.bias])
    o("gains", [torch.nn.init.calculate_gain(n) for n in ("relu", "tanh", "sigmoid", "linear")])
    o("leaky gain", torch.nn.init.calculate_gain("leaky_relu", 0.2))
    torch.manual_seed(0)
    w = torch.empty(4, 6)
    torch.nn.init.xavier_uniform_(w)
    bound = math.sqrt(6.0 / 10)
    o("xavier in range", bool((w.abs() <= bound).all()))
    torch.nn.init.kaiming_normal_(w, nonlinearity="relu")
    o("kaiming shape", w.shape)
    o("is leaf", layer.weight.is_leaf)


@program
def clip_grad_norm_and_value(torch, o):
    model = make_mlp(torch)
    out = model(torch.tensor(X_DATA)).pow(2).sum() * 10
    out.backward()
    total = torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=1.0)
    o("total", total)
    o("grads", [p.grad for p in model.parameters()])
    new_total = sum(p.grad.norm() ** 2 for p in model.parameters()) ** 0.5
    o("new total", new_total)
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.05)
    o("clipped", [p.grad for p in model.parameters()])
    vec = torch.nn.utils.parameters_to_vector(model.parameters())
    o("vec", vec)


@program(rtol=1e-5, atol=1e-6)
def optimizers_adamw_adagrad_rmsprop(torch, o):
    results = {}
    for name, make in [("adamw", lambda p: torch.optim.AdamW(p, lr=0.05)),
                       ("adamw wd", lambda p: torch.optim.AdamW(p, lr=0.05, weight_decay=0.1, amsgrad=True)),
                       ("adagrad", lambda p: torch.optim.Adagrad(p, lr=0.1)),
                       ("adagrad decay", lambda p: torch.optim.Adagrad(p, lr=0.1, lr_decay=0.01, weight_decay=0.1, initial_accumulator_value=0.1)),
                       ("rmsprop", lambda p: torch.optim.RMSprop(p, lr=0.01)),
                       ("rmsprop momentum centered", lambda p: torch.optim.RMSprop(p, lr=0.01, momentum=0.9, centered=True, weight_decay=0.01)),
                       ("sgd maximize", lambda p: torch.optim.SGD(p, lr=0.01, momentum=0.5, dampening=0.1, maximize=True)),
                       ("adam maximize", lambda p: torch.optim.Adam(p, lr=0.01, maximize=True))]:
        model = make_mlp(torch, "Tanh")
        opt = make(model.parameters())
        for _ in range(5):
            opt.zero_grad()
            loss = torch.nn.functional.mse_loss(model(torch.tensor(X_DATA)), torch.tensor(Y_REG))
            loss.backward()
            opt.step()
        results[name] = [loss] + list(model.parameters())
    o("results", results)


@program
def optimizer_printing_and_state(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    for opt in (torch.optim.SGD([w], lr=0.1), torch.optim.SGD([w], lr=0.1, momentum=0.9),
                torch.optim.Adam([w]), torch.optim.AdamW([w], lr=0.01), torch.optim.RMSprop([w]),
                torch.optim.Adagrad([w])):
        o(type(opt).__name__ + " repr", repr(opt))
        o(type(opt).__name__ + " keys", list(opt.param_groups[0].keys()))
        o(type(opt).__name__ + " defaults", opt.defaults)
    opt = torch.optim.Adam([w], lr=0.1)
    (w * w).sum().backward()
    opt.step()
    o("adam state", opt.state[w])
    sd = opt.state_dict()
    o("state_dict groups", sd["param_groups"])
    o("state_dict state keys", list(sd["state"].keys()))


@program
def optimizer_state_dict_roundtrip(torch, o):
    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    for _ in range(2):
        opt.zero_grad()
        model(torch.tensor(X_DATA)).pow(2).mean().backward()
        opt.step()
    sd = opt.state_dict()
    model2 = make_mlp(torch)
    model2.load_state_dict(model.state_dict())
    opt2 = torch.optim.SGD(model2.parameters(), lr=0.5, momentum=0.1)
    opt2.load_state_dict(sd)
    o("lr", opt2.param_groups[0]["lr"])
    for m, op in ((model, opt), (model2, opt2)):
        op.zero_grad()
        m(torch.tensor(X_DATA)).pow(2).mean().backward()
        op.step()
    o("same", [torch.allclose(a, b) for a, b in zip(model.parameters(), model2.parameters())])


@program
def lr_schedulers(torch, o):
    def run(make, steps=8):
        w = torch.nn.Parameter(torch.tensor([1.0]))
        opt = torch.optim.SGD([w], lr=0.1)
        sched = make(opt)
        rates = []
        for _ in range(steps):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
            sched.step()
            rates.append(sched.get_last_lr()[0])
        return rates, w

    S = torch.optim.lr_scheduler
    o("step", run(lambda opt: S.StepLR(opt, step_size=3, gamma=0.5)))
    o("multistep", run(lambda opt: S.MultiStepLR(opt, milestones=[2, 5], gamma=0.1)))
    o("exponential", run(lambda opt: S.ExponentialLR(opt, gamma=0.9)))
    o("lambda", run(lambda opt: S.LambdaLR(opt, lambda epoch: 1 / (epoch + 1))))
    o("cosine", run(lambda opt: S.CosineAnnealingLR(opt, T_max=4), steps=10))


@program
def lr_scheduler_order_warning(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    o.warns("early", lambda: sched.step(), "Detected call of `lr_scheduler.step()` before `optimizer.step()`")
    o("lr", opt.param_groups[0]["lr"])


@program
def sequential_ordered_dict_and_indexing(torch, o):
    model = torch.nn.Sequential(OrderedDict([
        ("fc1", torch.nn.Linear(3, 4)), ("act", torch.nn.ReLU()), ("fc2", torch.nn.Linear(4, 2))]))
    o("repr", repr(model))
    o("names", [n for n, _ in model.named_parameters()])
    o("fc1", repr(model.fc1))
    o("index", repr(model[0]))
    o("slice", repr(model[:2]))
    o("children", [type(c).__name__ for c in model.children()])
    o("modules", [type(m).__name__ for m in model.modules()])
    model.append(torch.nn.Sigmoid())
    o("appended", len(model))


@program
def module_train_eval_buffers(torch, o):
    class WithBuffer(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("running", torch.zeros(2))
            self.fc = torch.nn.Linear(2, 2)

        def forward(self, x):
            if self.training:
                with torch.no_grad():
                    self.running += x.mean(0)
            return self.fc(x - self.running)

    m = WithBuffer()
    with torch.no_grad():
        m.fc.weight.copy_(torch.tensor([[1.0, 0.5], [-0.5, 1.0]]))
        m.fc.bias.zero_()
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    o("train out", m(x))
    m.eval()
    o("eval out", m(x))
    o("buffers", list(m.buffers()))
    o("state keys", list(m.state_dict().keys()))
    o("training flags", [m.training, m.fc.training])


# ---- optimizers, schedulers, norms (session 9) ----

@program
def adam_family_and_adadelta_train_a_classifier(torch, o):
    X = torch.tensor(X_DATA)
    target = torch.tensor([0, 1, 2, 1, 0, 2][:X.shape[0]] * (X.shape[0] // 6 + 1))[:X.shape[0]]
    for name, make in [("Adamax", lambda p: torch.optim.Adamax(p, lr=0.05)),
                       ("NAdam", lambda p: torch.optim.NAdam(p, lr=0.05, weight_decay=0.01)),
                       ("NAdamW", lambda p: torch.optim.NAdam(p, lr=0.05, weight_decay=0.1,
                                                              decoupled_weight_decay=True)),
                       ("RAdam", lambda p: torch.optim.RAdam(p, lr=0.05, betas=(0.9, 0.9))),
                       ("Adadelta", lambda p: torch.optim.Adadelta(p, maximize=False))]:
        torch.manual_seed(0)
        model = torch.nn.Sequential(torch.nn.Linear(X.shape[1], 5), torch.nn.Tanh(), torch.nn.Linear(5, 3))
        with torch.no_grad():
            for i, p in enumerate(model.parameters()):
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1) / 3)
        opt = make(model.parameters())
        for step in range(6):
            opt.zero_grad()
            loss = torch.nn.functional.cross_entropy(model(X), target)
            loss.backward()
            opt.step()
        o(f"{name} loss", loss)
        o(f"{name} params", list(model.parameters()))
        o(f"{name} repr", repr(opt))
        o(f"{name} state keys", [list(v) for v in opt.state_dict()["state"].values()])


@program
def warmup_then_cosine_and_one_cycle(torch, o):
    S = torch.optim.lr_scheduler

    def rates(make, steps, opt_kind="sgd"):
        w = torch.nn.Parameter(torch.tensor([1.0]))
        opt = (torch.optim.SGD([w], lr=0.1, momentum=0.9) if opt_kind == "sgd"
               else torch.optim.Adam([w], lr=0.1))
        sched = make(opt)
        seen = []
        for _ in range(steps):
            opt.zero_grad()
            (w * w).sum().backward()
            opt.step()
            sched.step()
            group = opt.param_groups[0]
            seen.append([sched.get_last_lr()[0], group.get("momentum"), group.get("betas")])
        return seen, w

    o("warmup+cosine", rates(lambda opt: S.SequentialLR(
        opt, [S.LinearLR(opt, start_factor=0.1, total_iters=3), S.CosineAnnealingLR(opt, T_max=5)],
        milestones=[3]), 9))
    o("chained", rates(lambda opt: S.ChainedScheduler([S.ConstantLR(opt, factor=0.5, total_iters=2),
                                                       S.ExponentialLR(opt, gamma=0.9)]), 5))
    o("polynomial", rates(lambda opt: S.PolynomialLR(opt, total_iters=4, power=2.0), 6))
    o("warm restarts", rates(lambda opt: S.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=2), 8))
    o("one cycle sgd", rates(lambda opt: S.OneCycleLR(opt, max_lr=1.0, total_steps=8), 8))
    o("one cycle adam linear 3", rates(lambda opt: S.OneCycleLR(
        opt, max_lr=0.5, total_steps=10, anneal_strategy="linear", three_phase=True), 10, "adam"))
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    sched = S.OneCycleLR(opt, max_lr=1.0, total_steps=2)
    for _ in range(2):
        opt.step()
        sched.step()
    o.raises("past the end", sched.step, "Tried to step 3 times")


@program(2e-5, atol=2e-6)
def group_norm_and_instance_norm_layers(torch, o):
    rows = torch.tensor(X_DATA[:4])
    x = torch.cat([rows, rows * 0.5 - 1]).reshape(2, 4, 3).detach().requires_grad_()
    gn = torch.nn.GroupNorm(2, 4)
    inorm = torch.nn.InstanceNorm1d(4, affine=True, track_running_stats=True)
    o("reprs", [repr(gn), repr(inorm), repr(torch.nn.InstanceNorm2d(3))])
    o("state keys", [list(gn.state_dict()), list(inorm.state_dict()),
                     list(torch.nn.InstanceNorm1d(4).state_dict())])
    y = gn(x)
    z = inorm(x)
    o("outputs", [y, z, node_name(y.grad_fn), node_name(z.grad_fn)])
    (y * z).sum().backward()
    o("grads", [x.grad, gn.weight.grad, gn.bias.grad, inorm.weight.grad])
    o("running", [inorm.running_mean, inorm.running_var, inorm.num_batches_tracked])
    inorm.eval()
    o("eval", inorm(x))
    gx, = torch.autograd.grad((gn(x) ** 3).sum(), x, create_graph=True)
    o("second order", torch.autograd.grad((gx * gx).sum(), [x, gn.weight]))
    o.raises("groups", lambda: torch.nn.functional.group_norm(x, 3),
             "Expected number of channels in input to be divisible by num_groups")
    o.raises("instance dims", lambda: inorm(torch.ones(2, 4, 3, 3)), "expected 2D or 3D input")


@program
def mode_big_ints_and_gelu_at_infinity(torch, o):
    x = torch.tensor([[1.0, 2.0, 2.0, 3.0], [3.0, 3.0, 1.0, 1.0]], requires_grad=True)
    values, indices = torch.mode(x)
    o("mode", [values, indices, node_name(values.grad_fn)])
    values.sum().backward()
    o("mode grad", x.grad)
    o("mode dim 0", list(x.mode(0, keepdim=True)))
    o("big int", [torch.tensor([1.5, 2 ** 70]), torch.tensor([1, 2 ** 70], dtype=torch.float64)])
    o.raises("big int alone", lambda: torch.tensor([1, 2 ** 70]), "Overflow when unpacking long long")
    inf = float("inf")
    F = torch.nn.functional
    o("gelu", [F.gelu(torch.tensor([inf, -inf, float("nan"), 1.0])), F.gelu(torch.tensor(inf)),
               F.gelu(torch.tensor([inf, -inf]), approximate="tanh")])
    with torch.inference_mode():
        o("inference flag", [torch.is_inference_mode_enabled(), torch.is_grad_enabled()])
    o("inference flag after", torch.is_inference_mode_enabled())


@program
def float64_batch_into_a_float32_model(torch, o):
    """The classic: a numpy (float64) batch into layers built in float32."""
    torch.manual_seed(0)
    x = torch.tensor(np.linspace(-1, 1, 2 * 3 * 6 * 6).reshape(2, 3, 6, 6))  # float64
    o.raises("Conv2d", lambda: torch.nn.Conv2d(3, 4, 3)(x), "should be the same")
    o.raises("Conv2d without bias", lambda: torch.nn.Conv2d(3, 4, 3, bias=False)(x),
             "expected scalar type Double but found Float")
    o.raises("ConvTranspose2d", lambda: torch.nn.ConvTranspose2d(3, 4, 2)(x),
             "expected scalar type Double but found Float")
    o.raises("Conv1d", lambda: torch.nn.Conv1d(3, 4, 3)(x[:, :, 0]), "should be the same")
    o.raises("PReLU", lambda: torch.nn.PReLU()(x), "Type promoting not supported")
    o.raises("Bilinear", lambda: torch.nn.Bilinear(6, 6, 2)(x[0, 0], x[0, 1]),
             "All tensors must have the same dtype")
    o.raises("Linear", lambda: torch.nn.Linear(6, 2)(x), "same dtype")
    model = torch.nn.Conv2d(3, 4, 3)
    o("after .float()", model(x.float()).shape)
    o("after .double()", model.double()(x).dtype)


@program
def float64_batch_into_norms_and_recurrent_layers(torch, o):
    x = torch.tensor(np.linspace(-1, 1, 4 * 6).reshape(4, 6))  # float64
    o.raises("BatchNorm1d", lambda: torch.nn.BatchNorm1d(6)(x), "all inputs must share same datatype")
    o.raises("BatchNorm1d eval", lambda: torch.nn.BatchNorm1d(6).eval()(x), "mixed dtype")
    o("BatchNorm1d plain", torch.nn.BatchNorm1d(6, affine=False, track_running_stats=False)(x))
    o.raises("LayerNorm", lambda: torch.nn.LayerNorm(6)(x), "all inputs must share same datatype")
    o("LayerNorm plain", torch.nn.LayerNorm(6, elementwise_affine=False)(x))
    o.raises("GroupNorm", lambda: torch.nn.GroupNorm(2, 6)(x), "mixed dtype")
    o.raises("float32 input, float64 weight",
             lambda: torch.nn.functional.layer_norm(x.float(), (6,), torch.ones(6).double()),
             "expect parameter to have scalar type of Float")
    for kind in ("RNN", "GRU", "LSTM"):
        o.raises(kind, lambda: getattr(torch.nn, kind)(6, 3)(x[None]),
                 "RNN input dtype (torch.float64) does not match weight dtype (torch.float32)")
    o.raises("LSTM ints", lambda: torch.nn.LSTM(6, 3)(x[None].long()), "does not match weight dtype")
    o("LSTM converted", torch.nn.LSTM(6, 3)(x[None].float())[0].shape)


@program
def sizes_must_be_integers_and_targets_match_the_batch(torch, o):
    n = 6
    o.raises("zeros(n / 2)", lambda: torch.zeros(n / 2), "must be tuple of ints")
    o.raises("randn(2, 3.0)", lambda: torch.randn(2, 3.0), "tuple of ints")
    o.raises("view(2.0, 3)", lambda: torch.ones(n).view(2.0, 3), "tuple of ints")
    o("zeros(n // 2)", torch.zeros(n // 2))
    o("zeros(0-d int tensor)", torch.zeros(torch.tensor(2)).shape)
    o("ones(numpy int)", torch.ones(np.int64(2), 1).shape)
    scores = torch.zeros(2, 3)
    o.raises("target (1, 2)", lambda: torch.nn.functional.cross_entropy(
        scores, torch.tensor([[0, 1]])), "Expected input batch_size (2) to match target batch_size (1)")
    o.raises("target (2, 1)", lambda: torch.nn.functional.cross_entropy(
        scores, torch.tensor([[0], [1]])), "multi-target not supported")
    o.raises("target (3,)", lambda: torch.nn.functional.nll_loss(scores, torch.tensor([0, 1, 2])),
             "match target batch_size (3)")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
