"""Conformance sweep, in-place ops, views and version counters.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
from sweep_harness import X_DATA, Y_CLS, Y_REG, check, make_mlp, node_name, registry

program = registry()


# ---- in-place, more ------------------------------------------------------------------------

@program
def inplace_variants_and_versions(torch, o):
    x = torch.tensor([1.0, 4.0, 9.0])
    x.sqrt_()
    o("sqrt_", x)
    x.exp_().log_()
    o("exp_ log_", x)
    x.mul_(torch.tensor([1.0, 0.5, 2.0])).add_(1, alpha=2)
    o("chain", x)
    x.clamp_(min=2.5, max=5.0)
    o("clamp_", x)
    x.neg_().abs_()
    o("neg_ abs_", x)
    x.pow_(2).div_(2)
    o("pow_ div_", x)
    o("version", x._version)
    y = x.clone()
    o("clone version", y._version)
    v = x[:2]
    v.fill_(0)
    o("view write", x)
    o("shared version", [x._version, v._version])


@program
def inplace_relu_in_graph(torch, o):
    x = torch.tensor([-1.0, 2.0, -3.0, 4.0], requires_grad=True)
    y = x * 2
    torch.relu_(y) if hasattr(torch, "relu_") else y.relu_()
    o("y", y)
    o("name", y.grad_fn.name())
    y.sum().backward()
    o("grad", x.grad)


@program
def inplace_on_leaf_view_error(torch, o):
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def write_view():
        w[:2].mul_(2)

    o.raises("view of leaf", write_view, "a view of a leaf Variable that requires grad is being used in an in-place operation.")
    with torch.no_grad():
        w[:2].mul_(2)
    o("w", w)


@program
def zero_grad_patterns(torch, o):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    w.grad.data.zero_()
    o("data zero", w.grad)
    (w * 3).sum().backward()
    o("accum", w.grad)
    w.grad.zero_()
    o("zero_", w.grad)
    w.grad = None
    o("none", w.grad)
    w.grad = torch.tensor([5.0, 5.0])
    (w * 1).sum().backward()
    o("manual grad accum", w.grad)


@program
def lr_scheduler_get_lr_warning(torch, o):
    w = torch.nn.Parameter(torch.tensor([1.0]))
    opt = torch.optim.SGD([w], lr=0.1)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
    opt.step()
    o.warns("step", sched.step)
    o.warns("get_lr", sched.get_lr, "please use `get_last_lr()`")
    o("last", sched.get_last_lr())


@program
def printing_losses_and_model_outputs(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    out = model(x)
    o("model out", repr(out))
    o("single sample", repr(model(x[0])))
    o("batched 3d", repr(model(x.view(2, 3, 3))))
    F = torch.nn.functional
    target = torch.tensor(Y_REG)
    labels = torch.tensor(Y_CLS)
    losses = [torch.nn.MSELoss()(out, target), F.mse_loss(out, target, reduction="sum"),
              F.mse_loss(out, target, reduction="none"), torch.nn.CrossEntropyLoss()(out, labels),
              F.cross_entropy(out, labels, reduction="none"), F.nll_loss(F.log_softmax(out, 1), labels),
              torch.nn.L1Loss()(out, target), torch.nn.SmoothL1Loss()(out, target),
              torch.nn.HuberLoss(delta=0.5)(out, target),
              torch.nn.BCELoss()(torch.sigmoid(out), torch.sigmoid(target)),
              torch.nn.BCEWithLogitsLoss()(out, torch.sigmoid(target)),
              F.cross_entropy(out, labels, label_smoothing=0.1)]
    o("losses", [repr(loss) for loss in losses if loss.dim() == 0])
    o("elementwise", [(loss, loss.grad_fn.name()) for loss in losses if loss.dim() > 0])
    o("print", [str(loss) for loss in losses[:2]])
    o("no bias", torch.nn.Linear(3, 2, bias=False)(x).grad_fn.name())


@program(rtol=1e-9)
def loss_double_backward(torch, o):
    x = torch.tensor([[0.2, 0.7], [0.6, 0.3]], dtype=torch.float64, requires_grad=True)
    t = torch.tensor([[0.0, 1.0], [1.0, 0.3]], dtype=torch.float64, requires_grad=True)
    F = torch.nn.functional
    for name, fn in [("mse", lambda: F.mse_loss(x, t)),
                     ("smooth", lambda: F.smooth_l1_loss(x, t, beta=0.5)),
                     ("huber", lambda: F.huber_loss(x, t, delta=0.3)),
                     ("bce", lambda: F.binary_cross_entropy(x, t)),
                     ("bce logits", lambda: F.binary_cross_entropy_with_logits(x, t, pos_weight=torch.tensor([2.0, 1.0], dtype=torch.float64))),
                     ("nll", lambda: F.nll_loss(x, torch.tensor([1, 0]), weight=torch.tensor([1.0, 3.0], dtype=torch.float64))),
                     ("ce", lambda: F.cross_entropy(x, torch.tensor([1, 0])))]:
        loss = fn()
        grads = torch.autograd.grad(loss, [x, t], create_graph=True, allow_unused=True)
        used = [g for g in grads if g is not None and g.requires_grad]
        second = torch.autograd.grad(sum((g * g).sum() for g in used), [x, t], allow_unused=True) if used else None
        o(name, [loss, [g.detach() if g is not None else None for g in grads], second])


@program
def linear_layer_shapes_and_grads(torch, o):
    layer = torch.nn.Linear(3, 2)
    with torch.no_grad():
        layer.weight.copy_(torch.tensor([[0.1, 0.2, 0.3], [-0.3, 0.2, -0.1]]))
        layer.bias.copy_(torch.tensor([0.5, -0.5]))
    for shape in [(3,), (4, 3), (2, 4, 3), (1, 1, 2, 3)]:
        x = torch.arange(float(np.prod(shape))).view(shape).requires_grad_()
        y = layer(x)
        (y * y).sum().backward()
        o(str(shape), [y, x.grad, y.grad_fn.name()])
    o("weight grad", layer.weight.grad)
    o("bias grad", layer.bias.grad)
    x = torch.arange(12.0).view(3, 4).t()
    o("noncontiguous", layer(x[:, :3].t().t()) if False else layer(x[:3].t()))
    o.raises("dtype", lambda: layer(torch.ones(2, 3, dtype=torch.float64)), "mat1 and mat2 must have the same dtype")
    o.raises("shape", lambda: layer(torch.ones(2, 4)), "mat1 and mat2 shapes cannot be multiplied (2x4 and 3x2)")


@program
def division_rounding_modes(torch, o):
    a = torch.tensor([7, -7, 5, -5])
    b = torch.tensor([2, 2, -3, -3])
    o("floor int", torch.div(a, b, rounding_mode="floor"))
    o("trunc int", torch.div(a, b, rounding_mode="trunc"))
    o("none int", torch.div(a, b, rounding_mode=None))
    f = torch.tensor([7.5, -7.5])
    o("floor float", f.div(2, rounding_mode="floor"))
    o("trunc float", torch.div(f, 2, rounding_mode="trunc"))
    x = torch.tensor([5.0, -5.0], requires_grad=True)
    y = torch.tensor([2.0, 3.0], requires_grad=True)
    z = torch.div(x, y, rounding_mode="floor")
    o("z", z)
    o("grads", torch.autograd.grad(z.sum(), [x, y]))
    o.raises("bad mode", lambda: torch.div(a, 2, rounding_mode="round"), "div expected rounding_mode to be one of None, 'trunc', or 'floor'")


@program
def logspace_and_norm_variants(torch, o):
    o("logspace", torch.logspace(-2, 2, 9))
    o("logspace base 2", torch.logspace(0, 4, 5, base=2))
    o("logspace f64", torch.logspace(0, 1, 4, dtype=torch.float64))
    x = torch.tensor([[1.0, -2.0, 3.0], [0.0, 2.0, -2.0]], requires_grad=True)
    outs = [x.norm(p=float("inf")), x.norm(p=float("-inf"), dim=1), x.norm(p=0), x.norm(3, 1),
            torch.linalg.norm(x), torch.linalg.vector_norm(x, ord=1)]
    o("norms", outs)
    sum((out * (i + 1)).sum() for i, out in enumerate(outs)).backward()
    o("grad", x.grad)


@program
def cumprod_and_repeat_interleave(torch, o):
    x = torch.tensor([2.0, 0.5, 3.0, -1.0], requires_grad=True)
    c = torch.cumprod(x, 0)
    o("cumprod", c)
    (c * torch.tensor([1.0, 2.0, 3.0, 4.0])).sum().backward()
    o("grad", x.grad)
    m = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    o("cumprod dim1", m.cumprod(1))
    o("repeat_interleave", torch.tensor([1, 2, 3]).repeat_interleave(2))
    o("repeat_interleave dim", torch.repeat_interleave(m, 2, dim=0))
    o("repeat_interleave counts", torch.repeat_interleave(torch.tensor([1.0, 2.0]), torch.tensor([1, 3])))
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    y.repeat_interleave(3).sum().backward()
    o("ri grad", y.grad)


@program(rtol=1e-5, atol=1e-6)
def inverse_det_solve(torch, o):
    a = torch.tensor([[4.0, 1.0], [2.0, 3.0]], requires_grad=True)
    inv = torch.inverse(a)
    o("inv", inv)
    o("identity", a @ inv)
    d = torch.det(a)
    o("det", d)
    (inv.sum() + d).backward()
    o("grad", a.grad)
    o("linalg.inv", torch.linalg.inv(torch.tensor([[2.0, 0.0], [0.0, 4.0]])))
    o("solve", torch.linalg.solve(torch.tensor([[3.0, 1.0], [1.0, 2.0]]), torch.tensor([9.0, 8.0])))
    o.raises("singular", lambda: torch.inverse(torch.tensor([[1.0, 2.0], [2.0, 4.0]])),
             "The diagonal element 2 is zero, the inversion could not be completed because the input matrix is singular.")
    X = torch.tensor([[1.0, 1.0], [1.0, 2.0], [1.0, 3.0]])
    y = torch.tensor([[1.0], [2.0], [2.5]])
    w = torch.inverse(X.T @ X) @ X.T @ y
    o("normal equations", w)


@program
def random_functions_structure(torch, o):
    g = torch.Generator().manual_seed(123)
    o("generator", [type(g).__name__, g.initial_seed()])
    a = torch.randn(3, generator=g)
    g.manual_seed(123)
    b = torch.randn(3, generator=g)
    o("generator reproducible", torch.equal(a, b))
    torch.manual_seed(7)
    o("initial_seed", torch.initial_seed())
    p = torch.randperm(6)
    o("randperm", [p.dtype, p.shape, sorted(p.tolist())])
    n = torch.normal(0.0, 1.0, size=(2, 3))
    o("normal", [n.shape, n.dtype])
    n2 = torch.normal(torch.zeros(4), torch.ones(4))
    o("normal tensors", [n2.shape, n2.dtype])
    b = torch.bernoulli(torch.full((5,), 0.5))
    o("bernoulli", [b.dtype, bool(((b == 0) | (b == 1)).all())])
    o("bernoulli 1", torch.bernoulli(torch.ones(3)))
    e = torch.empty(4).uniform_(-1, 1)
    o("uniform_", bool((e.abs() <= 1).all()))
    o("normal_", torch.empty(2, 2).normal_(0, 0.1).shape)


@program
def dtype_info(torch, o):
    for d in (torch.float32, torch.float64, torch.float16):
        f = torch.finfo(d)
        o(str(d).split(".")[-1], [repr(f), f.bits, f.eps, f.max, f.min, f.tiny, f.resolution, f.dtype])
    for d in (torch.int64, torch.int32, torch.uint8, torch.int8):
        i = torch.iinfo(d)
        o(str(d).split(".")[-1], [repr(i), i.bits, i.max, i.min, i.dtype])
    o("promote", [torch.promote_types(torch.int32, torch.float32), torch.promote_types(torch.uint8, torch.int8)])
    o.raises("finfo int", lambda: torch.finfo(torch.int64), "torch.finfo() requires a floating point input type")


@program
def functional_inplace_activations(torch, o):
    F = torch.nn.functional
    x = torch.tensor([-1.0, 0.5, -2.0])
    F.relu(x, inplace=True)
    o("relu inplace", x)
    y = torch.tensor([-1.0, 0.5])
    F.leaky_relu(y, 0.1, inplace=True)
    o("leaky inplace", y)
    w = torch.tensor([-1.0, 2.0], requires_grad=True)
    h = w * 3
    out = torch.nn.ReLU(inplace=True)(h)
    o("same object", out is h)
    out.sum().backward()
    o("grad", w.grad)


@program
def module_init_errors(torch, o):
    class NoSuper(torch.nn.Module):
        def __init__(self):
            self.fc = torch.nn.Linear(2, 2)

    class NoSuperParam(torch.nn.Module):
        def __init__(self):
            self.w = torch.nn.Parameter(torch.ones(1))

    class NoForward(torch.nn.Module):
        pass

    o.raises("module", NoSuper, "cannot assign module before Module.__init__() call")
    o.raises("parameter", NoSuperParam, "cannot assign parameters before Module.__init__() call")
    o.raises("forward", lambda: NoForward()(torch.ones(1)), 'is missing the required "forward" function')
    o.raises("unknown attribute", lambda: torch.nn.Linear(2, 2).weights, "'Linear' object has no attribute 'weights'")
    o.raises("assign tensor to param", lambda: setattr(torch.nn.Linear(2, 2), "weight", torch.ones(2, 2)),
             "cannot assign 'torch.FloatTensor' as parameter 'weight' (torch.nn.Parameter or None expected)")


@program
def grad_assignment_checks(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)

    def assign(value):
        x.grad = value

    o.raises("int", lambda: assign(3), "assigned grad expected to be a Tensor or None but got grad of type int")
    o.raises("size", lambda: assign(torch.tensor([1.0, 2.0, 3.0])),
             "attempting to assign a gradient of size '[3]' to a tensor of size '[2]'")
    o.raises("dtype", lambda: assign(torch.tensor([1, 2])),
             "attempting to assign a gradient with dtype 'long int' to a tensor with grad_dtype 'Float'")
    assign(torch.tensor([0.5, 0.5]))
    (x * 2).sum().backward()
    o("accumulated onto assigned", x.grad)


@program
def backward_gradient_dtype_cast_and_empty_inputs(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x * 2).backward(torch.tensor([1, 3]))
    o("int gradient cast", x.grad)
    (x * 2).backward(torch.tensor([1.0, 1.0], dtype=torch.float64))
    o("double gradient cast", x.grad)
    o.raises("backward inputs empty", lambda: (x * 2).sum().backward(inputs=[]), "`inputs` argument to `backward()` cannot be empty.")
    o.raises("grad inputs empty", lambda: torch.autograd.grad((x * 2).sum(), []), "`inputs` argument to `grad()` cannot be empty.")


@program
def save_and_load_checkpoint(torch, o):
    import io

    model = make_mlp(torch)
    opt = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    model(torch.tensor(X_DATA)).sum().backward()
    opt.step()
    buffer = io.BytesIO()
    torch.save({"epoch": 3, "model": model.state_dict(), "optimizer": opt.state_dict(), "loss": torch.tensor(0.25)}, buffer)
    buffer.seek(0)
    checkpoint = torch.load(buffer)
    o("keys", list(checkpoint.keys()))
    o("epoch", checkpoint["epoch"])
    o("loss", checkpoint["loss"])
    restored = make_mlp(torch)
    with torch.no_grad():
        for p in restored.parameters():
            p.zero_()
    result = restored.load_state_dict(checkpoint["model"])
    o("load result", [list(result.missing_keys), list(result.unexpected_keys)])
    o("params", list(restored.parameters()))
    o("state types", [type(v).__name__ for v in checkpoint["model"].values()])
    o("requires grad", [v.requires_grad for v in checkpoint["model"].values()])
    o.raises("strict", lambda: restored.load_state_dict({"0.weight": torch.zeros(4, 3)}), "Missing key(s) in state_dict")


@program
def module_apply_init_pattern(torch, o):
    def init_weights(m):
        if isinstance(m, torch.nn.Linear):
            torch.nn.init.constant_(m.weight, 0.1)
            m.bias.data.fill_(0.01)

    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 2))
    returned = model.apply(init_weights)
    o("returned", returned is model)
    o("params", list(model.parameters()))
    o("out", model(torch.tensor(X_DATA)))
    o("modules", [type(m).__name__ for m in model.modules()])
    o("named modules", [n for n, _ in model.named_modules()])


@program
def parameter_count_and_summary(torch, o):
    model = torch.nn.Sequential(torch.nn.Linear(10, 20), torch.nn.ReLU(), torch.nn.Linear(20, 5))
    total = sum(p.numel() for p in model.parameters())
    trainable = sum(p.numel() for p in model.parameters() if p.requires_grad)
    o("counts", [total, trainable])
    lines = [f"{name:20s} {str(tuple(p.shape)):10s} {p.numel()}" for name, p in model.named_parameters()]
    o("summary", "\n".join(lines))
    o("first layer", f"{model[0]}")


@program
def training_loop_with_epochs_printing(torch, o):
    import contextlib
    import io

    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_CLS)
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for epoch in range(5):
            optimizer.zero_grad()
            outputs = model(x)
            loss = criterion(outputs, y)
            loss.backward()
            optimizer.step()
            _, predicted = torch.max(outputs.data, 1)
            correct = (predicted == y).sum().item()
            print(f"Epoch [{epoch + 1}/5], Loss: {loss.item():.4f}, Acc: {100 * correct / len(y):.1f}%")
        print(loss)
    o("stdout", buffer.getvalue())


@program(rtol=1e-5, atol=1e-6)
def makemore_bigram_neural_net(torch, o):
    chars = ".abcde"
    words = ["abc", "bad", "cab", "dace", "ebb"]
    stoi = {c: i for i, c in enumerate(chars)}
    xs, ys = [], []
    for w in words:
        seq = ["."] + list(w) + ["."]
        for c1, c2 in zip(seq, seq[1:]):
            xs.append(stoi[c1])
            ys.append(stoi[c2])
    xs = torch.tensor(xs)
    ys = torch.tensor(ys)
    num = xs.nelement()
    o("num", num)
    N = torch.zeros((6, 6), dtype=torch.int32)
    for a, b in zip(xs.tolist(), ys.tolist()):
        N[a, b] += 1
    o("counts", N)
    P = (N + 1).float()
    P /= P.sum(1, keepdims=True)
    o("P rows", P.sum(1))
    W = (torch.arange(36.0).view(6, 6) / 36 - 0.5).requires_grad_()
    for k in range(20):
        xenc = torch.nn.functional.one_hot(xs, num_classes=6).float()
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(num), ys].log().mean() + 0.01 * (W ** 2).mean()
        W.grad = None
        loss.backward()
        W.data += -10 * W.grad
        if k % 5 == 0:
            o(f"loss {k}", loss.item())
    o("W", W)
    nll = -torch.log(P[xs, ys]).mean()
    o("count-model nll", nll)


@program(rtol=1e-5, atol=1e-6)
def makemore_mlp_embeddings(torch, o):
    X = torch.tensor([[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 0], [0, 0, 4], [0, 4, 2]])
    Y = torch.tensor([2, 3, 0, 1, 2, 0])
    C = (torch.arange(10.0).view(5, 2) / 10 - 0.25).requires_grad_()
    W1 = (torch.linspace(-1, 1, 24).view(6, 4) * 0.5).requires_grad_()
    b1 = torch.zeros(4, requires_grad=True)
    W2 = (torch.linspace(-1, 1, 20).view(4, 5)).requires_grad_()
    b2 = torch.zeros(5, requires_grad=True)
    parameters = [C, W1, b1, W2, b2]
    o("n params", sum(p.nelement() for p in parameters))
    for step in range(15):
        emb = C[X]
        h = torch.tanh(emb.view(-1, 6) @ W1 + b1)
        logits = h @ W2 + b2
        loss = torch.nn.functional.cross_entropy(logits, Y)
        for p in parameters:
            p.grad = None
        loss.backward()
        lr = 0.5 if step < 10 else 0.05
        for p in parameters:
            p.data += -lr * p.grad
    o("emb shape", emb.shape)
    o("loss", loss.item())
    o("params", parameters)
    counts = logits.exp()
    prob = counts / counts.sum(1, keepdims=True)
    o("manual loss", -prob[torch.arange(6), Y].log().mean())


@program(rtol=1e-5, atol=1e-6)
def backprop_ninja_manual_gradients(torch, o):
    n = 4
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0], [0.3, 0.3, 0.3], [2.0, 1.0, -1.0]], requires_grad=True)
    Yb = torch.tensor([1, 2, 0, 0])
    logit_maxes = logits.max(1, keepdim=True).values
    norm_logits = logits - logit_maxes
    counts = norm_logits.exp()
    counts_sum = counts.sum(1, keepdims=True)
    counts_sum_inv = counts_sum ** -1
    probs = counts * counts_sum_inv
    logprobs = probs.log()
    loss = -logprobs[range(n), Yb].mean()
    for t in [logprobs, probs, counts_sum_inv, counts_sum, counts, norm_logits, logit_maxes]:
        t.retain_grad()
    loss.backward()
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
    dlogits += torch.nn.functional.one_hot(logits.max(1).indices, num_classes=logits.shape[1]) * dlogit_maxes

    def cmp(s, dt, t):
        ex = bool((dt == t.grad).all().item())
        app = torch.allclose(dt, t.grad)
        maxdiff = (dt - t.grad).abs().max().item()
        return f"{s:15s} | exact: {str(ex):5s} | approximate: {str(app):5s}", maxdiff

    results = [cmp("logprobs", dlogprobs, logprobs), cmp("probs", dprobs, probs),
               cmp("counts_sum_inv", dcounts_sum_inv, counts_sum_inv),
               cmp("counts", dcounts, counts), cmp("logit_maxes", dlogit_maxes, logit_maxes),
               cmp("logits", dlogits, logits)]
    o("approximate", [line.split("approximate: ")[1] for line, _ in results])
    o("maxdiff small", [d < 1e-6 for _, d in results])
    o("loss", loss)
    o("fast dlogits", (torch.nn.functional.softmax(logits, 1) - torch.nn.functional.one_hot(Yb, 3)) / n)


@program(rtol=1e-5, atol=1e-6)
def batchnorm_by_hand(torch, o):
    hprebn = torch.tensor([[1.0, 2.0, 0.5], [2.0, 0.0, 1.5], [0.5, 1.0, -1.0], [3.0, 2.5, 0.0]], requires_grad=True)
    bngain = torch.ones((1, 3), requires_grad=True)
    bnbias = torch.zeros((1, 3), requires_grad=True)
    n = hprebn.shape[0]
    bnmeani = 1 / n * hprebn.sum(0, keepdim=True)
    bndiff = hprebn - bnmeani
    bndiff2 = bndiff ** 2
    bnvar = 1 / (n - 1) * bndiff2.sum(0, keepdim=True)
    bnvar_inv = (bnvar + 1e-5) ** -0.5
    bnraw = bndiff * bnvar_inv
    hpreact = bngain * bnraw + bnbias
    o("hpreact", hpreact)
    o("var matches", torch.allclose(bnvar, hprebn.var(0, keepdim=True, unbiased=True)))
    (hpreact * torch.arange(12.0).view(4, 3)).sum().backward()
    o("grads", [hprebn.grad, bngain.grad, bnbias.grad])


@program
def reductions_zero_dim_and_integer_inputs(torch, o):
    s = torch.tensor(3.0, requires_grad=True)
    outs = [s.sum(0), s.mean(dim=-1), s.prod(0), s.max(0), s.amax(0), s.softmax(0), s.logsumexp(0),
            s.std(0, keepdim=True) if False else s.sum(0, keepdim=True), s.cumsum(0), s.norm(dim=0)]
    o("outs", [tuple(t) if isinstance(t, tuple) else t for t in outs])
    ints = torch.tensor([[1, 2, 3], [4, 5, 6]])
    o("prod int32", torch.tensor([2, 3], dtype=torch.int32).prod())
    o("prod uint8", torch.tensor([200, 2], dtype=torch.uint8).prod())
    o("logsumexp int", ints.logsumexp(1))
    o("all uint8", torch.tensor([1, 0], dtype=torch.uint8).all())
    o.raises("std int", lambda: ints.std(), "std and var only support floating point and complex dtypes")
    o.raises("norm int", lambda: ints.norm(), "linalg.vector_norm: Expected a floating point or complex tensor as input. Got Long")
    o.raises("softmax int", lambda: ints.softmax(1), "not implemented for 'Long'")
    o.raises("max empty", lambda: torch.zeros(0, 3).max(), "Expected reduction dim to be specified for input.numel() == 0.")
    o.raises("argmax empty", lambda: torch.zeros(0, 3).argmax(0), "Expected reduction dim 0 to have non-zero size.")


@program
def integer_powers_and_bitwise_errors(torch, o):
    o("int pow tensor", torch.tensor([2, 3, -1, 1]) ** torch.tensor([-1, 1, -3, -2]))
    o("base pow", 2 ** torch.tensor([-1, 0, 3]))
    o.raises("negative scalar power", lambda: torch.tensor([2, 3]) ** -1, "Integers to negative integer powers are not allowed.")
    o("float negative power", torch.tensor([2.0, 4.0]) ** -1)
    o.raises("float &", lambda: torch.tensor([1.0]) & torch.tensor([1.0]), "\"bitwise_and_cpu\" not implemented for 'Float'")
    o.raises("float |", lambda: torch.tensor([1.0]) | torch.tensor([1.0]), "\"bitwise_or_cpu\" not implemented for 'Float'")
    o.raises("float ^", lambda: torch.tensor([1.0]) ^ torch.tensor([True]), "\"bitwise_xor_cpu\" not implemented for 'Float'")
    o.raises("float ~", lambda: ~torch.tensor([1.0]), "~ (operator.invert) is only implemented on integer and Boolean-type tensors")
    o("int ~", ~torch.tensor([0, 5]))


@program
def python_protocols(torch, o):
    import copy

    t = torch.tensor([1.0, 2.0, 3.0])
    o.raises("round", lambda: round(torch.tensor(2.567), 2), "doesn't define __round__ method")
    o("abs", abs(torch.tensor([-1.0, 2.0])))
    o("len iter list", [len(t), list(t), [v.item() for v in t]])
    o("contains", [2 in t, 5 in t])
    o("builtins", [sum(t), max(t), sorted(torch.tensor([3, 1, 2]))])
    o("index", [[10, 20, 30][torch.tensor(1)], list(range(torch.tensor(3)))])
    o("none comparison", [t == None, t != None])  # noqa: E711
    o.raises("float of vector", lambda: float(t), "only one element tensors can be converted to Python scalars")
    o.raises("int of vector", lambda: int(torch.tensor([1, 2])), "only one element tensors can be converted to Python scalars")
    o.raises("bool of empty", lambda: bool(torch.tensor([])), "Boolean value of Tensor with no values is ambiguous")
    o("scalar conversions", [float(torch.tensor([[3.5]])), int(torch.tensor([3.7])), int(torch.tensor(True)), str(complex(torch.tensor(2.0)))])
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    (w * w).sum().backward()
    c = copy.deepcopy(w)
    o("deepcopy leaf", [c, c.requires_grad, c.is_leaf, c.grad, c is w])
    o.raises("deepcopy nonleaf", lambda: copy.deepcopy(w * 2), "Only Tensors created explicitly by the user (graph leaves) support the deepcopy protocol")
    layer = torch.nn.Linear(2, 2)
    clone = copy.deepcopy(layer)
    o("deepcopy module", [clone.weight is layer.weight, torch.equal(clone.weight, layer.weight), type(clone.weight).__name__])


@program
def numpy_ufuncs_and_array_operands(torch, o):
    t = torch.tensor([0.0, 1.0])
    o("np.exp", np.exp(t))
    o("np.sqrt 0-d", np.sqrt(torch.tensor(4.0)))
    o("np.greater", np.greater(t, 0.5))
    o("np.add int", np.add(torch.tensor([1, 2]), 1))
    o("tensor * array", torch.tensor([1.0, 2.0]) * np.array([2.0, 3.0]))
    o("tensor + int array", torch.tensor([1, 2]) + np.array([1, 2]))
    o("tensor - float32 array", torch.tensor([1.0, 2.0]) - np.array([1.0, 1.0], dtype=np.float32))


@program
def grids_stacks_and_tiles(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([3.0, 4.0, 5.0], requires_grad=True)
    X, Y = torch.meshgrid(x, y, indexing="ij")
    Z = X ** 2 + X * Y
    Z.sum().backward()
    o("ij", [X, Y, Z, x.grad, y.grad])
    Xs, Ys = torch.meshgrid(x.detach(), y.detach(), indexing="xy")
    o("xy", [Xs, Ys])
    o.warns("no indexing", lambda: torch.meshgrid(x.detach(), y.detach()), "it will be required to pass the indexing argument")
    o("stacks", [torch.hstack([x, y]), torch.vstack([x, x]), torch.column_stack([x, x]),
                 torch.hstack([x.view(2, 1), x.view(2, 1)])])
    o("broadcast", [torch.broadcast_to(x, (3, 2)), x.broadcast_to((2, 2)).shape,
                    torch.broadcast_tensors(x, torch.ones(3, 1))[1].shape])
    t = torch.arange(3.0, requires_grad=True)
    tiled = torch.tile(t, (2,)) * torch.arange(6.0)
    tiled.sum().backward()
    o("tile", [torch.tile(t, (2, 2)), t.grad])
    r = torch.arange(6.0).requires_grad_()
    rolled = r.roll(2)
    (rolled * torch.arange(6.0)).sum().backward()
    o("roll", [rolled, r.grad, torch.roll(torch.arange(6).view(2, 3), (1, 1), (0, 1)), torch.arange(5).roll(-1)])


@program
def einsum_basics(torch, o):
    a = torch.arange(6.0).view(2, 3).requires_grad_()
    b = torch.arange(12.0).view(3, 4).requires_grad_()
    c = torch.einsum("ij,jk->ik", a, b)
    (c * c).sum().backward()
    o("matmul", [c.detach(), a.grad, b.grad])
    v = torch.tensor([1.0, 2.0])
    w = torch.tensor([3.0, 4.0, 5.0])
    o("outer", torch.einsum("i,j->ij", v, w))
    o("others", [torch.einsum("ij->ji", a.detach()), torch.einsum("ij->", a.detach()),
                 torch.einsum("ij->j", a.detach()), torch.einsum("ij,ij->i", a.detach(), a.detach()),
                 torch.einsum("i,i->", v, v), torch.einsum("ij", a.detach()),
                 torch.einsum("bij,bjk->bik", torch.arange(24.0).view(2, 3, 4), torch.arange(40.0).view(2, 4, 5))])


# expressions on two (2, 3) tensors x, y that require grad: the name of each result's node
GRAD_FN_EXPRESSIONS = [
    'x+y', 'x-y', 'x*y', 'x/y', 'x**2', 'x**y', '2**x', '-x', 'x+1', '1-x', '2*x', 'x/2', '2/x',
    'x.exp()', 'x.log()', 'x.sin()', 'x.cos()', 'x.tan()', 'x.tanh()', 'x.sigmoid()', 'x.relu()',
    'x.sqrt()', 'x.rsqrt()', 'x.abs()', 'x.sign()', 'x.clamp(0.1, 0.5)', 'x.clamp(min=0.1)',
    'x.clamp(max=0.5)', 'x.sum()', 'x.sum(0)', 'x.sum(1, keepdim=True)', 'x.mean()', 'x.mean(0)',
    'x.prod()', 'x.prod(1)', 'x.max()', 'x.max(0)[0]', 'x.min()', 'x.min(1)[0]', 'x.amax(0)',
    'x.std()', 'x.var(0)', 'x.norm()', 'x.logsumexp(1)', 'x.cumsum(0)', 'x.cumprod(1)',
    'x.softmax(1)', 'x.log_softmax(0)', 'x.t()', 'x.T', 'x.view(-1)', 'x.reshape(3,2)',
    'x.flatten()', 'x.unsqueeze(0)', 'x.squeeze()', 'x.permute(1,0)', 'x.transpose(0,1)',
    'x.expand(2,2,3)', 'x[0]', 'x[:,1]', 'x[0,1]', 'x[[0,1]]', 'x[x>0.3]', 'x.clone()',
    'x.contiguous()', 'x.double()', 'x.float()', 'x@y.t()', 'x.mm(y.t())', 'x[0]@y[0]',
    'x[0].dot(y[0])', 'x.mv(y[0])', 'torch.cat([x,y])', 'torch.where(x>0.3,x,y)',
    'x.masked_fill(x>0.3,0.)', 'x.gather(1,torch.tensor([[0],[1]]))',
    'x.index_select(0,torch.tensor([1]))', 'x.split(1)[0]', 'x.chunk(2,1)[0]', 'x.unbind()[0]',
    'x.flip(0)', 'x.roll(1)', 'x.repeat(2,1)', 'x.maximum(y)', 'x.minimum(y)', 'x.erf()',
    'x.exp2()', 'x.expm1()', 'x.log1p()', 'x.log2()', 'x.log10()', 'x.floor()', 'x.round()',
    'x.trunc()', 'x.frac()', 'x.square()', 'x.reciprocal()', 'x.diag()', 'x.tril()', 'x.trace()',
    'torch.outer(x[0], y[0])', 'x.narrow(1,0,2)', 'x.select(1,0)', 'x.sort(1)[0]', 'x.topk(1)[0]',
    'torch.nn.functional.gelu(x)', 'torch.nn.functional.elu(x)',
    'torch.nn.functional.leaky_relu(x)', 'torch.nn.functional.softplus(x)',
    'torch.nn.functional.silu(x)', 'torch.nn.functional.normalize(x)', 'x.masked_select(x>0.3)',
    'x.repeat_interleave(2)', 'x.tile((2,))', 'x % 0.3', 'x.fmod(0.3)', 'x.atan()', 'x.asin()',
    'x.sinh()', 'torch.nn.functional.dropout(x, 0.0)', 'x.to(torch.float64)',
    'x.type(torch.float64)', 'x.sum(dim=(0,1))', 'x.mean(dim=(0,1))', 'x.sum(-1)', 'x.std(1)',
    'x.var()', 'x.max(1).values', 'torch.max(x,y)', 'torch.min(x,y)', 'x.clamp_min(0.3)',
    'x.clamp_max(0.3)', 'torch.diagonal(x)', 'x.squeeze(0)', 'x.view(3,2).t()', 'x.reshape(6)',
    "torch.einsum('ij->j',x)", 'x.diff()', 'torch.diff(x, dim=0)',
]


@program
def grad_fn_names_of_common_ops(torch, o):
    names = {}
    for expression in GRAD_FN_EXPRESSIONS:
        x = torch.tensor([[0.1, 0.2, 0.3], [0.4, 0.5, 0.6]], requires_grad=True)
        y = torch.tensor([[0.3, 0.1, 0.9], [0.2, 0.7, 0.4]], requires_grad=True)
        result = eval(expression, {"x": x, "y": y, "torch": torch})
        names[expression] = result.grad_fn.name() if result.grad_fn is not None else None
        if expression in ("x*y", "x.softmax(1)", "x@y.t()", "torch.cat([x,y])"):
            names[expression + " repr"] = repr(result)
    o("names", names)


# ---- views and in-place (session 9) ----

@program
def view_used_after_its_base_changed_in_place(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    v = y[0:1]
    y.mul_(3)
    v.sum().backward()
    o("reported example", [x.grad, node_name(v.grad_fn), node_name(v.grad_fn.next_functions[0][0])])
    views = {"select": lambda t: t[1], "view": lambda t: t.view(2, 1), "t": lambda t: t.unsqueeze(0).t(),
             "transpose": lambda t: t.view(2, 1).transpose(0, 1), "unsqueeze": lambda t: t.unsqueeze(0),
             "expand": lambda t: t.expand(3, 2), "narrow": lambda t: t.narrow(0, 1, 1),
             "view of a view": lambda t: t.view(2, 1)[1:]}
    for name, make in views.items():
        x = torch.tensor([1.0, 2.0], requires_grad=True)
        y = x * 2
        v = make(y)
        y.mul_(3)
        (v * torch.arange(1.0, v.numel() + 1).view(v.shape)).sum().backward()
        o(name, [x.grad, node_name(v.grad_fn)])


@program
def view_after_base_changed_autograd_grad_and_inplace(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 2
    v = y[1:]
    w = v[1:]
    before = (w * 5).sum()
    v.mul_(3)
    o("grads", list(torch.autograd.grad((w * w).sum(), [x, y], retain_graph=True)))
    o("used before the change", torch.autograd.grad(before, x, retain_graph=True))
    w.add_(x[:2])
    (y * torch.tensor([1.0, 10.0, 100.0, 1000.0])).sum().backward()
    o("in-place on the view", [x.grad, node_name(w.grad_fn), node_name(y.grad_fn)])
    p = torch.tensor([1.0, 2.0], requires_grad=True)
    u = p[1:]
    with torch.no_grad():
        p.mul_(2)
    (u * 3).sum().backward()
    o("leaf changed under no_grad", [p.grad, node_name(u.grad_fn)])


@program
def split_pieces_after_their_base_changed(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)
    y = x * 2
    a, b = y.split(2)
    c, d = y.chunk(2)
    e = y.unbind()[3]
    y[0:1].mul_(2)
    for name, piece in (("split", b), ("chunk", c), ("unbind", e)):
        o.raises(name, lambda: (piece * 2).sum().backward(),
                 "is a view and its base or another view of its base has been modified inplace. This "
                 "view is the output of a function that returns multiple views.")
    o.raises("written", lambda: a.mul_(2), "Output 0 of Split is a view and is being modified inplace.")
    with torch.no_grad():
        v = y[1:]
    o.raises("no_grad view written", lambda: v.mul_(2),
             "A view was created in no_grad mode and is being modified inplace with grad mode enabled.")
    y.add_(1)
    o.raises("no_grad view used", lambda: (v * 2).sum().backward(),
             "A view was created in no_grad mode and its base or another view of its base has been "
             "modified inplace with grad mode enabled.")


@program
def modified_by_an_inplace_operation_words(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.tanh()
    y.add_(1)
    o.raises("output", lambda: y.sum().backward(),
             "[torch.FloatTensor [2]], which is output 0 of Tanh, is at version 1; expected version 0 "
             "instead. Hint: enable anomaly detection to find the operation that failed to compute its "
             "gradient, with torch.autograd.set_detect_anomaly(True, check_nan=False).")
    a = torch.tensor([1.0, 2.0])
    z = x * a
    a.add_(1)
    o.raises("leaf", lambda: z.sum().backward(),
             "modified by an inplace operation: [torch.FloatTensor [2]] is at version 1; expected version 0 instead.")
    b = x * 1
    c = b[1:] * b[1:]
    b.mul_(2)
    o.raises("view", lambda: c.sum().backward(), "which is output 0 of AsStrided, is at version 1")


@program
def setitem_records_copy_slices(torch, o):
    names = []
    for key in (0, (slice(None), 1), (None, 0), (0, [0, 2]), [0, 1], (slice(None), [0, 2])):
        x = torch.ones(2, 3, requires_grad=True)
        y = x * 2
        y[key] = 0.0
        names.append(node_name(y.grad_fn))
    o("names", names)
    x = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64, requires_grad=True)
    p = torch.tensor([5.0, 6.0], dtype=torch.float64, requires_grad=True)
    y = x * x
    y[1:] = p * x[:2]
    y[0] = p[1]
    g = torch.autograd.grad((y * y).sum(), [x, p], create_graph=True)
    o("grads", list(g))
    o("second order", list(torch.autograd.grad(g[0].sum() + g[1].sum(), [x, p])))
    z = x * 1
    z[:] = 2.0
    o("whole tensor", [node_name(z.grad_fn), z])


@program
def inplace_on_a_slice_of_a_non_leaf_names(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x * 2
    z = y[1:]
    z.add_(1)
    o("own write", [node_name(z.grad_fn), node_name(z.grad_fn.next_functions[0][0]), node_name(y.grad_fn)])
    y.add_(1)
    o("base write", [node_name(z.grad_fn), node_name(z.grad_fn.next_functions[0][0])])
    (z * z).sum().backward()
    o("grad", x.grad)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
