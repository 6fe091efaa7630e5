"""Each course checker passes the reference answer, fails a wrong one with ``WrongAnswer``
(naming what is wrong), and reports "not answered yet" without raising for the placeholder."""

from __future__ import annotations

import pytest
import torch as real_torch
from answers import ANSWERS

import gradviz
from gradviz import course


def rollup_session():
    """Notebook 05's model: an encoder, three residual blocks (a ModuleList) and a head,
    recorded with its module paths and replayed."""
    real_torch.manual_seed(0)

    class Block(real_torch.nn.Module):
        def __init__(self, width):
            super().__init__()
            self.linear = real_torch.nn.Linear(width, width)

        def forward(self, x):
            return real_torch.tanh(self.linear(x)) + x

    class Model(real_torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.encoder = real_torch.nn.Sequential(real_torch.nn.Linear(4, 8),
                                                    real_torch.nn.Tanh())
            self.blocks = real_torch.nn.ModuleList([Block(8) for _ in range(3)])
            self.head = real_torch.nn.Linear(8, 2)

        def forward(self, x):
            hidden = self.encoder(x)
            for block in self.blocks:
                hidden = block(hidden)
            return self.head(hidden)

    model = Model()
    with gradviz.debug.torch_scopes():
        loss = model(real_torch.ones(3, 4)).pow(2).mean()
    return gradviz.debug.replay(gradviz.debug.record_torch(loss, params=model))


def answer(name: str, which: int):
    variable, *sources = ANSWERS[name]
    # notebook 05 imports PyTorch as torch; the others import gradviz as torch
    namespace = {"torch": real_torch if name in ("torch_silu", "rollup") else gradviz,
                 "course": course}
    if name == "ninja":
        namespace["t"] = course.ninja_forward()
    exec(sources[which], namespace)
    return namespace[variable]


def check(name: str, value):
    if name == "rollup":
        return course.EXERCISES[name](value, rollup_session())
    return course.EXERCISES[name](value)


def test_every_exercise_has_answers():
    assert set(ANSWERS) == set(course.EXERCISES)


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_reference_answer_passes(name, capsys):
    assert check(name, answer(name, 0)) is True
    assert capsys.readouterr().out.startswith("correct")


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_a_wrong_answer_fails(name):
    with pytest.raises(course.WrongAnswer) as error:
        check(name, answer(name, 1))
    assert str(error.value).split(":")[0] != "", error.value


@pytest.mark.parametrize("name", sorted(ANSWERS))
def test_the_placeholder_is_not_answered_yet(name, capsys):
    assert check(name, ...) is False
    assert "not answered yet" in capsys.readouterr().out


def test_a_partial_backprop_names_the_next_step(capsys):
    t = course.ninja_forward()
    n = t["x"].shape[0]
    d = {"logprobs": gradviz.zeros_like(t["logprobs"])}
    d["logprobs"][range(n), t["y"]] = -1.0 / n
    assert course.check_ninja(d) is False
    assert "steps 1-1 are right; not answered yet: step 2, d['probs']" in capsys.readouterr().out


def test_the_wrong_backprop_names_its_first_wrong_step():
    with pytest.raises(course.WrongAnswer, match=r"step 4, d\['counts'\] is the first wrong step"):
        course.check_ninja(answer("ninja", 1))


def test_the_predicted_orders_are_pytorchs():
    """The reference predictions are what PyTorch's engine does, not only what gradviz does."""
    x = real_torch.tensor([0.5, 1.0], requires_grad=True)
    w = real_torch.tensor([2.0, -1.0], requires_grad=True)
    a = x * w
    trace = gradviz.debug.record_torch((a.exp() + a.sin()).sum())
    order = [e["name"] for e in trace.events if e["kind"] == "node_started"]
    assert order == answer("run_order_prediction", 0)

    fired = []
    labels = course._checks.HOOK_LABELS
    x = real_torch.tensor([1.0, 2.0], requires_grad=True)
    y = x * x
    y.grad_fn.register_hook(lambda grad_inputs, grad_outputs: fired.append(labels[2]))
    y.grad_fn.register_prehook(lambda grad_outputs: fired.append(labels[1]))
    x.register_post_accumulate_grad_hook(lambda tensor: fired.append(labels[4]))
    x.register_hook(lambda grad: fired.append(labels[3]))
    y.register_hook(lambda grad: fired.append(labels[0]))
    y.sum().backward()
    assert fired == answer("hook_order", 0)


def test_the_backprop_reference_is_pytorchs_gradient():
    """The hand-written reference of the backprop exercise equals PyTorch's autograd on the
    same forward (so the checker's oracle, gradviz's engine, is checked too)."""
    t = course.ninja_forward()
    d = answer("ninja", 0)
    leaves = {name: real_torch.tensor(t[name].detach().numpy(), requires_grad=True)
              for name in ("W1", "b1", "W2", "b2")}
    x, y = real_torch.tensor(t["x"].numpy()), real_torch.tensor(t["y"].numpy())
    steps = {"h": x @ leaves["W1"] + leaves["b1"]}
    steps["a"] = real_torch.tanh(steps["h"])
    steps["logits"] = steps["a"] @ leaves["W2"] + leaves["b2"]
    steps["counts"] = steps["logits"].exp()
    steps["counts_sum"] = steps["counts"].sum(1, keepdim=True)
    steps["probs"] = steps["counts"] / steps["counts_sum"]
    steps["logprobs"] = steps["probs"].log()
    for value in steps.values():
        value.retain_grad()
    (-steps["logprobs"][real_torch.arange(x.shape[0]), y].mean()).backward()
    steps.update(leaves)
    for name in course.NINJA_STEPS:
        assert real_torch.allclose(real_torch.tensor(d[name].detach().numpy()), steps[name].grad,
                                   atol=1e-6), name
