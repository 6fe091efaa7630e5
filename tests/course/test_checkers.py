"""Each course checker passes the reference answer, fails a wrong one with ``WrongAnswer``
(naming what is wrong), and reports "not answered yet" without raising for the placeholder."""

from __future__ import annotations

import pytest
import torch as real_torch

import gradviz
from gradviz import course

from answers import ANSWERS


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
            self.encoder = real_torch.nn.Sequential(real_torch.nn.Linear(4, 8), real_torch.nn.Tanh())
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
