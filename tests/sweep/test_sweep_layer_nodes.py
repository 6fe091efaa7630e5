"""Conformance sweep, one node per layer: MobileNet-style depthwise-separable blocks, 3-D
convolutions and pools, ``EmbeddingBag`` text classifiers, spatial transformers and bicubic
up-sampling as teaching code writes them, with the graph a debugger draws (node names, the
next functions) and what ``grad_fn._saved_<name>`` shows.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring).
"""

from __future__ import annotations

import pytest
from sweep_harness import check, registry

program = registry()


def _graph(fn):
    """The node names of a backward graph, breadth first (as the debugger lists them), with
    torch's ``torch::autograd::AccumulateGrad`` read as ``AccumulateGrad``."""
    names, seen, queue = [], set(), [fn]
    while queue:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        names.append(node.name().split("::")[-1])
        queue.extend(next_node for next_node, _ in node.next_functions)
    return names


def _nodes(fn, name):
    """The nodes called ``name`` in the graph below ``fn``, breadth first."""
    found, seen, queue = [], set(), [fn]
    while queue:
        node = queue.pop(0)
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        if node.name() == name:
            found.append(node)
        queue.extend(next_node for next_node, _ in node.next_functions)
    return found


def _saved(fn):
    return sorted(name for name in dir(fn) if name.startswith("_saved_"))


@program(1e-5, atol=1e-6)
def mobilenet_depthwise_separable_block(torch, o):
    # MobileNet v1: depthwise 3x3 (groups = channels), BN, ReLU6, pointwise 1x1, BN, ReLU6
    nn = torch.nn
    block = nn.Sequential(nn.Conv2d(4, 4, 3, stride=2, padding=1, groups=4, bias=False),
                          nn.BatchNorm2d(4), nn.ReLU6(inplace=True),
                          nn.Conv2d(4, 8, 1, bias=False), nn.BatchNorm2d(8), nn.ReLU6())
    with torch.no_grad():
        block[0].weight.copy_(torch.linspace(-1, 1, 36).reshape(4, 1, 3, 3))
        block[3].weight.copy_(torch.linspace(1, -1, 32).reshape(8, 4, 1, 1))
    x = torch.linspace(-2, 2, 2 * 4 * 6 * 6).reshape(2, 4, 6, 6).requires_grad_()
    y = block(x)
    o("graph", _graph(y.grad_fn))
    depthwise = _nodes(y.grad_fn, "ConvolutionBackward0")[-1]
    o("depthwise node", depthwise.name())
    o("groups", depthwise._saved_groups)
    o("stride", depthwise._saved_stride)
    o("padding", depthwise._saved_padding)
    o("bias sizes", depthwise._saved_bias_sym_sizes_opt)
    o("saved names", _saved(depthwise))
    y.pow(2).mean().backward()
    o("input grad", x.grad)
    o("depthwise weight grad", block[0].weight.grad)


@program
def grouped_conv1d_over_channels(torch, o):
    # a grouped 1-D convolution (ResNeXt-style cardinality) of a short signal
    x = torch.arange(24.0).reshape(1, 6, 4).requires_grad_()
    w = torch.linspace(-1, 1, 12).reshape(6, 2, 1).requires_grad_()
    y = torch.nn.functional.conv1d(x, w, torch.ones(6), groups=3)
    o("node", y.grad_fn.name())
    o("next", [n.name().split("::")[-1] if n is not None else None
               for n, _ in y.grad_fn.next_functions])
    o("stride", y.grad_fn._saved_stride)
    o("dilation", y.grad_fn._saved_dilation)
    o("output padding", y.grad_fn._saved_output_padding)
    o("transposed", y.grad_fn._saved_transposed)
    y.sum().backward()
    o("x grad", x.grad)
    o("w grad", w.grad)


@program
def video_conv3d_and_pools(torch, o):
    # a tiny video classifier: Conv3d, MaxPool3d, AvgPool3d, AdaptiveAvgPool3d, Linear
    nn = torch.nn
    conv = nn.Conv3d(2, 4, 3, padding=1, groups=2)
    with torch.no_grad():
        conv.weight.copy_(torch.linspace(-0.5, 0.5, 4 * 27).reshape(4, 1, 3, 3, 3))
        conv.bias.copy_(torch.tensor([0.1, -0.1, 0.2, 0.0]))
    clip = torch.linspace(-1, 1, 2 * 2 * 4 * 6 * 6).reshape(2, 2, 4, 6, 6).requires_grad_()
    h = conv(clip)
    o("conv", h.grad_fn.name())
    p = nn.MaxPool3d((1, 2, 2))(h.relu())
    o("max pool", p.grad_fn.name())
    o("max pool kernel", p.grad_fn._saved_kernel_size)
    o("max pool stride", p.grad_fn._saved_stride)
    o("max pool ceil", p.grad_fn._saved_ceil_mode)
    a = nn.AvgPool3d(2, stride=1, padding=1, count_include_pad=False)(p)
    o("avg pool", a.grad_fn.name())
    o("avg pool count_include_pad", a.grad_fn._saved_count_include_pad)
    o("avg pool divisor", a.grad_fn._saved_divisor_override)
    g = nn.AdaptiveAvgPool3d((1, 2, 1))(a)
    o("adaptive", g.grad_fn.name())
    o("adaptive saved", g.grad_fn._saved_self.shape)
    g = nn.AdaptiveAvgPool3d(1)(g)
    o("global average pool", g.grad_fn.name())  # torch takes the mean
    logits = g.flatten(1) @ torch.linspace(-1, 1, 12).reshape(4, 3)
    o("graph", _graph(logits.grad_fn))
    logits.sum().backward()
    o("clip grad", clip.grad)
    o("conv weight grad", conv.weight.grad)


