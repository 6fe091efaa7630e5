"""The module paths torch code imports from (``torch.nn.parameter``, ``torch.nn.modules.loss``,
``torch.optim.optimizer``, ``torch.utils.checkpoint``, ``torch.jit``, ...) exist in gradviz
with the same names, and ``checkpoint`` gives torch's graph, values and gradients."""

from __future__ import annotations

import importlib
import warnings

import numpy as np
import pytest
import torch

import gradviz as gv

PATHS = {
    "nn.parameter": ["Parameter", "UninitializedParameter", "UninitializedBuffer"],
    "nn.modules.loss": ["_Loss", "MSELoss", "CrossEntropyLoss", "NLLLoss", "BCEWithLogitsLoss"],
    "nn.modules.batchnorm": ["_BatchNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d"],
    "nn.modules.instancenorm": ["_InstanceNorm", "InstanceNorm2d"],
    "nn.modules.normalization": ["LayerNorm", "GroupNorm", "RMSNorm"],
    "nn.modules.conv": ["Conv1d", "Conv2d", "Conv3d", "ConvTranspose2d"],
    "nn.modules.dropout": ["_DropoutNd", "Dropout", "Dropout2d"],
    "nn.modules.rnn": ["RNNBase", "RNNCellBase", "LSTM", "GRU", "LSTMCell"],
    "nn.modules.linear": ["Identity", "Linear", "Bilinear"],
    "nn.modules.activation": ["ReLU", "GELU", "MultiheadAttention", "Softmax"],
    "nn.modules.container": ["Sequential", "ModuleList", "ModuleDict"],
    "nn.modules.pooling": ["MaxPool2d", "AdaptiveAvgPool2d"],
    "nn.modules.sparse": ["Embedding", "EmbeddingBag"],
    "nn.modules.transformer": ["TransformerEncoderLayer", "Transformer"],
    "nn.modules.flatten": ["Flatten", "Unflatten"],
    "nn.common_types": ["_size_2_t", "_size_any_t"],
    "nn.attention": ["SDPBackend", "sdpa_kernel"],
    "nn.utils.clip_grad": ["clip_grad_norm_", "clip_grad_value_"],
    "nn.utils.stateless": ["functional_call"],
    "optim.optimizer": ["Optimizer", "required"],
    "utils.checkpoint": ["checkpoint", "checkpoint_sequential"],
    "utils.hooks": ["RemovableHandle"],
    "jit": ["is_scripting", "is_tracing", "ignore", "unused", "export", "script", "trace", "Final"],
}


@pytest.mark.parametrize("path", sorted(PATHS))
def test_the_module_path_exists_with_torchs_names(path):
    ours = importlib.import_module(f"gradviz.{path}")
    theirs = importlib.import_module(f"torch.{path}")
    for name in PATHS[path]:
        assert hasattr(theirs, name), f"torch.{path}.{name}"
        assert hasattr(ours, name), f"gradviz.{path}.{name}"
    assert set(getattr(ours, "__all__", PATHS[path])) <= set(dir(ours))


def test_the_base_classes_cover_their_layers_as_in_torch():
    from gradviz.nn.modules.batchnorm import _BatchNorm
    from gradviz.nn.modules.rnn import RNNBase, RNNCellBase

    assert all(isinstance(m, _BatchNorm) for m in (gv.nn.BatchNorm1d(2), gv.nn.BatchNorm2d(2), gv.nn.BatchNorm3d(2)))
    assert all(isinstance(m, RNNBase) for m in (gv.nn.LSTM(2, 3), gv.nn.GRU(2, 3), gv.nn.RNN(2, 3)))
    assert all(isinstance(m, RNNCellBase) for m in (gv.nn.LSTMCell(2, 3), gv.nn.GRUCell(2, 3)))
    assert gv.nn.RNNBase is RNNBase and gv.nn.parameter.Parameter is gv.nn.Parameter


def _model(m):
    m.manual_seed(0)
    return m.nn.Sequential(m.nn.Linear(4, 5), m.nn.Tanh(), m.nn.Linear(5, 3), m.nn.Sigmoid(), m.nn.Linear(3, 2))


