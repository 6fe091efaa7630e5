"""Conformance sweep, PyTorch's own tutorials and notes: "Learning PyTorch with Examples", the
two autograd introductions, "Extending PyTorch", "Double Backward with Custom Functions",
autograd mechanics (saved tensors, hooks), forward-mode AD and torch.func.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Random inputs of the tutorials are replaced
by fixed ones (``linspace``, ``tensor``), so both libraries see the same numbers.
"""

from __future__ import annotations

import math

import pytest
from sweep_harness import check, node_name, registry

program = registry()


# ---- Learning PyTorch with Examples: fitting sin(x) with a cubic ------------------------------

def _sin_data(torch, n=200):
    x = torch.linspace(-math.pi, math.pi, n)
    return x, torch.sin(x)


@program(1e-4, atol=1e-5)
def lpe_tensors_manual_backprop(torch, o):
    dtype = torch.float
    x, y = _sin_data(torch)
    a = torch.tensor(0.1, dtype=dtype)
    b = torch.tensor(-0.2, dtype=dtype)
    c = torch.tensor(0.05, dtype=dtype)
    d = torch.tensor(0.3, dtype=dtype)
    learning_rate = 1e-5
    for t in range(300):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        if t % 100 == 99:
            o(f"loss {t}", loss)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
    o("result", f"Result: y = {a.item():.3f} + {b.item():.3f} x + {c.item():.3f} x^2 + {d.item():.3f} x^3")
    o("params", [a, b, c, d])


@program(1e-4, atol=1e-5)
def lpe_tensors_and_autograd(torch, o):
    dtype = torch.float
    x, y = _sin_data(torch)
    a = torch.tensor(0.1, dtype=dtype, requires_grad=True)
    b = torch.tensor(-0.2, dtype=dtype, requires_grad=True)
    c = torch.tensor(0.05, dtype=dtype, requires_grad=True)
    d = torch.tensor(0.3, dtype=dtype, requires_grad=True)
    learning_rate = 1e-5
    for t in range(300):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            o(f"loss {t}", loss.item())
        loss.backward()
        with torch.no_grad():
            a -= learning_rate * a.grad
            b -= learning_rate * b.grad
            c -= learning_rate * c.grad
            d -= learning_rate * d.grad
            a.grad = None
            b.grad = None
            c.grad = None
            d.grad = None
    o("params", [a, b, c, d])
    o("loss.grad_fn", node_name(loss.grad_fn))
    o("a.grad after", a.grad)


@program(1e-4, atol=1e-5)
def lpe_legendre_polynomial3(torch, o):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    dtype = torch.float
    x, y = _sin_data(torch)
    a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    for t in range(300):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            o(f"loss {t}", loss.item())
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= learning_rate * p.grad
                p.grad = None
    o("params", [a, b, c, d])
    o("node", y_pred.grad_fn.next_functions[1][0].next_functions[1][0].name())
    # a and c stay within 1e-9 of 0: float32 rounding noise, whose sign the order of the
    # loss's sums decides (torch's cascade, numpy's pairwise), so the printout is compared
    # with a zero's sign dropped ("-0.000" is "0.000"); "params" compares the values
    result = f"Result: y = {a.item():.3f} + {b.item():.3f} * P3({c.item():.3f} + {d.item():.3f} x)"
    o("result", result.replace("-0.000", "0.000"))


@program(1e-4, atol=1e-5)
def lpe_nn_module_manual_update(torch, o):
    x, y = _sin_data(torch)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    o("xx.shape", xx.shape)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.2, -0.1, 0.05]]))
        model[0].bias.fill_(0.1)
    loss_fn = torch.nn.MSELoss(reduction='sum')
    learning_rate = 1e-6
    for t in range(200):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            o(f"loss {t}", loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    linear_layer = model[0]
    o("result", f"Result: y = {linear_layer.bias.item():.4f} + {linear_layer.weight[:, 0].item():.4f} x "
                f"+ {linear_layer.weight[:, 1].item():.4f} x^2 + {linear_layer.weight[:, 2].item():.4f} x^3")
    o("repr", repr(model))


@program(1e-4, atol=1e-5)
def lpe_custom_module_polynomial3(torch, o):
    class Polynomial3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor(0.1))
            self.b = torch.nn.Parameter(torch.tensor(0.2))
            self.c = torch.nn.Parameter(torch.tensor(-0.1))
            self.d = torch.nn.Parameter(torch.tensor(0.05))

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

        def string(self):
            return f'y = {self.a.item():.4f} + {self.b.item():.4f} x + {self.c.item():.4f} x^2 + {self.d.item():.4f} x^3'

    x, y = _sin_data(torch)
    model = Polynomial3()
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    for t in range(300):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            o(f"loss {t}", loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    o("string", model.string())
    o("named", [(n, p) for n, p in model.named_parameters()])
    o("repr", repr(model))


@program(1e-4, atol=1e-5)
def lpe_dynamic_net_weight_sharing(torch, o):
    import random as _random

    class DynamicNet(torch.nn.Module):
        def __init__(self, rng):
            super().__init__()
            self.rng = rng
            self.a = torch.nn.Parameter(torch.tensor(0.1))
            self.b = torch.nn.Parameter(torch.tensor(-0.2))
            self.c = torch.nn.Parameter(torch.tensor(0.05))
            self.d = torch.nn.Parameter(torch.tensor(0.1))
            self.e = torch.nn.Parameter(torch.tensor(-0.01))

        def forward(self, x):
            y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
            for exp in range(4, self.rng.randint(4, 6)):
                y = y + self.e * x ** exp
            return y

        def string(self):
            return (f'y = {self.a.item():.4f} + {self.b.item():.4f} x + {self.c.item():.4f} x^2 + '
                    f'{self.d.item():.4f} x^3 + {self.e.item():.4f} x^4 ? + {self.e.item():.4f} x^5 ?')

    x, y = _sin_data(torch)
    model = DynamicNet(_random.Random(0))
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    for t in range(300):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            o(f"loss {t}", loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    o("string", model.string())
    o("momentum buffers", [optimizer.state[p]["momentum_buffer"] for p in model.parameters()])


# ---- A Gentle Introduction to torch.autograd --------------------------------------------------

@program
def gentle_intro_q_external_grad(torch, o):
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3 * a ** 3 - b ** 2
    external_grad = torch.tensor([1., 1.])
    Q.backward(gradient=external_grad)
    o("check a", 9 * a ** 2 == a.grad)
    o("check b", -2 * b == b.grad)
    o("Q", Q)
    o("Q.grad_fn", node_name(Q.grad_fn))
    o("dag", [node_name(n) for n, _ in Q.grad_fn.next_functions])
    o("dag2", [[(node_name(n), i) for n, i in f.next_functions] for f, _ in Q.grad_fn.next_functions])
    o("leaf var", Q.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0].variable is a)


@program
def gentle_intro_exclusion_from_dag(torch, o):
    x = torch.tensor([[0.1, 0.2], [0.3, 0.4]])
    y = torch.tensor([[1.0, -1.0], [0.5, 0.0]])
    z = torch.tensor([[0.2, 0.1], [0.0, 0.3]], requires_grad=True)
    a = x + y
    o("a requires grad", a.requires_grad)
    b = x + z
    o("b requires grad", b.requires_grad)
    o("b", b)


@program(1e-5)
def gentle_intro_finetune_frozen_parameters(torch, o):
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.features = torch.nn.Sequential(torch.nn.Linear(4, 6), torch.nn.ReLU())
            self.fc = torch.nn.Linear(6, 3)

        def forward(self, x):
            return self.fc(self.features(x))

    model = Net()
    with torch.no_grad():
        model.features[0].weight.copy_(torch.linspace(-1, 1, 24).reshape(6, 4))
        model.features[0].bias.copy_(torch.linspace(-0.2, 0.2, 6))
    # freeze all the parameters in the network
    for param in model.parameters():
        param.requires_grad = False
    model.fc = torch.nn.Linear(6, 2)
    with torch.no_grad():
        model.fc.weight.copy_(torch.linspace(-0.5, 0.5, 12).reshape(2, 6))
        model.fc.bias.zero_()
    o("trainable", [n for n, p in model.named_parameters() if p.requires_grad])
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    data = torch.linspace(-2, 2, 20).reshape(5, 4)
    labels = torch.tensor([0, 1, 1, 0, 1])
    for step in range(5):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(data), labels)
        loss.backward()
        optimizer.step()
        o(f"loss {step}", loss)
    o("frozen grads", [p.grad for p in model.features.parameters()])
    o("fc grads", [p.grad for p in model.fc.parameters()])
    o("features unchanged", model.features[0].weight)
    o("fc", model.fc.weight)
    hidden = model.features(data)
    o("hidden", hidden)
    o("requires", [hidden.requires_grad, hidden.grad_fn is None])


