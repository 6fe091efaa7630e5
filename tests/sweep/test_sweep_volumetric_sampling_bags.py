"""Conformance sweep, the layers and checks closed as leftovers: a 3-D CNN on video clips
(Conv3d with groups, BatchNorm3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, padding modules),
a spatial transformer (affine_grid + grid_sample), a bag-of-words classifier (EmbeddingBag),
bicubic resizing, gradcheck's batched checks on a custom Function, and the dtype rules of the
losses, pools and dropout on integer or mixed-precision tensors.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Weights are filled with fixed values in both
libraries.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_harness import check, registry

program = registry()


def _fill(torch, module, scale=0.3):
    """Every parameter set to a scrambled sine (the same values in both libraries)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            values = np.sin(np.arange(p.numel()) * 0.7 + i) * scale
            p.copy_(torch.tensor(values.reshape(tuple(p.shape)), dtype=p.dtype))
    return module


def _data(torch, *shape, shift=0.0, dtype=None):
    n = math.prod(shape)
    return torch.tensor(np.cos(np.arange(n) * 1.3 + shift).reshape(shape),
                        dtype=dtype or torch.float32)


@program(1e-5, atol=1e-6)
def video_cnn_3d(torch, o):
    """A C3D-style clip classifier: two 3-D conv blocks (one grouped, one with replication
    padding), batch norm over (N, D, H, W), max and average pooling over time and space, a
    global adaptive pool and a linear head; one SGD step."""
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv3d(2, 4, 3, padding=1), nn.BatchNorm3d(4), nn.ReLU(),
        nn.MaxPool3d((1, 2, 2), return_indices=False),
        nn.Conv3d(4, 6, (3, 2, 2), padding=(1, 1, 0), groups=2, padding_mode="replicate"),
        nn.ReLU(), nn.AvgPool3d(2, ceil_mode=True, count_include_pad=False),
        nn.AdaptiveAvgPool3d((1, 2, 1)), nn.Flatten(), nn.Linear(12, 3))
    _fill(torch, model)
    o("repr", repr(model))
    clips = _data(torch, 2, 2, 4, 6, 6)
    labels = torch.tensor([0, 2])
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    for step in range(2):
        optimizer.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(clips), labels)
        loss.backward()
        o(f"loss {step}", loss)
        o(f"conv grad {step}", model[0].weight.grad)
        o(f"grouped grad {step}", model[4].weight.grad)
        optimizer.step()
    o("running mean", model[1].running_mean)
    out, indices = torch.nn.functional.max_pool3d(clips, 2, return_indices=True)
    o("pool indices", indices)
    o("reflect", nn.ReflectionPad3d((1, 0, 0, 1, 1, 0))(clips[:1, :1]))
    o.raises("rank", lambda: model(clips[0, 0]), "Expected 4D (unbatched) or 5D (batched) input")


@program(1e-5, atol=1e-6)
def spatial_transformer(torch, o):
    """A spatial transformer: a localization net predicts theta, affine_grid + grid_sample
    warp the image, and the gradient reaches the localization weights through the grid."""
    nn = torch.nn
    localization = nn.Linear(12, 6)
    _fill(torch, localization, 0.1)
    with torch.no_grad():
        localization.bias.copy_(torch.tensor([1.0, 0.0, 0.0, 0.0, 1.0, 0.0]))
    images = _data(torch, 2, 1, 3, 4).requires_grad_()
    theta = localization(images.flatten(1)).view(-1, 2, 3)
    grid = torch.nn.functional.affine_grid(theta, (2, 1, 5, 5), align_corners=False)
    o("grid", grid)
    for padding_mode in ("zeros", "border", "reflection"):
        warped = torch.nn.functional.grid_sample(images, grid, padding_mode=padding_mode,
                                                 align_corners=False)
        o(f"warped {padding_mode}", warped)
    loss = (warped ** 2).sum()
    loss.backward()
    o("loc grad", localization.weight.grad)
    o("image grad", images.grad)
    nearest = torch.nn.functional.grid_sample(images.detach(), grid.detach(), mode="nearest",
                                              align_corners=True)
    o("nearest", nearest)
    o.warns("default align_corners",
            lambda: torch.nn.functional.affine_grid(theta.detach(), (2, 1, 2, 2)),
            "Default grid_sample and affine_grid behavior has changed")
    o("bicubic", torch.nn.functional.interpolate(images.detach(), scale_factor=2, mode="bicubic",
                                                 align_corners=False))


