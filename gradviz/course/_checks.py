"""One checker per "your turn" exercise of the course notebooks (see the package docstring).

Note [What a checker compares with]
-----------------------------------
A checker never stores the answer. Predictions ("which node runs first?") are compared with
what the engine does when the checker runs the same code; hand-written gradients are compared
with the gradients gradviz's engine computes for the same forward, or with central finite
differences in float64. So a checker stays right when the engine changes, and a wrong
engine shows up as a failing reference-answer test rather than as a wrong lesson.
"""

from __future__ import annotations

import numpy as np

from .. import autograd, debug
from .. import ops as _ops
from .._tensor import Tensor
from ..autograd import reference_engine
from ..autograd._functional import make_graph_task
from ..instrument import Recorder

__all__ = ["WrongAnswer", "EXERCISES"]


class WrongAnswer(AssertionError):
    """A "your turn" answer that is not right; the message says what is wrong."""


def _unanswered(answer, name: str) -> bool:
    if answer is Ellipsis:
        print(f"not answered yet: {name} (replace the ... with your answer)")
        return True
    return False


def _correct(name: str, detail: str = "") -> bool:
    print(f"correct: {name}" + (f" ({detail})" if detail else ""))
    return True


def _wrong(name: str, message: str):
    raise WrongAnswer(f"{name}: {message}")


def _values(tensor) -> np.ndarray:
    return np.asarray(tensor.detach().numpy(), dtype=np.float64)


def _close(a, b, tolerance: float = 1e-4) -> bool:
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    return a.shape == b.shape and bool(np.allclose(a, b, rtol=tolerance, atol=tolerance))


def _is_function(answer) -> bool:
    return isinstance(answer, type) and issubclass(answer, autograd.Function)


def _require_function(answer, name: str) -> None:
    if not _is_function(answer):
        _wrong(name, f"expected a subclass of torch.autograd.Function, got {answer!r}")


def _node_names(events, kind: str = "node_started") -> list[str]:
    return [event["name"] for event in events if event["kind"] == kind]


# ---- 02: custom Functions -------------------------------------------------------------------


def check_cube(Cube) -> bool:
    """02, "Cube": ``Cube.apply(x)`` is ``x ** 3``, saves what it needs with
    ``save_for_backward``, and its backward is right and differentiable (double backward)."""
    name = "Cube"
    if _unanswered(Cube, name):
        return False
    _require_function(Cube, name)
    x = _ops.tensor([0.5, -1.5, 2.0], requires_grad=True)
    y = Cube.apply(x)
    if not isinstance(y, Tensor) or not _close(_values(y), _values(x) ** 3):
        _wrong(name, f"forward must return x ** 3 = {(_values(x) ** 3).tolist()}, got {y!r}")
    session = debug.backward(y.sum())
    session.continue_()
    if session.error is not None:
        _wrong(name, f"backward raised {type(session.error).__name__}: {session.error}")
    released = [event for event in session.events if event["kind"] == "saved_released"
                and event["node"] == y.grad_fn.node_id]
    if not released:
        _wrong(name, "the engine freed no saved tensor of CubeBackward: keep x with "
               "ctx.save_for_backward(x) (a plain ctx attribute is never freed, nor checked "
               "for in-place changes)")
    expected = 3 * _values(x) ** 2
    if x.grad is None or not _close(_values(x.grad), expected):
        _wrong(name, f"x.grad should be 3 * x ** 2 = {expected.tolist()}, got "
               f"{None if x.grad is None else _values(x.grad).tolist()}")
    x2 = _ops.tensor([0.5, -1.5, 2.0], requires_grad=True)
    (first,) = autograd.grad(Cube.apply(x2).sum(), x2, create_graph=True)
    if not first.requires_grad:
        _wrong(name, "with create_graph=True the gradient does not require grad, so it cannot be "
               "differentiated again: compute backward with differentiable tensor operations "
               "(and without @once_differentiable)")
    (second,) = autograd.grad(first.sum(), x2)
    if not _close(_values(second), 6 * _values(x2)):
        _wrong(name, f"the second derivative should be 6 * x = {(6 * _values(x2)).tolist()}, got "
               f"{_values(second).tolist()}")
    return _correct(name, "saved tensor released, gradient and double backward right")