# ---- Automatic differentiation with torch.autograd (Basics) ------------------------------------

@program
def basics_autograd_bce_single_layer(torch, o):
    x = torch.ones(5)
    y = torch.zeros(3)
    w = torch.tensor([[0.1, -0.2, 0.3], [0.4, 0.5, -0.6], [-0.7, 0.8, 0.9],
                      [1.0, -1.1, 0.2], [0.3, 0.1, -0.4]], requires_grad=True)
    b = torch.tensor([0.1, 0.2, -0.3], requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    o("grad_fn z", node_name(z.grad_fn))
    o("grad_fn loss", node_name(loss.grad_fn))
    o("print z", f"Gradient function for z = {z.grad_fn}".split(" object")[0].replace("<", ""))
    loss.backward()
    o("w.grad", w.grad)
    o("b.grad", b.grad)
    z = torch.matmul(x, w) + b
    o("z requires", z.requires_grad)
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    o("z requires no_grad", z.requires_grad)
    z = torch.matmul(x, w) + b
    z_det = z.detach()
    o("z_det requires", z_det.requires_grad)
    o("loss", loss)


@program
def basics_autograd_jacobian_product(torch, o):
    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    o("First call", inp.grad)
    out.backward(torch.ones_like(out), retain_graph=True)
    o("Second call", inp.grad)
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    o("Call after zeroing gradients", inp.grad)
    o("printed", f"First call\n{inp.grad}")
    o("out.grad_fn", node_name(out.grad_fn))
    o("chain", [node_name(n) for n, _ in out.grad_fn.next_functions])


@program
def basics_autograd_functional_jacobian_hessian(torch, o):
    def exp_reducer(x):
        return x.exp().sum(dim=1)

    inputs = torch.tensor([[0.1, 0.2], [-0.3, 0.4]])
    o("jacobian", torch.autograd.functional.jacobian(exp_reducer, inputs))
    o("jacobian create_graph", torch.autograd.functional.jacobian(exp_reducer, inputs, create_graph=True))

    def exp_adder(x, y):
        return 2 * x.exp() + 3 * y

    ins = (torch.tensor([0.5, -0.5]), torch.tensor([1.0, 2.0]))
    o("jacobian tuple", torch.autograd.functional.jacobian(exp_adder, ins))

    def pow_reducer(x):
        return x.pow(3).sum()

    o("hessian", torch.autograd.functional.hessian(pow_reducer, torch.tensor([[0.5, 1.0], [1.5, -2.0]])))

    def pow_adder_reducer(x, y):
        return (2 * x.pow(2) + 3 * y.pow(2)).sum()

    o("hessian tuple", torch.autograd.functional.hessian(pow_adder_reducer,
                                                         (torch.tensor([1.0, 2.0]), torch.tensor([3.0, 4.0]))))
    v = torch.ones(2)
    o("vjp", torch.autograd.functional.vjp(exp_reducer, inputs, v))
    o("jvp", torch.autograd.functional.jvp(exp_reducer, inputs, torch.ones(2, 2)))
    o("hvp", torch.autograd.functional.hvp(pow_reducer, torch.tensor([1.0, 2.0]), torch.tensor([1.0, -1.0])))
    o("vhp", torch.autograd.functional.vhp(pow_reducer, torch.tensor([1.0, 2.0]), torch.tensor([1.0, -1.0])))
    o.raises("vjp no v", lambda: torch.autograd.functional.vjp(exp_reducer, inputs),
             "The vector v can only be None if the user-provided function returns a single Tensor with a single element")


@program
def basics_requires_grad_underscore_and_detach(torch, o):
    a = torch.tensor([[1.0, 2.0], [3.0, 4.0]])
    a = ((a * 3) / (a - 1))
    o("a.requires_grad", a.requires_grad)
    a.requires_grad_(True)
    o("a.requires_grad after", a.requires_grad)
    b = (a * a).sum()
    o("b.grad_fn", node_name(b.grad_fn))
    c = a.detach()
    o("c", c)
    o("shares", c.data_ptr() == a.data_ptr())
    with torch.set_grad_enabled(False):
        d = a * 2
    o("d", d.requires_grad)
    torch.set_grad_enabled(True)
    o("enabled", torch.is_grad_enabled())



# ---- Extending PyTorch: custom autograd.Function ----------------------------------------------

def _linear_function(torch):
    class LinearFunction(torch.autograd.Function):
        @staticmethod
        def forward(input, weight, bias):
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def setup_context(ctx, inputs, output):
            input, weight, bias = inputs
            ctx.save_for_backward(input, weight, bias)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    return LinearFunction


@program
def extending_linear_function_setup_context(torch, o):
    LinearFunction = _linear_function(torch)
    x = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.25, -0.5]], dtype=torch.double, requires_grad=True)
    w = torch.tensor([[0.1, 0.2, 0.3], [-0.4, 0.5, 0.6]], dtype=torch.double, requires_grad=True)
    b = torch.tensor([0.01, -0.02], dtype=torch.double, requires_grad=True)
    y = LinearFunction.apply(x, w, b)
    o("y", y)
    o("name", y.grad_fn.name())
    o("needs", y.grad_fn.needs_input_grad)
    y.sum().backward()
    o("grads", [x.grad, w.grad, b.grad])
    o("gradcheck", torch.autograd.gradcheck(LinearFunction.apply, (x, w, b), eps=1e-6, atol=1e-4))
    x2 = x.detach()
    y2 = LinearFunction.apply(x2, w, None)
    o("needs no bias", y2.grad_fn.needs_input_grad)
    o("next", [node_name(n) for n, _ in y2.grad_fn.next_functions])
    w.grad = None
    y2.pow(2).sum().backward()
    o("w.grad no bias", w.grad)
    o("x2.grad", x2.grad)

    class Linear(torch.nn.Module):
        def __init__(self, input_features, output_features, bias=True):
            super().__init__()
            self.input_features = input_features
            self.output_features = output_features
            self.weight = torch.nn.Parameter(torch.empty(output_features, input_features))
            if bias:
                self.bias = torch.nn.Parameter(torch.empty(output_features))
            else:
                self.register_parameter('bias', None)
            with torch.no_grad():
                self.weight.copy_(torch.linspace(-0.3, 0.3, output_features * input_features)
                                  .reshape(output_features, input_features))
                if self.bias is not None:
                    self.bias.fill_(0.05)

        def forward(self, input):
            return LinearFunction.apply(input, self.weight, self.bias)

        def extra_repr(self):
            return f'input_features={self.input_features}, output_features={self.output_features}, bias={self.bias is not None}'

    lin = Linear(3, 2)
    o("repr", repr(lin))
    out = lin(x.float().detach())
    out.sum().backward()
    o("param grads", [p.grad for p in lin.parameters()])
    o("no bias repr", repr(Linear(3, 4, bias=False)))


@program
def extending_mul_constant_non_tensor_arg(torch, o):
    class MulConstant(torch.autograd.Function):
        @staticmethod
        def forward(tensor, constant):
            return tensor * constant

        @staticmethod
        def setup_context(ctx, inputs, output):
            _, constant = inputs
            ctx.constant = constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = MulConstant.apply(x, 2.5)
    o("y", y)
    o("next", [node_name(n) for n, _ in y.grad_fn.next_functions])
    y.backward(torch.tensor([1.0, 0.1, 0.01]))
    o("x.grad", x.grad)

    class MulConstantBad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, tensor, constant):
            ctx.constant = constant
            return tensor * constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, grad_output

    o.raises("grad for non-tensor", lambda: MulConstantBad.apply(x, 3.0).sum().backward(),
             "returned a gradient different than None at position 2, but the corresponding forward input was not a Variable")


