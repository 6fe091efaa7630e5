"""Lazy modules (Note [Lazy modules] in gradviz/nn/_lazy.py) against torch's: the repr and the
uninitialized tensors before the first forward, the eager class, shapes and repr after it, the
same forward and gradients as torch given the same weights, the same draws as the eager module
built with the inferred size, an optimizer made before the first forward, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

rng = np.random.default_rng(17)

# (constructor, input shape)
LAZY = {
    "LazyConv1d": (lambda nn: nn.LazyConv1d(4, 3, padding=1), (2, 3, 7)),
    "LazyConv1d no bias": (lambda nn: nn.LazyConv1d(4, 3, bias=False), (2, 3, 7)),
    "LazyConv2d": (lambda nn: nn.LazyConv2d(6, 3, stride=2, padding=1), (2, 3, 7, 7)),
    "LazyConv2d groups": (lambda nn: nn.LazyConv2d(6, 3, groups=2), (2, 4, 5, 5)),
    "LazyConv2d unbatched": (lambda nn: nn.LazyConv2d(2, 2), (3, 5, 5)),
    "LazyConv3d": (lambda nn: nn.LazyConv3d(2, 2), (1, 3, 4, 4, 4)),
    "LazyConvTranspose1d": (lambda nn: nn.LazyConvTranspose1d(3, 2, stride=2), (2, 4, 5)),
    "LazyConvTranspose2d": (lambda nn: nn.LazyConvTranspose2d(3, 2, stride=2), (2, 4, 3, 3)),
    "LazyBatchNorm1d": (lambda nn: nn.LazyBatchNorm1d(), (6, 5)),
    "LazyBatchNorm1d no affine": (lambda nn: nn.LazyBatchNorm1d(affine=False), (6, 5, 3)),
    "LazyBatchNorm2d": (lambda nn: nn.LazyBatchNorm2d(momentum=0.3), (4, 3, 5, 5)),
    "LazyBatchNorm3d": (lambda nn: nn.LazyBatchNorm3d(), (2, 3, 2, 2, 2)),
    "LazyInstanceNorm1d": (lambda nn: nn.LazyInstanceNorm1d(), (2, 3, 6)),
    "LazyInstanceNorm2d": (lambda nn: nn.LazyInstanceNorm2d(affine=False, track_running_stats=False), (2, 3, 4, 4)),
    "LazyInstanceNorm3d": (lambda nn: nn.LazyInstanceNorm3d(), (2, 3, 2, 2, 2)),
    "LazyLinear": (lambda nn: nn.LazyLinear(3), (4, 5)),
}


def kinds(module):
    return ([type(p).__name__ for p in module.parameters()], [type(b).__name__ for b in module.buffers()])


@pytest.mark.parametrize("name", list(LAZY))
def test_a_lazy_module_matches_torch_before_and_after_its_first_forward(name):
    make, shape = LAZY[name]
    ours, theirs = make(gradviz.nn), make(torch.nn)
    assert repr(ours) == repr(theirs)
    assert kinds(ours) == kinds(theirs)
    assert ours.has_uninitialized_params() == theirs.has_uninitialized_params()
    assert isinstance(ours, gradviz.nn.LazyModuleMixin)
    x = rng.standard_normal(shape).astype(np.float32)
    ours(gradviz.tensor(x))
    theirs(torch.tensor(x))
    assert type(ours).__name__ == type(theirs).__name__ and repr(ours) == repr(theirs)
    assert kinds(ours) == kinds(theirs) and not ours._forward_pre_hooks
    state = {key: value.detach().numpy() for key, value in ours.state_dict().items()}
    assert {k: v.shape for k, v in state.items()} == {k: tuple(v.shape) for k, v in theirs.state_dict().items()}
    theirs.load_state_dict({key: torch.tensor(value) for key, value in state.items()})
    # the same forward and gradients from the same weights, now on the eager classes
    x = rng.standard_normal(shape).astype(np.float32)
    a, b = gradviz.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    out_a, out_b = ours(a), theirs(b)
    np.testing.assert_allclose(out_a.detach().numpy(), out_b.detach().numpy(), rtol=1e-4, atol=1e-5)
    out_a.pow(2).sum().backward()
    out_b.pow(2).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), rtol=1e-4, atol=1e-4)
    for (key, p), (_, q) in zip(ours.named_parameters(), theirs.named_parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-4, atol=1e-4, err_msg=key)


@pytest.mark.parametrize("lazy,eager", [
    (lambda nn: nn.LazyConv2d(5, 3, padding=1), lambda nn: nn.Conv2d(3, 5, 3, padding=1)),
    (lambda nn: nn.LazyConvTranspose2d(5, 2), lambda nn: nn.ConvTranspose2d(3, 5, 2)),
    (lambda nn: nn.LazyLinear(4), lambda nn: nn.Linear(3, 4)),
])
def test_a_lazy_module_draws_what_the_eager_one_of_that_size_draws(lazy, eager):
    gradviz.manual_seed(5)
    module = lazy(gradviz.nn)
    module(gradviz.zeros((1, 3, 4, 4) if "Linear" not in repr(module) else (1, 3)))
    gradviz.manual_seed(5)
    reference = eager(gradviz.nn)
    for p, q in zip(module.parameters(), reference.parameters()):
        assert gradviz.equal(p, q)


def test_an_optimizer_made_before_the_first_forward_updates_the_materialized_parameters():
    model = gradviz.nn.Sequential(gradviz.nn.LazyConv2d(4, 3), gradviz.nn.LazyBatchNorm2d(), gradviz.nn.ReLU(),
                                  gradviz.nn.Flatten(), gradviz.nn.LazyLinear(2))
    optimizer = gradviz.optim.SGD(model.parameters(), lr=0.1)
    loss = model(gradviz.randn(2, 3, 6, 6)).sum()
    before = [p.detach().clone() for p in model.parameters()]
    loss.backward()
    optimizer.step()
    assert [type(m).__name__ for m in model] == ["Conv2d", "BatchNorm2d", "ReLU", "Flatten", "Linear"]
    assert all(not gradviz.equal(p, q) for p, q in zip(model.parameters(), before))


@pytest.mark.parametrize("bad", ["groups", "dims", "norm dims"])
def test_lazy_modules_refuse_what_torch_refuses(bad):
    def run(lib):
        nn = lib.nn
        call = {"groups": lambda: nn.LazyConv2d(8, 3, groups=3)(lib.zeros(1, 4, 5, 5)),
                "dims": lambda: nn.LazyConv1d(2, 3)(lib.zeros(3, 3, 3, 3)),
                "norm dims": lambda: nn.LazyBatchNorm2d()(lib.zeros(3, 3))}[bad]
        try:
            call()
        except Exception as error:  # the type and message, compared with torch's
            return type(error).__name__, str(error).replace("torch.", "").replace("gradviz.", "")
        return "accepted"

    assert run(gradviz) == run(torch) != "accepted"


def test_reading_an_uninitialized_buffer_says_to_run_forward_first():
    norm = gradviz.nn.LazyBatchNorm2d()
    assert repr(norm.running_mean) == "<UninitializedBuffer>"
    with pytest.raises(RuntimeError, match="Call `forward` to initialize"):
        norm.running_mean.shape  # noqa: B018