def check_needs_input_grad(answer) -> bool:
    """02, "needs_input_grad": the tuple ``ctx.needs_input_grad`` inside
    ``Scale.apply(x, 2.0, w)`` with ``x`` requiring grad and ``w`` not."""
    name = "needs_input_grad"
    if _unanswered(answer, name):
        return False
    seen = []

    class Scale(autograd.Function):
        @staticmethod
        def forward(ctx, x, factor, w):
            seen.append(ctx.needs_input_grad)
            return x * factor * w

        @staticmethod
        def backward(ctx, grad):
            return None, None, None

    Scale.apply(_ops.tensor([1.0], requires_grad=True), 2.0, _ops.tensor([3.0]))
    if not isinstance(answer, tuple) or len(answer) != len(seen[0]):
        _wrong(name, f"expected a tuple with one bool per argument of forward ({len(seen[0])}), "
               f"got {answer!r}")
    if tuple(answer) != tuple(seen[0]):
        wrong_at = next(i for i, (a, b) in enumerate(zip(answer, seen[0])) if a != b)
        _wrong(name, f"entry {wrong_at} is wrong: a float argument never needs a gradient, and a "
               "tensor needs one only when it requires grad")
    return _correct(name)


def check_dirty_add_one(AddOne) -> bool:
    """02, "mark_dirty": ``AddOne.apply(t)`` adds 1 to ``t`` in place through
    ``t.detach().numpy()``, tells the engine with ``ctx.mark_dirty``, returns ``t``, and has
    the identity as its backward."""
    name = "AddOne"
    if _unanswered(AddOne, name):
        return False
    _require_function(AddOne, name)
    a = _ops.tensor([1.0, 2.0], requires_grad=True)
    b = a * 1.0
    version = b._version
    out = AddOne.apply(b)
    if out is not b:
        _wrong(name, "apply must return the very tensor it modified (return x after "
               "ctx.mark_dirty(x)); it returned a different object")
    if not _close(_values(b), [2.0, 3.0]):
        _wrong(name, f"b = a * 1 = [1, 2] should be [2, 3] after AddOne (add 1 exactly once, in "
               f"place), got {_values(b).tolist()}")
    if b._version == version:
        _wrong(name, "the version counter did not move: call ctx.mark_dirty(x) in forward")
    out.sum().backward()
    if a.grad is None or not _close(_values(a.grad), [1.0, 1.0]):
        _wrong(name, f"a.grad should be [1, 1] (adding 1 has derivative 1), got {a.grad}")
    c = _ops.tensor([1.0, 2.0], requires_grad=True)
    d = c * 1.0
    square = d * d  # saves d
    AddOne.apply(d)
    try:
        square.sum().backward()
    except RuntimeError as error:
        if "modified by an inplace operation" not in str(error):
            raise
    else:
        _wrong(name, "a tensor saved by d * d was changed by AddOne, yet backward did not "
               "notice: mark_dirty must bump its version counter")
    return _correct(name, "the version counter moved and the engine caught the stale save")


def _buffer_graph(which: str):
    seen = []

    class FusedMul(autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, grad):
            x, w = ctx.saved_tensors
            x_buffer, _ = ctx.input_grad_buffers
            seen.append(x_buffer is not None)
            return grad * w, grad * x

    x = _ops.tensor([1.0, 2.0], requires_grad=True)
    w = _ops.tensor([3.0, 4.0], requires_grad=True)
    if which == "C":
        loss = (FusedMul.apply(x, w) + x * 3.0).sum()
    else:
        loss = (x * 3.0 + FusedMul.apply(x, w)).sum()
    loss.backward()
    return seen[0]


def check_buffer_prediction(answer) -> bool:
    """02, "input_grad_buffers": ``{"C": bool, "D": bool}``, whether ``FusedMul``'s backward
    is offered ``x``'s buffer in graphs C and D."""
    name = "input_grad_buffers"
    if _unanswered(answer, name):
        return False
    if not isinstance(answer, dict) or set(answer) != {"C", "D"}:
        _wrong(name, f'expected a dict {{"C": True or False, "D": True or False}}, got {answer!r}')
    for graph in ("C", "D"):
        truth = _buffer_graph(graph)
        if bool(answer[graph]) != truth:
            _wrong(name, f"graph {graph}: x's buffer is {'' if truth else 'not '}offered. Which "
                   "node has the higher sequence number, MulBackward0 of x * 3.0 or "
                   "FusedMulBackward? That one runs first.")
    return _correct(name)