@program
def extending_my_cube_double_backward(torch, o):
    class MyCube(torch.autograd.Function):
        @staticmethod
        def forward(x):
            result = x ** 3
            dx = 3 * x ** 2
            return result, dx

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, = inputs
            result, dx = output
            ctx.save_for_backward(x, dx)

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            result = grad_output * dx + grad_dx * 6 * x
            return result

    def my_cube(x):
        result, dx = MyCube.apply(x)
        return result

    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.double, requires_grad=True)
    y = my_cube(x)
    o("y", y)
    g, = torch.autograd.grad(y.sum(), x, create_graph=True)
    o("g", g)
    o("g.grad_fn", node_name(g.grad_fn))
    gg, = torch.autograd.grad(g.sum(), x)
    o("gg", gg)
    o("gradcheck", torch.autograd.gradcheck(my_cube, (x,)))
    o("gradgradcheck", torch.autograd.gradgradcheck(my_cube, (x,)))
    result, dx = MyCube.apply(x)
    o("outputs", [result, dx])
    o("same node", result.grad_fn is dx.grad_fn)
    o("output_nr", [result.output_nr if hasattr(result, "output_nr") else 0, dx.output_nr if hasattr(dx, "output_nr") else 1])


@program
def extending_vmap_generate_rule_and_func_grad(torch, o):
    class MyCube(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(x):
            result = x ** 3
            dx = 3 * x ** 2
            return result, dx

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, = inputs
            result, dx = output
            ctx.save_for_backward(x, dx)

        @staticmethod
        def backward(ctx, grad_output, grad_dx):
            x, dx = ctx.saved_tensors
            return grad_output * dx + grad_dx * 6 * x

    def my_cube(x):
        result, dx = MyCube.apply(x)
        return result

    x = torch.tensor([[0.5, -1.0, 2.0], [1.0, 0.0, -0.5]])
    o("vmap", torch.vmap(my_cube)(x))
    o("vmap in_dims 1", torch.func.vmap(my_cube, in_dims=1)(x))
    o("grad", torch.func.grad(lambda t: my_cube(t).sum())(x[0]))
    o("grad of grad", torch.func.grad(lambda t: torch.func.grad(lambda u: my_cube(u).sum())(t).sum())(x[0]))
    o("vmap grad", torch.func.vmap(torch.func.grad(lambda t: my_cube(t).sum()))(x))
    o("jacrev", torch.func.jacrev(my_cube)(x[0]))

    class NoRule(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x * 2

        @staticmethod
        def setup_context(ctx, inputs, output):
            pass

        @staticmethod
        def backward(ctx, g):
            return g * 2

    o.raises("no vmap rule", lambda: torch.vmap(NoRule.apply)(x), "does not have vmap support")

    class CtxStyle(torch.autograd.Function):
        generate_vmap_rule = True

        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    o.raises("ctx style vmap", lambda: torch.vmap(CtxStyle.apply)(x), "it must override the setup_context staticmethod")


@program
def extending_func_numpy_sort_with_vmap_staticmethod(torch, o):
    import numpy as np

    def to_numpy(tensor):
        return tensor.cpu().numpy()

    class NumpySort(torch.autograd.Function):
        @staticmethod
        def forward(x, dim):
            device = x.device
            x = to_numpy(x)
            ind = np.argsort(x, axis=dim, kind="stable")
            ind_inv = np.argsort(ind, axis=dim, kind="stable")
            result = np.take_along_axis(x, ind, axis=dim)
            return (
                torch.tensor(result, device=device),
                torch.tensor(ind, device=device),
                torch.tensor(ind_inv, device=device),
            )

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, dim = inputs
            _, ind, ind_inv = output
            ctx.mark_non_differentiable(ind, ind_inv)
            ctx.save_for_backward(ind, ind_inv)
            ctx.dim = dim

        @staticmethod
        def backward(ctx, grad_output, _0, _1):
            ind, ind_inv = ctx.saved_tensors
            return NumpyTake.apply(grad_output, ind_inv, ind, ctx.dim), None

        @staticmethod
        def vmap(info, in_dims, x, dim):
            x_bdim, _ = in_dims
            x = x.movedim(x_bdim, 0)
            dim = dim if dim >= 0 else dim + x.dim() - 1
            result = NumpySort.apply(x, dim + 1)
            return NumpySort.apply(x, dim + 1), (0, 0, 0)

    class NumpyTake(torch.autograd.Function):
        @staticmethod
        def forward(x, ind, ind_inv, dim):
            device = x.device
            x = to_numpy(x)
            ind = to_numpy(ind)
            return torch.tensor(np.take_along_axis(x, ind, dim), device=device)

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, ind, ind_inv, dim = inputs
            ctx.save_for_backward(ind, ind_inv)
            ctx.dim = dim

        @staticmethod
        def backward(ctx, grad_output):
            ind, ind_inv = ctx.saved_tensors
            result = NumpyTake.apply(grad_output, ind_inv, ind, ctx.dim)
            return result, None, None, None

        @staticmethod
        def vmap(info, in_dims, x, ind, ind_inv, dim):
            x_bdim, ind_bdim, ind_inv_bdim, _ = in_dims
            logical_dim = x.dim() if x_bdim is None else x.dim() - 1
            dim = dim if dim >= 0 else dim + logical_dim

            def maybe_expand_bdim_at_front(x, x_bdim):
                if x_bdim is None:
                    return x.expand(info.batch_size, *x.shape)
                return x.movedim(x_bdim, 0)

            x = maybe_expand_bdim_at_front(x, x_bdim)
            ind = maybe_expand_bdim_at_front(ind, ind_bdim)
            ind_inv = maybe_expand_bdim_at_front(ind_inv, ind_inv_bdim)
            return NumpyTake.apply(x, ind, ind_inv, dim + 1), 0

    x = torch.tensor([[3.0, 1.0, 2.0], [0.5, -1.0, 4.0]], requires_grad=True)
    y, ind, ind_inv = NumpySort.apply(x, 1)
    o("sorted", [y, ind, ind_inv])
    y.backward(torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]))
    o("grad", x.grad)
    xs = torch.tensor([[[3.0, 1.0], [2.0, 0.0]], [[-1.0, 5.0], [4.0, 2.0]]])
    result = torch.vmap(NumpySort.apply, in_dims=(0, None))(xs, 1)
    o("vmap sort", result)
    g = torch.func.grad(lambda t: (NumpySort.apply(t, 0)[0] * torch.tensor([1.0, 2.0, 3.0])).sum())(
        torch.tensor([2.0, 3.0, 1.0]))
    o("func.grad", g)
    vg = torch.vmap(torch.func.grad(lambda t: (NumpySort.apply(t, 0)[0] * torch.tensor([1.0, 2.0])).sum()))(
        torch.tensor([[2.0, 1.0], [0.0, 3.0]]))
    o("vmap grad", vg)


# ---- Double Backward with Custom Functions ------------------------------------------------------

@program
def double_backward_square_saves_inputs(torch, o):
    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return grad_out * 2 * x

    x = torch.tensor([[0.3, -1.2, 2.0], [1.5, 0.1, -0.7]], requires_grad=True, dtype=torch.double)
    o("gradcheck", torch.autograd.gradcheck(Square.apply, x))
    o("gradgradcheck", torch.autograd.gradgradcheck(Square.apply, x))
    out = Square.apply(x)
    grad_x, = torch.autograd.grad(out.sum(), x, create_graph=True)
    o("grad_x", grad_x)
    o("grad_x.grad_fn", node_name(grad_x.grad_fn))
    o("dag", [node_name(n) for n, _ in grad_x.grad_fn.next_functions])
    ggx, = torch.autograd.grad(grad_x.sum(), x)
    o("ggx", ggx)


