"""Conformance sweep, the PyTorch API that rarer programs reach for: ``Tensor.storage()`` and its
deprecation warning, pinned and shared memory, ``apply_``, ``Module.set_submodule``/``to_empty``/
``type``/``share_memory``, ``nn.AdaptiveLogSoftmaxWithLoss`` (forward, ``log_prob``,
``predict``, gradients), ``nn.DataParallel`` on a machine without an accelerator, and
``torch.profiler``'s context managers; and two tutorial programs: makemore's bigram counts in an
int32 table with ``cross_entropy``'s label smoothing and a seeded ``multinomial``, and
``torch.autograd.functional`` on functions of two inputs.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

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
def ra_adaptive_log_softmax(torch, o):
    asm = torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, cutoffs=[3, 6], div_value=2.0, head_bias=True)
    _fill(torch, asm)
    o("repr", repr(asm))
    o("sizes", [asm.shortlist_size, asm.n_clusters, asm.head_size, asm.cutoffs])
    o("shapes", [tuple(p.shape) for p in asm.parameters()])
    o("names", [n for n, _ in asm.named_parameters()])
    x = (torch.linspace(-1, 1, 6 * 8).reshape(6, 8) * torch.arange(1.0, 7.0).unsqueeze(1)).requires_grad_()
    target = torch.tensor([0, 4, 9, 2, 7, 5])
    out = asm(x, target)
    o("type", type(out).__name__)
    o("output", out.output)
    o("loss", out.loss)
    o("fields", out._fields)
    o("loss node", node_name(out.loss.grad_fn))
    out.loss.backward()
    o("x.grad", x.grad)
    o("grads", [p.grad for p in asm.parameters()])
    o("log_prob", asm.log_prob(x.detach()))
    o("log_prob sums to 1", asm.log_prob(x.detach()).exp().sum(1))
    o("predict", asm.predict(x.detach()))
    o("predict shortlist", asm.predict(torch.zeros(2, 8)))
    o("predict all tail", asm.predict(x.detach()[2:3] * 50))
    one = asm(x.detach()[1], torch.tensor(4))
    o("unbatched", [one.output, one.loss])
    o("single row", asm(x.detach()[:1], torch.tensor([8])).output)
    o.raises("bad target", lambda: asm(x, torch.tensor([0, 1, 2, 3, 4, 10])), "Target values should be in [0, 9]")
    o.raises("bad batch", lambda: asm(x, torch.tensor([0, 1])), "same size in the batch dimension")
    o.raises("2d target", lambda: asm(x, torch.zeros(6, 1, dtype=torch.long)), "0D or 1D target tensor expected")
    o.raises("0d target 2d input", lambda: asm(x, torch.tensor(1)), "0D target tensor expects 1D input")
    o.raises("cutoffs", lambda: torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [6, 3]), "cutoffs should be a sequence")
    o.raises("cutoffs big", lambda: torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, [10]), "cutoffs should be a sequence")
    o.raises("no cutoffs", lambda: torch.nn.AdaptiveLogSoftmaxWithLoss(8, 10, []), "length larger than 0")


@program
def ra_storage_pinning_sharing_apply(torch, o):
    x = torch.tensor([1.5, 2.0, 3.0])
    s = x[1:].storage()  # its warning, given once per process: test_sweep_warn_once.py
    o("storage", [s.size(), len(s), s.tolist(), s.dtype, s[0], s[-1], s.element_size(), s.nbytes()])
    o("storage ptr", [s.data_ptr() == x.data_ptr(), x[1:].storage().data_ptr() == x.data_ptr()])
    o("storage repr", repr(torch.tensor([1, 2]).storage()))
    o("storage type", type(s).__name__)
    o("untyped", [s.untyped().nbytes(), type(s.untyped()).__name__])
    o.raises("storage slice", lambda: s[0:1], "slices are only supported in UntypedStorage.__getitem__")
    o.raises("storage index", lambda: s[5], "out of range")
    o("is_pinned", x.is_pinned())
    o.raises("pin_memory", lambda: x.pin_memory(), "Cannot access accelerator device when none is available")
    o("is_shared", x.is_shared())
    y = x.clone()
    o("share_memory_", [y.share_memory_() is y, y.is_shared(), y, y.share_memory_().is_shared()])
    o("shared empty", torch.empty(0).share_memory_().is_shared())
    w = torch.arange(6.0)
    w.share_memory_()
    w[2] = 10.0
    o("shared write", [w, w.is_shared(), w[1:].is_shared(), w.clone().is_shared()])
    a = torch.arange(5.0)
    o("apply_", [a.apply_(lambda v: v * v + 1) is a, a])
    o("apply_ int", torch.tensor([1, 2, -3]).apply_(lambda v: v * 2.7))
    o("apply_ bool", torch.tensor([True, False]).apply_(lambda v: not v))
    b = torch.arange(6.0)
    b[::2].apply_(lambda v: -v)
    o("apply_ view", b)
    calls = []
    torch.tensor([[1.0, 2.0], [3.0, 4.0]]).apply_(lambda v: calls.append(v) or v)
    o("apply_ order", calls)
    o.raises("apply_ grad", lambda: torch.ones(2, requires_grad=True).apply_(lambda v: v),
             "Can't call apply_() on Variable that requires grad")
    v = torch.ones(2)
    before = v._version
    v.apply_(lambda t: t)
    o("apply_ version", v._version - before)


@program
def ra_module_surgery_and_types(torch, o):
    m = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(),
                            torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.BatchNorm1d(3)))
    m.set_submodule("1", torch.nn.Tanh())
    m.set_submodule("2.0", torch.nn.Identity())
    o("after set", repr(m))
    o("set returns", m.set_submodule("1", torch.nn.GELU()))
    m.set_submodule("9", torch.nn.ReLU())
    o("non-strict adds", repr(m))
    o.raises("strict", lambda: m.set_submodule("7", torch.nn.Tanh(), strict=True), "Sequential has no attribute `7`")
    o.raises("deep missing", lambda: m.set_submodule("a.b", torch.nn.Tanh()), "Sequential has no attribute `a`")
    o.raises("not a module", lambda: m.set_submodule("1", 3), "`module` is not an nn.Module")
    o.raises("empty", lambda: m.set_submodule("", torch.nn.Tanh()), "Cannot set the submodule without a target name!")
    lin = torch.nn.Linear(2, 2)
    lin.register_buffer("steps", torch.tensor(3))
    weight = lin.weight
    o("type", [lin.type(torch.float64) is lin, lin.weight.dtype, lin.steps.dtype, lin.weight is weight])
    o("type str", [lin.type("torch.FloatTensor").weight.dtype, lin.steps.dtype])
    o.raises("type int", lambda: torch.nn.Linear(2, 2).type(torch.int64),
             "data set to a tensor that requires gradients must be floating point")
    bn = torch.nn.BatchNorm1d(3).type(torch.float64)
    o("bn type", [bn.num_batches_tracked.dtype, bn.running_mean.dtype])
    lin = torch.nn.Linear(2, 2)
    lin.weight.grad = torch.ones(2, 2)
    lin.double()
    o("grad converted", lin.weight.grad.dtype)
    e = torch.nn.Linear(3, 2).to_empty(device="cpu")
    o("to_empty", [type(e).__name__, [(tuple(p.shape), p.dtype, type(p).__name__, p.requires_grad)
                                      for p in e.parameters()]])
    o.raises("to_empty no device", lambda: torch.nn.Linear(2, 2).to_empty(), "to_empty() missing 1 required keyword-only argument")
    sm = torch.nn.Linear(2, 2)
    sm.weight.grad = torch.zeros(2, 2)
    o("share_memory", [sm.share_memory() is sm, sm.weight.is_shared(), sm.bias.is_shared(),
                       sm.weight.grad.is_shared(), type(sm.weight).__name__])


@program
def ra_data_parallel_on_cpu(torch, o):
    net = torch.nn.Sequential(torch.nn.Linear(3, 2), torch.nn.Tanh())
    _fill(torch, net)
    dp = torch.nn.DataParallel(net)
    o("repr", repr(dp))
    o("device_ids", dp.device_ids)
    o("module", dp.module is net)
    x = torch.linspace(-1, 1, 12).reshape(4, 3)
    y = dp(x)
    o("forward", y)
    y.sum().backward()
    o("grads", [p.grad for p in net.parameters()])
    o("keys", list(dp.state_dict().keys()))
    o("parallel module", torch.nn.parallel.DataParallel is torch.nn.DataParallel)
    o("kwargs", torch.nn.DataParallel(torch.nn.Flatten())(x.reshape(4, 3, 1)).shape)
    o("device_ids given", torch.nn.DataParallel(net, device_ids=[0]).device_ids)


@program
def ra_profiler_ranges(torch, o):
    from_module = torch.profiler
    x = torch.ones(4, 4)
    with from_module.profile(activities=[from_module.ProfilerActivity.CPU], record_shapes=True) as prof:
        with from_module.record_function("model_inference"):
            y = x @ x
        with from_module.record_function("model_inference"):
            y = y @ x
        prof.step()
    o("result", y)
    table = prof.key_averages().table(sort_by="cpu_time_total", row_limit=10)
    o("range listed", "model_inference" in table)
    o("table type", type(table).__name__)

    @from_module.record_function("decorated")
    def f(v):
        return v + 1
    o("decorator", f(1))
    with from_module.record_function("outside"):
        o("outside a profiler", (x * 2).sum())


@program
def ra_makemore_int32_counts(torch, o):
    words = ["emma", "olivia", "ava", "isabella", "sophia"]
    chars = sorted(set("".join(words)))
    stoi = {s: i + 1 for i, s in enumerate(chars)}
    stoi["."] = 0
    n = len(stoi)
    N = torch.zeros((n, n), dtype=torch.int32)
    for w in words:
        cs = ["."] + list(w) + ["."]
        for c1, c2 in zip(cs, cs[1:]):
            N[stoi[c1], stoi[c2]] += 1
    o("N", N)
    o("N row", N[0])
    P = (N + 1).float()
    P /= P.sum(1, keepdim=True)
    o("P", P)
    o("P sum", P.sum(1))
    o("N dtype sum", N.sum().dtype)
    o("N[0,1] item", N[0, 1].item())
    o.raises("int @ float", lambda: N @ P, "expected")
    o("int @ int", (N @ N).dtype)
    o.raises("int32 @ int64", lambda: N @ N.long(), "expected")
    xs = torch.tensor([0, 1, 2, 3])
    ys = torch.tensor([1, 2, 3, 0])
    F = torch.nn.functional
    xenc = F.one_hot(xs, num_classes=n).float()
    o("xenc", [xenc.shape, xenc.dtype])
    o("one_hot dtype", F.one_hot(xs).dtype)
    W = (torch.arange(n * n, dtype=torch.float32).reshape(n, n) / (n * n) - 0.5).requires_grad_()
    for _ in range(3):
        logits = xenc @ W
        counts = logits.exp()
        probs = counts / counts.sum(1, keepdims=True)
        loss = -probs[torch.arange(4), ys].log().mean() + 0.01 * (W**2).mean()
        W.grad = None
        loss.backward()
        W.data += -10 * W.grad
    o("loss", loss)
    o("loss node", loss.grad_fn.name())
    o("W", W)
    o("ce ls", F.cross_entropy(logits, ys, label_smoothing=0.1))
    o("ce ls w", F.cross_entropy(logits, ys, weight=torch.linspace(0.5, 1.5, n), label_smoothing=0.2))
    o("ce ls ignore", F.cross_entropy(logits, torch.tensor([1, -100, 3, 0]), label_smoothing=0.3))
    o("ce ls sum", F.cross_entropy(logits, ys, label_smoothing=0.3, reduction="none"))
    o("ce probs target", F.cross_entropy(logits, probs.detach(), label_smoothing=0.1))
    o.raises("ce ls bad", lambda: F.cross_entropy(logits, ys, label_smoothing=1.5), "label_smoothing must be between 0.0")
    g = torch.Generator().manual_seed(2147483647)
    s = torch.multinomial(P[0], num_samples=5, replacement=True, generator=g)
    o("multinomial", [s.shape, s.dtype])
    o.raises("multinomial no repl", lambda: torch.multinomial(P[0], 100, replacement=False), "cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    o("randint gen", torch.randint(0, 5, (3,), generator=g).dtype)

@program
def ra_functional_jacobian_hessian(torch, o):
    AF = torch.autograd.functional
    def f(x, y):
        return (x ** 2 * y).sum()
    x = torch.tensor([1.0, 2.0])
    y = torch.tensor([3.0, -1.0])
    o("hessian 2 args", AF.hessian(f, (x, y)))
    o("jacobian 2 args", AF.jacobian(lambda a, b: a * b + a.sin(), (x, y)))
    o("jacobian create", AF.jacobian(lambda a: a ** 3, x, create_graph=True))
    o("jacobian vectorize", AF.jacobian(lambda a: a.exp() * 2, x, vectorize=True))
    o("jacobian strategy", AF.jacobian(lambda a: a.exp(), x, vectorize=True, strategy="forward-mode"))
    o("vjp", AF.vjp(lambda a: a ** 2, x, torch.ones(2)))
    o("jvp", AF.jvp(lambda a: a ** 2, x, torch.ones(2)))
    o("hvp", AF.hvp(lambda a: (a ** 3).sum(), x, torch.ones(2)))
    o("vhp", AF.vhp(lambda a: (a ** 3).sum(), x, torch.ones(2)))
    o("jac out tuple", AF.jacobian(lambda a: (a * 2, a.sum()), x))
    o.raises("hessian non scalar", lambda: AF.hessian(lambda a: a * 2, x), "should contain a single element")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