# ---- 03: how the engine orders work ---------------------------------------------------------


def _order_graph():
    x = _ops.tensor([0.5, 1.0], requires_grad=True)
    w = _ops.tensor([2.0, -1.0], requires_grad=True)
    a = x * w
    b = a.exp()
    c = a.sin()
    return (b + c).sum(), x, w


def check_run_order_prediction(answer) -> bool:
    """03, "run order": the node names of ``(b + c).sum()`` in the order backward runs them."""
    name = "run order"
    if _unanswered(answer, name):
        return False
    loss, _, _ = _order_graph()
    session = debug.backward(loss)
    session.continue_()
    truth = _node_names(session.events)
    if not isinstance(answer, (list, tuple)) or not all(isinstance(n, str) for n in answer):
        _wrong(name, f"expected a list of node names such as 'SumBackward0', got {answer!r}")
    for position, (guess, actual) in enumerate(zip(answer, truth)):
        if guess != actual:
            _wrong(name, f"position {position}: you said {guess!r}, but {actual!r} runs there "
                   f"(the ready node with the highest sequence number runs first)")
    if len(answer) != len(truth):
        _wrong(name, f"{len(truth)} nodes run, your list has {len(answer)}")
    return _correct(name)


def check_dependency_counts(answer) -> bool:
    """03, "dependencies": ``{"MulBackward0": n, "x": m}``, the dependency counts at
    ``backward_started`` of ``MulBackward0`` and of ``x``'s AccumulateGrad in ``_order_graph``."""
    name = "dependency counts"
    if _unanswered(answer, name):
        return False
    loss, x, _ = _order_graph()
    mul = loss.grad_fn.next_functions[0][0].next_functions[0][0].next_functions[0][0]
    accumulate = mul.next_functions[0][0]
    recorder = Recorder()
    make_graph_task(loss, observer=recorder).run()
    counts = {int(k): v for k, v in recorder.events[0]["dependencies"].items()}
    truth = {"MulBackward0": counts.get(mul.node_id, 0), "x": counts.get(accumulate.node_id, 0)}
    if not isinstance(answer, dict) or set(answer) != set(truth):
        _wrong(name, f'expected a dict {{"MulBackward0": count, "x": count}}, got {answer!r}')
    for key, value in truth.items():
        if answer[key] != value:
            _wrong(name, f"{key}: {answer[key]!r} is wrong; count the edges that reach it from "
                   "nodes that will run")
    return _correct(name)


HOOK_LABELS = ("tensor hook on y", "pre-hook of y.grad_fn", "post-hook of y.grad_fn",
               "tensor hook on x", "post-accumulate hook on x")


def check_hook_order(answer) -> bool:
    """03, "hook order": the labels of ``HOOK_LABELS`` in the order the hooks fire."""
    name = "hook order"
    if _unanswered(answer, name):
        return False
    fired = []
    x = _ops.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: fired.append(HOOK_LABELS[2]))
    y.grad_fn.register_prehook(lambda grad_outputs: fired.append(HOOK_LABELS[1]))
    x.register_post_accumulate_grad_hook(lambda tensor: fired.append(HOOK_LABELS[4]))
    x.register_hook(lambda grad: fired.append(HOOK_LABELS[3]))
    y.register_hook(lambda grad: fired.append(HOOK_LABELS[0]))
    y.sum().backward()
    if not isinstance(answer, (list, tuple)) or sorted(answer) != sorted(fired):
        _wrong(name, f"expected the five labels {list(HOOK_LABELS)} in some order, got {answer!r}")
    for position, (guess, actual) in enumerate(zip(answer, fired)):
        if guess != actual:
            _wrong(name, f"position {position}: you said {guess!r}, but {actual!r} fires there")
    return _correct(name)