@program
def double_backward_exp_saves_outputs(torch, o):
    class Exp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            result = torch.exp(x)
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_out):
            result, = ctx.saved_tensors
            return result * grad_out

    x = torch.tensor([[0.3, -1.2], [1.5, 0.1]], requires_grad=True, dtype=torch.double)
    o("gradcheck", torch.autograd.gradcheck(Exp.apply, x))
    o("gradgradcheck", torch.autograd.gradgradcheck(Exp.apply, x))
    out = Exp.apply(x)
    grad_x, = torch.autograd.grad(out.sum(), x, create_graph=True)
    o("grad_x.grad_fn", node_name(grad_x.grad_fn))
    o("next", [node_name(n) for n, _ in grad_x.grad_fn.next_functions])
    g2, = torch.autograd.grad(grad_x.sum(), x)
    o("g2", g2)


@program
def double_backward_sinh_intermediates(torch, o):
    class Sinh(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.save_for_backward(expx, expnegx)
            return (expx - expnegx) / 2, expx, expnegx

        @staticmethod
        def backward(ctx, grad_out, _grad_out_exp, _grad_out_negexp):
            expx, expnegx = ctx.saved_tensors
            grad_input = grad_out * (expx + expnegx) / 2
            grad_input += _grad_out_exp * expx
            grad_input -= _grad_out_negexp * expnegx
            return grad_input

    def sinh(x):
        return Sinh.apply(x)[0]

    x = torch.tensor([[0.3, -1.2], [1.5, 0.1]], requires_grad=True, dtype=torch.double)
    o("gradcheck", torch.autograd.gradcheck(sinh, x))
    o("gradgradcheck", torch.autograd.gradgradcheck(sinh, x))
    out = sinh(x)
    grad_x, = torch.autograd.grad(out.sum(), x, create_graph=True)
    o("grad_x", grad_x)
    g2, = torch.autograd.grad(grad_x.sum(), x)
    o("g2", g2)

    class SinhBad(torch.autograd.Function):
        # the tutorial's "incorrect" version: intermediates are not outputs, so the second
        # derivative silently misses their contribution
        @staticmethod
        def forward(ctx, x):
            expx = torch.exp(x)
            expnegx = torch.exp(-x)
            ctx.expx = expx
            ctx.expnegx = expnegx
            return (expx - expnegx) / 2

        @staticmethod
        def backward(ctx, grad_out):
            expx = ctx.expx
            expnegx = ctx.expnegx
            grad_input = grad_out * (expx + expnegx) / 2
            return grad_input

    out = SinhBad.apply(x)
    grad_x, = torch.autograd.grad(out.sum(), x, create_graph=True)
    o("bad grad_x requires_grad", grad_x.requires_grad)
    o("bad grad_x", grad_x)
    o.raises("bad second", lambda: torch.autograd.grad(grad_x.sum(), x), "does not require grad")


@program
def double_backward_cube_with_backward_function(torch, o):
    def cube_forward(x):
        return x ** 3

    def cube_backward(grad_out, x):
        return grad_out * 3 * x ** 2

    def cube_backward_backward(grad_out, sav_grad_out, x):
        return grad_out * sav_grad_out * 6 * x

    def cube_backward_backward_grad_out(grad_out, x):
        return grad_out * 3 * x ** 2

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return cube_forward(x)

        @staticmethod
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return CubeBackward.apply(grad_out, x)

    class CubeBackward(torch.autograd.Function):
        @staticmethod
        def forward(ctx, grad_out, x):
            ctx.save_for_backward(x, grad_out)
            return cube_backward(grad_out, x)

        @staticmethod
        def backward(ctx, grad_out):
            x, sav_grad_out = ctx.saved_tensors
            dx = cube_backward_backward(grad_out, sav_grad_out, x)
            dgrad_out = cube_backward_backward_grad_out(grad_out, x)
            return dgrad_out, dx

    x = torch.tensor([[0.3, -1.2], [1.5, 0.1]], requires_grad=True, dtype=torch.double)
    o("gradcheck", torch.autograd.gradcheck(Cube.apply, x))
    o("gradgradcheck", torch.autograd.gradgradcheck(Cube.apply, x))
    out = Cube.apply(x)
    grad_x, = torch.autograd.grad(out.sum(), x, create_graph=True)
    o("grad_x.grad_fn", node_name(grad_x.grad_fn))
    o("dag", [node_name(n) for n, _ in grad_x.grad_fn.next_functions])
    g2, = torch.autograd.grad(grad_x.sum(), x)
    o("g2", g2)


@program
def double_backward_once_differentiable(torch, o):
    from torch.autograd.function import once_differentiable  # noqa: F401 - only torch has it there
    once = torch.autograd.function.once_differentiable

    class Square(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 2

        @staticmethod
        @once
        def backward(ctx, grad_out):
            x, = ctx.saved_tensors
            return grad_out * 2 * x

    x = torch.tensor([0.5, 2.0], requires_grad=True, dtype=torch.double)
    out = Square.apply(x)
    g, = torch.autograd.grad(out.sum(), x, create_graph=True)
    o("g", g)
    o("g.grad_fn", node_name(g.grad_fn))
    # the incoming gradient (ones) does not require grad: the plain error, not once_differentiable's
    o.raises("second", lambda: g.sum().backward(), "does not require grad")
    v = torch.ones(2, dtype=torch.double, requires_grad=True)
    g3, = torch.autograd.grad(Square.apply(x), x, v, create_graph=True)
    o.raises("second with grad requiring grad", lambda: g3.sum().backward(),
             "trying to differentiate twice a function that was marked with @once_differentiable")
    out2 = Square.apply(x)
    g2, = torch.autograd.grad(out2.sum(), x)
    o("g2", g2)
    o.raises("gradgradcheck", lambda: torch.autograd.gradgradcheck(Square.apply, (x,)),
             "Jacobian mismatch for output 0 with respect to input 0")



# ---- Autograd mechanics and "Hooks for autograd saved tensors" --------------------------------

@program
def saved_hooks_tutorial_pack_unpack_log(torch, o):
    log = []

    def pack_hook(x):
        log.append(("Packing", x.detach().clone(), x.requires_grad, node_name(x.grad_fn)))
        return x

    def unpack_hook(x):
        log.append(("Unpacking", x.detach().clone()))
        return x

    a = torch.ones(5, requires_grad=True)
    b = torch.ones(5, requires_grad=True) * 2
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = a * b
    o("after forward", sorted(str(entry[0]) + str(entry[1].tolist()) for entry in log))
    y.sum().backward()
    o("count", len(log))
    o("kinds", sorted(entry[0] for entry in log))
    o("grads", [a.grad])


@program
def saved_hooks_tutorial_scale_and_counter(torch, o):
    x = torch.tensor([0.5, -1.0, 2.0, 3.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(lambda x: x * 4, lambda x: x / 4):
        y = torch.pow(x, 2)
    y.sum().backward()
    o("grad equal", x.grad.equal(2 * x))
    o("grad", x.grad)

    # the hooks change the values backward sees: the gradient is wrong on purpose
    x.grad = None
    with torch.autograd.graph.saved_tensors_hooks(lambda x: x * 4, lambda x: x):
        y = torch.pow(x, 2)
    y.sum().backward()
    o("scaled grad", x.grad)

    counter = [0]

    def pack(t):
        counter[0] += 1
        return t

    def unpack(t):
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, unpack):
        z = (x.exp() * x.sin()).sum()
    o("packed", counter[0])
    z.backward()


@program
def saved_hooks_tutorial_save_to_disk(torch, o):
    import os
    import tempfile
    import uuid

    tmp_dir = tempfile.mkdtemp()
    files = []

    class SelfDeletingTempFile:
        def __init__(self):
            self.name = os.path.join(tmp_dir, str(uuid.uuid4()))

        def __del__(self):
            if os.path.exists(self.name):
                os.remove(self.name)

    def pack_hook(tensor):
        temp_file = SelfDeletingTempFile()
        torch.save(tensor, temp_file.name)
        files.append(temp_file.name)
        return temp_file

    def unpack_hook(temp_file):
        return torch.load(temp_file.name)

    x = torch.tensor([0.25, 0.5, 1.0], requires_grad=True)
    with torch.autograd.graph.saved_tensors_hooks(pack_hook, unpack_hook):
        y = x.pow(2) * x.exp()
    o("files written", len(files))
    o("on disk", all(os.path.exists(f) for f in files))
    y.sum().backward()
    o("grad", x.grad)


@program
def saved_hooks_save_on_cpu_and_inplace(torch, o):
    x = torch.tensor([1.0, 2.0, 3.0], requires_grad=True)
    with torch.autograd.graph.save_on_cpu(pin_memory=False):
        h = x * 2
        y = h.pow(2)
    y.sum().backward()
    o("grad", x.grad)

    # double backward through tensors unpacked by the hooks
    x.grad = None
    with torch.autograd.graph.save_on_cpu():
        y = (x.sin() * x).sum()
    g, = torch.autograd.grad(y, x, create_graph=True)
    o("g", g)
    g.sum().backward()
    o("second", x.grad)
    # an in-place change after saving is not seen: the copy is used
    x.grad = None
    with torch.autograd.graph.save_on_cpu():
        h = x * 1
        y = h.exp()
    h.mul_(100)
    y.sum().backward()
    o("copy used", x.grad)

    # without hooks an in-place change of a saved tensor is caught
    x.grad = None
    a = x * 1
    b = a.exp()
    a.mul_(2)
    o.raises("modified", lambda: (a * b).sum().backward(),
             "one of the variables needed for gradient computation has been modified by an inplace operation")
    c = x * 1
    d = c.sin()
    c.add_(1)
    o("version", c._version)
    o.raises("version words", lambda: d.sum().backward(), "is at version 1; expected version 0 instead")
    o("grad after error", x.grad)


@program
def autograd_mechanics_inplace_and_no_grad(torch, o):
    x = torch.tensor([1.0, -2.0, 3.0], requires_grad=True)
    o.raises("leaf in place", lambda: x.add_(1), "a leaf Variable that requires grad is being used in an in-place operation")
    with torch.no_grad():
        x.add_(1)
    o("x", x)
    o("version", x._version)
    y = x.sigmoid()
    y.mul_(2)
    o.raises("sigmoid output in place", lambda: y.sum().backward(),
             "one of the variables needed for gradient computation has been modified by an inplace operation")
    z = x.relu()
    z.add_(1)  # ReluBackward saves its result: in-place add breaks it
    o.raises("relu", lambda: z.sum().backward(), "modified by an inplace operation")
    w = x * 3
    w.add_(1)  # MulBackward saves the inputs, not the output: fine
    w.sum().backward()
    o("grad", x.grad)
    o("w.grad_fn", node_name(w.grad_fn))
    with torch.inference_mode():
        q = x * 2
    o("inference", [q.requires_grad, torch.is_inference_mode_enabled()])


# ---- tensor and module hooks -------------------------------------------------------------------

@program
def hooks_tensor_register_hook_and_retain_grad(torch, o):
    seen = []
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a * 3
    b.retain_grad()
    c = b.pow(2)
    h = b.register_hook(lambda g: seen.append(g.clone()))
    a.register_hook(lambda g: g * 10)
    c.register_hook(lambda g: g + 1)
    c.sum().backward(retain_graph=True)
    o("seen", seen)
    o("a.grad", a.grad)
    o("b.grad", b.grad)
    o("b.retains_grad", b.retains_grad)
    o("a.retains_grad", a.retains_grad)
    o("c.retains_grad", c.retains_grad)
    h.remove()
    c.sum().backward()
    o("seen after remove", len(seen))
    o("a.grad 2", a.grad)
    o.raises("retain leaf ok", lambda: a.retain_grad(), "")
    d = torch.tensor([1.0])
    o.raises("hook on no-grad", lambda: d.register_hook(lambda g: g),
             "cannot register a hook on a tensor that doesn't require gradient")


@program
def hooks_module_forward_and_pre_hooks(torch, o):
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.ReLU(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]]))
        model[0].bias.copy_(torch.tensor([0.0, 0.1, -0.1]))
        model[2].weight.copy_(torch.tensor([[0.3, -0.2, 0.1]]))
        model[2].bias.fill_(0.05)
    activations = {}

    def get_activation(name):
        def hook(model, input, output):
            activations[name] = output.detach()
        return hook

    handles = [model[0].register_forward_hook(get_activation("fc1")),
               model[1].register_forward_hook(get_activation("relu"))]
    log = []
    pre = model[2].register_forward_pre_hook(lambda m, args: log.append(("pre", type(m).__name__, args[0].shape)))
    x = torch.tensor([[1.0, 2.0], [-1.0, 0.5]])
    out = model(x)
    o("out", out)
    o("fc1", activations["fc1"])
    o("relu", activations["relu"])
    o("log", log)
    # a pre-hook that replaces the input, a forward hook that replaces the output
    model[0].register_forward_pre_hook(lambda m, args: (args[0] * 2,))
    model[2].register_forward_hook(lambda m, args, output: output + 100)
    o("changed", model(x))
    for h in handles:
        h.remove()
    pre.remove()
    activations.clear()
    model(x)
    o("removed", sorted(activations))

    kw_seen = []
    lin = torch.nn.Linear(2, 2)
    lin.register_forward_pre_hook(lambda m, args, kwargs: kw_seen.append(sorted(kwargs)), with_kwargs=True)
    lin.register_forward_hook(lambda m, args, kwargs, out: kw_seen.append(("post", len(args))), with_kwargs=True)
    order = []
    lin.register_forward_hook(lambda m, a, out: order.append("second"))
    lin.register_forward_hook(lambda m, a, out: order.append("first"), prepend=True)
    lin(input=x)
    o("kwargs", kw_seen)
    o("order", order)


