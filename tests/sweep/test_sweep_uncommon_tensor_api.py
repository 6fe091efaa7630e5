"""Conformance sweep: teaching programs that reach for the less common tensor API (running
extremes, nan-reductions, splitting and gathering helpers, views through ``diagonal`` and
``unfold``, indexing with 0-d tensors, hand-written optimizers with ``addcmul_``, the special
functions, statistics helpers).

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, node_name, registry

program = registry()


@program
def adam_by_hand_with_addcmul_and_addcdiv(torch, o):
    # linear regression with Adam written out, as in "optimizers from scratch" notebooks
    x = torch.linspace(-1.0, 1.0, 8).view(-1, 1)
    y = 3.0 * x - 0.5
    w = torch.zeros(1, 1, requires_grad=True)
    b = torch.zeros(1, requires_grad=True)
    state = {id(p): (torch.zeros_like(p), torch.zeros_like(p)) for p in (w, b)}
    beta1, beta2, lr, eps = 0.9, 0.999, 0.1, 1e-8
    for step in range(1, 6):
        loss = ((x @ w + b - y) ** 2).mean()
        loss.backward()
        with torch.no_grad():
            for p in (w, b):
                m, v = state[id(p)]
                m.mul_(beta1).add_(p.grad, alpha=1 - beta1)
                v.mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
                denom = (v / (1 - beta2 ** step)).sqrt().add_(eps)
                p.addcdiv_(m, denom, value=-lr / (1 - beta1 ** step))
                p.grad.zero_()
        o(f"loss {step}", loss)
    o("params", [w, b])
    o("addcmul", torch.addcmul(torch.ones(2), torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), value=0.5))
    o.raises("addcdiv ints", lambda: torch.addcdiv(torch.ones(2), torch.tensor([1, 2]), torch.tensor([1, 2])),
             "Integer division with addcdiv is no longer supported")


@program(1e-4)  # logcumsumexp's second derivative sums in a different order
def running_extremes_drawdown_and_log_prefix(torch, o):
    prices = torch.tensor([10.0, 12.0, 11.0, 15.0, 9.0, 14.0], requires_grad=True)
    peak = torch.cummax(prices, dim=0)
    o("peak", [peak.values, peak.indices, type(peak).__name__, node_name(peak.values.grad_fn)])
    drawdown = (peak.values - prices) / peak.values
    worst = drawdown.max()
    worst.backward()
    o("drawdown", [drawdown, prices.grad])
    low = prices.detach().cummin(0)
    o("trough", [low.values, low.indices])
    scores = torch.tensor([[0.5, -1.0, 2.0], [3.0, 0.0, -2.0]], requires_grad=True)
    prefix = scores.logcumsumexp(dim=1)
    o("log prefix", [prefix, node_name(prefix.grad_fn)])
    g, = torch.autograd.grad(prefix.sum(), scores, create_graph=True)
    gg, = torch.autograd.grad((g * g).sum(), scores)
    o("log prefix grads", [g, gg])
    second = torch.kthvalue(scores, 2, dim=1)
    o("second smallest", [second.values, second.indices, node_name(second.values.grad_fn)])
    lo, hi = torch.aminmax(scores, dim=1)
    (hi - lo).sum().backward()
    o("range grads", [lo, hi, scores.grad, node_name(lo.grad_fn)])


@program
def nan_aware_statistics_and_binning(torch, o):
    readings = torch.tensor([[1.0, float("nan"), 3.0], [4.0, 5.0, float("nan")], [7.0, 8.0, 9.0]],
                            requires_grad=True)
    per_row = readings.nanmean(dim=1)
    total = torch.nansum(readings)
    (per_row.sum() + total).backward()
    o("nan stats", [per_row, total, readings.grad, node_name(total.grad_fn), node_name(per_row.grad_fn)])
    o("nanmedian", [readings.detach().nanmedian(), readings.detach().nanmedian(dim=0).values])
    data = torch.tensor([0.1, 0.4, 0.45, 0.8, 0.95, 0.2, 0.6])
    o("histc", torch.histc(data, bins=4, min=0.0, max=1.0))
    edges = torch.tensor([0.25, 0.5, 0.75])
    o("buckets", [torch.bucketize(data, edges), torch.bucketize(data, edges, right=True)])
    o("searchsorted", torch.searchsorted(edges, torch.tensor([0.5, 0.1, 0.9]), side="right"))
    o("isin", torch.isin(torch.tensor([1, 2, 3, 4]), torch.tensor([2, 4])))
    samples = torch.tensor([[1.0, 2.0, 4.0, 7.0], [2.0, 1.0, 0.0, -1.0], [0.5, 0.5, 1.5, 2.0]],
                           requires_grad=True)
    c = torch.cov(samples)
    r = torch.corrcoef(samples)
    (c.sum() + r[0, 1]).backward()
    o("cov corrcoef", [c, r, samples.grad, node_name(c.grad_fn), node_name(r.grad_fn)])
    o.raises("nanmean ints", lambda: torch.tensor([1, 2]).nanmean(), "nanmean(): expected input to have floating point")


@program
def minibatches_with_tensor_split_and_picked_log_probs(torch, o):
    logits = torch.tensor([[2.0, 0.5, -1.0], [0.1, 0.2, 3.0], [1.0, 1.0, 1.0], [-0.5, 2.5, 0.0],
                           [0.3, -0.3, 0.9]], requires_grad=True)
    targets = torch.tensor([0, 2, 1, 1, 2])
    losses = []
    for chunk, labels in zip(logits.tensor_split(3), targets.tensor_split(3)):
        log_probs = chunk.log_softmax(dim=1)
        picked = torch.take_along_dim(log_probs, labels.unsqueeze(1), dim=1)
        losses.append(-picked.mean())
        o(f"chunk {len(losses)}", [chunk.shape, node_name(chunk.grad_fn), picked, node_name(picked.grad_fn)])
    loss = torch.stack(losses).mean()
    loss.backward()
    o("loss", [loss, logits.grad])
    a, b = torch.arange(12.0).view(3, 4).hsplit(2)
    o("hsplit", [a, b, [t.shape for t in torch.arange(10).tensor_split([2, 5])]])
    o("take", torch.take(torch.arange(12).view(3, 4), torch.tensor([[0, 11], [5, -1]])))
    o.raises("hsplit uneven", lambda: torch.ones(3, 4).hsplit(3), "not divisible by the split_size 3")


@program(1e-3, atol=1e-6)  # a near-zero residual from a float32 solve
def ridge_regression_through_a_diagonal_view(torch, o):
    x = torch.tensor([[1.0, 2.0], [2.0, 1.0], [3.0, 5.0], [4.0, 3.0]])
    y = torch.tensor([[3.0], [3.0], [8.0], [7.0]])
    lam = torch.tensor(0.5, requires_grad=True)
    gram = x.T @ x
    gram.diagonal().add_(lam)  # a view: the write lands in gram
    o("gram", [gram, node_name(gram.grad_fn), gram._version])
    w = torch.linalg.solve(gram, x.T @ y)
    loss = ((x @ w - y) ** 2).sum()
    loss.backward()
    o("ridge", [w, loss, lam.grad])
    m = torch.zeros(3, 3)
    d = m.diagonal(offset=1)
    d.fill_(2.0)
    o("view facts", [m, d._base is m, d._version == m._version])
    cov = torch.diag_embed(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    sign, logabsdet = torch.linalg.slogdet(cov)
    o("batched diag", [cov, sign, logabsdet, torch.logdet(cov)])


@program
def moving_average_with_unfold_windows(torch, o):
    signal = torch.tensor([1.0, 3.0, 2.0, 5.0, 4.0, 6.0, 8.0], requires_grad=True)
    windows = signal.unfold(0, 3, 1)
    o("windows", [windows, node_name(windows.grad_fn), windows._base is signal])
    smooth = windows.mean(dim=1)
    smooth.pow(2).sum().backward()
    o("grad", [smooth, signal.grad])
    image = torch.arange(16.0).view(1, 4, 4)
    patches = image.unfold(1, 2, 2).unfold(2, 2, 2)
    o("patches", [patches.shape, patches[0, 1, 0]])
    buffer = torch.zeros(6)
    buffer.unfold(0, 2, 2).select(1, 0).fill_(1.0)
    o("write through windows", buffer)
    o.raises("too big", lambda: signal.unfold(0, 8, 1), "maximum size for tensor at dimension 0 is 7 but size is 8")


@program
def indexing_with_tensors_ellipsis_and_bools(torch, o):
    x = torch.arange(12.0).view(3, 4).requires_grad_()
    y = x * 2
    total = 0
    for i in torch.arange(3):  # loop variables are 0-d tensors in teaching code
        row = y[i]
        total = total + row[i]
    o("picked", [total, node_name(y[torch.tensor(1)].grad_fn), y[torch.tensor(1)]._base is y])
    whole = y[...]
    o("alias", [node_name(whole.grad_fn), node_name(y[()].grad_fn), whole._base is y,
                node_name(y[:].grad_fn)])
    o("bool keys", [y[True].shape, y[False].shape, node_name(y[True].grad_fn), y[None].shape])
    total.backward()
    o("grad", x.grad)
    z = torch.zeros(2, 3)
    z[torch.tensor(1)] = 5.0
    z[True] = z + 1
    o("written", z)


@program
def clamp_with_tensor_bounds_and_integer_limits(torch, o):
    x = torch.tensor([-2.0, -0.5, 0.3, 1.5, 4.0], requires_grad=True)
    low = torch.tensor([-1.0, -1.0, 0.0, 0.0, 0.0], requires_grad=True)
    high = torch.tensor([1.0, 1.0, 1.0, 2.0, 3.0], requires_grad=True)
    clipped = x.clamp(min=low, max=high)
    clipped.sum().backward()
    o("clipped", [clipped, node_name(clipped.grad_fn), x.grad, low.grad, high.grad])
    o("one sided", [node_name(torch.clamp_min(x, low).grad_fn), node_name(torch.clamp_max(x, high).grad_fn)])
    pixels = torch.tensor([10, 200, 255], dtype=torch.uint8)
    o("uint8", [pixels.clamp(0, 250), pixels.clamp(max=2.5), torch.where(pixels > 100, pixels, 7)])
    o.raises("uint8 max", lambda: pixels.clamp(max=1000), "value cannot be converted to type uint8_t without overflow")
    o.raises("where big", lambda: torch.where(pixels > 100, pixels, 300), "value cannot be converted to type uint8_t without overflow")
    o.raises("masked_fill big", lambda: pixels.masked_fill(pixels > 100, 256), "value cannot be converted to type uint8_t without overflow")
    o.raises("int64 limit", lambda: torch.tensor([1]).clamp(min=2 ** 63), "value cannot be converted to type int64_t without overflow")
    o.raises("mixed bounds", lambda: x.clamp(min=low, max=2.0), "received an invalid combination of arguments")


@program
def logistic_regression_with_special_functions(torch, o):
    x = torch.tensor([[0.5, 1.0], [1.5, -0.5], [-1.0, 2.0], [2.0, 0.5]])
    y = torch.tensor([1.0, 0.0, 1.0, 0.0])
    w = torch.tensor([0.1, -0.2], requires_grad=True)
    z = x @ w
    p = torch.special.expit(z)
    # softplus via logaddexp: log(1 + e^z) = logaddexp(0, z)
    nll = (torch.logaddexp(torch.zeros(4), z) - y * z).mean()
    nll.backward()
    o("nll", [p, nll, w.grad, torch.logit(p, eps=1e-6)])
    counts = torch.tensor([0.0, 2.0, 5.0])
    rate = torch.tensor([0.5, 1.5, 4.0], requires_grad=True)
    poisson = (rate - counts * rate.log() + torch.lgamma(counts + 1)).sum()
    poisson.backward()
    o("poisson", [poisson, rate.grad, torch.digamma(rate.detach()), torch.special.gammaln(counts + 1)])
    t = torch.tensor([0.0, 0.5, 1.5], requires_grad=True)
    o("more", [torch.special.xlog1py(t, t), torch.hypot(t, t + 1), t.sinc(), t.deg2rad(),
               torch.erfinv(t / 2), torch.special.entr(t), torch.float_power(t, 2).dtype,
               torch.copysign(t, -1.0), t.asinh(), torch.heaviside(t - 0.5, torch.tensor(0.5))])
    g, = torch.autograd.grad(torch.special.xlog1py(t, t).sum() + t.erfc().sum(), t, create_graph=True)
    o("grads", [g, torch.autograd.grad(g.sum(), t)[0]])


@program
def rotations_kron_and_products(torch, o):
    image = torch.arange(6.0).view(2, 3).requires_grad_()
    rotated = torch.rot90(image, 1, [0, 1])
    o("rot90", [rotated, node_name(rotated.grad_fn), image.rot90(2), image.rot90(-1)])
    (rotated * torch.arange(6.0).view(3, 2)).sum().backward()
    o("rot90 grad", image.grad)
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    k = torch.kron(a, torch.eye(2))
    t = torch.tensordot(a, torch.ones(2, 3), dims=1)
    i = torch.inner(a, a)
    (k.sum() + t.sum() + i.sum()).backward()
    o("products", [k, t, i, a.grad])
    o("block_diag", torch.block_diag(torch.ones(2, 2), torch.tensor([[5.0]]), torch.tensor([7.0, 8.0])))
    o("cartesian", torch.cartesian_prod(torch.tensor([1, 2]), torch.tensor([3, 4, 5])))
    u = torch.tensor([1.0, 0.0, 0.0], requires_grad=True)
    v = torch.tensor([0.0, 1.0, 0.0])
    n = torch.linalg.cross(u, v)
    n.sum().backward()
    o("cross", [n, u.grad, node_name(n.grad_fn)])
    m = torch.tensor([[1.0, 1.0], [1.0, 0.0]])
    o("fibonacci", [torch.linalg.matrix_power(m, 10), m.matrix_power(0)])
    o("fused", [torch.addmv(torch.ones(2), m, torch.tensor([1.0, 2.0]), beta=2),
                torch.addr(torch.zeros(2, 2), torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0])),
                torch.baddbmm(torch.zeros(1, 2, 2), m[None], m[None]), torch.vdot(u, v)])


@program
def trapezoid_integration_and_index_writes(torch, o):
    xs = torch.linspace(0.0, 3.14159, 9)
    ys = xs.sin().requires_grad_()
    area = torch.trapezoid(ys, xs)
    area.backward()
    o("area", [area, ys.grad, node_name(area.grad_fn), torch.trapezoid(ys.detach(), dx=0.5)])
    x = torch.zeros(3, 4, requires_grad=True)
    filled = x.index_fill(1, torch.tensor([0, 3]), -1.0)
    copied = filled.index_copy(0, torch.tensor([2]), torch.ones(1, 4))
    scattered = copied.masked_scatter(copied == 0, torch.arange(10.0))
    (scattered * torch.arange(12.0).view(3, 4)).sum().backward()
    o("writes", [scattered, x.grad, node_name(filled.grad_fn), node_name(copied.grad_fn),
                 node_name(scattered.grad_fn)])


@program
def layout_device_and_conjugation_queries(torch, o):
    x = torch.arange(6.0).view(2, 3).requires_grad_()
    o("queries", [x.is_cpu, x.nbytes, x.itemsize, x.layout == torch.strided, x.is_sparse, x.is_sparse_csr,
                  x.is_quantized, x.is_meta, x.is_mkldnn, x.is_nested, x.is_conj(), x.is_neg(),
                  torch.zeros(4, dtype=torch.int16).nbytes, torch.zeros(0).itemsize])
    o("same tensor", [x.conj() is x, torch.conj(x) is x, x.resolve_conj() is x, torch.resolve_neg(x) is x])
    (x.conj().resolve_conj() * x).sum().backward()
    o("gradient through conj", x.grad)


@program
def untyped_storage_shared_by_views(torch, o):
    # memory tutorials: views share one storage, the storage is the whole base, clone copies
    x = torch.arange(12.0).reshape(3, 4)
    base = x.untyped_storage()
    views = {"slice": x[1:, 1:], "transpose": x.T, "expand": x.expand(2, 3, 4), "row": x[1],
             "diagonal": x.diagonal(), "unfold": x.unfold(1, 2, 1), "view": x.view(12), "split": x.split(1)[2]}
    for name, v in views.items():
        s = v.untyped_storage()
        o(name, [s.nbytes(), s.data_ptr() == x.data_ptr(), s == base, v.data_ptr() - s.data_ptr(),
                 v.storage_offset() * v.element_size()])
    copies = {"clone": x.clone(), "contiguous of T": x.T.contiguous(), "mul": x * 2, "double": x.double(),
              "index": x[[0, 2]], "int8": torch.ones(5, dtype=torch.int8), "empty": torch.ones(0),
              "0-d": torch.tensor(2.5), "bool": x > 3}
    for name, c in copies.items():
        s = c.untyped_storage()
        o(name, [s.nbytes(), s.data_ptr() == x.data_ptr(), s == base, c.data_ptr() - s.data_ptr()])
    o("size, len, element_size", [base.size(), len(base), base.element_size()])
    o("bytes", torch.tensor([1, 258], dtype=torch.int16).untyped_storage().tolist())
    o("repr", repr(torch.tensor([1, 2], dtype=torch.uint8).untyped_storage()))
    w = torch.ones(3, requires_grad=True)
    (w * 2).sum().backward()
    o("grad's storage", [w.grad.untyped_storage().nbytes(), w.grad.untyped_storage() == w.untyped_storage()])


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