# ---- 04: hunting wrong gradients ------------------------------------------------------------


def check_fixed_softplus(Softplus) -> bool:
    """04, "fix the backward": ``Softplus.apply(x)`` is ``log(1 + exp(x))`` and the doctor
    finds nothing wrong with it."""
    name = "Softplus"
    if _unanswered(Softplus, name):
        return False
    _require_function(Softplus, name)
    x = _ops.tensor([-2.0, -0.5, 0.0, 1.0, 3.0], requires_grad=True)
    y = Softplus.apply(x)
    expected = np.log1p(np.exp(_values(x)))
    if not _close(_values(y), expected):
        _wrong(name, f"forward should be log(1 + exp(x)) = {expected.round(4).tolist()}")
    report = debug.doctor((y * _ops.tensor([1.0, -2.0, 3.0, 0.5, 1.5])).sum(), model_checks=False)
    if report.findings:
        _wrong(name, "the doctor still finds: " + "; ".join(f.message for f in report.findings))
    return _correct(name, "the doctor finds nothing")


def check_reconnected_model(forward) -> bool:
    """04, "a broken graph": ``forward(x, w1, w2)`` returns a loss from which both ``w1`` and
    ``w2`` get the right gradient of ``((tanh(x @ w1) @ w2) ** 2).mean()``."""
    name = "reconnected model"
    if _unanswered(forward, name):
        return False
    if not callable(forward):
        _wrong(name, f"expected a function forward(x, w1, w2), got {forward!r}")
    generator = np.random.default_rng(3)
    x = _ops.tensor(generator.normal(size=(4, 3)).astype(np.float32))
    w1 = _ops.tensor(generator.normal(size=(3, 5)).astype(np.float32), requires_grad=True)
    w2 = _ops.tensor(generator.normal(size=(5, 2)).astype(np.float32), requires_grad=True)
    forward(x, w1, w2).backward()
    for label, tensor in (("w1", w1), ("w2", w2)):
        if tensor.grad is None:
            _wrong(name, f"{label}.grad is None: the path from the loss to {label} is still cut "
                   "(a .detach(), .numpy() or a new tensor built from values)")
    hidden = np.tanh(_values(x) @ _values(w1))
    out = hidden @ _values(w2)
    d_out = 2 * out / out.size
    expected_w2 = hidden.T @ d_out
    expected_w1 = _values(x).T @ ((d_out @ _values(w2).T) * (1 - hidden ** 2))
    for label, tensor, expected in (("w1", w1, expected_w1), ("w2", w2, expected_w2)):
        if not _close(_values(tensor.grad), expected):
            _wrong(name, f"{label}.grad is not the gradient of the model's loss")
    return _correct(name)


#: The intermediate gradients of the backprop exercise, in the order they are computed.
NINJA_STEPS = ("logprobs", "probs", "counts_sum", "counts", "logits", "W2", "b2", "a", "h",
               "W1", "b1")


def ninja_forward(seed: int = 0) -> dict:
    """The two-layer MLP of the backprop exercise: a dict of every tensor of its forward pass
    (each intermediate ``retain_grad()``-ed) and ``loss``, the mean cross-entropy, written out
    step by step (``logits`` -> ``counts`` -> ``probs`` -> ``logprobs``)."""
    generator = np.random.default_rng(seed)
    n, d, hidden, classes = 8, 5, 6, 4
    def parameter(shape, scale):
        values = (generator.normal(size=shape) * scale).astype(np.float32)
        return _ops.tensor(values, requires_grad=True)

    t = {"x": _ops.tensor(generator.normal(size=(n, d)).astype(np.float32)),
         "y": _ops.tensor(generator.integers(0, classes, size=n))}
    t["W1"], t["b1"] = parameter((d, hidden), 0.5), parameter(hidden, 0.1)
    t["W2"], t["b2"] = parameter((hidden, classes), 0.5), parameter(classes, 0.1)
    t["h"] = t["x"] @ t["W1"] + t["b1"]
    t["a"] = _ops.tanh(t["h"])
    t["logits"] = t["a"] @ t["W2"] + t["b2"]
    t["counts"] = t["logits"].exp()
    t["counts_sum"] = t["counts"].sum(1, keepdim=True)
    t["probs"] = t["counts"] / t["counts_sum"]
    t["logprobs"] = t["probs"].log()
    t["loss"] = -t["logprobs"][_ops.arange(n), t["y"]].mean()
    for key in ("h", "a", "logits", "counts", "counts_sum", "probs", "logprobs"):
        t[key].retain_grad()
    return t