@program
def hooks_module_full_backward_hook(torch, o):
    model = torch.nn.Sequential(torch.nn.Linear(2, 3), torch.nn.Tanh(), torch.nn.Linear(3, 1))
    with torch.no_grad():
        model[0].weight.copy_(torch.tensor([[0.1, 0.2], [-0.3, 0.4], [0.5, -0.6]]))
        model[0].bias.copy_(torch.tensor([0.0, 0.1, -0.1]))
        model[2].weight.copy_(torch.tensor([[0.3, -0.2, 0.1]]))
        model[2].bias.fill_(0.05)
    log = []

    def backward_hook(module, grad_input, grad_output):
        log.append((type(module).__name__, grad_input, grad_output))

    def backward_pre_hook(module, grad_output):
        log.append(("pre " + type(module).__name__, grad_output))

    handles = [m.register_full_backward_hook(backward_hook) for m in model]
    handles.append(model[1].register_full_backward_pre_hook(backward_pre_hook))
    x = torch.tensor([[1.0, 2.0], [-1.0, 0.5]], requires_grad=True)
    out = model(x)
    o("out grad_fn", node_name(out.grad_fn))
    o("inner grad_fn", node_name(out.grad_fn.next_functions[0][0]))
    out.sum().backward()
    o("log", log)
    o("x.grad", x.grad)
    o("param grads", [p.grad for p in model.parameters()])

    # the input does not require grad: the first layer's hook gets (None,)
    log.clear()
    out = model(x.detach())
    o.warns("no input grad warns", lambda: out.sum().backward(), "Full backward hook is firing")
    o("log no input grad", log)

    # a hook may replace grad_input
    for h in handles:
        h.remove()
    model[1].register_full_backward_hook(lambda m, gi, go: (gi[0] * 0,))
    x.grad = None
    model.zero_grad()
    model(x).sum().backward()
    o("zeroed", [x.grad, model[0].weight.grad])
    model[2].register_full_backward_pre_hook(lambda m, go: (go[0] * 3,))
    x.grad = None
    model.zero_grad()
    model(x).sum().backward()
    o("pre scaled", [model[2].weight.grad, model[2].bias.grad])

    bad = torch.nn.Linear(2, 2)
    bad.register_full_backward_hook(lambda m, gi, go: (gi[0], gi[0]))
    o.raises("wrong count", lambda: bad(x).sum().backward(),
             "Backward hook returned an invalid number of grad_input, got 2, but expected 1")


