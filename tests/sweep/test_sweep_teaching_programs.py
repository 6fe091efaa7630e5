"""Conformance sweep, teaching programs (d2l, CS231n, fast.ai, nanoGPT, makemore, word2vec, ...)
and the conformance fixes they led to.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import numpy as np
import pytest
from sweep_harness import X_DATA, Y_CLS, Y_REG, check, make_mlp, node_name, registry

program = registry()


# ---- conformance fixes ----

@program
def stack_records_one_stack_node(torch, o):
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = torch.tensor([3.0, 4.0], requires_grad=True)
    s = torch.stack([a, b * 2], dim=1)
    o("node", [s.grad_fn.name(), repr(s)])
    o("next", [(node_name(f), nr) for f, nr in s.grad_fn.next_functions])
    (s * torch.tensor([[1.0, 2.0], [3.0, 4.0]])).sum().backward()
    o("grads", [a.grad, b.grad])
    ints = torch.stack([torch.tensor([1, 2]), torch.tensor([3.0, 4.0], requires_grad=True)])
    o("promoted", [ints, ints.grad_fn.name()])
    o("last dim", torch.stack([torch.arange(3), torch.arange(3)], -1))
    o.raises("unequal", lambda: torch.stack([torch.ones(2), torch.ones(3)]), "stack expects each tensor to be equal size")
    o.raises("empty", lambda: torch.stack([]), "stack expects a non-empty TensorList")
    o.raises("dim", lambda: torch.stack([a, b], 2), "Dimension out of range")
    # double backward through stack and unbind: the gradient's graph has their nodes
    x = torch.arange(6.0).view(2, 3).requires_grad_()
    g, = torch.autograd.grad(torch.stack([x[0] * x[1], x[1]]).pow(2).sum(), x, create_graph=True)
    o("grad of stack", [g, g.grad_fn.name()])
    u = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    first, second = u.unbind()
    gu, = torch.autograd.grad((first * second).sum(), u, create_graph=True)
    o("grad of unbind", [gu, gu.grad_fn.name(), gu.grad_fn.next_functions[0][0].name()])
    gu.sum().backward()
    o("second order", u.grad)


@program
def negative_slice_steps_are_errors(torch, o):
    x = torch.arange(6)
    y = torch.arange(6.0).view(2, 3)
    o.raises("reverse", lambda: x[::-1], "step must be greater than zero")
    o.raises("range", lambda: x[5:0:-2], "step must be greater than zero")
    o.raises("second dim", lambda: y[:, ::-1], "step must be greater than zero")
    o.raises("with advanced", lambda: y[[0], ::-1], "step must be greater than zero")
    o.raises("zero step", lambda: x[::0], "slice step cannot be zero")

    def write():
        z = torch.zeros(4)
        z[::-1] = 1.0

    o.raises("setitem", write, "step must be greater than zero")
    o("flip instead", [x.flip(0), y.flip(1), x[::2], y[:, 1::2]])


@program
def cat_of_zero_dim_tensors(torch, o):
    a, b = torch.tensor(1.0), torch.tensor(2.0)
    o.raises("cat 0-d", lambda: torch.cat([a, b]), "zero-dimensional tensor (at position 0) cannot be concatenated")
    o.raises("second is 0-d", lambda: torch.cat([torch.ones(2), b]), "zero-dimensional tensor (at position 1) cannot be concatenated")
    o("stack instead", [torch.stack([a, b]), torch.cat([a.view(1), b.reshape(1)])])


@program
def numpy_axis_keywords(torch, o):
    x = torch.arange(6.0).view(2, 3)
    i = torch.tensor([[0, 1, 0]])
    o("reductions", [x.sum(axis=0), torch.sum(x, axis=1), x.mean(axis=1), torch.mean(x, axis=0, keepdims=True),
                     x.sum(0, keepdims=True), x.prod(axis=0), x.std(axis=0), x.var(axis=0), x.amax(axis=0),
                     x.logsumexp(axis=0), x.cumsum(axis=0), x.argmax(axis=0), x.softmax(axis=0)])
    o("joins", [torch.cat([x, x], axis=1), torch.cat((x, x), axis=0), torch.stack([x, x], axis=1),
                torch.concat([x, x], 1), torch.concatenate([x, x], axis=0)])
    o("squeeze", [x[None].squeeze(axis=0), torch.squeeze(x[None], axis=0), x.unsqueeze(axis=-1),
                  torch.unsqueeze(x, axis=0), x[None].squeeze(axis=(0,)), x[None, :, None].squeeze((0, 2)),
                  x[None].squeeze([0, 1])])
    o("pieces", [x.chunk(2, axis=0), x.unbind(axis=1), x.narrow(axis=1, start=1, length=2), x.select(axis=0, index=1),
                 torch.chunk(x, 3, axis=1), torch.unbind(x, axis=0)])
    o("indexing", [x.gather(axis=0, index=i), torch.gather(x, axis=1, index=i[:, :2]),
                   x.index_select(axis=1, index=torch.tensor([2, 0])), x.sort(axis=0, descending=True).values,
                   x.argsort(axis=1), x.topk(1, axis=0).indices, x.repeat_interleave(2, axis=0),
                   x.scatter(axis=0, index=i, src=x), x.scatter_add(axis=0, index=i, src=x),
                   x.index_add(axis=0, index=torch.tensor([0]), source=x[:1])])
    o("diff", [x.diff(axis=0), torch.diff(x, axis=1)])
    w = torch.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    z = torch.cat([w, w * 2], axis=1).sum(axis=0)
    z.sum().backward()
    o("gradient", [z, z.grad_fn.name(), w.grad])
    o.raises("both names", lambda: x.sum(dim=0, axis=0), "unexpected keyword argument 'axis'")
    o.raises("cat both names", lambda: torch.cat([x], dim=0, axis=0), "unexpected keyword argument 'axis'")
    o.raises("duplicate squeeze dims", lambda: x[None].squeeze((0, 0)), "dim 0 appears multiple times in the list of dims")
    # where torch has no axis= alias it is a TypeError
    o.raises("flip", lambda: x.flip(axis=0), "")
    o.raises("roll", lambda: x.roll(1, axis=0), "unexpected keyword argument 'axis'")
    o.raises("split", lambda: x.split(1, axis=0), "unexpected keyword argument 'axis'")


@program
def integer_tensors_wrap_python_ints(torch, o):
    def u8():
        return torch.tensor([1, 2], dtype=torch.uint8)

    def i8():
        return torch.tensor([1, 100], dtype=torch.int8)

    o("functions", [torch.add(u8(), -1), torch.sub(u8(), 300), torch.mul(i8(), 3000000000),
                    torch.sub(i8(), 200), u8().add(-1, alpha=2), u8().add(1, alpha=-1), u8().sub(-1),
                    torch.mul(torch.tensor([1, 2], dtype=torch.int32), 2 ** 40),
                    torch.add(torch.tensor([1, 2], dtype=torch.int16), 40000),
                    torch.add(torch.tensor([1, 2]), 2 ** 63), torch.add(i8(), 2 ** 64 - 1),
                    torch.add(torch.tensor([True, False]), 300), torch.add(3, u8())])
    o("in place", [u8().add_(-1), u8().sub_(300), u8().mul_(300), i8().add_(200)])
    # fill values are checked: an unsigned dtype takes a negative number down to -max
    o("fills", [u8().fill_(-1), u8().fill_(-255), u8().masked_fill(u8() > 1, -3),
                torch.full((2,), -1, dtype=torch.uint8), torch.full((2,), -2 ** 63, dtype=torch.int64)])
    o.raises("fill too big", lambda: u8().fill_(300), "value cannot be converted to type uint8_t without overflow")
    o.raises("fill too small", lambda: u8().fill_(-256), "value cannot be converted to type uint8_t without overflow")
    o.raises("masked_fill", lambda: i8().masked_fill(i8() > 0, -200), "value cannot be converted to type int8_t without overflow")
    o.raises("full int32", lambda: torch.full((2,), 2 ** 40, dtype=torch.int32), "value cannot be converted to type int without overflow")
    o("reflected", [3 - u8(), 300 - u8(), -1 - i8(), u8() - 3, u8() * 200])
    o("rounded", [u8() // -1, torch.floor_divide(u8(), -1), u8().div(-1, rounding_mode="floor"),
                  u8().div(-1, rounding_mode="trunc"), torch.tensor([-7], dtype=torch.int8) // 300,
                  u8() % -3, torch.remainder(u8(), 300), torch.fmod(i8(), 300)])
    o("true division promotes: no wrap", [u8() / -1, torch.div(u8(), 300)])
    o("comparisons", [u8() > -1, u8() == 257, u8() < 300, u8() >= 256, u8().eq(-255), u8().ne(-1)])
    o("bitwise", [u8() & -1, u8() | -256])
    o.raises("past 64 bits", lambda: torch.add(i8(), 2 ** 64), "int too big to convert")
    o.raises("below -2**63", lambda: torch.add(i8(), -2 ** 63 - 1), "can't convert negative int to unsigned")


@program(0.0, atol=0.0)  # float16 values exactly: a rounding difference is the point
def half_precision_with_python_numbers(torch, o):
    # torch computes float16 arithmetic in float32 and rounds once; a Python number stays in
    # float32 for division (here through div's rounding_mode=None, which takes gradviz's
    # Python path; the operators need the engine change described in ops/_pointwise.py)
    h = torch.tensor([1.0, 2.0, 0.5, -3.1, 1e-3], dtype=torch.float16)
    o("div", [torch.div(h, 1e-5, rounding_mode=None), h.div(1e5, rounding_mode=None),
              h.div(3.0, rounding_mode=None), torch.div(h, 70000, rounding_mode=None)])
    o("add and sub round the number to float16", [h + 1e5, h - 70000.0, h + 1e-4, h + 0.1, 0.1 - h, 65520.0 - h])
    o("two half tensors", [h * h.flip(0), h / h.flip(0), h + h.flip(0)])


@program
def inplace_shape_mismatch_errors(torch, o):
    def zeros():
        return torch.zeros(2, 3)

    def assign(key, value):
        z = zeros()
        z[key] = value
        return z

    o.raises("row too short", lambda: assign(0, torch.ones(2)), "The expanded size of the tensor (3) must match the existing size (2) at non-singleton dimension 0.  Target sizes: [3].  Tensor sizes: [2]")
    o.raises("row too many dims", lambda: assign(0, torch.ones(2, 3)), "the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)")
    o.raises("column", lambda: assign((slice(None), 0), torch.ones(3)), "The expanded size of the tensor (2) must match the existing size (3) at non-singleton dimension 0")
    o.raises("advanced key", lambda: assign([0, 1], torch.ones(3, 3)), "shape mismatch: value tensor of shape [3, 3] cannot be broadcast to indexing result of shape [2, 3]")
    o.raises("mask", lambda: assign(zeros() > 5, torch.ones(2)), "shape mismatch: value tensor of shape [2] cannot be broadcast to indexing result of shape [0]")
    o("leading ones are dropped", [assign(0, torch.ones(1, 3)), assign((slice(None), 1), torch.ones(1, 1, 2)),
                                   assign(1, torch.ones(1, 1))])
    o.raises("expand", lambda: torch.ones(2, 3).expand(3), "the number of sizes provided (1) must be greater or equal to the number of dimensions in the tensor (2)")
    o.raises("add_ grows", lambda: torch.zeros(3).add_(torch.ones(2, 3)), "output with shape [3] doesn't match the broadcast shape [2, 3]")
    o.raises("mul_ on a view grows", lambda: zeros()[0].mul_(torch.ones(2, 3)), "output with shape [3] doesn't match the broadcast shape [2, 3]")
    o.raises("add_ mismatch", lambda: zeros().add_(torch.ones(3, 2)), "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")
    o.raises("copy_", lambda: zeros().copy_(torch.ones(3, 2)), "The size of tensor a (3) must match the size of tensor b (2) at non-singleton dimension 1")
    w = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = w * 1
    o.raises("recorded add_ grows", lambda: y.add_(torch.ones(2, 3)), "output with shape [3] doesn't match the broadcast shape [2, 3]")
    v = torch.tensor([[5.0, 6.0, 7.0]], requires_grad=True)
    y[:] = v
    y.sum().backward()
    o("leading one, gradient", [y, w.grad, v.grad])


@program
def grad_made_with_create_graph_is_a_copy(torch, o):
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    (x ** 2).sum().backward(create_graph=True)
    node = x.grad.grad_fn
    o("first", [x.grad, node_name(node), [(node_name(f), nr) for f, nr in node.next_functions]])
    (x ** 3).sum().backward(create_graph=True)
    node = x.grad.grad_fn
    o("accumulated", [x.grad, node_name(node), [(node_name(f), nr) for f, nr in node.next_functions]])
    x.grad.sum().backward()
    o("through the copy", x.grad)
    y = torch.tensor([1.0, 2.0], requires_grad=True)
    g, = torch.autograd.grad((y ** 2).sum(), y, create_graph=True)
    o("autograd.grad", [g, node_name(g.grad_fn)])


# ---- teaching programs ------------------------------------------------------

@program(rtol=1e-5, atol=1e-6)
def d2l_linear_regression_from_scratch(torch, o):
    import contextlib
    import io

    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    X = torch.stack([torch.linspace(-1, 1, 10), torch.cos(torch.arange(10.0))], dim=1)
    y = torch.matmul(X, true_w) + true_b
    y += 0.01 * torch.sin(torch.arange(10.0))
    y = y.reshape((-1, 1))
    o("features", [X.shape, y.shape, X[0], y[0]])

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

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

    lr, num_epochs, batch_size = 0.3, 3, 4
    buffer = io.StringIO()
    with contextlib.redirect_stdout(buffer):
        for epoch in range(num_epochs):
            for Xb, yb in data_iter(batch_size, X, y):
                l = squared_loss(linreg(Xb, w, b), yb)
                l.sum().backward()
                sgd([w, b], lr, batch_size)
            with torch.no_grad():
                train_l = squared_loss(linreg(X, w, b), y)
                print(f'epoch {epoch + 1}, loss {float(train_l.mean()):f}')
        print(f'error in estimating w: {true_w - w.reshape(true_w.shape)}')
        print(f'error in estimating b: {true_b - b}')
    o("stdout", buffer.getvalue())
    o("params", [w, b, w.grad, b.grad])


@program(rtol=1e-5, atol=1e-6)
def d2l_softmax_regression_from_scratch(torch, o):
    X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    o("sums", [X.sum(0, keepdim=True), X.sum(1, keepdim=True)])

    def softmax(X):
        X_exp = torch.exp(X)
        partition = X_exp.sum(1, keepdim=True)
        return X_exp / partition

    X_prob = softmax(torch.tensor([[0.1, 0.5, -0.2, 0.0, 1.0], [1.0, 1.0, 0.2, -0.3, 0.4]]))
    o("softmax", [X_prob, X_prob.sum(1)])
    y = torch.tensor([0, 2])
    y_hat = torch.tensor([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]])
    o("pick", y_hat[[0, 1], y])

    def cross_entropy(y_hat, y):
        return - torch.log(y_hat[range(len(y_hat)), y])

    o("ce", cross_entropy(y_hat, y))

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    o("accuracy", accuracy(y_hat, y) / len(y))

    class Accumulator:
        def __init__(self, n):
            self.data = [0.0] * n

        def add(self, *args):
            self.data = [a + float(b) for a, b in zip(self.data, args)]

        def __getitem__(self, idx):
            return self.data[idx]

    features = torch.tensor([[0.5, -1.0, 2.0, 0.1], [1.5, 0.3, -0.7, 0.2], [-0.2, 0.8, 1.1, -0.5],
                             [0.9, -0.4, 0.0, 1.0], [0.0, 1.0, -1.0, 0.3], [1.2, 1.2, 0.5, -0.8]])
    labels = torch.tensor([2, 0, 1, 0, 1, 2])
    W = torch.linspace(-0.1, 0.1, 12).reshape(4, 3).requires_grad_(True)
    b = torch.zeros(3, requires_grad=True)

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b)

    for epoch in range(10):
        metric = Accumulator(3)
        for i in range(0, 6, 3):
            Xb, yb = features[i:i + 3], labels[i:i + 3]
            y_hat = net(Xb)
            l = cross_entropy(y_hat, yb)
            l.sum().backward()
            with torch.no_grad():
                for param in [W, b]:
                    param -= 0.5 * param.grad / 3
                    param.grad.zero_()
            metric.add(float(l.sum()), accuracy(y_hat, yb), yb.numel())
        if epoch % 3 == 0:
            o(f"epoch {epoch}", [metric[0] / metric[2], metric[1] / metric[2]])
    o("W", [W, b])
    o("preds", net(features).argmax(axis=1))


@program
def autograd_functional_jacobian_hessian(torch, o):
    functional = torch.autograd.functional
    hessian, hvp, jacobian, jvp, vhp, vjp = (functional.hessian, functional.hvp, functional.jacobian,
                                             functional.jvp, functional.vhp, functional.vjp)

    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = torch.tensor([[0.1, 0.2], [0.3, -0.4]])
    o("jacobian", jacobian(exp_reducer, inputs))
    o("jacobian create_graph", jacobian(exp_reducer, inputs, create_graph=True))

    def exp_adder(x, y):
        return 2 * x.exp() + 3 * y

    xs = (torch.tensor([0.5, -0.1]), torch.tensor([1.0, 2.0]))
    o("jacobian tuple", jacobian(exp_adder, xs))

    def pow_reducer(x):
        return x.pow(3).sum()

    o("hessian", hessian(pow_reducer, inputs))

    def pow_adder_reducer(x, y):
        return (2 * x.pow(2) + 3 * y.pow(2)).sum()

    o("hessian tuple", hessian(pow_adder_reducer, xs))
    v = torch.ones(2)
    o("vjp", vjp(exp_reducer, inputs, v))
    o("jvp", jvp(exp_reducer, inputs, torch.ones(2, 2)))
    o("vhp", vhp(pow_reducer, inputs, torch.ones(2, 2)))
    o("hvp", hvp(pow_reducer, inputs, torch.ones(2, 2)))
    o("jacobian of linear", jacobian(lambda x: torch.tensor([[1.0, 2.0], [3.0, 4.0]]) @ x, torch.tensor([1.0, 1.0])))
    o("jacobian scalar out", jacobian(lambda x: (x ** 2).sum(), torch.tensor([1.0, 2.0, 3.0])))
    o("jacobian unused", jacobian(lambda x, y: x * 2, (torch.tensor([1.0]), torch.tensor([2.0]))))
    o.raises("strict", lambda: jacobian(lambda x, y: x * 2, (torch.tensor([1.0]), torch.tensor([2.0])), strict=True),
             "Output 0 of the user-provided function is independent of input 1")


@program
def embedding_lookup_module_and_functional(torch, o):
    F = torch.nn.functional

    emb = torch.nn.Embedding(5, 3)
    o("repr", repr(emb))
    o("weight meta", [emb.weight.shape, emb.weight.requires_grad, type(emb.weight).__name__])
    with torch.no_grad():
        emb.weight.copy_(torch.arange(15.0).view(5, 3) / 10)
    idx = torch.tensor([[0, 2, 2], [4, 3, 0]])
    out = emb(idx)
    o("out", out)
    (out * torch.arange(18.0).view(2, 3, 3)).sum().backward()
    o("grad", emb.weight.grad)
    o("grad_fn", out.grad_fn.name())
    o("functional", F.embedding(torch.tensor([1, 4]), emb.weight.detach()))
    pad = torch.nn.Embedding(4, 2, padding_idx=0)
    o("padding row", pad.weight[0])
    o("pad repr", repr(pad))
    with torch.no_grad():
        pad.weight.copy_(torch.arange(8.0).view(4, 2))
    pad(torch.tensor([0, 1, 0, 3])).sum().backward()
    o("padding grad", pad.weight.grad)
    pre = torch.nn.Embedding.from_pretrained(torch.tensor([[1.0, 2.0], [3.0, 4.0]]))
    o("pretrained", [pre(torch.tensor([1, 0])), pre.weight.requires_grad])
    o.raises("out of range", lambda: emb(torch.tensor([5])), "index out of range in self")
    o.raises("float index", lambda: emb(torch.tensor([1.0])), "Expected tensor for argument #1 'indices' to have one of the following scalar types: Long, Int")


@program(rtol=1e-5, atol=1e-6)
def layer_norm_module_and_functional(torch, o):
    F = torch.nn.functional

    x = torch.tensor([[1.0, 2.0, 4.0], [0.5, -0.5, 3.0]], requires_grad=True)
    ln = torch.nn.LayerNorm(3)
    o("repr", repr(ln))
    o("params", [ln.weight, ln.bias])
    y = ln(x)
    o("y", y)
    o("stats", [y.mean(-1), y.var(-1, unbiased=False)])
    (y * torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 2.0]])).sum().backward()
    o("grads", [x.grad, ln.weight.grad, ln.bias.grad])
    o("functional", F.layer_norm(x.detach(), (3,)))
    o("functional affine", F.layer_norm(x.detach(), [3], torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.0, 1.0, 0.0]), eps=1e-3))
    plain = torch.nn.LayerNorm([2, 3], elementwise_affine=False)
    o("2d", [plain(x.detach()), repr(plain), list(plain.parameters())])
    manual = (x - x.mean(-1, keepdim=True)) / torch.sqrt(x.var(-1, keepdim=True, unbiased=False) + 1e-5)
    o("manual close", torch.allclose(manual, y, atol=1e-6))
    o.raises("bad shape", lambda: ln(torch.ones(2, 4)), "Given normalized_shape=[3], expected input with shape [*, 3], but got input of size[2, 4]")


@program(rtol=1e-5, atol=1e-6)
def batch_norm_1d_train_and_eval(torch, o):
    bn = torch.nn.BatchNorm1d(3)
    o("repr", repr(bn))
    o("buffers", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    o("state keys", list(bn.state_dict().keys()))
    x = torch.tensor([[1.0, 2.0, 0.5], [2.0, 0.0, 1.5], [0.5, 1.0, -1.0], [3.0, 2.5, 0.0]], requires_grad=True)
    y = bn(x)
    o("train out", y)
    (y * torch.arange(12.0).view(4, 3)).sum().backward()
    o("grads", [x.grad, bn.weight.grad, bn.bias.grad])
    o("running", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    bn(x.detach() * 2)
    o("running 2", [bn.running_mean, bn.running_var, bn.num_batches_tracked])
    bn.eval()
    o("eval out", bn(torch.tensor([[1.0, 1.0, 1.0]])))
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.BatchNorm1d(4), torch.nn.ReLU())
    o("seq repr", repr(model))
    o("n params", sum(p.numel() for p in model.parameters()))
    o.raises("one sample", lambda: torch.nn.BatchNorm1d(3)(torch.ones(1, 3)), "Expected more than 1 value per channel when training")
    nomom = torch.nn.BatchNorm1d(2, momentum=None, affine=False)
    nomom(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))
    nomom(torch.tensor([[0.0, 2.0], [1.0, 1.0]]))
    o("cumulative average", [nomom.running_mean, nomom.running_var, repr(nomom)])


@program
def dataloader_tensor_dataset_batches(torch, o):
    data = torch.utils.data

    features = torch.arange(20.0).view(10, 2)
    labels = torch.arange(10) % 3
    dataset = data.TensorDataset(features, labels)
    o("len", len(dataset))
    o("item", dataset[3])
    o("slice", dataset[2:4])
    loader = data.DataLoader(dataset, batch_size=4, shuffle=False)
    o("n batches", len(loader))
    batches = [(X, y) for X, y in loader]
    o("batches", batches)
    o("drop_last", [X.shape for X, _ in data.DataLoader(dataset, batch_size=4, drop_last=True)])
    o("len drop_last", len(data.DataLoader(dataset, batch_size=4, drop_last=True)))
    shuffled = data.DataLoader(dataset, batch_size=3, shuffle=True)
    seen = torch.cat([X for X, _ in shuffled])
    o("shuffled covers all", seen.sort(0).values)
    first = next(iter(data.DataLoader(dataset, batch_size=5)))
    o("next iter", first)

    class Squares(data.Dataset):
        def __init__(self, n):
            self.n = n

        def __len__(self):
            return self.n

        def __getitem__(self, i):
            return float(i), i * i

    o("custom", list(data.DataLoader(Squares(5), batch_size=2)))

    class Dicts(data.Dataset):
        def __len__(self):
            return 3

        def __getitem__(self, i):
            return {"x": torch.tensor([i, i + 1.0]), "label": i}

    o("dict batches", [sorted(b.items()) for b in data.DataLoader(Dicts(), batch_size=2)])
    o("no batching", list(data.DataLoader(dataset, batch_size=None))[:2])
    parts = data.random_split(dataset, [7, 3])
    o("split lengths", [len(p) for p in parts])
    o.raises("mismatched sizes", lambda: data.TensorDataset(torch.zeros(3), torch.zeros(4)), "Size mismatch between tensors")


@program(rtol=1e-5, atol=1e-6)
def cs231n_svm_and_softmax_loss_vectorized(torch, o):
    X = torch.tensor([[0.5, -1.0, 2.0, 1.0], [1.5, 0.3, -0.7, 1.0], [-0.2, 0.8, 1.1, 1.0]])
    y = torch.tensor([2, 0, 1])
    W = torch.linspace(-0.5, 0.5, 12).view(4, 3).requires_grad_()
    reg = 0.1
    num_train = X.shape[0]
    scores = X.mm(W)
    correct = scores[torch.arange(num_train), y].view(-1, 1)
    margins = torch.clamp(scores - correct + 1, min=0)
    margins[torch.arange(num_train), y] = 0
    loss = margins.sum() / num_train + reg * torch.sum(W * W)
    loss.backward()
    o("svm loss", loss)
    o("svm grad", W.grad)
    mask = (margins > 0).float()
    mask[torch.arange(num_train), y] = -mask.sum(dim=1)
    dW = X.t().mm(mask) / num_train + 2 * reg * W.detach()
    o("manual svm grad close", torch.allclose(dW, W.grad))
    o("svm multi_margin", torch.nn.functional.multi_margin_loss(scores.detach(), y))
    W.grad = None
    scores = X @ W
    shifted = scores - scores.max(dim=1, keepdim=True)[0]
    log_probs = shifted - torch.logsumexp(shifted, dim=1, keepdim=True)
    loss = -log_probs[range(num_train), y].mean() + reg * (W ** 2).sum()
    loss.backward()
    probs = log_probs.exp().detach()
    probs[range(num_train), y] -= 1
    dW = X.T @ probs / num_train + 2 * reg * W.detach()
    o("softmax loss", loss)
    o("softmax grad", [W.grad, (dW - W.grad).abs().max().item() < 1e-6])
    o("rel error", ((dW - W.grad).norm() / (dW.norm() + W.grad.norm())).item() < 1e-6)


@program(rtol=1e-5, atol=1e-6)
def fastai_mnist_basics_style(torch, o):
    threes = torch.stack([torch.full((2, 2), 0.2) + 0.1 * i for i in range(3)])
    sevens = torch.stack([torch.tensor([[0.9, 0.1], [0.8, 0.0]]) - 0.05 * i for i in range(3)])
    mean3, mean7 = threes.mean(0), sevens.mean(0)
    o("means", [mean3, mean7])
    a_3 = threes[1]
    o("l1 l2", [(a_3 - mean3).abs().mean(), ((a_3 - mean7) ** 2).mean().sqrt()])
    F = torch.nn.functional
    o("F l1 mse", [F.l1_loss(a_3.float(), mean7), F.mse_loss(a_3, mean7).sqrt()])

    def mnist_distance(a, b):
        return (a - b).abs().mean((-1, -2))

    o("broadcast distance", mnist_distance(sevens, mean3))

    def is_3(x):
        return mnist_distance(x, mean3) < mnist_distance(x, mean7)

    o("is_3", [is_3(a_3), is_3(a_3).float(), is_3(sevens)])
    o("accuracy", [is_3(threes).float().mean(), (1 - is_3(sevens).float()).mean()])
    train_x = torch.cat([threes, sevens]).view(-1, 2 * 2)
    train_y = torch.tensor([1] * len(threes) + [0] * len(sevens)).unsqueeze(1)
    o("shapes", [train_x.shape, train_y.shape])
    dset = list(zip(train_x, train_y))
    x, yy = dset[0]
    o("first", [x.shape, yy])
    weights = (torch.linspace(-1, 1, 4).view(4, 1) * 0.5).requires_grad_()
    bias = torch.zeros(1).requires_grad_()

    def linear1(xb):
        return xb @ weights + bias

    def mnist_loss(predictions, targets):
        predictions = predictions.sigmoid()
        return torch.where(targets == 1, 1 - predictions, predictions).mean()

    def batch_accuracy(xb, yb):
        preds = xb.sigmoid()
        correct = (preds > 0.5) == yb
        return correct.float().mean()

    for epoch in range(5):
        for i in range(0, 6, 2):
            xb, yb = train_x[i:i + 2], train_y[i:i + 2]
            loss = mnist_loss(linear1(xb), yb)
            loss.backward()
            for p in (weights, bias):
                p.data -= p.grad * 1.0
                p.grad.zero_()
        acc = batch_accuracy(linear1(train_x), train_y)
        o(f"epoch {epoch}", [round(acc.item(), 4), loss])
    o("weights", [weights, bias])
    o("sigmoid plot", torch.sigmoid(torch.linspace(-4, 4, 5)))


@program
def common_beginner_mistakes_errors(torch, o):
    F = torch.nn.functional

    model = torch.nn.Linear(3, 2)
    o.raises("int input to Linear", lambda: model(torch.tensor([[1, 2, 3]])), "mat1 and mat2 must have the same dtype")
    o.raises("double input to Linear", lambda: model(torch.tensor([[1.0, 2.0, 3.0]], dtype=torch.float64)), "mat1 and mat2 must have the same dtype")
    o.raises("wrong features", lambda: model(torch.ones(4, 5)), "mat1 and mat2 shapes cannot be multiplied (4x5 and 3x2)")
    o.raises("1d wrong features", lambda: model(torch.ones(5)), "mat1 and mat2 shapes cannot be multiplied (1x5 and 3x2)")
    logits = torch.tensor([[0.1, 0.2, 0.7], [0.5, 0.4, 0.1]])
    o.raises("int32 target", lambda: F.cross_entropy(logits, torch.tensor([0, 2], dtype=torch.int32)), "expected target dtype to be Long or Byte, but got Int")
    o.raises("target out of bounds", lambda: F.cross_entropy(logits, torch.tensor([0, 3])), "out of bounds")
    o.raises("float class indices", lambda: F.cross_entropy(logits, torch.tensor([0.0, 2.0])), "expected target dtype to be Long or Byte, but got Float")
    o.raises("one-hot 2d target", lambda: F.nll_loss(logits, torch.tensor([[0], [2]])), "multi-target not supported")
    o("mse int target", F.mse_loss(logits, torch.tensor([[0, 1, 0], [1, 0, 0]])))
    o.raises("bce target range", lambda: F.binary_cross_entropy(torch.tensor([0.5]), torch.tensor([2.0])), "all elements of target should be between 0 and 1")
    o.raises("stack different sizes", lambda: torch.stack([torch.ones(2), torch.ones(3)]), "stack expects each tensor to be equal size, but got [2] at entry 0 and [3] at entry 1")
    o.raises("cat different dims", lambda: torch.cat([torch.ones(2, 2), torch.ones(2)]), "Tensors must have same number of dimensions: got 2 and 1")
    o.raises("item on vector", lambda: torch.tensor([1.0, 2.0]).item(), "a Tensor with 2 elements cannot be converted to Scalar")
    o.raises("numpy with grad", lambda: torch.ones(2, requires_grad=True).numpy(), "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() instead.")
    o.raises("bool of vector", lambda: bool(torch.tensor([1, 0])), "Boolean value of Tensor with more than one value is ambiguous")
    o.raises("float of vector", lambda: float(torch.tensor([1.0, 2.0])), "only one element tensors can be converted to Python scalars")
    o.raises("int of vector", lambda: int(torch.tensor([1, 2])), "only one element tensors can be converted to Python scalars")
    w = torch.ones(2, requires_grad=True)
    o.raises("leaf inplace", lambda: w.add_(1), "a leaf Variable that requires grad is being used in an in-place operation.")
    o.raises("grad of nonscalar", lambda: (w * 2).backward(), "grad can be implicitly created only for scalar outputs")
    o.raises("tensor of tensors", lambda: torch.tensor([torch.ones(2), torch.ones(2)]), "only one element tensors can be converted to Python scalars")
    o.raises("ragged list", lambda: torch.tensor([[1, 2], [3]]), "expected sequence of length 2 at dim 1 (got 1)")
    o.raises("string in list", lambda: torch.tensor([1, "a"]), "invalid data type 'str'")
    o.raises("view of transposed", lambda: torch.arange(6).view(2, 3).t().view(6), "view size is not compatible with input tensor's size and stride")
    o.raises("softmax no dim int", lambda: torch.softmax(torch.tensor([1, 2]), 0), "not implemented for 'Long'")
    o.raises("mean of long", lambda: torch.tensor([1, 2, 3]).mean(), "mean(): could not infer output dtype. Input dtype must be either a floating point or complex dtype. Got: Long")
    o.raises("requires grad int", lambda: torch.tensor([1, 2], requires_grad=True), "Only Tensors of floating point and complex dtype can require gradients")
    o.raises("argmax float compare", lambda: torch.tensor([[1.0, 2.0]]).argmax(dim=2), "Dimension out of range (expected to be in range of [-2, 1], but got 2)")


@program(rtol=1e-5, atol=1e-6)
def gradient_accumulation_micro_batches(torch, o):
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    full = make_mlp(torch)
    torch.nn.functional.mse_loss(full(x), y).backward()
    full_grads = [p.grad.clone() for p in full.parameters()]
    model = make_mlp(torch)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    accumulation_steps = 3
    optimizer.zero_grad()
    losses = []
    for i, (xb, yb) in enumerate(zip(x.split(2), y.split(2))):
        loss = torch.nn.functional.mse_loss(model(xb), yb) / accumulation_steps
        loss.backward()
        losses.append(loss.item())
        if (i + 1) % accumulation_steps == 0:
            o("accumulated equals full", [torch.allclose(p.grad, g, atol=1e-7) for p, g in zip(model.parameters(), full_grads)])
            optimizer.step()
            optimizer.zero_grad()
    o("losses", losses)
    o("sum of losses", [sum(losses), torch.nn.functional.mse_loss(full(x), y).item()])
    o("params", list(model.parameters()))
    o("grads after zero", [p.grad for p in model.parameters()])
    model.zero_grad(set_to_none=False)
    o("grads zero", [p.grad for p in model.parameters()])


@program(rtol=1e-5, atol=1e-6)
def evaluation_loop_no_grad_and_inference_mode(torch, o):
    model = make_mlp(torch, "Tanh")
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_CLS)
    model.eval()
    correct, total, running_loss = 0, 0, 0.0
    criterion = torch.nn.CrossEntropyLoss(reduction="sum")
    with torch.no_grad():
        for xb, yb in zip(x.split(4), y.split(4)):
            outputs = model(xb)
            running_loss += criterion(outputs, yb).item()
            _, predicted = outputs.max(1)
            total += yb.size(0)
            correct += predicted.eq(yb).sum().item()
    o("totals", [correct, total, running_loss / total, 100. * correct / total])
    o("training flag", [model.training, model[0].training])
    with torch.inference_mode():
        out = model(x)
    o("inference out", [out.requires_grad, out.grad_fn is None, (out.argmax(1) == y).float().mean()])
    probs = torch.softmax(out, dim=1)
    conf, pred = probs.max(dim=1)
    o("confidence", [conf, pred])
    o("per-class", [((pred == c) & (y == c)).sum().item() for c in range(2)])
    model.train()
    o("back to train", model.training)
    with torch.no_grad():
        preds = torch.cat([model(xb).argmax(dim=-1) for xb in x.split(2)])
    o("preds", [preds, preds.dtype, preds.tolist()])


@program
def activation_functions_catalog(torch, o):
    F = torch.nn.functional

    names = ["relu6", "hardtanh", "logsigmoid", "softsign", "selu", "celu", "mish", "hardswish",
             "hardsigmoid", "tanhshrink", "softmin"]
    results = {}
    for name in names:
        x = torch.tensor([-4.0, -1.5, -0.5, 0.0, 0.5, 1.5, 4.0, 7.0], requires_grad=True)
        fn = getattr(F, name)
        y = fn(x, dim=0) if name == "softmin" else fn(x)
        (y * torch.arange(1.0, 9.0)).sum().backward()
        results[name] = [y, x.grad]
    o("functional", results)
    modules = [torch.nn.ReLU6(), torch.nn.Hardtanh(-2.0, 2.0), torch.nn.LogSigmoid(),
               torch.nn.Softsign(), torch.nn.SELU(), torch.nn.CELU(alpha=0.5), torch.nn.Mish(),
               torch.nn.Hardswish(), torch.nn.Hardsigmoid(), torch.nn.Tanhshrink(),
               torch.nn.Softmin(dim=1)]
    x = torch.tensor([[-3.0, -0.25, 0.0, 0.25, 3.5]])
    o("modules", [(repr(m), m(x)) for m in modules])
    o("hardtanh args", F.hardtanh(torch.tensor([-3.0, 0.3, 3.0]), min_val=-1.0, max_val=2.0))
    o("celu alpha", F.celu(torch.tensor([-1.0, 1.0]), alpha=2.0))


@program
def activation_second_derivatives(torch, o):
    F = torch.nn.functional

    for name in ["logsigmoid", "softsign", "selu", "celu", "mish", "tanhshrink"]:
        x = torch.tensor([-1.5, -0.3, 0.4, 2.0], requires_grad=True)
        y = getattr(F, name)(x)
        (g,) = torch.autograd.grad(y.sum(), x, create_graph=True)
        (h,) = torch.autograd.grad(g.sum(), x)
        o(name, [g, h])


@program(rtol=1e-5, atol=1e-6)
def similarity_and_distances(torch, o):
    F = torch.nn.functional

    a = torch.tensor([[1.0, 2.0, 3.0], [0.5, -1.0, 0.0]], requires_grad=True)
    b = torch.tensor([[1.0, 0.0, -1.0], [2.0, 1.0, 1.0]])
    cos = F.cosine_similarity(a, b)
    o("cos", cos)
    cos.sum().backward()
    o("cos grad", a.grad)
    o("cos dim0", F.cosine_similarity(a.detach(), b, dim=0))
    o("cos broadcast", F.cosine_similarity(a.detach().unsqueeze(1), b.unsqueeze(0), dim=-1))
    o("cos module", [torch.nn.CosineSimilarity(dim=1)(a.detach(), b), repr(torch.nn.CosineSimilarity())])
    o("cos zeros", F.cosine_similarity(torch.zeros(1, 3), b[:1]))
    manual = (a * b).sum(1) / (a.norm(dim=1) * b.norm(dim=1))
    o("manual", torch.allclose(manual, cos))
    o("pairwise", F.pairwise_distance(a.detach(), b))
    o("cdist", torch.cdist(a.detach(), b))
    o("cdist p1", torch.cdist(a.detach(), b, p=1))
    o("dist", [torch.dist(a.detach(), b), torch.dist(a.detach(), b, p=1)])
    x = torch.tensor([[0.0, 0.0], [3.0, 4.0], [1.0, 1.0]], requires_grad=True)
    d = torch.cdist(x, x)
    (d ** 2).sum().backward()
    o("cdist grad", [d, x.grad])


@program
def statistics_median_mode_unique_bincount(torch, o):
    t = torch.tensor([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])
    o("median", [t.median(), torch.median(t)])
    m = torch.tensor([[1.0, 5.0, 2.0], [7.0, 3.0, 3.0]])
    values, indices = m.median(dim=1)
    o("median dim", [values, indices])
    o("median keepdim", torch.median(m, 0, keepdim=True))
    labels = torch.tensor([2, 0, 1, 2, 2, 0])
    o("unique", torch.unique(labels))
    o("unique counts", torch.unique(labels, return_counts=True))
    o("unique inverse", labels.unique(return_inverse=True))
    o("unique sorted float", torch.tensor([2.5, 1.0, 2.5]).unique())
    o("bincount", torch.bincount(labels))
    o("bincount minlength", labels.bincount(minlength=5))
    o("bincount weights", torch.bincount(labels, weights=torch.tensor([0.5, 1.0, 1.0, 0.25, 0.25, 2.0])))
    o("std_mean", torch.std_mean(m, dim=1))
    o("var_mean", torch.var_mean(m))
    o("class weights", 1.0 / torch.bincount(labels).float())
    o.raises("bincount negative", lambda: torch.bincount(torch.tensor([-1, 2])), "bincount only supports 1-d non-negative integral inputs.")
    g = torch.tensor([3.0, 1.0, 2.0], requires_grad=True)
    g.median().backward()
    o("median grad", g.grad)


@program(rtol=1e-5, atol=1e-6)
def kl_divergence_and_distillation_losses(torch, o):
    F = torch.nn.functional

    student = torch.tensor([[1.0, 2.0, 0.5], [0.1, -1.0, 2.0]], requires_grad=True)
    teacher = torch.tensor([[0.5, 2.5, 0.0], [0.0, -0.5, 1.5]])
    T = 2.0
    soft = F.kl_div(F.log_softmax(student / T, dim=1), F.softmax(teacher / T, dim=1), reduction="batchmean") * T * T
    hard = F.cross_entropy(student, torch.tensor([1, 2]))
    loss = 0.7 * soft + 0.3 * hard
    loss.backward()
    o("losses", [soft, hard, loss])
    o("grad", student.grad)
    p = F.log_softmax(student.detach(), 1)
    q = F.softmax(teacher, 1)
    o("reductions", [F.kl_div(p, q, reduction=r) for r in ("none", "sum", "batchmean")])
    o("log_target", F.kl_div(p, q.log(), reduction="sum", log_target=True))
    o("module", [torch.nn.KLDivLoss(reduction="batchmean")(p, q), repr(torch.nn.KLDivLoss())])
    o.warns("mean warning", lambda: F.kl_div(p, q, reduction="mean"), "reduction: 'mean' divides the total loss by both the batch size and the support size")
    mu = torch.tensor([0.5, -0.2], requires_grad=True)
    logvar = torch.tensor([0.1, -0.3], requires_grad=True)
    kld = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    kld.backward()
    o("vae kld", [kld, mu.grad, logvar.grad])


@program
def d2l_corr2d_and_pooling_from_scratch(torch, o):
    def corr2d(X, K):
        h, w = K.shape
        Y = torch.zeros((X.shape[0] - h + 1, X.shape[1] - w + 1))
        for i in range(Y.shape[0]):
            for j in range(Y.shape[1]):
                Y[i, j] = (X[i:i + h, j:j + w] * K).sum()
        return Y

    X = torch.tensor([[0.0, 1.0, 2.0], [3.0, 4.0, 5.0], [6.0, 7.0, 8.0]])
    K = torch.tensor([[0.0, 1.0], [2.0, 3.0]])
    o("corr2d", corr2d(X, K))

    class Conv2D(torch.nn.Module):
        def __init__(self, kernel_size):
            super().__init__()
            self.weight = torch.nn.Parameter(torch.ones(kernel_size) * 0.5)
            self.bias = torch.nn.Parameter(torch.zeros(1))

        def forward(self, x):
            return corr2d(x, self.weight) + self.bias

    E = torch.ones((6, 8))
    E[:, 2:6] = 0
    o("edge image", E)
    Kedge = torch.tensor([[1.0, -1.0]])
    Yedge = corr2d(E, Kedge)
    o("edges", [Yedge, corr2d(E.t(), Kedge)])
    conv2d = Conv2D(kernel_size=(1, 2))
    lr = 1e-2
    for i in range(10):
        Y_hat = conv2d(E)
        l = (Y_hat - Yedge) ** 2
        conv2d.zero_grad()
        l.sum().backward()
        conv2d.weight.data[:] -= lr * conv2d.weight.grad
        conv2d.bias.data -= lr * conv2d.bias.grad
        if (i + 1) % 2 == 0:
            o(f"epoch {i + 1}", f"loss {l.sum():.3f}")
    o("learned", [conv2d.weight.data.reshape((1, 2)), conv2d.bias])

    def pool2d(X, pool_size, mode="max"):
        p_h, p_w = pool_size
        Y = torch.zeros((X.shape[0] - p_h + 1, X.shape[1] - p_w + 1))
        for i in range(Y.shape[0]):
            for j in range(Y.shape[1]):
                if mode == "max":
                    Y[i, j] = X[i: i + p_h, j: j + p_w].max()
                elif mode == "avg":
                    Y[i, j] = X[i: i + p_h, j: j + p_w].mean()
        return Y

    o("pools", [pool2d(X, (2, 2)), pool2d(X, (2, 2), "avg")])
    Xg = X.clone().requires_grad_()
    pool2d(Xg, (2, 2)).sum().backward()
    o("pool grad", Xg.grad)

    def corr2d_multi_in_out(X, K):
        return torch.stack([sum(corr2d(x, k) for x, k in zip(X, k_)) for k_ in K], 0)

    Xm = torch.stack([X, X + 1])
    Km = torch.stack([torch.stack([K, K + 1]), torch.stack([K + 1, K + 2])])
    o("multi in out", [Km.shape, corr2d_multi_in_out(Xm, Km)])


@program
def tensor_from_mixed_nested_lists_and_scalars(torch, o):
    o("int float", torch.tensor([[1, 2.0], [3, 4]]))
    o("bool int float", torch.tensor([[True, 2], [3.5, False]]))
    o("bool int", torch.tensor([[True, 0], [1, False]]))
    o("nested tuples", torch.tensor(((1, 2), (3, 4))))
    o("list of 0-d tensors", torch.tensor([torch.tensor(1.5), torch.tensor(2.5)]))
    o("list of 1-elem tensors", torch.tensor([torch.tensor([1]), torch.tensor([2])]))
    o("mixed tensor and float", torch.tensor([torch.tensor(1), 2.5]))
    o("numpy scalars", torch.tensor([np.float32(1.5), np.int64(2)]))
    o("numpy float64 scalar", torch.tensor(np.float64(2.5)))
    o("numpy array float64", torch.tensor(np.array([1.0, 2.0])))
    o("numpy int32", torch.tensor(np.array([1, 2], dtype=np.int32)))
    o("empty nested", torch.tensor([[], []]))
    o("deep", torch.tensor([[[1], [2]], [[3], [4]]]).shape)
    o("large int", torch.tensor([2 ** 40, 1]))
    o("from range", torch.tensor(range(4)))
    o("float from int dtype", torch.tensor([1, 2], dtype=torch.float64))
    o("int from float dtype", torch.tensor([1.7, -2.7], dtype=torch.int64))
    o("bool dtype", torch.tensor([0.0, 2.0], dtype=torch.bool))
    o("shape arithmetic", [torch.zeros(2, 3, 4).shape[1:], torch.zeros(2, 3).shape + (5,),
                           torch.zeros(2, 3).shape[0] * torch.zeros(2, 3).shape[1], torch.zeros(2, 3).shape == (2, 3),
                           list(torch.zeros(2, 3).shape), torch.zeros(2, 3).size(-1), torch.zeros(2, 3).numel()])
    o.raises("too large", lambda: torch.tensor([2 ** 64]), "Overflow when unpacking long")
    o.raises("dict", lambda: torch.tensor({"a": 1}), "Could not infer dtype of dict")


@program(rtol=1e-5, atol=1e-6)
def nanogpt_self_attention_head(torch, o):
    F = torch.nn.functional
    B, T, C = 2, 4, 6
    x = (torch.arange(B * T * C, dtype=torch.float32).view(B, T, C) % 7 - 3) / 3
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T))
    wei = wei.masked_fill(tril == 0, float('-inf'))
    o("masked", wei)
    wei = F.softmax(wei, dim=-1)
    o("averaging weights", wei)
    o("bag of words", [wei @ x, (wei @ x).shape])
    xbow = torch.zeros((B, T, C))
    for b in range(B):
        for t in range(T):
            xbow[b, t] = torch.mean(x[b, :t + 1], 0)
    o("loop equals matmul", torch.allclose(xbow, wei @ x))
    head_size = 3
    key = torch.nn.Linear(C, head_size, bias=False)
    query = torch.nn.Linear(C, head_size, bias=False)
    value = torch.nn.Linear(C, head_size, bias=False)
    with torch.no_grad():
        key.weight.copy_(torch.linspace(-0.5, 0.5, 18).view(3, 6))
        query.weight.copy_(torch.linspace(0.4, -0.3, 18).view(3, 6))
        value.weight.copy_(torch.linspace(-0.2, 0.6, 18).view(3, 6))
    ln = torch.nn.LayerNorm(C)
    xn = ln(x.requires_grad_())
    k, q, v = key(xn), query(xn), value(xn)
    att = q @ k.transpose(-2, -1) * head_size ** -0.5
    att = att.masked_fill(tril[:T, :T] == 0, float('-inf'))
    att = F.softmax(att, dim=-1)
    out = att @ v
    o("att", [att, out.shape, att.grad_fn.name()])
    (out ** 2).sum().backward()
    o("grads", [x.grad, key.weight.grad, query.weight.grad, value.weight.grad, ln.weight.grad])
    o("rows sum to one", att.sum(-1))


@program(rtol=1e-5, atol=1e-6)
def word2vec_skipgram_negative_sampling(torch, o):
    F = torch.nn.functional

    class SkipGram(torch.nn.Module):
        def __init__(self, vocab_size, dim):
            super().__init__()
            self.center = torch.nn.Embedding(vocab_size, dim)
            self.context = torch.nn.Embedding(vocab_size, dim)

        def forward(self, center, context, negatives):
            u = self.center(center)
            v = self.context(context)
            n = self.context(negatives)
            pos = F.logsigmoid((u * v).sum(dim=1))
            neg = F.logsigmoid(-torch.bmm(n, u.unsqueeze(2)).squeeze(2)).sum(dim=1)
            return -(pos + neg).mean()

    model = SkipGram(6, 3)
    with torch.no_grad():
        model.center.weight.copy_(torch.linspace(-1, 1, 18).view(6, 3))
        model.context.weight.copy_(torch.linspace(1, -1, 18).view(6, 3) * 0.5)
    o("model", repr(model))
    center = torch.tensor([0, 1, 2, 3])
    context = torch.tensor([1, 2, 3, 4])
    negatives = torch.tensor([[5, 4], [0, 5], [1, 0], [2, 5]])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(5):
        optimizer.zero_grad()
        loss = model(center, context, negatives)
        loss.backward()
        optimizer.step()
        o(f"loss {step}", round(loss.item(), 5))
    o("embeddings", [model.center.weight, model.context.weight])
    emb = model.center.weight.detach()
    sims = F.cosine_similarity(emb[0].unsqueeze(0), emb, dim=1)
    o("most similar", [sims, sims.topk(3).indices])
    normed = F.normalize(emb, dim=1)
    o("similarity matrix", normed @ normed.T)


@program(rtol=1e-5, atol=1e-6)
def d2l_linear_regression_concise(torch, o):
    data = torch.utils.data
    nn = torch.nn
    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features = torch.stack([torch.linspace(-1, 1, 12), torch.sin(torch.arange(12.0))], 1)
    labels = (features @ true_w + true_b).reshape(-1, 1)

    def load_array(data_arrays, batch_size, is_train=True):
        dataset = data.TensorDataset(*data_arrays)
        return data.DataLoader(dataset, batch_size, shuffle=is_train)

    data_iter = load_array((features, labels), 4, is_train=False)
    o("first batch", next(iter(data_iter)))
    net = nn.Sequential(nn.Linear(2, 1))
    net[0].weight.data.fill_(0.01)
    net[0].bias.data.fill_(0)
    loss = nn.MSELoss()
    trainer = torch.optim.SGD(net.parameters(), lr=0.1)
    for epoch in range(3):
        for X, y in data_iter:
            l = loss(net(X), y)
            trainer.zero_grad()
            l.backward()
            trainer.step()
        l = loss(net(features), labels)
        o(f"epoch {epoch + 1}", f'epoch {epoch + 1}, loss {l:.4f}')
    w = net[0].weight.data
    o("error in w", true_w - w.reshape(true_w.shape))
    b = net[0].bias.data
    o("error in b", true_b - b)
    o("huber", nn.HuberLoss()(net(features), labels))
    o("shuffled epoch shapes", [X.shape for X, _ in load_array((features, labels), 5)])


@program(rtol=1e-5, atol=1e-6)
def d2l_rnn_from_scratch(torch, o):
    F = torch.nn.functional
    vocab_size, num_hiddens = 5, 4
    X = torch.arange(10).reshape((2, 5)) % vocab_size
    o("one-hot shape", F.one_hot(X.T, vocab_size).shape)

    def get_params():
        W_xh = torch.linspace(-0.3, 0.3, vocab_size * num_hiddens).reshape(vocab_size, num_hiddens)
        W_hh = torch.linspace(0.2, -0.2, num_hiddens * num_hiddens).reshape(num_hiddens, num_hiddens)
        b_h = torch.zeros(num_hiddens)
        W_hq = torch.linspace(-0.5, 0.5, num_hiddens * vocab_size).reshape(num_hiddens, vocab_size)
        b_q = torch.zeros(vocab_size)
        params = [W_xh, W_hh, b_h, W_hq, b_q]
        for param in params:
            param.requires_grad_(True)
        return params

    def init_rnn_state(batch_size, num_hiddens):
        return (torch.zeros((batch_size, num_hiddens)),)

    def rnn(inputs, state, params):
        W_xh, W_hh, b_h, W_hq, b_q = params
        H, = state
        outputs = []
        for X in inputs:
            H = torch.tanh(torch.mm(X, W_xh) + torch.mm(H, W_hh) + b_h)
            Y = torch.mm(H, W_hq) + b_q
            outputs.append(Y)
        return torch.cat(outputs, dim=0), (H,)

    def grad_clipping(params, theta):
        norm = torch.sqrt(sum(torch.sum(p.grad ** 2) for p in params))
        if norm > theta:
            for param in params:
                param.grad[:] *= theta / norm
        return norm

    params = get_params()
    state = init_rnn_state(X.shape[0], num_hiddens)
    Y, new_state = rnn(F.one_hot(X.T, vocab_size).type(torch.float32), state, params)
    o("shapes", [Y.shape, len(new_state), new_state[0].shape])
    targets = (X + 1) % vocab_size
    for step in range(4):
        state = init_rnn_state(X.shape[0], num_hiddens)
        y_hat, state = rnn(F.one_hot(X.T, vocab_size).float(), state, params)
        y = targets.T.reshape(-1)
        l = F.cross_entropy(y_hat, y.long()).mean()
        for p in params:
            p.grad = None
        l.backward()
        norm = grad_clipping(params, 0.5)
        with torch.no_grad():
            for p in params:
                p -= 1.0 * p.grad
        o(f"step {step}", [l, norm, torch.exp(l).item()])
    o("params", params)
    prefix_outputs = [0]
    state = init_rnn_state(1, num_hiddens)
    for _ in range(6):
        inp = torch.tensor([prefix_outputs[-1]]).reshape((1, 1))
        out, state = rnn(F.one_hot(inp.T, vocab_size).float(), state, params)
        prefix_outputs.append(int(out.argmax(dim=1).reshape(1)))
    o("greedy decode", prefix_outputs)


@program(rtol=1e-5, atol=1e-6)
def makemore_mlp_with_nn_modules(torch, o):
    nn = torch.nn
    vocab, block, emb_dim, hidden = 6, 3, 2, 5
    model = nn.Sequential(
        nn.Embedding(vocab, emb_dim), nn.Flatten(), nn.Linear(block * emb_dim, hidden, bias=False),
        nn.BatchNorm1d(hidden), nn.Tanh(), nn.Linear(hidden, vocab))
    with torch.no_grad():
        model[0].weight.copy_(torch.linspace(-1, 1, vocab * emb_dim).view(vocab, emb_dim))
        model[2].weight.copy_(torch.linspace(-0.5, 0.5, hidden * block * emb_dim).view(hidden, block * emb_dim))
        model[5].weight.copy_(torch.linspace(0.3, -0.3, vocab * hidden).view(vocab, hidden))
        model[5].bias.zero_()
        model[-1].weight *= 0.1
    o("model", repr(model))
    o("n params", sum(p.nelement() for p in model.parameters()))
    o("param shapes", [(n, p.shape) for n, p in model.named_parameters()])
    o("buffers", [n for n, _ in model.named_buffers()])
    Xtr = torch.tensor([[0, 0, 1], [0, 1, 2], [1, 2, 3], [2, 3, 4], [0, 0, 5], [0, 5, 1]])
    Ytr = torch.tensor([2, 3, 4, 0, 1, 0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for i in range(6):
        logits = model(Xtr)
        loss = torch.nn.functional.cross_entropy(logits, Ytr)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if i % 2 == 0:
            o(f"{i:7d}", f"{i:7d}/{6:7d}: {loss.item():.4f}")
    o("running stats", [model[3].running_mean, model[3].running_var, model[3].num_batches_tracked])
    model.eval()
    with torch.no_grad():
        probs = torch.softmax(model(Xtr[:2]), dim=1)
    o("eval probs", probs)
    o("sample argmax", probs.argmax(1).tolist())
    o("state_dict", list(model.state_dict().keys()))


@program
def keepdim_standardization_clamp_where_with_tensors(torch, o):
    X = torch.tensor([[1.0, 200.0, 0.5], [2.0, 180.0, 0.1], [3.0, 260.0, 0.9], [4.0, 220.0, 0.3]])
    mean = X.mean(dim=0, keepdim=True)
    std = X.std(dim=0, keepdim=True)
    Z = (X - mean) / std
    o("standardized", [Z, Z.mean(0), Z.std(0)])
    o("row normalized", X / X.sum(dim=1, keepdim=True))
    o("without keepdim error", (X.sum(1)).shape)
    o.raises("keepdim mistake", lambda: X / X.sum(dim=1), "The size of tensor a (3) must match the size of tensor b (4) at non-singleton dimension 1")
    o("minmax", (X - X.min(0).values) / (X.max(0).values - X.min(0).values))
    lo = torch.tensor([1.5, 190.0, 0.2])
    hi = torch.tensor([3.5, 250.0, 0.8])
    x = X.clone().requires_grad_()
    c = torch.clamp(x, min=lo, max=hi)
    c.sum().backward()
    o("clamp tensors", [c, x.grad])
    o("clamp only min tensor", X.clamp(min=lo))
    o("torch.where scalar", torch.where(X > 2, X, 0.0))
    o("torch.where tensors", torch.where(mean < X, X - mean, mean - X))
    o("where int/float", torch.where(torch.tensor([True, False]), torch.tensor([1, 2]), torch.tensor([0.5, 1.5])))
    o("where scalar both", torch.where(X[:, 0] > 2, 1.0, -1.0))
    y = torch.tensor([-1.0, 0.0, 2.0], requires_grad=True)
    r = torch.where(y > 0, y ** 2, torch.zeros_like(y))
    r.sum().backward()
    o("where grad", [r, y.grad])
    o("nan_to_num like", torch.where(torch.isnan(torch.tensor([1.0, float('nan')])), torch.tensor(0.0), torch.tensor([1.0, float('nan')])))


@program
def accuracy_integer_and_bool_arithmetic(torch, o):
    preds = torch.tensor([1, 0, 2, 2, 1])
    y = torch.tensor([1, 1, 2, 0, 1])
    eq = preds == y
    o("eq", [eq, eq.dtype, eq.sum(), eq.sum().dtype, eq.sum().item()])
    o("float mean", [eq.float().mean(), eq.double().mean(), eq.float().mean().item()])
    o("bool arithmetic", [eq + eq, eq * 2, eq.int(), eq.long().sum(), torch.sum(eq), eq.to(torch.float32) * 100])
    o("tensor / int", [eq.sum() / len(y), eq.sum() * 100 / len(y), eq.sum() // 2])
    o("int / tensor", [1 / (eq.sum() + 1), 10 - eq.sum()])
    o("negation", [~eq, eq.logical_not(), (~eq).sum(), (~eq).nonzero(), (~eq).nonzero().squeeze()])
    o("any all", [eq.any(), eq.all(), eq.any().item(), bool(eq.any())])
    o("mask counts per class", [((preds == c) & (y == c)).sum().item() for c in range(3)])
    cm = torch.zeros(3, 3, dtype=torch.int64)
    for t, p in zip(y, preds):
        cm[t, p] += 1
    o("confusion", [cm, cm.diag(), cm.diag().float() / cm.sum(1).float(), cm.sum(0)])
    o("bool plus int", [torch.tensor(True) + 1, torch.tensor([True, False]) + torch.tensor([1, 1])])
    o("int true div", [torch.tensor([3, 4]) / 2, torch.tensor([3, 4]) / torch.tensor([2, 2])])
    o("percent string", f"Accuracy: {100 * eq.float().mean():.2f}%")
    o("percent item string", f"{eq.sum().item()}/{len(y)} ({100. * eq.sum().item() / len(y):.0f}%)")
    o.raises("bool subtract", lambda: eq - eq, "Subtraction, the `-` operator, with two bool tensors is not supported")
    o.raises("bool negate", lambda: -eq, "Negation, the `-` operator, on a bool tensor is not supported")


@program
def formatting_and_printing_scalars(torch, o):
    loss = torch.tensor(1.234567, requires_grad=True) * 2
    o("fstring item", f"{loss.item():.4f}")
    o("fstring tensor", f"{loss:.3f}")
    o("format e", f"{torch.tensor(0.000123):.2e}")
    o("format g", f"{torch.tensor(2.5):g}")
    o("percent", "%.2f" % torch.tensor(3.14159))  # noqa: UP031 - %-formatting a tensor is the test
    o("percent one-element", "%.2f" % torch.tensor([3.14159]))  # noqa: UP031
    o("str repr", [str(loss), repr(torch.tensor(2.5)), str(torch.tensor([1.5]))])
    o("round item", [round(loss.item(), 2), round(float(loss), 1), int(torch.tensor(3.9)), float(torch.tensor([2]))])
    o("int format", f"{torch.tensor(7):03d}")
    o.raises("one-element format", lambda: f"{torch.tensor([1.0]):.3f}", "unsupported format string passed to Tensor.__format__")
    o("print list", str([torch.tensor(1.0), torch.tensor(2)]))
    o("tolist", [torch.tensor([[1.5, 2.0]]).tolist(), torch.tensor(3).tolist(), torch.tensor([True]).tolist()])
    o("item types", [type(torch.tensor(1).item()).__name__, type(torch.tensor(1.0).item()).__name__,
                     type(torch.tensor(True).item()).__name__, type(torch.tensor(1, dtype=torch.int32).item()).__name__])
    o("len and iteration", [len(torch.zeros(3, 2)), [t.shape for t in torch.zeros(2, 3)]])
    o.raises("len of scalar", lambda: len(torch.tensor(1.0)), "len() of a 0-d tensor")
    o.raises("iterate scalar", lambda: list(torch.tensor(1.0)), "iteration over a 0-d tensor")
    o("hex index", [torch.arange(5)[torch.tensor(2)], torch.arange(5)[torch.tensor(2)].shape])
    o("numbers in range", list(range(torch.tensor(3))))


@program
def printing_attention_masks_and_new_modules(torch, o):
    T = 4
    tril = torch.tril(torch.ones(T, T))
    wei = torch.zeros((T, T)).masked_fill(tril == 0, float('-inf'))
    o("masked str", str(wei))
    o("softmax str", str(torch.softmax(wei, dim=-1)))
    o("ninf nan", str(torch.tensor([float('-inf'), float('nan'), 1.5, -2.0])))
    o("big", str(torch.tensor([1e-8, 1.0, 1e8])))

    class Block(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.ln = torch.nn.LayerNorm(4)
            self.emb = torch.nn.Embedding(10, 4, padding_idx=0)
            self.ffwd = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.GELU(), torch.nn.Linear(16, 4),
                                            torch.nn.Dropout(0.1))
            self.bn = torch.nn.BatchNorm1d(4, momentum=0.01)

        def forward(self, idx):
            return self.ffwd(self.ln(self.emb(idx)))

    o("block", repr(Block()))
    o("acts", repr(torch.nn.Sequential(torch.nn.ReLU6(), torch.nn.Hardtanh(-2, 2), torch.nn.SELU(inplace=True),
                                       torch.nn.CELU(0.5), torch.nn.Softmin(dim=-1), torch.nn.Mish())))
    o("losses", repr([torch.nn.KLDivLoss(reduction="batchmean"), torch.nn.MultiMarginLoss(), torch.nn.CosineSimilarity(dim=0)]))
    ln = torch.nn.LayerNorm(3)
    o("ln out", str(ln(torch.tensor([[1.0, 2.0, 3.0]]))))
    bn = torch.nn.BatchNorm1d(2)
    o("bn out", str(bn(torch.tensor([[1.0, 2.0], [3.0, 5.0]]))))
    emb = torch.nn.Embedding(3, 2)
    with torch.no_grad():
        emb.weight.fill_(0.5)
    o("emb out", str(emb(torch.tensor([0, 2]))))
    o("emb weight", str(emb.weight))


@program(rtol=1e-5, atol=1e-6)
def training_loop_bookkeeping_idioms(torch, o):
    model = make_mlp(torch)
    x = torch.tensor(X_DATA)
    y = torch.tensor(Y_REG)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    losses = []
    norms = []
    for epoch in range(4):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        norms.append(torch.nn.utils.clip_grad_norm_(model.parameters(), max_norm=0.5))
        optimizer.step()
        losses.append(loss)
        for g in optimizer.param_groups:
            g['lr'] *= 0.5
    o("stacked mean", torch.stack(losses).mean())
    o("sum over len", sum(losses) / len(losses))
    o("from floats", torch.tensor([l.item() for l in losses]).mean())
    o("norms", norms)
    o("lr", [g['lr'] for g in optimizer.param_groups])
    o("momentum buffers", [optimizer.state[p]['momentum_buffer'] for p in model.parameters()])
    o("best epoch", int(torch.stack(losses).argmin()))
    o("detached list", [l.detach() for l in losses][-1])
    o.raises("cat empty", lambda: torch.cat([]), "expected a non-empty list of Tensors")
    o.raises("stack empty", lambda: torch.stack([]), "stack expects a non-empty TensorList")
    with torch.no_grad():
        eval_loss = torch.nn.functional.mse_loss(model(x), y)
    o.raises("backward of no_grad loss", lambda: eval_loss.backward(), "element 0 of tensors does not require grad and does not have a grad_fn")
    arr = np.array([[1.0, 2.0], [3.0, 4.0]])
    t = torch.from_numpy(arr).float()
    o("from_numpy float", [t, t.dtype])
    shared = torch.from_numpy(arr)
    arr[0, 0] = 10.0
    o("shared", shared)
    p = torch.nn.Parameter(torch.ones(2))
    (p * 3).sum().backward()
    p.grad.data.zero_()
    o("grad data zero", p.grad)


@program
def seeded_randomness_structure(torch, o):
    torch.manual_seed(42)
    a = torch.randn(3, 4)
    torch.manual_seed(42)
    b = torch.randn(3, 4)
    o("same seed same values", torch.equal(a, b))
    o("randint range", [torch.randint(0, 5, (100,)).min().item() >= 0, torch.randint(0, 5, (100,)).max().item() < 5,
                        torch.randint(5, (3,)).dtype, torch.randint(0, 5, size=(2, 2)).shape])
    perm = torch.randperm(10)
    o("randperm", [perm.sort().values, perm.dtype])
    o("rand range", [bool((torch.rand(50) < 1).all()), bool((torch.rand(50) >= 0).all())])
    o("normal shapes", [torch.normal(0.0, 1.0, size=(2, 3)).shape, torch.normal(torch.zeros(4), torch.ones(4)).shape,
                        torch.normal(mean=torch.zeros(2, 2), std=0.1).shape])
    g = torch.Generator().manual_seed(0)
    o("generator", [torch.randn(2, generator=g).shape, torch.rand(3, generator=g).dtype])
    o("generator device", [repr(g.device), str(g.device), g.device == torch.device("cpu"),
                           g.initial_seed()])
    w = torch.empty(3, 5)
    torch.nn.init.xavier_uniform_(w)
    bound = (6 / (3 + 5)) ** 0.5
    o("xavier bound", bool((w.abs() <= bound).all()))
    torch.nn.init.kaiming_normal_(w, mode="fan_out", nonlinearity="relu")
    o("kaiming shape", w.shape)
    idx = torch.multinomial(torch.tensor([0.0, 1.0, 0.0]), num_samples=5, replacement=True)
    o("multinomial deterministic", idx)
    o("bernoulli extremes", torch.bernoulli(torch.tensor([0.0, 1.0, 1.0])))
    drop = torch.nn.Dropout(p=0.5)
    out = drop(torch.ones(1000))
    o("dropout values", sorted(set(out.tolist())))
    o("dropout eval", torch.nn.Dropout(0.5).eval()(torch.ones(3)))
    o("dropout p=1", torch.nn.functional.dropout(torch.ones(3), p=1.0))


def _copy_conv_weights(torch, model):
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            n = p.numel()
            p.copy_(torch.linspace(-0.5, 0.5, n).view(p.shape) * (0.9 ** i))


@program(rtol=1e-4, atol=1e-6)
def d2l_lenet_training(torch, o):
    nn = torch.nn
    net = nn.Sequential(
        nn.Conv2d(1, 2, kernel_size=3, padding=1), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Conv2d(2, 4, kernel_size=2), nn.Sigmoid(),
        nn.AvgPool2d(kernel_size=2, stride=2),
        nn.Flatten(),
        nn.Linear(4, 5), nn.Sigmoid(),
        nn.Linear(5, 3))
    _copy_conv_weights(torch, net)
    X = (torch.arange(2 * 1 * 6 * 6, dtype=torch.float32).reshape(2, 1, 6, 6) % 5) / 5
    shapes = []
    out = X
    for layer in net:
        out = layer(out)
        shapes.append(f"{layer.__class__.__name__} output shape:\t{out.shape}")
    o("shapes", shapes)
    o("net", repr(net))
    y = torch.tensor([0, 2])
    optimizer = torch.optim.SGD(net.parameters(), lr=0.9)
    loss_fn = nn.CrossEntropyLoss()
    for epoch in range(3):
        optimizer.zero_grad()
        l = loss_fn(net(X), y)
        l.backward()
        optimizer.step()
        o(f"loss {epoch}", l)
    o("grads", [p.grad for p in net.parameters()])
    o("grad_fn", [net[0](X).grad_fn.name(), net[2](net[0](X)).grad_fn.name()])


@program(rtol=1e-4, atol=1e-6)
def cnn_relu_maxpool_classifier(torch, o):
    nn = torch.nn
    F = torch.nn.functional

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(3, 4, 3, padding=1)
            self.conv2 = nn.Conv2d(4, 4, 3, stride=1, padding=1, bias=False)
            self.pool = nn.MaxPool2d(2, 2)
            self.gap = nn.AdaptiveAvgPool2d((1, 1))
            self.fc = nn.Linear(4, 2)

        def forward(self, x):
            x = self.pool(F.relu(self.conv1(x)))
            x = F.relu(self.conv2(x))
            x = self.gap(x)
            x = torch.flatten(x, 1)
            return self.fc(x)

    net = Net()
    _copy_conv_weights(torch, net)
    o("repr", repr(net))
    x = torch.cos(torch.arange(2 * 3 * 4 * 4, dtype=torch.float32)).view(2, 3, 4, 4)
    x.requires_grad_()
    out = net(x)
    o("out", out)
    loss = F.cross_entropy(out, torch.tensor([1, 0]))
    loss.backward()
    o("input grad", x.grad)
    o("param grads", [p.grad for p in net.parameters()])
    pooled, indices = F.max_pool2d(x.detach(), 2, return_indices=True)
    o("pool indices", [pooled, indices])
    o("unbatched", net.conv1(x.detach()[0]).shape)
    o("functional conv", F.conv2d(x.detach(), net.conv1.weight.detach(), stride=2).shape)
    o("unfold", F.unfold(x.detach(), kernel_size=2, stride=2).shape)
    o.raises("wrong channels", lambda: net.conv1(torch.ones(1, 1, 4, 4)), "expected input[1, 1, 4, 4] to have 3 channels, but got 1 channels instead")
    o.raises("kernel too big", lambda: F.conv2d(torch.ones(1, 1, 2, 2), torch.ones(1, 1, 3, 3)), "Kernel size can't be greater than actual input size")
    o.raises("2d input", lambda: net.conv1(torch.ones(4, 4)), "Expected 3D (unbatched) or 4D (batched) input to conv2d, but got input of size: [4, 4]")
    o.raises("flatten then fc mismatch", lambda: net.fc(torch.ones(2, 5)), "mat1 and mat2 shapes cannot be multiplied (2x5 and 4x2)")


@program(rtol=1e-4, atol=1e-6)
def lstm_sequence_classifier(torch, o):
    nn = torch.nn

    class SentimentLSTM(nn.Module):
        def __init__(self, vocab_size, embed_dim, hidden_dim, num_classes):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim, padding_idx=0)
            self.lstm = nn.LSTM(embed_dim, hidden_dim, batch_first=True)
            self.fc = nn.Linear(hidden_dim, num_classes)

        def forward(self, x):
            embedded = self.embedding(x)
            output, (hidden, cell) = self.lstm(embedded)
            return self.fc(hidden[-1])

    model = SentimentLSTM(8, 3, 4, 2)
    with torch.no_grad():
        for i, (name, p) in enumerate(model.named_parameters()):
            p.copy_(torch.linspace(-0.6, 0.6, p.numel()).view(p.shape) * (1 - 0.1 * i))
    o("repr", repr(model))
    o("names", [(n, p.shape) for n, p in model.named_parameters()])
    x = torch.tensor([[1, 4, 2, 0], [3, 3, 5, 7]])
    y = torch.tensor([0, 1])
    optimizer = torch.optim.Adam(model.parameters(), lr=0.05)
    for step in range(3):
        optimizer.zero_grad()
        logits = model(x)
        loss = nn.functional.cross_entropy(logits, y)
        loss.backward()
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        o(f"loss {step}", loss)
    o("grads", [p.grad for p in model.parameters()])
    out, (h, c) = model.lstm(model.embedding(x))
    o("shapes", [out.shape, h.shape, c.shape, torch.allclose(out[:, -1], h[-1])])


@program(rtol=1e-4, atol=1e-6)
def rnn_and_gru_cells_by_hand(torch, o):
    nn = torch.nn
    rnn = nn.RNN(input_size=2, hidden_size=3, num_layers=2)
    gru = nn.GRU(2, 3, bidirectional=True)
    cell = nn.GRUCell(2, 3)
    for module in (rnn, gru, cell):
        with torch.no_grad():
            for p in module.parameters():
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view(p.shape))
    o("reprs", [repr(rnn), repr(gru), repr(cell)])
    seq = torch.sin(torch.arange(10.0)).view(5, 1, 2)
    out, h = rnn(seq)
    o("rnn", [out, h])
    h0 = torch.zeros(2, 1, 3)
    out, h = gru(seq, h0)
    o("gru", [out, h, out.shape])
    hx = torch.zeros(1, 3)
    outputs = []
    for t in range(seq.shape[0]):
        hx = cell(seq[t], hx)
        outputs.append(hx)
    stacked = torch.stack(outputs)
    o("cell loop", stacked)
    o("cell equals layer forward half", torch.allclose(stacked.squeeze(1), out[:, 0, :3], atol=1e-6))
    stacked.sum().backward()
    o("cell grads", [p.grad for p in cell.parameters()])
    o.raises("wrong input size", lambda: rnn(torch.ones(5, 1, 3)), "input.size(-1) must be equal to input_size. Expected 2, got 3")
    o.raises("wrong hidden", lambda: gru(seq, torch.zeros(1, 1, 3)), "Expected hidden size (2, 1, 3), got [1, 1, 3]")


@program(rtol=1e-4, atol=1e-6)
def cnn_with_batchnorm2d(torch, o):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 2, 3, padding=1, bias=False), nn.BatchNorm2d(2), nn.ReLU(),
                          nn.MaxPool2d(2), nn.Flatten(), nn.Linear(8, 2))
    _copy_conv_weights(torch, model)
    o("repr", repr(model))
    x = torch.cos(torch.arange(2 * 16.0)).view(2, 1, 4, 4)
    out = model(x)
    out.sum().backward()
    o("out", out)
    o("grads", [p.grad for p in model.parameters()])
    o("bn stats", [model[1].running_mean, model[1].running_var, model[1].num_batches_tracked])
    model.eval()
    o("eval", model(x))
    o.raises("bn2d on 2d", lambda: nn.BatchNorm2d(2)(torch.ones(3, 2)), "expected 4D input (got 2D input)")


@program(rtol=1e-5, atol=1e-6)
def time_series_windows_ema_and_plateau(torch, o):
    series = torch.sin(torch.arange(12.0) / 2)
    windows = series.unfold(0, 4, 1)
    X, y = windows[:, :3], windows[:, 3:]
    o("windows", [windows.shape, X[:2], y[:2]])
    model = torch.nn.Linear(3, 1)
    with torch.no_grad():
        model.weight.copy_(torch.tensor([[0.1, -0.2, 0.3]]))
        model.bias.zero_()
    ema = [p.detach().clone() for p in model.parameters()]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    scheduler = torch.optim.lr_scheduler.ReduceLROnPlateau(optimizer, mode="min", factor=0.5, patience=0)
    for epoch in range(6):
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(X), y)
        loss.backward()
        optimizer.step()
        with torch.no_grad():
            for e, p in zip(ema, model.parameters()):
                e.lerp_(p, 0.1)
        scheduler.step(loss.item() if epoch != 3 else 10.0)
        o(f"epoch {epoch}", [loss, optimizer.param_groups[0]["lr"], scheduler.num_bad_epochs])
    o("ema", ema)
    o("lerp", [torch.lerp(torch.zeros(3), torch.ones(3), 0.25), torch.lerp(torch.zeros(2), torch.ones(2), torch.tensor([0.1, 0.9]))])
    angles = torch.atan2(torch.tensor([1.0, -1.0, 0.0]), torch.tensor([0.0, -1.0, -1.0]))
    o("atan2", [angles, angles * 180 / torch.pi])
    o("constants", [torch.pi, torch.e, torch.inf, -torch.inf, torch.tensor([1.0, 2.0])[:, torch.newaxis].shape,
                    torch.zeros(2).masked_fill(torch.tensor([True, False]), -torch.inf)])
    seqs = [torch.tensor([3, 1, 4]), torch.tensor([1, 5]), torch.tensor([9])]
    padded = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True)
    lengths = torch.tensor([len(s) for s in seqs])
    mask = torch.arange(padded.shape[1])[None, :] < lengths[:, None]
    o("padded", [padded, mask, padded.float().masked_fill(~mask, float("nan"))])
    o("pad", [torch.nn.functional.pad(torch.ones(2, 2), (1, 1)), torch.nn.functional.pad(torch.arange(3), (2, 0), value=-1)])
    idx = torch.triu_indices(3, 3, offset=1)
    sim = torch.arange(9.0).view(3, 3)
    o("upper pairs", [idx, sim[idx[0], idx[1]]])
    o("nan_to_num", torch.nan_to_num(torch.log(torch.tensor([0.0, 1.0, -1.0])), nan=0.0, neginf=-100.0))
    o("movedim", [torch.zeros(2, 3, 4).movedim(-1, 0).shape, torch.zeros(2, 3).swapaxes(0, 1).shape, torch.zeros(2, 3).ravel().shape])


@program(rtol=1e-5, atol=1e-6)
def parameter_list_and_dict_models(torch, o):
    nn = torch.nn

    class PolyModel(nn.Module):
        def __init__(self, degree):
            super().__init__()
            self.coeffs = nn.ParameterList([nn.Parameter(torch.tensor(0.1 * (i + 1))) for i in range(degree + 1)])
            self.extra = nn.ParameterDict({"scale": nn.Parameter(torch.ones(1)), "shift": nn.Parameter(torch.zeros(1))})

        def forward(self, x):
            y = sum(c * x ** i for i, c in enumerate(self.coeffs))
            return y * self.extra["scale"] + self.extra["shift"]

    model = PolyModel(2)
    o("repr", repr(model))
    o("named", [(n, p.shape) for n, p in model.named_parameters()])
    o("state keys", list(model.state_dict().keys()))
    x = torch.linspace(-1, 1, 5)
    y = 1 + 2 * x - x ** 2
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    for step in range(5):
        optimizer.zero_grad()
        loss = ((model(x) - y) ** 2).mean()
        loss.backward()
        optimizer.step()
    o("loss", loss)
    o("coeffs", list(model.coeffs))
    o("dict", [(k, v) for k, v in model.extra.items()])
    model.coeffs.append(torch.zeros(()))
    o("appended", [len(model.coeffs), type(model.coeffs[3]).__name__, model.coeffs[3].requires_grad,
                   len(list(model.parameters()))])
    o("contains", ["scale" in model.extra, list(model.extra.keys()), len(model.extra)])
    o("list repr", repr(nn.ParameterList([nn.Parameter(torch.ones(2, 3)), nn.Parameter(torch.zeros(1, dtype=torch.float64))])))


@program(rtol=1e-5, atol=1e-6)
def checkpoint_copy_and_dtype_of_new_modules(torch, o):
    import copy
    import io

    nn = torch.nn
    model = nn.Sequential(nn.Embedding(5, 3), nn.LSTM(3, 2, batch_first=True))
    head = nn.Sequential(nn.Conv2d(1, 2, 2), nn.BatchNorm2d(2), nn.LayerNorm([2, 2, 2]))
    for module in (model, head):
        with torch.no_grad():
            for i, p in enumerate(module.parameters()):
                p.copy_(torch.linspace(-0.3, 0.3, p.numel()).view(p.shape) + 0.01 * i)
    head(torch.arange(18.0).view(2, 1, 3, 3) / 10)
    state = head.state_dict()
    o("keys", list(state.keys()))
    o("num_batches_tracked", [state["1.num_batches_tracked"], state["1.running_mean"]])
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer)
    fresh = nn.Sequential(nn.Conv2d(1, 2, 2), nn.BatchNorm2d(2), nn.LayerNorm([2, 2, 2]))
    result = fresh.load_state_dict(loaded)
    o("load result", [list(result.missing_keys), list(result.unexpected_keys)])
    fresh.eval()
    head.eval()
    x = torch.arange(9.0).view(1, 1, 3, 3) / 9
    o("same eval output", torch.allclose(fresh(x), head(x)))
    twin = copy.deepcopy(model)
    idx = torch.tensor([[0, 3, 4]])
    out, (h, c) = twin[1](twin[0](idx))
    o("deepcopy lstm", [out, h, c])
    o("deepcopy independent", twin[0].weight is not model[0].weight)
    model.double()
    o("double dtypes", [p.dtype for p in model.parameters()])
    head.double()
    o("buffers after double", [(n, b.dtype) for n, b in head.named_buffers()])
    o("double output", head(x.double()).dtype)
    lstm_state = model[1].state_dict()
    o("lstm state", [(k, v.shape, v.dtype) for k, v in lstm_state.items()])
    o.raises("strict mismatch", lambda: nn.LSTM(3, 4).load_state_dict(lstm_state), "size mismatch for weight_ih_l0")


@program(rtol=1e-5, atol=1e-6)
def contrastive_loss_and_fused_attention(torch, o):
    F = torch.nn.functional
    z = torch.tensor([[1.0, 0.2, -0.5], [0.9, 0.1, -0.4], [-0.3, 1.0, 0.2], [-0.2, 0.8, 0.4]], requires_grad=True)
    temperature = 0.5
    zn = F.normalize(z, dim=1)
    sim = zn @ zn.T / temperature
    sim = sim.clone().fill_diagonal_(float("-inf"))
    targets = torch.tensor([1, 0, 3, 2])
    loss = F.cross_entropy(sim, targets)
    loss.backward()
    o("nt-xent", [loss, z.grad])
    o("fill_diagonal", torch.zeros(3, 3).fill_diagonal_(1.0))
    B, T, C, n_head = 1, 4, 6, 2
    x = torch.sin(torch.arange(B * T * C, dtype=torch.float32)).view(B, T, C).requires_grad_()
    q, k, v = x, x * 0.5, x.flip(-1)
    q, k, v = (t.view(B, T, n_head, C // n_head).transpose(1, 2) for t in (q, k, v))
    y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    manual = (q @ k.transpose(-2, -1)) * (1.0 / (k.size(-1) ** 0.5))
    manual = manual.masked_fill(torch.tril(torch.ones(T, T)).view(1, 1, T, T) == 0, float("-inf"))
    manual = F.softmax(manual, dim=-1) @ v
    o("sdpa equals manual", torch.allclose(y, manual, atol=1e-6))
    y = y.transpose(1, 2).contiguous().view(B, T, C)
    y.sum().backward()
    o("sdpa", [y, x.grad])
    scores = torch.tensor([0.1, 0.5, 0.35, 0.9, 0.7, 0.2])
    o("quantiles", [torch.quantile(scores, 0.5), scores.quantile(torch.tensor([0.25, 0.75])),
                    torch.quantile(scores.view(2, 3), 0.5, dim=1), torch.median(scores)])
    threshold = torch.quantile(scores, 0.8)
    o("top 20%", (scores >= threshold).nonzero().flatten())


@program
def single_sample_statistics_warnings(torch, o):
    h = torch.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    std = o.warns("std of one sample", lambda: h.std(0, keepdim=True), "degrees of freedom is <= 0")
    o("std", std)
    o.warns("var", lambda: torch.tensor([3.0]).var(), "var(): degrees of freedom is <= 0")
    o.warns("std_mean", lambda: torch.std_mean(torch.tensor([3.0])), "std_mean(): degrees of freedom is <= 0")
    o.warns("biased is fine", lambda: h.var(0, unbiased=False))
    o.warns("batch of two", lambda: torch.tensor([[1.0], [2.0]]).std(0))
    normalized = (h - h.mean(0, keepdim=True)) / (h.var(0, keepdim=True, unbiased=False) + 1e-5).sqrt()
    normalized.sum().backward()
    o("normalized", [normalized, h.grad])
    o.raises("batchnorm one sample", lambda: torch.nn.BatchNorm1d(3)(h), "Expected more than 1 value per channel when training")
    bn = torch.nn.BatchNorm1d(3).eval()
    o("batchnorm eval one sample", bn(h))


@program
def saturated_sigmoid_printing_and_overflow(torch, o):
    logits = torch.tensor([-100.0, -90.0, -20.0, 0.0, 20.0, 100.0], requires_grad=True)
    probs = torch.sigmoid(logits)
    o("probs", probs)
    o("printed", str(probs))
    o("double", str(torch.sigmoid(logits.detach().double())))
    probs.sum().backward()
    o("grad", logits.grad)
    o("module", str(torch.nn.Sigmoid()(torch.tensor([[-88.5, 88.5]]))))
    o("bce saturated", torch.nn.functional.binary_cross_entropy(probs.detach(), torch.tensor([1.0, 0, 0, 1, 1, 0])))
    o.warns("overflow to inf", lambda: torch.tensor([1e40, -1e40]))
    o.warns("cast down", lambda: torch.tensor([1e300], dtype=torch.float64).float())
    o("inf values", [torch.tensor([1e40]), torch.tensor([1e300], dtype=torch.float64).float()])


@program
def d2l_builders_guide_blocks_and_parameters(torch, o):
    import io

    nn = torch.nn
    F = torch.nn.functional

    class MySequential(nn.Module):
        def __init__(self, *args):
            super().__init__()
            for idx, module in enumerate(args):
                self._modules[str(idx)] = module

        def forward(self, X):
            for block in self._modules.values():
                X = block(X)
            return X

    def init_constant(module):
        if type(module) == nn.Linear:
            nn.init.constant_(module.weight, 0.1)
            nn.init.zeros_(module.bias)

    X = torch.arange(8.0).reshape(2, 4) / 8
    net = MySequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    net.apply(init_constant)
    o("my sequential", [net(X), repr(net), [n for n, _ in net.named_parameters()]])

    def block1():
        return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 4), nn.ReLU())

    def block2():
        net = nn.Sequential()
        for i in range(2):
            net.add_module(f'block {i}', block1())
        return net

    rgnet = nn.Sequential(block2(), nn.Linear(4, 1))
    rgnet.apply(init_constant)
    o("rgnet", [repr(rgnet), rgnet(X), rgnet[0][1][0].bias.data])
    o("state", [(k, v.shape) for k, v in rgnet.state_dict().items()][:4])
    o("param access", [type(net._modules["2"].bias).__name__, net._modules["2"].bias.data, net._modules["2"].weight.grad is None])
    o("all params", [(name, param.shape) for name, param in net.named_parameters()])
    o("state_dict bias", net.state_dict()['2.bias'].data)

    def my_init(m):
        if type(m) == nn.Linear:
            nn.init.uniform_(m.weight, -10, 10)
            m.weight.data *= m.weight.data.abs() >= 5

    net.apply(my_init)
    w = net._modules["0"].weight
    o("my_init", bool(((w.abs() >= 5) | (w == 0)).all()))
    net._modules["0"].weight.data[:] += 1
    net._modules["0"].weight.data[0, 0] = 42
    o("edited", net._modules["0"].weight.data[0, 0])
    shared = nn.Linear(8, 8)
    tied = nn.Sequential(nn.Linear(4, 8), nn.ReLU(), shared, nn.ReLU(), shared, nn.ReLU(), nn.Linear(8, 1))
    tied.apply(init_constant)
    tied[2].weight.data[0, 0] = 100
    o("tied", [bool((tied[2].weight.data[0] == tied[4].weight.data[0]).all()), len(list(tied.parameters())),
               len(tied.state_dict())])
    tied(X).sum().backward()
    o("tied grad", tied[2].weight.grad[0])

    class CenteredLayer(nn.Module):
        def forward(self, X):
            return X - X.mean()

    layer = CenteredLayer()
    o("centered", [layer(torch.tensor([1.0, 2, 3, 4, 5])), nn.Sequential(nn.Linear(4, 8), CenteredLayer())(X).mean().abs() < 1e-6])
    x = torch.arange(4)
    buffer = io.BytesIO()
    torch.save([x, torch.zeros(4)], buffer)
    buffer.seek(0)
    x2, y2 = torch.load(buffer)
    o("save list", [x2, y2])
    buffer = io.BytesIO()
    torch.save({'x': x, 'y': torch.zeros(4)}, buffer)
    buffer.seek(0)
    o("save dict", torch.load(buffer))
    clone = MySequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 2))
    clone.load_state_dict(net.state_dict())
    clone.eval()
    o("clone equal", bool((clone(X) == net(X)).all()))


@program(rtol=1e-4, atol=1e-6)
def text_cnn_conv1d_classifier(torch, o):
    nn = torch.nn
    F = torch.nn.functional

    class TextCNN(nn.Module):
        def __init__(self, vocab_size, embed_dim, num_filters, kernel_sizes, num_classes):
            super().__init__()
            self.embedding = nn.Embedding(vocab_size, embed_dim)
            self.convs = nn.ModuleList([nn.Conv1d(embed_dim, num_filters, k) for k in kernel_sizes])
            self.pool = nn.AdaptiveAvgPool1d(1)
            self.fc = nn.Linear(num_filters * len(kernel_sizes), num_classes)

        def forward(self, x):
            emb = self.embedding(x).permute(0, 2, 1)
            pooled = [F.max_pool1d(F.relu(conv(emb)), conv(emb).shape[-1]).squeeze(-1) for conv in self.convs]
            averaged = [self.pool(F.relu(conv(emb))).squeeze(-1) for conv in self.convs]
            return self.fc(torch.cat(pooled, dim=1)) + 0.1 * self.fc(torch.cat(averaged, dim=1))

    model = TextCNN(10, 4, 3, [2, 3], 2)
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).view(p.shape) * (1 - 0.05 * i))
    o("repr", repr(model))
    x = torch.tensor([[1, 5, 2, 7, 0, 3], [4, 4, 9, 1, 2, 8]])
    y = torch.tensor([1, 0])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    for step in range(3):
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        optimizer.step()
        o(f"loss {step}", loss)
    o("grads", [p.grad for p in model.parameters()])
    o("shapes", [model.convs[0](model.embedding(x).transpose(1, 2)).shape, nn.MaxPool1d(2)(torch.ones(1, 2, 5)).shape,
                 nn.AvgPool1d(3, stride=1)(torch.arange(5.0).view(1, 1, 5))])
    o.raises("conv1d channels", lambda: model.convs[0](torch.ones(1, 3, 6)), "expected input[1, 3, 6] to have 4 channels, but got 3 channels instead")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