def check_ninja_steps(d: dict, t: dict) -> int:
    """Compare each of ``d[step]`` (in ``NINJA_STEPS`` order) with the gradient gradviz's engine
    computed for ``t[step]``; returns how many steps are answered, raises at the first wrong one."""
    name = "backprop by hand"
    if t["loss"].grad_fn is not None and t["logprobs"].grad is None:
        t["loss"].backward(retain_graph=True)
    for index, step in enumerate(NINJA_STEPS):
        answer = d.get(step, Ellipsis)
        if answer is Ellipsis:
            return index
        expected = _values(t[step].grad)
        got = np.asarray(answer.detach().numpy() if isinstance(answer, Tensor) else answer,
                         dtype=np.float64)
        if got.shape != expected.shape:
            _wrong(name, f"step {index + 1}, d[{step!r}]: shape {list(got.shape)}, expected "
                   f"{list(expected.shape)} (a gradient has the shape of its tensor)")
        if not _close(got, expected):
            error = float(np.max(np.abs(got - expected)))
            _wrong(name, f"step {index + 1}, d[{step!r}] is the first wrong step (largest error "
                   f"{error:.3g}); the steps before it are right")
    return len(NINJA_STEPS)


def check_ninja(d) -> bool:
    """04, "backprop by hand": ``d`` maps each name of ``NINJA_STEPS`` to the learner's gradient
    of the loss with respect to that tensor of ``ninja_forward()``."""
    name = "backprop by hand"
    if _unanswered(d, name):
        return False
    if not isinstance(d, dict):
        _wrong(name, f"expected a dict of gradients, got {type(d).__name__}")
    answered = check_ninja_steps(d, ninja_forward())
    if answered < len(NINJA_STEPS):
        if answered:
            print(f"steps 1-{answered} are right; ", end="")
        print(f"not answered yet: step {answered + 1}, d[{NINJA_STEPS[answered]!r}]")
        return False
    return _correct(name, f"all {len(NINJA_STEPS)} steps match gradviz's gradients")


# ---- 05: a real PyTorch model ---------------------------------------------------------------


def check_torch_silu(SiLU) -> bool:
    """05, "fix a torch Function": ``SiLU.apply(x)`` (a ``torch.autograd.Function``) is
    ``x * sigmoid(x)`` and gradviz's doctor finds nothing wrong with its backward."""
    import torch  # the PyTorch notebook's checker needs PyTorch, and only it

    name = "SiLU"
    if _unanswered(SiLU, name):
        return False
    if not (isinstance(SiLU, type) and issubclass(SiLU, torch.autograd.Function)):
        _wrong(name, f"expected a subclass of torch.autograd.Function, got {SiLU!r}")
    x = torch.tensor([-3.0, -0.5, 0.0, 0.7, 2.0], requires_grad=True)
    y = SiLU.apply(x)
    if not torch.allclose(y, torch.nn.functional.silu(x.detach()), atol=1e-5):
        _wrong(name, "forward should be x * sigmoid(x)")
    report = debug.doctor((y * torch.tensor([1.0, -1.0, 2.0, 0.5, 3.0])).sum(), model_checks=False)
    if report.findings:
        _wrong(name, "the doctor still finds: " + "; ".join(f.message for f in report.findings))
    return _correct(name, "the doctor finds nothing")


def check_rollup_answer(answer, session) -> bool:
    """05, "navigate": the dotted module name that holds the most nodes of ``session``'s graph,
    the whole model (``""``) aside."""
    name = "largest module"
    if _unanswered(answer, name):
        return False
    modules = [m for m in session.rollup()["modules"] if m["name"]]
    biggest = max(m["count"] for m in modules)
    winners = sorted(m["name"] for m in modules if m["count"] == biggest)
    if answer not in winners:
        known = {m["name"]: m["count"] for m in modules}
        detail = (f"{answer!r} holds {known[answer]} nodes" if answer in known
                  else f"{answer!r} is not a module path of this graph")
        _wrong(name, f"{detail}; look at the 'count' of each entry of session.rollup()['modules']")
    return _correct(name, f"{answer} holds {biggest} nodes")