@program
def hooks_post_accumulate_grad_optimizer_in_backward(torch, o):
    model = torch.nn.Sequential(torch.nn.Linear(3, 4), torch.nn.ReLU(), torch.nn.Linear(4, 1))
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1))
    optimizer_dict = {p: torch.optim.Adam([p], foreach=False) for p in model.parameters()}

    def optimizer_hook(parameter) -> None:
        optimizer_dict[parameter].step()
        optimizer_dict[parameter].zero_grad()

    for p in model.parameters():
        p.register_post_accumulate_grad_hook(optimizer_hook)
    x = torch.tensor([[1.0, 2.0, 3.0], [-1.0, 0.5, 0.0], [0.2, 0.2, -0.4]])
    target = torch.tensor([[1.0], [0.0], [-1.0]])
    for step in range(3):
        loss = torch.nn.functional.mse_loss(model(x), target)
        loss.backward()
        o(f"loss {step}", loss)
    o("params", list(model.parameters()))
    o("grads are None", [p.grad is None for p in model.parameters()])



# ---- Forward-mode Automatic Differentiation -----------------------------------------------------

def _grid(torch, rows, cols, scale=1.0, shift=0.0):
    return (torch.linspace(-1.0, 1.0, rows * cols).reshape(rows, cols) * scale + shift)


@program
def forward_ad_tutorial_basics(torch, o):
    import torch.autograd.forward_ad as _unused  # noqa: F401 - the tutorial's import, for torch
    fwAD = torch.autograd.forward_ad
    primal = _grid(torch, 4, 4)
    tangent = _grid(torch, 4, 4, scale=0.5, shift=0.25)

    def fn(x, y):
        return x ** 2 + y ** 2

    with fwAD.dual_level():
        dual_input = fwAD.make_dual(primal, tangent)
        o("tangent is", fwAD.unpack_dual(dual_input).tangent is tangent)
        dual_input_alt = fwAD.make_dual(primal, tangent.T)
        o("tangent.T is not", fwAD.unpack_dual(dual_input_alt).tangent is not tangent)
        plain_tensor = _grid(torch, 4, 4, scale=2.0)
        dual_output = fn(dual_input, plain_tensor)
        jvp = fwAD.unpack_dual(dual_output).tangent
        o("jvp", jvp)
        o("primal", fwAD.unpack_dual(dual_output).primal)
        o("namedtuple", [type(fwAD.unpack_dual(dual_output)).__name__, fwAD.unpack_dual(dual_output)._fields])
        p, t = fwAD.unpack_dual(dual_output)
        o("unpacked", [p, t])
        o("plain tangent", fwAD.unpack_dual(plain_tensor).tangent)
    o("after level", fwAD.unpack_dual(dual_output).tangent is None)
    o.raises("make_dual outside", lambda: fwAD.make_dual(primal, tangent),
             "Trying to create a dual Tensor for forward AD but no level exists")


@program
def forward_ad_tutorial_modules(torch, o):
    fwAD = torch.autograd.forward_ad
    model = torch.nn.Linear(5, 5)
    with torch.no_grad():
        model.weight.copy_(_grid(torch, 5, 5, scale=0.3))
        model.bias.copy_(torch.linspace(-0.1, 0.1, 5))
    input = _grid(torch, 3, 5)
    params = {name: p for name, p in model.named_parameters()}
    tangents = {name: torch.ones_like(p) * (i + 1) * 0.1 for i, (name, p) in enumerate(params.items())}
    with fwAD.dual_level():
        for name, p in params.items():
            delattr(model, name)
            setattr(model, name, fwAD.make_dual(p, tangents[name]))
        out = model(input)
        # torch's tangent requires grad here (its addmm formula multiplies the primal weight by
        # a zero tangent); gradviz's does not: compare the values
        o("jvp module", fwAD.unpack_dual(out).tangent.detach())
        o("out", fwAD.unpack_dual(out).primal)

    from torch.func import functional_call  # noqa: F401 - torch's import
    model = torch.nn.Linear(5, 5)
    with torch.no_grad():
        model.weight.copy_(_grid(torch, 5, 5, scale=0.3))
        model.bias.copy_(torch.linspace(-0.1, 0.1, 5))
    dual_params = {}
    with fwAD.dual_level():
        for name, p in params.items():
            dual_params[name] = fwAD.make_dual(p, tangents[name])
        out = torch.func.functional_call(model, dual_params, input)
        o("jvp functional_call", fwAD.unpack_dual(out).tangent.detach())
    o("model untouched", [model.weight, model.bias])
    o("param types", [type(p).__name__ for p in model.parameters()])


