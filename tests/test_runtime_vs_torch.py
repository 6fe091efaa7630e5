"""The process-wide switches training scripts call, against torch: the random generator's
state (save, restore, fork), threads, deterministic algorithms and ``compile``
(Note [Runtime switches] in gradviz/_runtime.py, Note [Generator state] in ops/_creation.py)."""

from __future__ import annotations

import pytest
import torch

import gradviz
from gradviz import _runtime

LIBRARIES = {"gradviz": gradviz, "torch": torch}


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_saving_and_restoring_the_rng_state_repeats_the_draws(library, tmp_path):
    lib = LIBRARIES[library]
    lib.manual_seed(11)
    state = lib.get_rng_state()
    first = (lib.rand(4), lib.randn(2, 3), lib.randint(0, 9, (5,)), lib.randperm(6))
    lib.set_rng_state(state)
    again = (lib.rand(4), lib.randn(2, 3), lib.randint(0, 9, (5,)), lib.randperm(6))
    assert all(lib.equal(a, b) for a, b in zip(first, again))
    assert state.dtype is lib.uint8 and state.ndim == 1
    lib.save({"rng": state}, tmp_path / "checkpoint.pt")   # the checkpointing pattern
    lib.set_rng_state(lib.load(tmp_path / "checkpoint.pt")["rng"])
    assert lib.equal(lib.rand(4), first[0])


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_fork_rng_leaves_the_default_stream_where_it_was(library):
    lib = LIBRARIES[library]
    lib.manual_seed(3)
    expected = lib.rand(3)
    lib.manual_seed(3)
    with lib.random.fork_rng():
        lib.rand(100)
    assert lib.equal(lib.rand(3), expected)
    lib.manual_seed(3)
    with lib.random.fork_rng(enabled=False):
        lib.rand(1)
    assert not lib.equal(lib.rand(3), expected)


@pytest.mark.parametrize("library", list(LIBRARIES))
def test_a_generator_state_restores_its_own_stream(library):
    lib = LIBRARIES[library]
    generator = lib.Generator().manual_seed(5)
    state = generator.get_state()
    drawn = lib.randn(3, generator=generator)
    lib.randn(3)   # the default stream does not interfere
    generator.set_state(state)
    assert lib.equal(lib.randn(3, generator=generator), drawn) and generator.initial_seed() == 5
    assert lib.random.default_generator is lib.default_generator


@pytest.mark.parametrize("bad", ["float tensor", "wrong size", "list"])
def test_bad_rng_states_are_refused_as_torch_refuses_them(bad):
    def run(lib):
        value = {"float tensor": lib.tensor([1.0]), "wrong size": lib.zeros(10, dtype=lib.uint8),
                 "list": [1, 2]}[bad]
        try:
            lib.set_rng_state(value)
        except Exception as error:  # compared with torch's (the state size is gradviz's own)
            return type(error).__name__, str(error).split(" of size")[0]
        return "accepted"

    assert run(gradviz) == run(torch) != "accepted"


def test_set_num_threads_limits_numpy_pools_and_refuses_what_torch_refuses():
    previous = gradviz.get_num_threads()
    try:
        gradviz.set_num_threads(1)
        assert gradviz.get_num_threads() == 1
        for bad in (0, -2, "a", 1.5):
            ours, theirs = [_error(lambda lib=lib: lib.set_num_threads(bad)) for lib in (gradviz, torch)]
            assert ours == theirs and ours is not None, bad
    finally:
        gradviz.set_num_threads(previous)
        _runtime._num_threads = None


def _error(call):
    try:
        call()
    except Exception as error:  # the type and message, compared with torch's
        return type(error).__name__, str(error)
    return None


def test_deterministic_algorithm_flags_match_torch():
    try:
        for lib in LIBRARIES.values():
            lib.use_deterministic_algorithms(True, warn_only=True)
        assert gradviz.are_deterministic_algorithms_enabled() == torch.are_deterministic_algorithms_enabled()
        assert gradviz.is_deterministic_algorithms_warn_only_enabled() is True
        assert _error(lambda: gradviz.use_deterministic_algorithms("x")) == \
            _error(lambda: torch.use_deterministic_algorithms("x"))
    finally:
        for lib in LIBRARIES.values():
            lib.use_deterministic_algorithms(False)
    assert gradviz.are_deterministic_algorithms_enabled() is False


def test_compile_runs_the_model_eagerly_with_the_same_results():
    gradviz.manual_seed(0)
    model = gradviz.nn.Sequential(gradviz.nn.Linear(3, 4), gradviz.nn.Tanh())
    compiled = gradviz.compile(model, mode="max-autotune")
    assert compiled is model

    @gradviz.compile(fullgraph=True)
    def loss_of(x):
        return model(x).pow(2).sum()

    x = gradviz.randn(2, 3)
    loss_of(x).backward()
    grad = model[0].weight.grad.clone()
    model.zero_grad()
    model(x).pow(2).sum().backward()
    assert gradviz.equal(grad, model[0].weight.grad)
    with pytest.raises(RuntimeError, match="Either mode or options"):
        gradviz.compile(model, mode="default", options={})