# ---- 06: inside the engine ------------------------------------------------------------------


def _order_programs():
    def fan_in():
        x = _ops.tensor([0.5, 1.0], requires_grad=True)
        a = x * 2.0
        return (a.exp() + a.sin() * a).sum()

    def two_leaves():
        x = _ops.tensor([0.5, 1.0], requires_grad=True)
        w = _ops.tensor([1.5, -1.0], requires_grad=True)
        return (_ops.tanh(x * w) * w).sum()

    def chain_and_branch():
        x = _ops.tensor([0.5, 1.0], requires_grad=True)
        b = x.cos()
        c = b * b
        return (c.exp().sum() + b.sum()) * 2.0
    return {"fan_in": fan_in, "two_leaves": two_leaves, "chain_and_branch": chain_and_branch}


def check_run_order(run_order) -> bool:
    """06, "your own scheduler": ``run_order(root)`` returns the names of the nodes that
    backward from the node ``root`` runs, in the engine's order, without running anything."""
    name = "run_order"
    if _unanswered(run_order, name):
        return False
    if not callable(run_order):
        _wrong(name, f"expected a function run_order(root), got {run_order!r}")
    for label, program in _order_programs().items():
        loss = program()
        # node.name() of an AccumulateGrad is torch's 'torch::autograd::AccumulateGrad'
        mine = [str(n).rsplit("::", 1)[-1] for n in run_order(loss.grad_fn)]
        recorder = Recorder()
        make_graph_task(loss, observer=recorder).run()
        truth = _node_names(recorder.events)
        for position, (guess, actual) in enumerate(zip(mine, truth)):
            if guess != actual:
                _wrong(name, f"graph {label!r}, position {position}: your order has {guess!r}, "
                       f"the engine runs {actual!r} (engine order: {truth})")
        if len(mine) != len(truth):
            _wrong(name, f"graph {label!r}: the engine runs {len(truth)} nodes, your order has "
                   f"{len(mine)}")
    return _correct(name, f"same order as the engine on {len(_order_programs())} graphs")


def check_reference_buffers(answer) -> bool:
    """06, "what the reference engine offers": what ``ctx.input_grad_buffers`` holds when the
    reference engine runs graph A of notebook 02 (``y = FusedMul(x, w); (y * x).sum()``)."""
    name = "reference buffers"
    if _unanswered(answer, name):
        return False
    seen = []

    class FusedMul(autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            ctx.save_for_backward(x, w)
            return x * w

        @staticmethod
        def backward(ctx, grad):
            seen.append(tuple(ctx.input_grad_buffers))
            x, w = ctx.saved_tensors
            return grad * w, grad * x

    x = _ops.tensor([1.0, 2.0], requires_grad=True)
    w = _ops.tensor([3.0, 4.0], requires_grad=True)
    reference_engine.backward((FusedMul.apply(x, w) * x).sum())
    truth = seen[0]
    if not isinstance(answer, tuple) or len(answer) != len(truth) or any(
            (a is None) != (b is None) for a, b in zip(answer, truth)):
        _wrong(name, f"the reference engine offers {truth!r}; read expose_input_buffers in "
               "gradviz/autograd/reference_engine.py")
    return _correct(name)


#: Every exercise's checker, by the name the tests use.
EXERCISES = {
    "cube": check_cube, "needs_input_grad": check_needs_input_grad,
    "add_one": check_dirty_add_one, "buffers": check_buffer_prediction,
    "run_order_prediction": check_run_order_prediction,
    "dependency_counts": check_dependency_counts, "hook_order": check_hook_order,
    "softplus": check_fixed_softplus, "reconnect": check_reconnected_model,
    "ninja": check_ninja, "torch_silu": check_torch_silu, "rollup": check_rollup_answer,
    "run_order": check_run_order, "reference_buffers": check_reference_buffers,
}