@program
def forward_ad_tutorial_custom_function_jvp(torch, o):
    fwAD = torch.autograd.forward_ad

    class Fn(torch.autograd.Function):
        @staticmethod
        def forward(ctx, foo):
            result = torch.exp(foo)
            ctx.result = result
            return result

        @staticmethod
        def jvp(ctx, gI):
            gO = gI * ctx.result
            del ctx.result
            return gO

    fn = Fn.apply
    primal = _grid(torch, 3, 3).double().requires_grad_()
    tangent = _grid(torch, 3, 3, scale=-0.5).double()
    with fwAD.dual_level():
        dual_input = fwAD.make_dual(primal, tangent)
        dual_output = fn(dual_input)
        jvp = fwAD.unpack_dual(dual_output).tangent
    o("jvp", jvp)
    o("gradcheck fw", torch.autograd.gradcheck(Fn.apply, (primal,), check_forward_ad=True,
                                               check_backward_ad=False, check_undefined_grad=False,
                                               check_batched_grad=False))

    class NoJvp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 2

    def run_no_jvp():
        with fwAD.dual_level():
            NoJvp.apply(fwAD.make_dual(primal, tangent))

    class WrongJvp(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_forward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            return g

        @staticmethod
        def jvp(ctx, t):
            x, = ctx.saved_tensors
            return t * x.cos() * 2

    o.raises("wrong jvp", lambda: torch.autograd.gradcheck(WrongJvp.apply, (primal,), check_forward_ad=True,
                                                         check_backward_ad=False, check_undefined_grad=False),
             "Jacobian computed with forward mode mismatch for output 0 with respect to input 0")
    o("gradcheck fw false", torch.autograd.gradcheck(WrongJvp.apply, (primal,), check_forward_ad=True,
                                                     check_backward_ad=False, check_undefined_grad=False,
                                                     raise_exception=False))
    o("gradcheck both", torch.autograd.gradcheck(lambda t: (t * t).exp().sum(0), (primal,), check_forward_ad=True))
    o.raises("no jvp", run_no_jvp, "You must implement the jvp function for custom autograd.Function to use it with forward mode AD")


@program
def forward_ad_tutorial_functional_api(torch, o):
    import functools

    from torch.func import jvp  # noqa: F401 - torch's import

    x = _grid(torch, 2, 3)
    t = _grid(torch, 2, 3, scale=0.5, shift=0.5)
    y = _grid(torch, 2, 3, scale=-2.0)

    def func(x, y):
        return x.sin() * y

    new_func = functools.partial(func, y=y)
    primal_out, tangent_out = torch.func.jvp(new_func, (x,), (t,))
    o("primal_out", primal_out)
    o("tangent_out", tangent_out)

    model = torch.nn.Linear(3, 2)
    with torch.no_grad():
        model.weight.copy_(_grid(torch, 2, 3, scale=0.4))
        model.bias.copy_(torch.tensor([0.1, -0.1]))
    params = dict(model.named_parameters())
    tangents = {k: torch.ones_like(v) for k, v in params.items()}

    def call(params, input):
        return torch.func.functional_call(model, params, (input,))

    out, jvp_out = torch.func.jvp(lambda p: call(p, x), (params,), (tangents,))
    # torch's tangent requires grad (the parameters do); gradviz's does not: compare values
    o("module jvp", [out, jvp_out.detach()])


# ---- torch.func: Jacobians, Hessians, hvp, vhp -------------------------------------------------

@program(1e-5, atol=1e-6)
def func_tutorial_jacobians_hessians(torch, o):
    from functools import partial

    from torch.func import hessian, jacfwd, jacrev, vjp, vmap  # noqa: F401 - torch's imports
    F = torch.nn.functional
    func = torch.func

    def predict(weight, bias, x):
        return F.linear(x, weight, bias).tanh()

    D = 4
    weight = _grid(torch, D, D, scale=0.7)
    bias = torch.linspace(-0.2, 0.3, D)
    x = torch.linspace(-1.0, 1.5, D)

    def compute_jac(xp):
        jacobian_rows = [torch.autograd.grad(predict(weight, bias, xp), xp, vec)[0]
                         for vec in unit_vectors]
        return torch.stack(jacobian_rows)

    xp = x.clone().requires_grad_()
    unit_vectors = torch.eye(D)
    jacobian = compute_jac(xp)
    o("jacobian", jacobian)
    _, vjp_fn = func.vjp(partial(predict, weight, bias), x)
    ft_jacobian, = func.vmap(vjp_fn)(unit_vectors)
    o("vmap vjp", ft_jacobian)
    o("jacrev", func.jacrev(predict, argnums=2)(weight, bias, x))
    ft_jac_weight, ft_jac_bias = func.jacrev(predict, argnums=(0, 1))(weight, bias, x)
    o("jacrev argnums", [ft_jac_weight, ft_jac_bias])
    o("jacfwd", func.jacfwd(predict, argnums=2)(weight, bias, x))
    o("hessian jacrev jacrev", func.jacrev(func.jacrev(predict, argnums=2), argnums=2)(weight, bias, x))
    o("hessian", func.hessian(predict, argnums=2)(weight, bias, x))
    o("hessian jacrev jacfwd", func.jacrev(func.jacfwd(predict, argnums=2), argnums=2)(weight, bias, x))

    batch_size = 3
    xs = _grid(torch, batch_size, D, scale=0.8)
    compute_batch_jacobian = func.vmap(func.jacrev(predict, argnums=2), in_dims=(None, None, 0))
    batch_jacobian0 = compute_batch_jacobian(weight, bias, xs)
    o("batch jacobian", batch_jacobian0)

    def predict_with_output_summed(weight, bias, x):
        return predict(weight, bias, x).sum(0)

    batch_jacobian1 = func.jacrev(predict_with_output_summed, argnums=2)(weight, bias, xs).movedim(1, 0)
    o("summed trick", torch.allclose(batch_jacobian0, batch_jacobian1))
    o("batch hessian", func.vmap(func.hessian(predict, argnums=2), in_dims=(None, None, 0))(weight, bias, xs))

    def hvp(f, primals, tangents):
        return func.jvp(func.grad(f), primals, tangents)[1]

    def f(x):
        return x.sin().sum()

    x = torch.linspace(-1.0, 2.0, 5)
    tangent = torch.linspace(0.5, 1.0, 5)
    o("hvp", hvp(f, (x,), (tangent,)))
    o("hvp expected", -x.sin() * tangent)

    def hvp_revrev(f, primals, tangents):
        _, vjp_fn = func.vjp(func.grad(f), *primals)
        return vjp_fn(*tangents)

    o("hvp revrev", hvp_revrev(f, (x,), (tangent,)))


@program(1e-5, atol=1e-6)
def func_tutorial_per_sample_grads(torch, o):
    from torch.func import functional_call, grad, vmap  # noqa: F401 - torch's imports
    F = torch.nn.functional
    func = torch.func

    class SimpleNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(6, 4)
            self.fc2 = torch.nn.Linear(4, 3)

        def forward(self, x):
            x = x.flatten(1)
            x = F.relu(self.fc1(x))
            x = self.fc2(x)
            return F.log_softmax(x, dim=1)

    model = SimpleNet()
    with torch.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(torch.linspace(-0.6, 0.6, p.numel()).reshape(p.shape) * (1 + 0.3 * i))
    batch_size = 4
    data = _grid(torch, batch_size, 6, scale=2.0).reshape(batch_size, 2, 3)
    targets = torch.tensor([0, 2, 1, 2])

    def loss_fn(predictions, targets):
        return F.nll_loss(predictions, targets)

    def compute_grad(sample, target):
        sample = sample.unsqueeze(0)
        target = target.unsqueeze(0)
        prediction = model(sample)
        loss = loss_fn(prediction, target)
        return torch.autograd.grad(loss, list(model.parameters()))

    def compute_sample_grads(data, targets):
        sample_grads = [compute_grad(data[i], targets[i]) for i in range(batch_size)]
        sample_grads = zip(*sample_grads)
        return [torch.stack(shards) for shards in sample_grads]

    per_sample_grads = compute_sample_grads(data, targets)
    o("manual", per_sample_grads)

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = func.functional_call(model, (params, buffers), (batch,))
        loss = loss_fn(predictions, targets)
        return loss

    ft_compute_grad = func.grad(compute_loss)
    ft_compute_sample_grad = func.vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
    o("keys", list(ft_per_sample_grads))
    o("vmap grads", list(ft_per_sample_grads.values()))
    for per_sample_grad, ft_per_sample_grad in zip(per_sample_grads, ft_per_sample_grads.values()):
        o("close", torch.allclose(per_sample_grad, ft_per_sample_grad, atol=3e-3, rtol=1e-5))
    o("grad_and_value", func.grad_and_value(compute_loss)(params, buffers, data[0], targets[0])[1])


@program(1e-5, atol=1e-6)
def func_tutorial_model_ensembling(torch, o):
    import copy
    F = torch.nn.functional
    func = torch.func

    class SimpleMLP(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = torch.nn.Linear(4, 5)
            self.fc2 = torch.nn.Linear(5, 2)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x)))

    num_models = 3
    models = [SimpleMLP() for _ in range(num_models)]
    with torch.no_grad():
        for m, model in enumerate(models):
            for i, p in enumerate(model.parameters()):
                p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (1 + 0.2 * i + 0.5 * m))
    minibatches = _grid(torch, num_models * 2, 4).reshape(num_models, 2, 4)
    minibatch = minibatches[0]
    predictions_diff_minibatch_loop = [model(mb) for model, mb in zip(models, minibatches)]
    predictions2 = [model(minibatch) for model in models]
    params, buffers = func.stack_module_state(models)
    o("stacked", [(k, v) for k, v in params.items()])
    base_model = copy.deepcopy(models[0])

    def fmodel(params, buffers, x):
        return func.functional_call(base_model, (params, buffers), (x,))

    predictions1_vmap = func.vmap(fmodel)(params, buffers, minibatches)
    o("vmap diff", predictions1_vmap)
    o("close diff", torch.allclose(predictions1_vmap, torch.stack(predictions_diff_minibatch_loop), atol=1e-3, rtol=1e-5))
    predictions2_vmap = func.vmap(fmodel, in_dims=(0, 0, None))(params, buffers, minibatch)
    o("close same", torch.allclose(predictions2_vmap, torch.stack(predictions2), atol=1e-3, rtol=1e-5))
    o("base untouched", list(base_model.parameters()))


@program
def func_tutorial_grad_transform_basics(torch, o):
    func = torch.func
    x = torch.tensor(0.7)
    cos_x = func.grad(lambda x: torch.sin(x))(x)
    o("cos", cos_x)
    neg_sin_x = func.grad(func.grad(lambda x: torch.sin(x)))(x)
    o("-sin", neg_sin_x)

    def f(x, y):
        return (x * y.exp()).sum()

    a, b = torch.tensor([1.0, 2.0]), torch.tensor([0.5, -0.5])
    o("argnums", func.grad(f, argnums=(0, 1))(a, b))
    o("aux", func.grad(lambda x: ((x ** 2).sum(), x.mean()), has_aux=True)(a))
    o("vmap dot", func.vmap(torch.dot)(_grid(torch, 3, 2), _grid(torch, 3, 2, shift=1.0)))
    o("vmap in_dims None", func.vmap(torch.mul, in_dims=(0, None))(_grid(torch, 3, 2), torch.tensor(2.0)))
    o("vmap out_dims", func.vmap(lambda t: t * 2, out_dims=1)(_grid(torch, 3, 2)))
    o("vjp", func.vjp(torch.sin, a)[1](torch.ones(2)))
    o.raises("grad non-scalar", lambda: func.grad(lambda x: x * 2)(a),
             "Expected f(*args) to return a scalar Tensor, got tensor with 1 dims")
    o.raises("vmap size mismatch", lambda: func.vmap(torch.add)(torch.ones(2), torch.ones(3)),
             "Expected all tensors to have the same size in the mapped dimension")
    o.raises("vmap random", lambda: func.vmap(lambda t: t + torch.rand(2))(torch.ones(3, 2)),
             "vmap: called random operation while in randomness error mode")