@program
def embedding_bag_text_classifier(torch, o):
    # the torchtext tutorial's model: EmbeddingBag (mean) over a flat batch with offsets
    bag = torch.nn.EmbeddingBag(10, 3, mode="mean")
    with torch.no_grad():
        bag.weight.copy_(torch.linspace(-1, 1, 30).reshape(10, 3))
    text = torch.tensor([1, 2, 4, 5, 4, 3, 2, 9])
    offsets = torch.tensor([0, 2, 5])
    y = bag(text, offsets)
    o("node", y.grad_fn.name())
    o("next", [n.name().split("::")[-1] if n is not None else None
               for n, _ in y.grad_fn.next_functions])
    y.pow(2).sum().backward()
    o("weight grad", bag.weight.grad)
    weights = torch.tensor([1.0, 0.5, 2.0, 1.0, 1.0, 0.0, 1.0, 3.0], requires_grad=True)
    s = torch.nn.functional.embedding_bag(text, bag.weight, offsets, mode="sum",
                                          per_sample_weights=weights)
    o("weighted next", [n.name().split("::")[-1] for n, _ in s.grad_fn.next_functions])
    s.sum().backward()
    o("per-sample weights grad", weights.grad)
    m = torch.nn.functional.embedding_bag(text, bag.weight, offsets, mode="max")
    o("max node", m.grad_fn.name())


@program(1e-5, atol=1e-6)
def spatial_transformer_grid_sample(torch, o):
    # the spatial transformer tutorial: theta -> affine_grid -> grid_sample
    theta = torch.tensor([[[0.9, 0.1, 0.05], [-0.1, 1.1, 0.0]]], requires_grad=True)
    image = torch.linspace(0, 1, 2 * 5 * 6).reshape(1, 2, 5, 6).requires_grad_()
    grid = torch.nn.functional.affine_grid(theta, (1, 2, 4, 4), align_corners=False)
    out = torch.nn.functional.grid_sample(image, grid, padding_mode="border",
                                          align_corners=False)
    o("node", out.grad_fn.name())
    o("next", [n.name().split("::")[-1] for n, _ in out.grad_fn.next_functions[:1]])
    o("interpolation mode", out.grad_fn._saved_interpolation_mode)
    o("padding mode", out.grad_fn._saved_padding_mode)
    o("align corners", out.grad_fn._saved_align_corners)
    o("saved grid", out.grad_fn._saved_grid)
    o("saved names", _saved(out.grad_fn))
    out.pow(2).sum().backward()
    o("theta grad", theta.grad)
    o("image grad", image.grad)


@program(1e-5, atol=1e-6)
def bicubic_upsampling_second_derivative(torch, o):
    # super-resolution: bicubic up-sampling, and a gradient penalty through it
    x = torch.linspace(-1, 1, 2 * 3 * 4).reshape(1, 2, 3, 4).requires_grad_()
    y = torch.nn.functional.interpolate(x, scale_factor=2, mode="bicubic", align_corners=False)
    o("node", y.grad_fn.name())
    o("output size", y.grad_fn._saved_output_size)
    o("scales", (y.grad_fn._saved_scales_h, y.grad_fn._saved_scales_w))
    o("input sizes", y.grad_fn._saved_self_sym_sizes)
    (g,) = torch.autograd.grad(y.sin().sum(), x, create_graph=True)
    o("first", g)
    (gg,) = torch.autograd.grad(g.pow(2).sum(), x)
    o("second", gg)


@program
def packed_sequence_through_lstm(torch, o):
    # the padded-batch RNN tutorial: pack_padded_sequence -> LSTM -> pad_packed_sequence
    lstm = torch.nn.LSTM(2, 3)
    with torch.no_grad():
        for i, p in enumerate(lstm.parameters()):
            p.copy_(torch.linspace(-0.5, 0.5, p.numel()).reshape(p.shape) * (i + 1) / 4)
    batch = torch.linspace(-1, 1, 3 * 4 * 2).reshape(3, 4, 2).requires_grad_()
    packed = torch.nn.utils.rnn.pack_padded_sequence(batch, [4, 3, 1], batch_first=True)
    o("node", packed.data.grad_fn.name())
    o("batch_first", packed.data.grad_fn._saved_batch_first)
    o("batch sizes", packed.data.grad_fn._saved_result1)
    out, _ = lstm(packed)
    padded, lengths = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=True)
    padded.sum().backward()
    o("lengths", lengths)
    o("batch grad", batch.grad)


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
