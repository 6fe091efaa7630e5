"""Conformance sweep, tensors: creation, printing, views, indexing, reductions, broadcasting, dtypes, math, conversions.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
from sweep_harness import X_DATA, check, make_mlp, registry

program = registry()


# ---- tensor creation -------------------------------------------------------------------------

@program
def creation_tensor_dtypes(torch, o):
    o("floats", torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    o("ints", torch.tensor([1, 2, 3]))
    o("bools", torch.tensor([True, False]))
    o("mixed", torch.tensor([1, 2.5]))
    o("scalar", torch.tensor(3.5))
    o("int scalar", torch.tensor(3))
    o("explicit", torch.tensor([1, 2], dtype=torch.float32))
    o("double", torch.tensor([1.0, 2.0], dtype=torch.float64))
    o("int32", torch.tensor([1, 2], dtype=torch.int32))
    o("empty", torch.tensor([]))
    o("bool + int", torch.tensor([True, 2]))


@program
def creation_zeros_ones_full(torch, o):
    o("zeros", torch.zeros(2, 3))
    o("zeros tuple", torch.zeros((2, 3)))
    o("ones", torch.ones(3))
    o("ones list", torch.ones([2, 2]))
    o("ones int", torch.ones(2, dtype=torch.int64))
    o("full int", torch.full((2, 2), 7))
    o("full float", torch.full((2,), 7.0))
    o("full bool", torch.full((2,), True))
    o("empty shape", torch.empty(2, 3).shape)
    o("zeros 0-d", torch.zeros(()))
    o("ones grad", torch.ones(2, requires_grad=True))


@program
def creation_arange(torch, o):
    o("arange 5", torch.arange(5))
    o("arange 1 10 2", torch.arange(1, 10, 2))
    o("arange float", torch.arange(0, 1, 0.1))
    o("arange 5.", torch.arange(5.0))
    o("arange neg", torch.arange(5, 0, -1))
    o("arange dtype", torch.arange(4, dtype=torch.float32))
    o("arange 0.5 step", torch.arange(1, 2.5, 0.5))
    o("arange len", len(torch.arange(0, 10, 3)))


@program
def creation_linspace_eye(torch, o):
    o("linspace", torch.linspace(0, 1, 5))
    o("linspace neg", torch.linspace(-1, 1, steps=4))
    o("linspace one", torch.linspace(2, 3, 1))
    o("linspace f64", torch.linspace(0, 1, 3, dtype=torch.float64))
    o("eye", torch.eye(3))
    o("eye rect", torch.eye(2, 3))
    o("eye int", torch.eye(2, dtype=torch.int64))


@program
def creation_like(torch, o):
    x = torch.tensor([[1, 2], [3, 4]])
    y = torch.tensor([1.5, 2.5], requires_grad=True)
    o("zeros_like", torch.zeros_like(x))
    o("ones_like", torch.ones_like(y))
    o("full_like", torch.full_like(x, 9))
    o("full_like float on int", torch.full_like(x, 2.7))
    o("zeros_like dtype", torch.zeros_like(x, dtype=torch.float32))
    o("empty_like shape", torch.empty_like(y).shape)
    o("ones_like grad", torch.ones_like(y, requires_grad=True))


@program
def creation_conversions(torch, o):
    x = torch.tensor([1.7, -2.3, 0.0])
    o("double", x.double())
    o("float", x.double().float())
    o("long", x.long())
    o("int", x.int())
    o("bool", x.bool())
    o("half", x.half())
    o("to", x.to(torch.float64))
    o("to int", x.to(dtype=torch.int64))
    o("type_as", x.type_as(torch.tensor([1])))
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    z = y.double()
    o("grad through cast", z)
    z.sum().backward()
    o("grad", y.grad)


@program
def tensor_from_tensor_warning(torch, o):
    x = torch.tensor([1.0, 2.0])
    y = o.warns("copy construct", lambda: torch.tensor(x), "To copy construct from a tensor")
    o("y", y)
    y[0] = 5
    o("x unchanged", x)


@program
def creation_errors(torch, o):
    o.raises("ragged", lambda: torch.tensor([[1, 2], [3]]), "expected sequence of length 2 at dim 1 (got 1)")
    o.raises("zeros negative", lambda: torch.zeros(-1), "zeros: Dimension size must be non-negative.")
    o.raises("ones negative", lambda: torch.ones(2, -1), "Trying to create tensor with negative dimension -1: [2, -1]")
    o.raises("randn negative", lambda: torch.randn(-3), "Trying to create tensor with negative dimension -3: [-3]")


@program
def tensor_class_constructor(torch, o):
    o("Tensor list", torch.Tensor([1, 2, 3]))
    o("Tensor nested", torch.Tensor([[1.5, 2], [3, 4]]))
    o("Tensor shape", torch.Tensor(2, 3).shape)
    o("Tensor dtype", torch.Tensor(2).dtype)


# ---- shape queries and printing ------------------------------------------------------------------

@program
def shape_queries(torch, o):
    x = torch.zeros(2, 3, 4)
    o("shape", x.shape)
    o("size", x.size())
    o("size 1", x.size(1))
    o("size -1", x.size(-1))
    o("dim", x.dim())
    o("ndim", x.ndim)
    o("numel", x.numel())
    o("nelement", x.nelement())
    o("len", len(x))
    o("shape[0]", x.shape[0])
    o("shape slice", x.shape[1:])
    o("shape list", list(x.shape))
    o("shape eq", x.shape == (2, 3, 4))
    o("repr shape", repr(x.shape))
    o("str shape", str(x.shape))
    o("print slice", str(x.shape[1:]))
    o("Size", torch.Size([2, 3]))
    o("Size numel", torch.Size([2, 3]).numel())
    o("repr Size", repr(torch.Size([2, 3])))
    o("empty Size", repr(torch.zeros(()).shape))
    o("Size plus tuple", repr(x.shape + (5,)))
    o("torch.numel", torch.numel(x))


@program
def dtype_queries(torch, o):
    x = torch.tensor([1.0])
    o("dtype", x.dtype)
    o("str", str(x.dtype))
    o("repr", repr(torch.int64))
    o("eq", [x.dtype == torch.float32, x.dtype == torch.float, torch.float is torch.float32,
             torch.double == torch.float64, torch.long == torch.int64])
    o("is_floating_point", [x.is_floating_point(), torch.tensor([1]).is_floating_point(),
                            torch.float32.is_floating_point, torch.int32.is_floating_point])
    o("element_size", [x.element_size(), torch.tensor([1]).element_size(),
                       x.double().element_size()])
    o("default", torch.get_default_dtype())
    o("itemsize", torch.float64.itemsize)
    o("f-string", f"{x.dtype}")


@program
def printing_float_tensors(torch, o):
    cases = [
        torch.tensor([1.0, 2.0, 3.0]),
        torch.tensor([1.5, -2.25, 3.0]),
        torch.tensor([[1.0, 2.0], [3.0, 4.0]]),
        torch.tensor([0.1, 0.2, 0.3]),
        torch.tensor([1e-5, 1.0]),
        torch.tensor([1e10, 1.0]),
        torch.tensor([123456.0, 0.5]),
        torch.tensor([0.0001, 0.001]),
        torch.tensor(3.14159),
        torch.tensor(-0.0),
        torch.tensor([float("nan"), 1.0, float("inf")]),
        torch.tensor([float("-inf"), 2.5]),
        torch.tensor([1.0, 2.0], dtype=torch.float64),
        torch.tensor([0.1], dtype=torch.float64),
        torch.tensor([1.5], dtype=torch.float16),
        torch.zeros(2, 0),
        torch.tensor([]),
        torch.tensor([-1.0, 1.0]),
        torch.tensor([[[1.0, 2.0], [3.0, 4.0]], [[5.0, 6.0], [7.0, 8.0]]]),
        torch.tensor([100.0, 0.001]),
        torch.tensor([1000.5, 2.0]),
        torch.tensor([1e-8]),
        torch.tensor([12345678.0]),
        torch.tensor([0.0, 0.0]),
    ]
    o("repr", [repr(t) for t in cases])
    o("str", [str(t) for t in cases])


@program
def printing_int_bool_tensors(torch, o):
    cases = [
        torch.tensor([1, 2, 3]),
        torch.tensor([-10, 200, 3]),
        torch.tensor([[1, 2], [30, 4]]),
        torch.tensor(7),
        torch.tensor([1, 2], dtype=torch.int32),
        torch.tensor([1, 2], dtype=torch.uint8),
        torch.tensor([1, 2], dtype=torch.int16),
        torch.tensor([True, False, True]),
        torch.tensor([True, True]),
        torch.tensor(False),
        torch.tensor([[True], [False]]),
        torch.tensor([], dtype=torch.int64),
        torch.zeros(0, 3, dtype=torch.int64),
    ]
    o("repr", [repr(t) for t in cases])


@program
def printing_grad_tensors(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    cases = [x, x + 1, x - 1, x * 2, x / 2, x ** 2, -x, x.sum(), x.mean(), x.exp(), x.log(),
             torch.tanh(x), torch.sigmoid(x), torch.relu(x), x.sin(), x.cos(), x.sqrt(),
             x.abs(), x.view(2, 1), x.reshape(1, 2), x.unsqueeze(0), x[0], x[:1], x.clone(),
             x.t() if x.dim() < 2 else x, x @ x, x.double(), x.max(), x.norm(), 2 - x, 1 / x,
             x.pow(3), torch.cat([x, x]), x.expand(2, 2), x.repeat(2),
             x.clamp(min=1.5), torch.softmax(x, 0), x.T, x.squeeze(), x.prod(), x.cumsum(0),
             x.std(), x.var(), torch.where(x > 1, x, 0.0), x.flip(0), x.permute(0),
             x.transpose(0, 0), x.unsqueeze(1).t(), x.masked_fill(x > 1, 0.0), x.detach()]
    o("repr", [repr(t) for t in cases])
    y = torch.tensor([1.0, 2.0], dtype=torch.float64, requires_grad=True)
    o("double repr", [repr(y), repr(y * 2)])


@program
def printing_large_tensors(torch, o):
    o("arange 2000", repr(torch.arange(2000)))
    o("float 1500", repr(torch.arange(1500).float()))
    o("matrix", repr(torch.arange(2000).reshape(100, 20)))
    o("wide", repr(torch.arange(30).float()))
    o("wide ints", repr(torch.arange(40)))
    o("wide matrix", repr(torch.linspace(0, 1, 24).reshape(2, 12)))
    o("long decimals", repr(torch.linspace(-1, 1, 15)))


@program
def printing_print_function(torch, o):
    import contextlib
    import io

    buffer = io.StringIO()
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    loss = (x ** 2).sum()
    with contextlib.redirect_stdout(buffer):
        print(x)
        print(loss)
        print(x.shape)
        print(x.dtype)
        print("loss:", loss.item())
        print(f"loss = {loss}")
        print([x, x.grad])
        print(torch.tensor([[1, 2], [3, 4]]))
    o("stdout", buffer.getvalue())


@program
def format_specs(torch, o):
    loss = torch.tensor(0.123456)
    o("f .4f", f"{loss:.4f}")
    o("format", f"{torch.tensor(2.5):.2f}")
    o("f item", f"{loss.item():.3f}")
    o("f plain", f"{loss}")
    o("int fmt", f"{torch.tensor(5):d}")
    o("fmt with grad", f"{torch.tensor(1.5, requires_grad=True):.1f}")
    o.raises("vector fmt", lambda: f"{torch.tensor([1.0, 2.0]):.2f}", "unsupported format string")


# ---- views, reshaping ----------------------------------------------------------------------------

@program
def views_and_reshapes(torch, o):
    x = torch.arange(6.0, requires_grad=True)
    a = x.view(2, 3)
    b = x.view(-1, 2)
    c = a.T
    d = a.t()
    e = a.reshape(3, 2)
    f = a.flatten()
    g = a.unsqueeze(0)
    h = g.squeeze(0)
    i = a.permute(1, 0)
    j = a.transpose(0, 1)
    k = a.view(-1)
    o("shapes", [t.shape for t in (a, b, c, d, e, f, g, h, i, j, k)])
    o("values", [a, c, e, i])
    o("names", [t.grad_fn.name() for t in (a, c, d, e, f, g, h, i, j)])
    (c * torch.arange(6.0).view(3, 2)).sum().backward()
    o("grad", x.grad)


@program
def view_errors(torch, o):
    x = torch.arange(6)
    o.raises("bad view", lambda: x.view(4), "shape '[4]' is invalid for input of size 6")
    o.raises("bad reshape", lambda: x.reshape(4, -1), "shape '[4, -1]' is invalid for input of size 6")
    t = torch.arange(6).view(2, 3).t()
    o("is_contiguous", t.is_contiguous())
    o.raises("noncontiguous view", lambda: t.view(6), "view size is not compatible with input tensor's size and stride")
    o("contiguous view", t.contiguous().view(6))
    o("reshape ok", t.reshape(6))


@program
def squeeze_unsqueeze(torch, o):
    x = torch.zeros(1, 3, 1, 2)
    o("squeeze", x.squeeze().shape)
    o("squeeze 0", x.squeeze(0).shape)
    o("squeeze 1", x.squeeze(1).shape)
    o("unsqueeze -1", x.unsqueeze(-1).shape)
    o("None index", torch.arange(3)[None, :, None].shape)
    o("torch.squeeze", torch.squeeze(x, 2).shape)


@program
def expand_and_repeat(torch, o):
    x = torch.tensor([[1.0], [2.0]], requires_grad=True)
    e = x.expand(2, 3)
    o("expand", e)
    r = x.repeat(1, 3)
    o("repeat", r)
    (e * torch.arange(6.0).view(2, 3)).sum().backward()
    o("grad", x.grad)
    o("expand_as", x.expand_as(torch.zeros(2, 4)).shape)
    o("expand -1", x.expand(-1, 4).shape)


@program
def cat_and_stack(torch, o):
    a = torch.tensor([[1.0, 2.0]], requires_grad=True)
    b = torch.tensor([[3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    c = torch.cat([a, b], dim=0)
    o("cat0", c)
    d = torch.cat((b, b), dim=1)
    o("cat1", d)
    s = torch.stack([b, b])
    o("stack", s)
    s1 = torch.stack([b[0], b[1]], dim=1)
    o("stack1", s1)
    (c.sum() + d.sum() * 2 + (s1 ** 2).sum()).backward()
    o("grads", [a.grad, b.grad])
    o.raises("cat mismatch", lambda: torch.cat([a, torch.zeros(1, 3)]), "Sizes of tensors must match except in dimension 0")
    o.raises("stack mismatch", lambda: torch.stack([a, b]), "stack expects each tensor to be equal size")
    o("cat ints floats", torch.cat([torch.tensor([1]), torch.tensor([2.5])]))


@program
def split_chunk_unbind(torch, o):
    x = torch.arange(10.0, requires_grad=True)
    parts = torch.split(x, 3)
    o("split", parts)
    chunks = x.chunk(3)
    o("chunk", chunks)
    rows = torch.arange(6).view(2, 3).unbind(0)
    o("unbind", rows)
    (parts[0].sum() * 2 + chunks[2].sum()).backward()
    o("grad", x.grad)


# ---- indexing ------------------------------------------------------------------------------------

@program
def basic_indexing(torch, o):
    x = torch.arange(12).reshape(3, 4)
    o("x[0]", x[0])
    o("x[-1]", x[-1])
    o("x[1, 2]", x[1, 2])
    o("x[1][2]", x[1][2])
    o("x[:, 0]", x[:, 0])
    o("x[1:3]", x[1:3])
    o("x[:, 1:3]", x[:, 1:3])
    o("x[..., 1]", x[..., 1])
    o("x[::2]", x[::2])
    o("x[:, ::-1] error", None)
    o("x[None]", x[None].shape)
    o("x[:, None]", x[:, None].shape)
    o("x[0, :, None]", x[0, :, None].shape)


@program
def advanced_indexing(torch, o):
    x = torch.arange(12.0).reshape(3, 4)
    o("list", x[[0, 2]])
    o("tensor idx", x[torch.tensor([2, 0])])
    o("pairs", x[[0, 1, 2], [3, 2, 1]])
    o("mask", x[x > 5])
    o("row mask", x[torch.tensor([True, False, True])])
    o("mixed", x[1:, [0, 3]])
    o("neg", x[-1, -1])
    o("bool scalar count", (x > 5).sum())


@program
def indexing_gradients(torch, o):
    x = torch.arange(6.0, requires_grad=True)
    y = x[1:4].sum() + x[[0, 0, 5]].sum() * 2 + x[x > 3].sum() * 10
    y.backward()
    o("grad", x.grad)
    m = torch.arange(6.0).view(2, 3).requires_grad_()
    z = (m[:, 1] * m[1]).sum() if False else (m[:, 1].sum() + m[1, 2])
    z.backward()
    o("matrix grad", m.grad)


@program
def index_errors(torch, o):
    x = torch.arange(3)
    o.raises("out of bounds", lambda: x[5], "index 5 is out of bounds for dimension 0 with size 3")
    o.raises("too many", lambda: x[0, 0], "too many indices for tensor of dimension 1")
    m = torch.zeros(2, 3)
    o.raises("dim", lambda: m.sum(dim=2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)")


@program
def setitem_variants(torch, o):
    x = torch.zeros(3, 4)
    x[0] = 1.0
    x[1, 2] = 5.0
    x[:, 3] = torch.tensor([7.0, 8.0, 9.0])
    x[x == 0] = -1.0
    o("x", x)
    y = torch.arange(5)
    y[1:3] = 0
    o("y", y)
    y[torch.tensor([0, 4])] = torch.tensor([9, 9])
    o("y2", y)
    z = torch.zeros(3)
    z[0] = 2.7
    o("z", z)
    w = torch.zeros(3, dtype=torch.int64)
    w[1] = 2.7
    o("int truncates", w)


@program
def setitem_on_leaf_error_and_clone(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)

    def assign():
        x[0] = 0.0

    o.raises("leaf", assign, "a leaf Variable that requires grad is being used in an in-place operation.")
    y = x.clone()
    y[0] = 0.0
    o("y", y)
    (y * y).sum().backward()
    o("grad", x.grad)


@program
def masked_fill_and_where(torch, o):
    x = torch.tensor([[1.0, -2.0], [-3.0, 4.0]], requires_grad=True)
    m = x.masked_fill(x < 0, 0.0)
    o("masked", m)
    w = torch.where(x > 0, x, torch.zeros_like(x))
    o("where", w)
    w2 = torch.where(x > 0, x * 2, -x)
    o("where2", w2)
    w3 = torch.where(x > 0, x, 0.0)
    o("where scalar", w3)
    (m.sum() + w2.sum()).backward()
    o("grad", x.grad)
    o("where one arg", torch.where(torch.tensor([0, 3, 0, 1]) > 0))
    o("where ints", torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([10, 20])))
    o("where int float", torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), 0.5))


@program
def gather_scatter(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    idx = torch.tensor([[2], [0]])
    g = x.gather(1, idx)
    o("gather", g)
    g.sum().backward()
    o("grad", x.grad)
    s = torch.zeros(2, 3).scatter(1, idx, 1.0)
    o("scatter one-hot", s)
    o("index_select", torch.index_select(x, 0, torch.tensor([1, 1])))


@program
def one_hot_like_eye_indexing(torch, o):
    labels = torch.tensor([2, 0, 1])
    onehot = torch.eye(3)[labels]
    o("onehot", onehot)
    logits = torch.tensor([[0.1, 0.2, 3.0], [2.0, 0.1, 0.0], [0.0, 1.0, 0.5]], requires_grad=True)
    probs = torch.softmax(logits, dim=1)
    loss = -(onehot * torch.log(probs)).sum(dim=1).mean()
    loss.backward()
    o("loss", loss)
    o("grad", logits.grad)
    o("picked", probs[torch.arange(3), labels])


# ---- reductions ----------------------------------------------------------------------------------

@program
def reductions_sum_mean(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    o("sum", x.sum())
    o("sum0", x.sum(0))
    o("sum1 keep", x.sum(dim=1, keepdim=True))
    o("sum tuple", x.sum(dim=(0, 1)))
    o("mean", x.mean())
    o("mean1", x.mean(1))
    o("mean -1 keep", torch.mean(x, dim=-1, keepdim=True))
    o("torch.sum", torch.sum(x, 0))
    (x.sum(0) * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("grad", x.grad)


@program
def reductions_int_and_bool(torch, o):
    x = torch.tensor([[1, 2], [3, 4]])
    o("sum int", x.sum())
    o("sum int dim", x.sum(0))
    b = torch.tensor([True, False, True])
    o("sum bool", b.sum())
    o("float mean", x.float().mean())
    o.raises("mean int", lambda: x.mean(), "mean(): could not infer output dtype")
    o("sum dtype", x.sum(dtype=torch.float64))
    o("int32 sum", torch.tensor([1, 2], dtype=torch.int32).sum())
    o("max int", x.max())
    o("prod int", x.prod())
    o("cumsum int", x.cumsum(0))


@program
def max_min_with_dim(torch, o):
    x = torch.tensor([[1.0, 5.0, 3.0], [7.0, 2.0, 9.0]], requires_grad=True)
    values, indices = torch.max(x, dim=1)
    o("values", values)
    o("indices", indices)
    r = x.max(dim=0)
    o("named", [r.values, r.indices])
    o("tuple", tuple(r))
    o("repr", repr(r))
    m = x.min(1, keepdim=True)
    o("min keepdim", [m[0], m[1]])
    o("max all", x.max())
    o("argmax", x.argmax())
    o("argmax dim", x.argmax(dim=1))
    o("argmin dim keep", torch.argmin(x, dim=0, keepdim=True))
    values.sum().backward()
    o("grad", x.grad)
    o("max binary", torch.max(x, torch.tensor(4.0)))


@program
def max_ties_gradient(torch, o):
    x = torch.tensor([1.0, 3.0, 3.0, 2.0], requires_grad=True)
    x.max().backward()
    o("max all ties", x.grad)
    x.grad = None
    v, i = x.max(0)
    v.backward()
    o("max dim ties", [i, x.grad])
    y = torch.tensor([2.0, 2.0], requires_grad=True)
    torch.amax(y, 0).backward()
    o("amax", y.grad)


@program
def reductions_more(torch, o):
    x = torch.tensor([[1.0, 2.0, 4.0], [3.0, 0.5, -1.0]], requires_grad=True)
    outs = {
        "prod": x.prod(), "prod1": x.prod(1), "std": x.std(), "var": x.var(),
        "std0": x.std(dim=0), "var unbiased False": x.var(unbiased=False),
        "var correction0": x.var(dim=1, correction=0), "cumsum": x.cumsum(dim=1),
        "norm": x.norm(), "norm dim": x.norm(dim=1), "norm p1": x.norm(p=1),
        "logsumexp": torch.logsumexp(x, dim=1), "amax": x.amax(dim=0), "amin": x.amin(),
    }
    o("outs", outs)
    total = sum(v.sum() for v in outs.values())
    total.backward()
    o("grad", x.grad)


@program
def topk_sort(torch, o):
    x = torch.tensor([3.0, 1.0, 4.0, 1.5, 5.0], requires_grad=True)
    v, i = torch.topk(x, 2)
    o("topk", [v, i])
    s = torch.sort(x, descending=True)
    o("sort", [s.values, s.indices])
    o("argsort", torch.argsort(x))
    v.sum().backward()
    o("grad", x.grad)


# ---- broadcasting --------------------------------------------------------------------------------

@program
def broadcasting_shapes_and_grads(torch, o):
    a = torch.tensor([[1.0], [2.0], [3.0]], requires_grad=True)
    b = torch.tensor([[10.0, 20.0, 30.0, 40.0]], requires_grad=True)
    c = a + b
    o("c", c)
    (c * c).sum().backward()
    o("grads", [a.grad, b.grad])
    m = torch.ones(2, 3, requires_grad=True)
    v = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    (m * v).sum().backward()
    o("row broadcast", [m.grad, v.grad])
    s = torch.tensor(2.0, requires_grad=True)
    (m * s).sum().backward()
    o("scalar tensor", s.grad)


@program
def broadcasting_error(torch, o):
    a = torch.ones(2, 3)
    b = torch.ones(2)
    o.raises("add", lambda: a + b,
             "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")
    o.raises("mul", lambda: torch.ones(4, 2) * torch.ones(3, 1),
             "The size of tensor a (4) must match the size of tensor b (3) at non-singleton dimension 0")


@program
def broadcasting_batch_norm_like(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 6.0], [5.0, 1.0]], requires_grad=True)
    mean = x.mean(dim=0, keepdim=True)
    std = x.std(dim=0, keepdim=True)
    z = (x - mean) / (std + 1e-5)
    o("z", z)
    (z * torch.tensor([[1.0, 2.0]])).sum().backward()
    o("grad", x.grad)


# ---- dtype promotion -----------------------------------------------------------------------------

@program
def promotion_int_float(torch, o):
    i = torch.tensor([1, 2, 3])
    f = torch.tensor([0.5, 1.5, 2.5])
    d = torch.tensor([0.5, 1.5, 2.5], dtype=torch.float64)
    o("int + float scalar", i + 1.5)
    o("int * int scalar", i * 2)
    o("int + float tensor", i + f)
    o("float32 + float64", f + d)
    o("int / int", i / 2)
    o("int / int tensor", i / i)
    o("int ** 2", i ** 2)
    o("int ** float", i ** 0.5)
    o("float32 * float64 0-d", f * torch.tensor(2.0, dtype=torch.float64))
    o("int * float 0-d", i * torch.tensor(2.5))
    o("int32 + int64", torch.tensor([1], dtype=torch.int32) + torch.tensor([1]))
    o("int32 + int scalar", torch.tensor([1], dtype=torch.int32) + 5)
    o("uint8 + int8", torch.tensor([1], dtype=torch.uint8) + torch.tensor([1], dtype=torch.int8))
    o("float16 + float32", torch.tensor([1.0], dtype=torch.float16) + torch.tensor([1.0]))
    o("int - float", i - f)
    o("float // int", f // 1)
    o("int // int", torch.tensor([7, -7]) // 2)
    o("int % int", torch.tensor([7, -7]) % 3)
    o("float % float", torch.tensor([5.5, -5.5]) % 2.0)


@program
def promotion_bool(torch, o):
    b = torch.tensor([True, False, True])
    i = torch.tensor([1, 2, 3])
    o("bool + int tensor", b + i)
    o("bool * float", b * 1.5)
    o("bool + int scalar", b + 1)
    o("bool.float", b.float())
    o("bool & bool", b & torch.tensor([True, True, False]))
    o("bool | bool", b | torch.tensor([False, True, False]))
    o("~bool", ~b)
    o("bool + bool", b + b)
    o("comparison dtype", (i > 1).dtype)
    o("logical", torch.logical_and(i > 1, b))
    o.raises("neg bool", lambda: -b, "Negation, the `-` operator, on a bool tensor is not supported")
    o.raises("sub bool", lambda: b - b, "Subtraction, the `-` operator, with two bool tensors is not supported")


@program
def promotion_grad_dtypes(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    d = torch.tensor([3.0, 4.0], dtype=torch.float64, requires_grad=True)
    y = x * d
    o("y", y)
    y.sum().backward()
    o("grads", [x.grad, d.grad])
    z = torch.tensor([1.0, 2.0], requires_grad=True)
    (z * torch.tensor([1, 2])).sum().backward()
    o("int other", z.grad)


@program
def comparison_ops(torch, o):
    a = torch.tensor([1.0, 2.0, 3.0])
    b = torch.tensor([3.0, 2.0, 1.0])
    o("ops", [a < b, a <= b, a > b, a >= b, a == b, a != b, a > 2, a > 2, a == 2])
    o("torch fns", [torch.eq(a, b), torch.gt(a, 1.5), torch.lt(a, b)])
    o("equal", torch.equal(a, a.clone()))
    o("allclose", torch.allclose(a, a + 1e-9))
    o("any all", [(a > 2).any(), (a > 0).all(), (a > 0).all().item()])
    o.raises("bool ambiguous", lambda: bool(a > 1), "Boolean value of Tensor with more than one value is ambiguous")
    o("bool single", bool(torch.tensor([2.0]) > 1))


# ---- in-place ops --------------------------------------------------------------------------------

@program
def inplace_basics(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0])
    o("version0", x._version)
    x.add_(1)
    x.mul_(2)
    o("after", x)
    o("version", x._version)
    x.zero_()
    o("zero_", x)
    x.fill_(3.5)
    o("fill_", x)
    x.clamp_(max=2.0)
    o("clamp_", x)
    y = torch.tensor([-1.0, 1.0])
    y.relu_()
    o("relu_", y)
    z = torch.tensor([1.0, 2.0])
    z += 1
    z *= 3
    z -= 1
    z /= 2
    o("augmented", z)
    i = torch.tensor([1, 2])
    i += 1
    o("int +=", i)
    o.raises("int += float", lambda: i.add_(1.5), "result type Float can't be cast to the desired output type Long")


@program
def inplace_saved_tensor_error(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x.exp()
    y.add_(1)
    o.raises("modified", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an inplace operation")
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 2
    c = b * b
    b.mul_(3)
    o.raises("modified2", lambda: c.sum().backward(), "is at version 1; expected version 0 instead")


@program
def inplace_on_nonleaf_ok(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    y.add_(1)
    o("y", y)
    o("name", y.grad_fn.name())
    y.sum().backward()
    o("grad", x.grad)
    z = x + 0
    z.mul_(2)
    z.sum().backward()
    o("grad2", x.grad)


@program
def inplace_leaf_no_grad_update(torch, o):
    w = torch.tensor([1.0, 2.0], requires_grad=True)
    with torch.no_grad():
        w.mul_(0.5)
        w += 1
    o("w", w)
    o("flags", [w.is_leaf, w.requires_grad])


@program
def copy_and_version(torch, o):
    a = torch.zeros(3)
    a.copy_(torch.tensor([1, 2, 3]))
    o("copy int into float", a)
    b = torch.zeros(2, 3)
    b.copy_(torch.tensor([1.0, 2.0, 3.0]))
    o("broadcast copy", b)
    o("version", b._version)


# ---- matmul ---------------------------------------------------------------------------------------

@program
def matmul_variants(torch, o):
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], requires_grad=True)
    b = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], requires_grad=True)
    v = torch.tensor([1.0, -1.0], requires_grad=True)
    outs = [a @ b, torch.matmul(a, b), a.mm(b), torch.mm(a, b), a @ v, torch.mv(a, v), v @ v,
            torch.dot(v, v), b.T @ a.T]
    o("outs", outs)
    sum(t.sum() for t in outs).backward()
    o("grads", [a.grad, b.grad, v.grad])


@program
def matmul_batched(torch, o):
    a = torch.arange(12.0).reshape(2, 2, 3).requires_grad_()
    b = torch.arange(6.0).reshape(3, 2).requires_grad_()
    c = a @ b
    o("c", c)
    d = torch.bmm(a, a.transpose(1, 2))
    o("bmm", d)
    (c.sum() + d.sum()).backward()
    o("grads", [a.grad, b.grad])


@program
def matmul_errors(torch, o):
    a = torch.ones(2, 3)
    o.raises("mm", lambda: a @ torch.ones(2, 3), "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)")
    o.raises("dtype", lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.float64),
             "expected m1 and m2 to have the same dtype")
    o.raises("dot", lambda: torch.dot(torch.ones(2), torch.ones(3)), "inconsistent tensor size")
    o.raises("int float", lambda: torch.ones(2, 2) @ torch.ones(2, 2, dtype=torch.int64),
             "expected m1 and m2 to have the same dtype")


# ---- softmax / log_softmax -------------------------------------------------------------------

@program
def softmax_dims(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]], requires_grad=True)
    s0 = torch.softmax(x, dim=0)
    s1 = x.softmax(dim=1)
    sm = torch.nn.functional.softmax(x, dim=-1)
    ls = torch.log_softmax(x, 1)
    ls2 = x.log_softmax(-1)
    o("outs", [s0, s1, sm, ls, ls2])
    o("row sums", s1.sum(dim=1))
    (s1[:, 0].sum() + ls[:, 2].sum()).backward()
    o("grad", x.grad)


@program
def softmax_implicit_dim_warning(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    y = o.warns("implicit", lambda: torch.nn.functional.softmax(x), "Implicit dimension choice for softmax")
    o("y", y)


@program
def softmax_numerical_stability(torch, o):
    x = torch.tensor([1000.0, 1001.0, 1002.0], requires_grad=True)
    s = torch.softmax(x, 0)
    o("s", s)
    naive = torch.exp(x) / torch.exp(x).sum()
    o("naive", naive)
    ls = torch.log_softmax(x, 0)
    ls[0].backward()
    o("grad", x.grad)


# ---- misc pointwise ----------------------------------------------------------------------------

@program
def pointwise_functions_and_grads(torch, o):
    x = torch.tensor([0.5, 1.0, 2.0], dtype=torch.float64, requires_grad=True)
    fns = {
        "exp": torch.exp, "log": torch.log, "sqrt": torch.sqrt, "sin": torch.sin,
        "cos": torch.cos, "tanh": torch.tanh, "sigmoid": torch.sigmoid, "abs": torch.abs,
        "neg": torch.neg, "reciprocal": torch.reciprocal, "rsqrt": torch.rsqrt,
        "log1p": torch.log1p, "expm1": torch.expm1, "log2": torch.log2, "log10": torch.log10,
        "exp2": torch.exp2, "erf": torch.erf, "square": lambda t: t ** 2,
        "pow3": lambda t: torch.pow(t, 3), "rpow": lambda t: 2 ** t,
        "clamp": lambda t: torch.clamp(t, 0.8, 1.5), "relu": torch.relu,
        "sign": torch.sign,
    }
    for name, fn in fns.items():
        y = fn(x)
        (g,) = torch.autograd.grad(y.sum(), x)
        o(name, [y, g])


@program
def abs_relu_at_zero(torch, o):
    x = torch.tensor([-1.0, 0.0, 1.0], requires_grad=True)
    (torch.abs(x).sum()).backward()
    o("abs", x.grad)
    x.grad = None
    torch.relu(x).sum().backward()
    o("relu", x.grad)
    x.grad = None
    torch.clamp(x, min=0.0).sum().backward()
    o("clamp", x.grad)
    x.grad = None
    x.clamp(-1.0, 1.0).sum().backward()
    o("clamp edges", x.grad)
    y = torch.tensor([0.0], requires_grad=True)
    torch.sqrt(y).backward()
    o("sqrt at 0", y.grad)


@program
def nan_inf_values(torch, o):
    x = torch.tensor([0.0, -1.0, 1.0], requires_grad=True)
    y = torch.log(x)
    o("log", y)
    z = x / 0
    o("div0", z)
    y.sum().backward()
    o("grad", x.grad)
    o("isnan", torch.isnan(y))
    o("isinf", torch.isinf(z))
    o("isfinite", torch.isfinite(y))


@program
def maximum_minimum_and_grads(torch, o):
    a = torch.tensor([1.0, 5.0, 3.0], requires_grad=True)
    b = torch.tensor([2.0, 4.0, 3.0], requires_grad=True)
    m = torch.maximum(a, b)
    n = torch.minimum(a, b)
    o("m", m)
    o("n", n)
    (m.sum() + 2 * n.sum()).backward()
    o("grads", [a.grad, b.grad])


@program
def pow_special_cases(torch, o):
    x = torch.tensor([0.0, 1.0, 2.0], requires_grad=True)
    (x ** 2).sum().backward()
    o("pow2", x.grad)
    x.grad = None
    (x ** 0.5).sum().backward()
    o("pow half", x.grad)
    x.grad = None
    (x ** 0).sum().backward()
    o("pow0", x.grad)
    e = torch.tensor([2.0, 3.0, 0.5], requires_grad=True)
    b = torch.tensor([2.0, 2.0, 4.0], requires_grad=True)
    (b ** e).sum().backward()
    o("tensor pow", [b.grad, e.grad])


# ---- devices, conversions, tensor metadata ----------------------------------------------------

@program
def device_selection_idiom(torch, o):
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    o("device", str(device))
    o("repr", repr(device))
    o("type", device.type)
    x = torch.tensor([1.0, 2.0]).to(device)
    o("x", x)
    o("x.device", str(x.device))
    o("same device", x.device == device)
    model = torch.nn.Linear(2, 1).to(device)
    o("model returns itself", isinstance(model, torch.nn.Linear))
    o("cpu", x.cpu().numpy())
    o("to cpu string", x.to("cpu"))
    o("mps", torch.backends.mps.is_available())
    o("cuda count", torch.cuda.device_count())
    o.raises("bad device", lambda: torch.device("gpu"), "Expected one of cpu, cuda")


@program
def model_double_and_dtype_conversion(torch, o):
    model = make_mlp(torch)
    model.double()
    o("dtypes", [p.dtype for p in model.parameters()])
    x = torch.tensor(X_DATA, dtype=torch.float64)
    out = model(x)
    o("out", out)
    model.float()
    o("back", [p.dtype for p in model.parameters()])
    model.to(torch.float64)
    o("to", [p.dtype for p in model.parameters()])
    o("is Parameter", [type(p).__name__ for p in model.parameters()])


@program
def tensor_type_strings(torch, o):
    o("float", torch.tensor([1.0]).type())
    o("long", torch.tensor([1]).type())
    o("bool", torch.tensor([True]).type())
    o("double", torch.tensor([1.0], dtype=torch.float64).type())
    o("int32", torch.tensor([1], dtype=torch.int32).type())
    o("convert", torch.tensor([1.5]).type(torch.float64))
    o("convert str", torch.tensor([1.5]).type("torch.DoubleTensor"))
    o("convert long", torch.tensor([1.5, -2.7]).type(torch.long))


@program
def strides_and_contiguity(torch, o):
    x = torch.arange(6.0).view(2, 3)
    o("stride", x.stride())
    o("stride dim", x.stride(1))
    t = x.t()
    o("t stride", t.stride())
    o("contiguous", [x.is_contiguous(), t.is_contiguous(), t.contiguous().is_contiguous()])
    o("contiguous stride", t.contiguous().stride())


@program
def new_tensor_factories(torch, o):
    x = torch.tensor([1.0, 2.0], dtype=torch.float64)
    o("new_zeros", x.new_zeros(2, 3))
    o("new_ones", x.new_ones((2,)))
    o("new_full", x.new_full((2, 2), 7.0))
    o("new_tensor", x.new_tensor([1, 2, 3]))
    o("new_tensor dtype", x.new_tensor([1, 2], dtype=torch.int64))
    o("new_empty shape", x.new_empty(4).shape)
    i = torch.tensor([1, 2])
    o("int new_ones", i.new_ones(3))


@program
def legacy_tensor_constructor(torch, o):
    o("list", torch.Tensor([1, 2, 3]))
    o("nested", torch.Tensor([[1, 2], [3, 4]]))
    o("sizes", torch.Tensor(2, 3).shape)
    o("size dtype", torch.Tensor(2).dtype)
    o("Size arg", torch.Tensor(torch.Size([1, 2])).shape)
    o("empty", torch.Tensor())
    o("bools", torch.Tensor([True, False]))
    t = torch.tensor([1, 2])
    o("from tensor", torch.Tensor(t))
    o("FloatTensor-like", torch.Tensor([0.5]).dtype)
    o.raises("scalar", lambda: torch.Tensor(2.5), "data must be a sequence")


@program
def size_arithmetic(torch, o):
    x = torch.zeros(2, 3, 4)
    o("concat", x.shape[:-1] + (5,))
    o("prepend", (1,) + x.shape)
    o("repeat", x.shape[1:] * 2)
    o("reversed", x.shape[::-1])
    o("view with size", x.view(x.shape[0], -1).shape)
    o("view star", x.view(*x.shape).shape)
    o("reshape size", torch.arange(24).reshape(x.size()).shape)
    o("zeros from size", torch.zeros(x.shape[1:]).shape)
    o("ones(size())", torch.ones(x.size()).shape)
    o("unpack", list(x.shape))
    b, c, d = x.shape
    o("unpacked", [b, c, d])
    o("Size is tuple", isinstance(x.shape, tuple))
    o("index", x.shape.index(3) if hasattr(x.shape, "index") else None)
    o("count", x.shape.count(2))


@program
def numpy_roundtrips(torch, o):
    a = np.array([[1.5, 2.5], [3.5, 4.5]], dtype=np.float32)
    t = torch.from_numpy(a)
    o("from_numpy", t)
    o("back", t.numpy())
    o("int64", torch.tensor([1, 2]).numpy())
    o("bool", (torch.tensor([1, 2]) > 1).numpy())
    o("float64 array", torch.tensor(np.array([0.1, 0.2])))
    o("np scalar", torch.tensor(np.float64(2.5)))
    o("list of np floats", torch.tensor([np.float64(1.0), np.float64(2.0)]))
    o("list of np float32", torch.tensor([np.float32(1.0), 2.0]))
    o("as_tensor shares", torch.as_tensor(a) is not None)
    o("np.asarray", np.asarray(torch.tensor([1.0, 2.0])))
    o("mean of numpy", float(np.mean(torch.tensor([1.0, 2.0, 4.0]).numpy())))


# ---- new math functions --------------------------------------------------------------------

@program
def rounding_functions(torch, o):
    x = torch.tensor([-2.5, -1.5, -0.4, 0.5, 1.5, 2.6], requires_grad=True)
    outs = [x.floor(), x.ceil(), x.round(), x.trunc(), x.frac(), torch.round(x, decimals=1),
            torch.floor(x), torch.ceil(x)]
    o("outs", outs)
    total = sum((out * torch.arange(6.0)).sum() for out in outs)
    total.backward()
    o("grad", x.grad)
    o("int floor", torch.tensor([1, 2]).floor())
    o("round decimals", torch.round(torch.tensor([1.2345, 2.5678]), decimals=2))


@program
def remainder_and_floor_division(torch, o):
    a = torch.tensor([7, -7, 7, -7])
    b = torch.tensor([3, 3, -3, -3])
    o("int //", a // b)
    o("int %", a % b)
    o("fmod", torch.fmod(a, b))
    o("remainder", torch.remainder(a, b))
    f = torch.tensor([5.5, -5.5, 2.0])
    o("float //", f // 2)
    o("float %", f % 2)
    o("float % -2", f % -2)
    o("rfloordiv", 10 // torch.tensor([3, 4]))
    o("rmod", 10 % torch.tensor([3, 4]))
    x = torch.tensor([5.5, -3.2], requires_grad=True)
    y = torch.tensor([2.0, 1.5], requires_grad=True)
    (x % y).sum().backward()
    o("grads", [x.grad, y.grad])
    z = x // 2
    o("floordiv requires_grad", z.requires_grad)
    o.raises("floordiv backward", lambda: z.sum().backward(), "derivative for aten::floor_divide is not implemented")


@program
def trig_and_hyperbolic(torch, o):
    x = torch.tensor([-0.5, 0.1, 0.7], dtype=torch.float64, requires_grad=True)
    for name in ("tan", "atan", "asin", "acos", "sinh", "cosh"):
        y = getattr(torch, name)(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (gg,) = torch.autograd.grad(g.sum(), x)
        o(name, [y, g, gg])
        o(name + " repr", repr(getattr(x, name)().detach()))


@program
def square_clamp_min_max(torch, o):
    x = torch.tensor([-2.0, -0.5, 0.5, 2.0], requires_grad=True)
    outs = [torch.square(x), x.square(), x.clamp_min(0.0), x.clamp_max(1.0), torch.clamp_min(x, -1.0)]
    o("outs", outs)
    o("names", [t.grad_fn.name() for t in outs])
    sum(t.sum() for t in outs).backward()
    o("grad", x.grad)


@program
def nan_checks_and_isclose(torch, o):
    x = torch.tensor([1.0, float("nan"), float("inf"), -float("inf"), 0.0])
    o("isnan", torch.isnan(x))
    o("isinf", x.isinf())
    o("isfinite", x.isfinite())
    o("any nan", torch.isnan(x).any())
    o("nan != nan", x != x)
    a = torch.tensor([1.0, 2.0, 3.0])
    o("isclose", torch.isclose(a, a + 1e-7))
    o("isclose tol", torch.isclose(a, torch.tensor([1.1, 2.0, 3.5]), atol=0.2))
    o("equal", [torch.equal(a, a.clone()), torch.equal(a, a[:2]), a.equal(a + 1)])


@program
def all_any_count_nonzero(torch, o):
    x = torch.tensor([[1.0, 0.0, 3.0], [0.0, 0.0, 2.0]])
    o("all", x.all())
    o("any", x.any())
    o("all dim", x.all(dim=1))
    o("any dim keep", x.any(dim=0, keepdim=True))
    o("torch.all", torch.all(x > -1))
    o("count_nonzero", torch.count_nonzero(x))
    o("count dim", torch.count_nonzero(x, dim=0))
    o("bool ops", [(x > 0).all().item(), (x > 2).any().item()])
    o("int", torch.tensor([1, 2, 0]).all())


@program
def masked_select_and_nonzero(torch, o):
    x = torch.tensor([[1.0, -2.0, 3.0], [-4.0, 5.0, -6.0]], requires_grad=True)
    pos = torch.masked_select(x, x > 0)
    o("pos", pos)
    o("method", x.masked_select(x < 0))
    (pos * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("grad", x.grad)
    o("nonzero", (x > 0).nonzero())
    o("nonzero tuple", torch.nonzero(x > 0, as_tuple=True))
    o("argwhere-like", torch.nonzero(torch.tensor([0, 3, 0, 5])))
    o("where 1-arg", torch.where(torch.tensor([[True, False], [False, True]])))


@program
def repeat_and_tile_like(torch, o):
    x = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    r = x.repeat(2, 3)
    o("r", r)
    r3 = x.repeat(2, 1, 1)
    o("r3 shape", r3.shape)
    (r * torch.arange(24.0).view(4, 6)).sum().backward()
    o("grad", x.grad)
    o("1d", torch.tensor([1, 2]).repeat(3))
    o.raises("too few", lambda: x.repeat(2), "Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")


@program
def diagonal_trace_triangles(torch, o):
    m = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], requires_grad=True)
    outs = {"trace": m.trace(), "diag": torch.diag(m), "diag1": m.diag(1),
            "diagonal": m.diagonal(), "diagonal -1": torch.diagonal(m, -1), "tril": m.tril(),
            "triu1": torch.triu(m, 1), "tril -1": m.tril(-1)}
    o("outs", outs)
    total = sum((v * (i + 1)).sum() for i, v in enumerate(outs.values()))
    total.backward()
    o("grad", m.grad)
    v = torch.tensor([1.0, 2.0], requires_grad=True)
    d = torch.diag(v)
    o("diag of vector", d)
    (d * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("v.grad", v.grad)
    o("eye trace", torch.eye(4).trace())


@program
def outer_product(torch, o):
    a = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    b = torch.tensor([0.5, -1.0], requires_grad=True)
    p = torch.outer(a, b)
    o("p", p)
    o("name", p.grad_fn.name())
    (p * torch.arange(6.0).view(3, 2)).sum().backward()
    o("grads", [a.grad, b.grad])
    o("ger", torch.ger(b, b))


@program
def logical_xor_and_bitwise(torch, o):
    a = torch.tensor([True, True, False, False])
    b = torch.tensor([True, False, True, False])
    o("xor", torch.logical_xor(a, b))
    o("^", a ^ b)
    o("int ^", torch.tensor([5, 3]) ^ torch.tensor([1, 1]))
    o("int &", torch.tensor([5, 3]) & torch.tensor([1, 1]))
    o("int |", torch.tensor([5, 3]) | torch.tensor([2, 4]))
    o("~int", ~torch.tensor([0, 5]))


# ---- printing, more -------------------------------------------------------------------------

@program
def printing_suffix_wrapping(torch, o):
    x = torch.linspace(0, 1, 9, requires_grad=True)
    o("long with grad_fn", repr(x * 2))
    o("long requires_grad", repr(x))
    y = torch.arange(8, dtype=torch.float64, requires_grad=True)
    o("double wrap", repr(y * 1.5))
    o("int32 long", repr(torch.arange(20, dtype=torch.int32)))
    o("float16", repr(torch.linspace(0, 1, 12, dtype=torch.float16)))


@program
def printing_3d_summarized(torch, o):
    o("3d", repr(torch.arange(2 * 600).view(2, 20, 30)))
    o("3d float", repr(torch.arange(1200.0).view(20, 6, 10) / 7))
    o("neg sci", repr(torch.tensor([-1e-5, 2e6, 3.0])))
    o("mixed ints", repr(torch.tensor([-1000000, 5, 42])))
    o("tiny", repr(torch.tensor([1e-10, 2e-10])))
    o("big ints as float", repr(torch.tensor([1e8, 1.0])))
    o("just below 1e8", repr(torch.tensor([99999999.0, 1.0])))
    o("ratio 1000", repr(torch.tensor([0.001, 1.0])))
    o("ratio 1001", repr(torch.tensor([0.001, 1.001])))


@program
def printing_set_printoptions(torch, o):
    try:
        torch.set_printoptions(precision=2)
        o("precision 2", repr(torch.tensor([1.12345, 2.5])))
        torch.set_printoptions(sci_mode=False)
        o("no sci", repr(torch.tensor([1e-5, 1.0])))
        torch.set_printoptions(threshold=5)
        o("threshold", repr(torch.arange(10)))
        torch.set_printoptions(profile="default")
        torch.set_printoptions(linewidth=40)
        o("linewidth", repr(torch.arange(20)))
    finally:
        torch.set_printoptions(profile="default")
        torch.set_printoptions(sci_mode=None)
    o("restored", repr(torch.tensor([1.12345])))


@program
def printing_containers_and_parameters(torch, o):
    import contextlib
    import io

    model = make_mlp(torch)
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for name, param in model.named_parameters():
            print(name, param.shape)
        print(list(model.parameters())[1])
        print({"w": torch.tensor([1.0]), "n": torch.tensor(3)})
        print((torch.tensor([1.0]), torch.tensor([True])))
        print(model[0].weight.grad)
        print(model.state_dict()["0.bias"])
    o("stdout", buffer.getvalue())


@program
def printing_after_training_step(torch, o):
    w = torch.tensor([1.0, -1.0], requires_grad=True)
    loss = ((w * torch.tensor([2.0, 3.0])).sum() - 1) ** 2
    loss.backward()
    o("loss", str(loss))
    o("grad", str(w.grad))
    with torch.no_grad():
        w -= 0.1 * w.grad
    o("w", str(w))
    o("f-string", f"loss={loss.item():.4f} w={w.tolist()}")
    o("format loss", f"{loss:.3f}")
    o("f vector", f"{w}")


@program
def printing_custom_function_and_leaf_grads(torch, o):
    class Double(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = Double.apply(x)
    o("repr", repr(y))
    o("name", y.grad_fn.name())
    z = y.sum()
    o("z", repr(z))
    z.backward()
    o("grad repr", repr(x.grad))


@program
def printing_dtype_and_size_objects(torch, o):
    o("dtypes", [str(d) for d in (torch.float32, torch.float64, torch.int64, torch.int32,
                                   torch.bool, torch.uint8, torch.float16, torch.int16, torch.int8)])
    o("aliases", [repr(torch.float), repr(torch.double), repr(torch.long), repr(torch.int),
                  repr(torch.half), repr(torch.short)])
    o("Size empty", repr(torch.Size([])))
    o("Size str", str(torch.zeros(3, 1).shape))
    o("shape list", str([torch.zeros(2).shape, torch.zeros(1, 2).shape]))


# ---- indexing / shapes, more -----------------------------------------------------------------

@program
def batch_slicing_minibatches(torch, o):
    x = torch.arange(20.0).view(10, 2)
    y = torch.arange(10.0)
    model = torch.nn.Linear(2, 1)
    with torch.no_grad():
        model.weight.fill_(0.1)
        model.bias.fill_(0.0)
    opt = torch.optim.SGD(model.parameters(), lr=0.001)
    batch_size = 4
    losses = []
    for i in range(0, len(x), batch_size):
        xb, yb = x[i:i + batch_size], y[i:i + batch_size]
        pred = model(xb).squeeze(-1)
        loss = ((pred - yb) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    o("losses", losses)
    o("shapes", [x[8:12].shape, x[-3:].shape])


@program
def flip_gradient(torch, o):
    x = torch.arange(6)
    o("flip", torch.flip(x, [0]))
    m = torch.arange(6.0).view(2, 3).requires_grad_()
    f = m.flip(1)
    (f * torch.tensor([1.0, 2.0, 3.0])).sum().backward()
    o("grad", m.grad)


@program
def fancy_index_assignment_patterns(torch, o):
    x = torch.zeros(5)
    idx = torch.tensor([0, 2, 4])
    x[idx] = torch.tensor([1.0, 2.0, 3.0])
    o("x", x)
    m = torch.zeros(3, 3)
    m[torch.arange(3), torch.arange(3)] = 1.0
    o("eye via index", m)
    m[m == 0] = -1
    o("masked", m)
    z = torch.arange(6).view(2, 3)
    z[:, 1] = 0
    o("column", z)
    z[0] += 10
    o("row +=", z)


@program
def gather_for_action_values(torch, o):
    q = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0], [7.0, 8.0, 9.0]], requires_grad=True)
    actions = torch.tensor([2, 0, 1])
    chosen = q.gather(1, actions.unsqueeze(1)).squeeze(1)
    o("chosen", chosen)
    max_next = q.max(1)[0].detach()
    loss = ((chosen - (1 + 0.9 * max_next)) ** 2).mean()
    loss.backward()
    o("loss", loss)
    o("grad", q.grad)
    o("indexing equivalent", q[torch.arange(3), actions])


@program
def stack_cat_unsqueeze_patterns(torch, o):
    xs = [torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]), torch.tensor([5.0, 6.0])]
    o("stack", torch.stack(xs).shape)
    o("stack dim1", torch.stack(xs, dim=1))
    o("cat unsqueeze", torch.cat([x.unsqueeze(0) for x in xs]))
    o("cat dim -1", torch.cat(xs, dim=-1))
    o("hstack-like", torch.cat([xs[0], xs[1]]))
    scalars = [torch.tensor(1.5), torch.tensor(2.5)]
    o("stack scalars", torch.stack(scalars))
    o("tensor of floats", torch.tensor([s.item() for s in scalars]))


@program
def reshape_errors_and_infer(torch, o):
    x = torch.arange(12)
    o("infer", x.view(3, -1).shape)
    o("infer first", x.reshape(-1, 6).shape)
    o.raises("two -1", lambda: x.view(-1, -1), "only one dimension can be inferred")
    o("flatten", torch.arange(24).view(2, 3, 4).flatten(1).shape)
    o("flatten range", torch.arange(24).view(2, 3, 4).flatten(0, 1).shape)
    o("unflatten-like", x.view(2, 2, 3).shape)


@program
def transpose_permute_matmul_shapes(torch, o):
    a = torch.arange(24.0).view(2, 3, 4)
    o("transpose", a.transpose(1, 2).shape)
    o("permute", a.permute(2, 0, 1).shape)
    o("mT", a.mT.shape)
    o("bmm", torch.bmm(a, a.transpose(1, 2)).shape)
    o("matmul broadcast", (a @ torch.ones(4, 5)).shape)
    o("matmul vec", (a @ torch.ones(4)).shape)
    o.raises("T on 3d", lambda: a.T.shape, None)


# ---- reductions / dtype, more ----------------------------------------------------------------

@program
def mean_std_var_options(torch, o):
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [2.0, 4.0, 6.0, 8.0]], requires_grad=True)
    outs = [x.mean(dim=(0, 1)), x.std(unbiased=False), x.var(dim=0, keepdim=True),
            torch.std(x, dim=1), torch.var(x, 1, unbiased=True), x.std(correction=0)]
    o("outs", outs)
    sum(t.sum() for t in outs).backward()
    o("grad", x.grad)


@program
def argmax_accuracy_pattern(torch, o):
    logits = torch.tensor([[0.1, 2.0, 0.3], [1.5, 0.2, 0.1], [0.0, 0.1, 0.2], [0.3, 0.3, 0.1]])
    labels = torch.tensor([1, 0, 1, 0])
    preds = logits.argmax(dim=1)
    o("preds", preds)
    correct = (preds == labels).sum().item()
    o("correct", correct)
    o("accuracy", correct / len(labels))
    o("acc tensor", (preds == labels).float().mean())
    _, predicted = torch.max(logits, 1)
    o("torch.max", predicted)
    o("ties argmax", torch.tensor([0.3, 0.3, 0.1]).argmax())


@program
def dtype_promotion_more(torch, o):
    o("float16 * int", (torch.tensor([1.5], dtype=torch.float16) * 2).dtype)
    o("int8 + uint8", (torch.tensor([1], dtype=torch.int8) + torch.tensor([1], dtype=torch.uint8)).dtype)
    o("bool * bool", (torch.tensor([True]) * torch.tensor([True])))
    o("int tensor * 0-d float64", (torch.tensor([1, 2]) * torch.tensor(1.5, dtype=torch.float64)))
    o("0-d int * float32", (torch.tensor(2) * torch.tensor([1.5])))
    o("int / 0-d int", torch.tensor([3, 4]) / torch.tensor(2))
    o("pow int int", torch.tensor([2, 3]) ** torch.tensor([2, 2]))
    o("float ** int tensor", torch.tensor([2.0, 3.0]) ** torch.tensor([2, 3]))
    o("int ** negative float", torch.tensor([2, 4]) ** -0.5)
    o("abs int", torch.tensor([-3, 2]).abs())
    o("neg int", -torch.tensor([1, -2]))
    o("sqrt int", torch.sqrt(torch.tensor([4, 9])))
    o("exp int", torch.exp(torch.tensor([0, 1])))
    o("sigmoid int", torch.sigmoid(torch.tensor([0])))
    o("mean float16", torch.tensor([1.0, 2.0], dtype=torch.float16).mean())
    o("sum uint8", torch.tensor([200, 100], dtype=torch.uint8).sum())
    o("cumsum bool", torch.tensor([True, False, True]).cumsum(0))
    o("max of bool", torch.tensor([True, False]).max())
    o("where dtype", torch.where(torch.tensor([True, False]), torch.tensor([1.0]), torch.tensor([2], dtype=torch.int64)))


@program
def int_overflow_and_division_edge(torch, o):
    x = torch.tensor([1.0, -1.0, 0.0])
    o("div zero", x / 0)
    o("int div zero float", torch.tensor([1, 0]) / 0)
    o("log negative", torch.log(torch.tensor([-1.0])))
    o("sqrt negative", torch.sqrt(torch.tensor([-4.0])))
    o("exp large", torch.exp(torch.tensor([100.0])))
    o("uint8 wrap", torch.tensor([250], dtype=torch.uint8) + 10)
    o("int32 max", torch.tensor([2147483647], dtype=torch.int32) + 1)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