def _copy_weights(source, target):
    for p, q in zip(source.parameters(), target.parameters()):
        with gv.no_grad():
            q.copy_(gv.tensor(p.detach().numpy()))


@pytest.mark.parametrize("use_reentrant", [True, False])
def test_checkpoint_gives_torchs_node_values_and_gradients(use_reentrant):
    data = np.random.default_rng(0).standard_normal((6, 4)).astype(np.float32)
    results = []
    torch_model = _model(torch)
    gv_model = _model(gv)
    _copy_weights(torch_model, gv_model)
    for m, model in ((gv, gv_model), (torch, torch_model)):
        x = m.tensor(data, requires_grad=True)
        out = m.utils.checkpoint.checkpoint(model, x, use_reentrant=use_reentrant)
        node = type(out.grad_fn).__name__
        out.pow(2).sum().backward()
        results.append((node, out.detach().numpy(), x.grad.numpy(), [p.grad.numpy() for p in model.parameters()]))
    (g_node, g_out, g_x, g_params), (t_node, t_out, t_x, t_params) = results
    assert g_node == t_node
    np.testing.assert_allclose(g_out, t_out, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(g_x, t_x, rtol=1e-5, atol=1e-6)
    for a, b in zip(g_params, t_params):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_checkpoint_recomputes_with_the_forward_random_state_and_warns_like_torch():
    def block(a):
        return gv.nn.functional.dropout(a * 3, 0.5, True)

    x = gv.ones(200, requires_grad=True)
    gv.manual_seed(5)
    with pytest.warns(UserWarning, match="use_reentrant parameter should be passed explicitly"):
        out = gv.utils.checkpoint.checkpoint(block, x)
    out.sum().backward()
    kept = out.detach().numpy() != 0
    np.testing.assert_array_equal(x.grad.numpy() != 0, kept)  # the recomputed mask is the forward's
    np.testing.assert_allclose(x.grad.numpy()[kept], 6.0)
    y = gv.ones(3, requires_grad=True)
    for m, leaf in ((gv, y), (torch, torch.ones(3, requires_grad=True))):
        out = m.utils.checkpoint.checkpoint(lambda a, m=m: a.exp(), leaf, use_reentrant=True)
        with pytest.raises(RuntimeError, match="incompatible with .grad"):
            m.autograd.grad(out.sum(), leaf)
        with pytest.warns(UserWarning, match="None of the inputs have requires_grad=True"):
            m.utils.checkpoint.checkpoint(lambda a: a.exp(), m.ones(2), use_reentrant=True)


def test_checkpoint_sequential_matches_torch():
    data = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    torch_model, gv_model = _model(torch), _model(gv)
    _copy_weights(torch_model, gv_model)
    grads = []
    for m, model in ((gv, gv_model), (torch, torch_model)):
        x = m.tensor(data, requires_grad=True)
        m.utils.checkpoint.checkpoint_sequential(model, 2, x, use_reentrant=True).sum().backward()
        grads.append(x.grad.numpy())
    np.testing.assert_allclose(grads[0], grads[1], rtol=1e-5, atol=1e-6)


def test_jit_runs_eagerly():
    assert gv.jit.is_scripting() is torch.jit.is_scripting() is False
    assert gv.jit.is_tracing() is False

    @gv.jit.ignore
    def helper(x):
        return x + 1

    assert helper(1) == 2
    module = gv.nn.Linear(2, 2)
    with pytest.warns(UserWarning, match="runs models eagerly"):
        assert gv.jit.script(module) is module
    with pytest.raises(RuntimeError, match="gradviz has no TorchScript"):
        gv.jit.save(module, "x.pt")


def test_sdpa_kernel_accepts_torchs_backends():
    from gradviz.nn.attention import SDPBackend, sdpa_kernel

    q = gv.randn(1, 2, 3, 4)
    with sdpa_kernel(SDPBackend.MATH), warnings.catch_warnings():
        out = gv.nn.functional.scaled_dot_product_attention(q, q, q)
    assert tuple(out.shape) == (1, 2, 3, 4)
    with pytest.raises(AssertionError, match="Backend must be an instance of SDPBackend"):
        with sdpa_kernel(["math"]):
            pass