@program
def functional_jacobian_strategies_and_vectorize(torch, o):
    def exp_adder(x, y):
        return 2 * x.exp() + 3 * y, (x * y).sum()

    inputs = (torch.tensor([0.5, -0.5, 1.0]), torch.tensor([1.0, 2.0, 3.0]))
    AF = torch.autograd.functional
    o("reverse", AF.jacobian(exp_adder, inputs))
    o("reverse vectorized", AF.jacobian(exp_adder, inputs, vectorize=True))
    o("forward", AF.jacobian(exp_adder, inputs, vectorize=True, strategy="forward-mode"))
    o("single forward", AF.jacobian(torch.sin, torch.tensor([[0.1, 0.2], [0.3, 0.4]]),
                                    vectorize=True, strategy="forward-mode"))

    def f(x):
        return (x.sin() * x.pow(2)).sum()

    x = torch.tensor([0.3, -0.7, 1.2])
    o("hessian", AF.hessian(f, x))
    o("hessian fwd-over-rev", AF.hessian(f, x, vectorize=True, outer_jacobian_strategy="forward-mode").detach())
    o("input untouched", x.requires_grad)
    o.raises("forward needs vectorize", lambda: AF.jacobian(torch.sin, x, strategy="forward-mode"),
             "only implemented for `vectorize=True`")
    o.raises("forward create_graph", lambda: AF.jacobian(torch.sin, x, create_graph=True, strategy="forward-mode"),
             '`create_graph=True` and `strategy="forward-mode"` are not supported together')
    o.raises("strict vectorize", lambda: AF.jacobian(torch.sin, x, strict=True, vectorize=True),
             "`strict=True` and `vectorized=True` are not supported together")
    o.raises("bad strategy", lambda: AF.jacobian(torch.sin, x, strategy="sideways"),
             'Expected strategy to be either "forward-mode" or "reverse-mode"')



# ---- autograd mechanics: backward hooks execution ------------------------------------------------

@program
def hooks_node_pre_and_post_hooks_order(torch, o):
    log = []
    a = torch.tensor([1.0, 2.0], requires_grad=True)
    b = a.exp()
    c = b * 3
    c.register_hook(lambda g: log.append(("tensor c", g.clone())))
    b.grad_fn.register_prehook(lambda gO: log.append(("exp prehook", gO[0].clone())))
    b.grad_fn.register_hook(lambda gI, gO: log.append(("exp hook", gI[0].clone(), gO[0].clone())))
    a.register_hook(lambda g: log.append(("leaf a", g.clone())))
    a.register_post_accumulate_grad_hook(lambda p: log.append(("post accumulate", p.grad.clone())))
    c.sum().backward()
    o("log", log)
    o("names", [c.grad_fn.name(), b.grad_fn.name()])
    # a pre-hook that replaces the incoming gradient, a post-hook that replaces the result
    a.grad = None
    d = a.sin()
    d.grad_fn.register_prehook(lambda gO: (gO[0] * 10,))
    d.sum().backward()
    o("prehook scaled", a.grad)
    a.grad = None
    e = a.cos()
    e.grad_fn.register_hook(lambda gI, gO: (gI[0] + 100,))
    e.sum().backward()
    o("posthook replaced", a.grad)


@program
def hooks_tensor_modified_in_place_after_registering(torch, o):
    seen = []
    x = torch.tensor([0.5, 1.0], requires_grad=True)
    t = x.sin()
    t.register_hook(lambda g: seen.append(("before in-place", g.clone())))
    t.mul_(3)  # in-place after registering: the hook sees the gradient of the old value
    t.register_hook(lambda g: seen.append(("after in-place", g.clone())))
    t.sum().backward()
    o("seen", seen)
    o("x.grad", x.grad)
    o("t.grad_fn", node_name(t.grad_fn))


# ---- Extending torch.func with autograd.Function: jvp and setup_context -----------------------------

@program
def extending_func_my_exp_jvp_and_transforms(torch, o):
    class MyExp(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return x.exp()

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(output)
            ctx.save_for_forward(output)

        @staticmethod
        def backward(ctx, grad_output):
            result, = ctx.saved_tensors
            return grad_output * result

        @staticmethod
        def jvp(ctx, x_t):
            result, = ctx.saved_tensors
            return x_t * result

    x = torch.tensor([0.1, -0.4, 1.2])
    t = torch.tensor([1.0, 0.5, -2.0])
    o("jvp", torch.func.jvp(MyExp.apply, (x,), (t,)))
    o("grad no rule", torch.func.grad(lambda v: MyExp.apply(v).sum())(x))
    # jacrev, jacfwd and hessian vmap over the Function: it needs a vmap rule
    for name in ("jacrev", "jacfwd", "hessian"):
        o.raises(name + " without vmap rule", lambda: getattr(torch.func, name)(MyExp.apply)(x),
                 "You tried to vmap over MyExp, but it does not have vmap support")
    MyExp.generate_vmap_rule = True
    o("jacfwd", torch.func.jacfwd(MyExp.apply)(x))
    o("jacrev", torch.func.jacrev(MyExp.apply)(x))
    o("grad", torch.func.grad(lambda v: MyExp.apply(v).sum())(x))
    o("hessian", torch.func.hessian(lambda v: MyExp.apply(v).sum())(x))
    fwAD = torch.autograd.forward_ad
    with fwAD.dual_level():
        out = MyExp.apply(fwAD.make_dual(x, t))
        o("dual", list(fwAD.unpack_dual(out)))



@program
def func_jacobians_of_pytrees(torch, o):
    func = torch.func
    x = torch.tensor([0.5, -1.0])
    y = torch.tensor([[1.0, 2.0], [3.0, 0.5]])

    def f(x, y):
        return x.sin() * 2, (y @ x).exp()

    def g(p, x):
        return (p["w"] @ x + p["b"]).tanh()

    p = {"w": y, "b": torch.tensor([0.1, -0.1])}
    for name in ("jacrev", "jacfwd"):
        jac = getattr(func, name)
        o(name + " tuple outputs", jac(f)(x, y))
        o(name + " argnums", jac(f, argnums=(0, 1))(x, y))
        o(name + " dict params", jac(g)(p, x))
        o(name + " dict outputs", jac(lambda x: {"a": x.sum(), "b": x * x})(x))
        o(name + " aux", jac(lambda x: (x.exp(), x.sum()), has_aux=True)(x))
    hess = func.hessian(lambda p, x: g(p, x).sum())(p, x)
    o("hessian dict", [(k, [(k2, v2) for k2, v2 in v.items()]) for k, v in hess.items()])
    o.raises("jacfwd random", lambda: func.jacfwd(lambda t: t + torch.rand(2))(x),
             "vmap: called random operation while in randomness error mode")
    o("jacfwd same randomness shape", func.jacfwd(lambda t: t * torch.rand(()), randomness="same")(x).shape)



@program
def hooks_multi_grad_hook(torch, o):
    calls = []

    def fn(grads):
        calls.append([g is not None for g in grads])
        calls.append([g for g in grads if g is not None])

    a = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    b = torch.tensor([[0.5, -1.0, 2.0], [1.5, 0.0, -0.5]], requires_grad=True)
    c = a * b
    d = a * b
    handle = torch.autograd.graph.register_multi_grad_hook((a, b, c, d), fn)
    c.sum().backward(retain_graph=True)
    o("c only", calls)
    calls.clear()
    (c + d).sum().backward(retain_graph=True)
    o("both", calls)
    handle.remove()
    calls.clear()
    c.sum().backward(retain_graph=True)
    o("removed", calls)

    first = []
    torch.autograd.graph.register_multi_grad_hook((a, b), lambda g: first.append(g.clone()), mode="any")
    (a * b * 2).sum().backward()
    o("any", len(first))
    o.raises("mode", lambda: torch.autograd.graph.register_multi_grad_hook((a,), fn, mode="some"),
             "Expects mode to be one of ('all', 'any') but got some")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