@program(1e-5, atol=1e-6)
def bag_of_words_classifier(torch, o):
    """fastText-style text classification: EmbeddingBag means the word vectors of each
    sentence (offsets mark where sentences start), a linear layer classifies."""
    nn = torch.nn
    bag = nn.EmbeddingBag(20, 4, mode="mean", padding_idx=0)
    head = nn.Linear(4, 2)
    _fill(torch, bag)
    _fill(torch, head)
    o("repr", repr(bag))
    words = torch.tensor([3, 7, 0, 12, 5, 5, 19, 0, 0])
    offsets = torch.tensor([0, 3, 6])
    logits = head(bag(words, offsets))
    loss = torch.nn.functional.cross_entropy(logits, torch.tensor([1, 0, 1]))
    loss.backward()
    o("logits", logits)
    o("embedding grad", bag.weight.grad)
    summed = torch.nn.functional.embedding_bag(
        words, bag.weight.detach(), offsets, mode="sum",
        per_sample_weights=torch.linspace(0.5, 1.5, 9))
    o("weighted sum", summed)
    o("max", torch.nn.functional.embedding_bag(words.view(3, 3), bag.weight.detach(), mode="max"))
    o.raises("weights with mean", lambda: bag(words, offsets, torch.ones(9)),
             "per_sample_weights is only supported for mode='sum'")


@program
def gradcheck_batched(torch, o):
    """Checking a custom Function the way torch's own tests do: gradcheck with the batched
    gradient checks, gradgradcheck over reverse and forward-over-reverse."""

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, g):
            x, = ctx.saved_tensors
            return 3 * x ** 2 * g

    x = torch.tensor([0.5, -1.0, 2.0], dtype=torch.float64, requires_grad=True)
    o("batched", torch.autograd.gradcheck(Cube.apply, (x,), check_batched_grad=True))
    o("gradgrad batched", torch.autograd.gradgradcheck(Cube.apply, (x,), check_batched_grad=True))
    o("fwd over rev", torch.autograd.gradgradcheck(lambda t: t.sin() * t, (x,),
                                                   check_fwd_over_rev=True))
    o.raises("batched forward without forward", lambda: torch.autograd.gradcheck(
        Cube.apply, (x,), check_batched_forward_grad=True),
        "Setting check_batched_forward_grad=True requires check_forward_ad to be True")


@program
def integer_and_mixed_dtypes(torch, o):
    """What beginners feed the layers by accident: integer images into pooling and dropout,
    integer or float64 targets into the losses."""
    F = torch.nn.functional
    image = torch.arange(32).view(1, 2, 4, 4)
    o("avg int64", F.avg_pool2d(image, 2))
    o("avg int64 no pad count", F.avg_pool2d(-image, 3, 1, 1, count_include_pad=False))
    o.raises("avg int32", lambda: F.avg_pool2d(image.int(), 2), "not implemented for 'Int'")
    o("dropout eval", F.dropout(image, 0.5, training=False))
    o("dropout p=1", F.dropout(image, 1.0))
    o.raises("dropout int", lambda: torch.nn.Dropout()(image),
             "result type Float can't be cast to the desired output type Long")
    prediction = torch.tensor([0.5, 1.5, 2.5], requires_grad=True)
    o("mse int target", F.mse_loss(prediction, torch.tensor([1, 1, 3])))
    o("huber f64 target", F.huber_loss(prediction, torch.tensor([1.0, 2.0, 2.0],
                                                                dtype=torch.float64)))
    # the loss takes the target's dtype (float32 here, from a float64 prediction)
    o("bce logits f32 target", F.binary_cross_entropy_with_logits(
        prediction.double(), torch.tensor([1.0, 0.0, 1.0])))
    o.raises("mse ints", lambda: F.mse_loss(torch.tensor([1, 2]), torch.tensor([1, 3])),
             "\"mse_cpu\" not implemented for 'Long'")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
