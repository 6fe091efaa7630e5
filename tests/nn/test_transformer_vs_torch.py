"""nn.MultiheadAttention, F.multi_head_attention_forward and the Transformer layers against
torch 2.13: outputs, attention weights and the gradients of every input and parameter (torch's
weights loaded through state_dict), batch_first both ways, bool and float masks, key padding,
causal masks, need_weights / average_attn_weights, norm_first, activations; state_dict keys,
repr, init, errors and warnings; gradcheck in float64."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import torch
from layer_compare import close, compare_layer, same_error

import gradviz

E, HEADS = 8, 2


def _lib(t):
    return gradviz if isinstance(t, gradviz.Tensor) else torch


def _x(shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape)


def _causal(n):
    return np.triu(np.ones((n, n), dtype=bool), 1)


def _padding(batch, length):
    mask = np.zeros((batch, length), dtype=bool)
    mask[0, -2:] = True
    mask[-1, -1] = True
    return mask


# ---- MultiheadAttention ---------------------------------------------------------------------

@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("need_weights,average", [(True, True), (True, False), (False, True)])
def test_self_attention(batch_first, need_weights, average, dtype):
    x = _x((3, 5, E) if batch_first else (5, 3, E))
    outs, _ = compare_layer(
        lambda nn: nn.MultiheadAttention(E, HEADS, batch_first=batch_first), [x], dtype,
        forward=lambda m, t: m(t, t, t, need_weights=need_weights, average_attn_weights=average))
    assert (len(outs) == 2) == need_weights


MASK_CASES = ["bool 2d", "float 2d", "bool 3d", "padding", "padding float", "padding + causal",
              "causal hint"]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("need_weights", [True, False])
@pytest.mark.parametrize("case", MASK_CASES)
def test_masks(case, need_weights, dtype):
    L, N = 5, 3
    x = _x((N, L, E), 1)
    arrays, grad = [x], [True]
    if case == "bool 2d":
        arrays.append(_causal(L))
    elif case == "float 2d":
        arrays.append(np.where(_causal(L), -1e9, 0.0) + _x((L, L), 2) * 0.1)
    elif case == "bool 3d":
        arrays.append((np.random.default_rng(3).random((N * HEADS, L, L)) < 0.3) & ~np.eye(L, dtype=bool))
    elif case in ("padding", "padding + causal"):
        arrays.append(_padding(N, L))
    elif case == "padding float":
        arrays.append(np.where(_padding(N, L), -np.inf, 0.0))
    elif case == "causal hint":
        arrays.append(np.where(_causal(L), -np.inf, 0.0))
    grad += [False] * (len(arrays) - 1)
    if case == "bool 3d":
        arrays[1][:, :, 0] = False  # every query keeps one key

    def forward(m, t, mask=None):
        lib = _lib(t)
        if mask is not None and mask.dtype.is_floating_point:
            mask = mask.to(t.dtype)
        kw = dict(need_weights=need_weights)
        if case.startswith("padding"):
            kw["key_padding_mask"] = mask
            if case == "padding + causal":
                kw["attn_mask"] = lib.tensor(_causal(L))
        elif case == "causal hint":
            kw.update(attn_mask=mask, is_causal=True)
        else:
            kw["attn_mask"] = mask
        return m(t, t, t, **kw)

    compare_layer(lambda nn: nn.MultiheadAttention(E, HEADS, batch_first=True), arrays, dtype,
                  forward=forward, grad_inputs=grad)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kw", [dict(), dict(bias=False), dict(add_bias_kv=True), dict(add_zero_attn=True),
                                dict(kdim=6, vdim=4), dict(kdim=6, vdim=4, bias=False, add_bias_kv=True)],
                         ids=str)
def test_cross_attention_and_options(kw, dtype):
    L, S, N = 4, 6, 2
    q, k, v = _x((L, N, E), 4), _x((S, N, kw.get("kdim", E)), 5), _x((S, N, kw.get("vdim", E)), 6)
    mask = np.zeros((N, S), dtype=bool)
    mask[1, -1] = True
    compare_layer(lambda nn: nn.MultiheadAttention(E, HEADS, **kw), [q, k, v, mask], dtype,
                  forward=lambda m, a, b, c, pad: m(a, b, c, key_padding_mask=pad, average_attn_weights=False))
    if "kdim" not in kw:  # key is value: the packed in-projection's split path
        compare_layer(lambda nn: nn.MultiheadAttention(E, HEADS, **kw), [q, k], dtype,
                      forward=lambda m, a, b: m(a, b, b))


def test_unbatched_and_functional_form():
    x, mask = _x((5, E), 7), _causal(5)
    compare_layer(lambda nn: nn.MultiheadAttention(E, HEADS), [x, mask], forward=lambda m, t, k: m(t, t, t, attn_mask=k))
    compare_layer(lambda nn: nn.MultiheadAttention(E, HEADS), [x, mask[0]],
                  forward=lambda m, t, k: m(t, t, t, key_padding_mask=k, need_weights=False))

    def functional(m, q, k, v):
        return _lib(q).nn.functional.multi_head_attention_forward(
            q, k, v, E, HEADS, m.in_proj_weight, m.in_proj_bias, None, None, False, 0.0,
            m.out_proj.weight, m.out_proj.bias, training=True)

    compare_layer(lambda nn: nn.MultiheadAttention(E, HEADS), [_x((4, 2, E), 8), _x((3, 2, E), 9), _x((3, 2, E), 10)],
                  forward=functional)


def test_state_dict_repr_init():
    for kw in [dict(), dict(kdim=6, vdim=4, add_bias_kv=True, bias=False)]:
        g, t = gradviz.nn.MultiheadAttention(E, HEADS, **kw), torch.nn.MultiheadAttention(E, HEADS, **kw)
        assert repr(g) == repr(t)
        assert [(n, tuple(p.shape)) for n, p in g.state_dict().items()] == \
               [(n, tuple(p.shape)) for n, p in t.state_dict().items()]
    big = gradviz.nn.MultiheadAttention(64, 4)
    bound = np.sqrt(6 / (64 + 3 * 64))  # xavier-uniform of (3E, E)
    w = big.in_proj_weight.detach().numpy()
    assert np.abs(w).max() <= bound and abs(w.std() - bound / np.sqrt(3)) < 0.03 * bound
    assert not big.in_proj_bias.detach().numpy().any() and not big.out_proj.bias.detach().numpy().any()


def test_gradcheck():
    m = gradviz.nn.MultiheadAttention(4, 2).double()
    x = gradviz.tensor(_x((3, 2, 4), 11), requires_grad=True)
    mask = gradviz.tensor(_causal(3))
    assert gradviz.autograd.gradcheck(lambda t, w: m(t, t, t, attn_mask=mask)[0] * w.sum(), (x, m.in_proj_weight))
    assert gradviz.autograd.gradcheck(lambda t: m(t, t, t, need_weights=False, attn_mask=mask)[0], (x,))


def test_errors_and_warnings():
    def both(call, phrase):
        same_error(lambda: call(gradviz), lambda: call(torch), phrase)

    x = _x((5, 3, E), 12).astype(np.float32)
    both(lambda m: m.nn.MultiheadAttention(E, 3), "embed_dim must be divisible by num_heads")
    both(lambda m: m.nn.MultiheadAttention(0, 3), "embed_dim and num_heads must be greater than 0")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x[None])] * 3), "query should be unbatched 2D or batched 3D tensor")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x[..., :4])] * 3), "was expecting embedding dimension of 8, but got 4")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x)] * 3, attn_mask=m.tensor(_causal(4))),
         "The shape of the 2D attn_mask is torch.Size([4, 4]), but should be (5, 5).")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x)] * 3, attn_mask=m.zeros(3, 5, 5)),
         "The shape of the 3D attn_mask is torch.Size([3, 5, 5]), but should be (6, 5, 5).")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x)] * 3, key_padding_mask=m.zeros(3, 5, dtype=m.int64)),
         "only bool and floating types of key_padding_mask are supported")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x)] * 3, key_padding_mask=m.zeros(3, 4, dtype=m.bool)),
         "Expected key_padded_mask.shape[1] to be 5, but got 4")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x)] * 3, key_padding_mask=m.zeros(3, dtype=m.bool)),
         "expected `key_padding_mask` to be `None` or 2-D but found 1-D tensor instead")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(*[m.tensor(x)] * 3, is_causal=True),
         "Need attn_mask if specifying the is_causal hint.")
    both(lambda m: m.nn.MultiheadAttention(E, 2)(m.tensor(x), m.tensor(x[:4]), m.tensor(x)),
         "key shape torch.Size([4, 3, 8]) does not match value shape torch.Size([5, 3, 8])")
    both(lambda m: m.nn.TransformerEncoderLayer(E, 2, activation="tanh"), "activation should be relu/gelu, not tanh")
    for lib in (gradviz, torch):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            lib.nn.MultiheadAttention(E, 2)(*[lib.tensor(x)] * 3, key_padding_mask=lib.zeros(3, 5, dtype=lib.bool),
                                            attn_mask=lib.zeros(5, 5))
        assert [str(w.message) for w in caught] == [
            "Support for mismatched key_padding_mask and attn_mask is deprecated. Use same type for both instead."]


# ---- Transformer layers ---------------------------------------------------------------------

def _activation(name):
    return lambda nn: {"relu": "relu", "gelu": "gelu", "callable": nn.functional.silu,
                       "module": nn.GELU()}[name]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu", "callable"])
def test_encoder_layer(activation, batch_first, norm_first, dtype):
    L, N = 5, 3
    x = _x((N, L, E) if batch_first else (L, N, E), 13)
    make = lambda nn: nn.TransformerEncoderLayer(E, HEADS, 16, dropout=0.0, activation=_activation(activation)(nn),  # noqa: E731
                                                 batch_first=batch_first, norm_first=norm_first)
    compare_layer(make, [x, _causal(L), _padding(N, L)], dtype, grad_inputs=[True, False, False],
                  forward=lambda m, t, mask, pad: m(t, src_mask=mask, src_key_padding_mask=pad))
    compare_layer(make, [x], dtype)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_encoder_with_causal_mask(batch_first, dtype):
    L, N = 6, 2
    x = _x((N, L, E) if batch_first else (L, N, E), 14)

    def make(nn):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return nn.TransformerEncoder(nn.TransformerEncoderLayer(E, HEADS, 16, dropout=0.0, batch_first=batch_first),
                                         num_layers=2, norm=nn.LayerNorm(E))

    def forward(m, t):
        mask = _lib(t).nn.Transformer.generate_square_subsequent_mask(L, dtype=t.dtype)
        return m(t, mask=mask), m(t, mask=mask, is_causal=True)

    compare_layer(make, [x], dtype, forward=forward)


@pytest.mark.filterwarnings("ignore:Support for mismatched")  # a float tgt_mask beside bool padding
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("batch_first", [False, True])
def test_decoder_layer_and_decoder(batch_first, norm_first, dtype):
    T, S, N = 4, 5, 2
    shape = (lambda n: (N, n, E)) if batch_first else (lambda n: (n, N, E))
    tgt, memory = _x(shape(T), 15), _x(shape(S), 16)
    arrays = [tgt, memory, np.where(_causal(T), -np.inf, 0.0), _padding(N, T), _padding(N, S)]

    def forward(m, t, mem, mask, tpad, mpad):
        return m(t, mem, tgt_mask=mask.to(t.dtype), tgt_key_padding_mask=tpad, memory_key_padding_mask=mpad)

    layer = lambda nn: nn.TransformerDecoderLayer(E, HEADS, 16, dropout=0.0, activation="gelu",  # noqa: E731
                                                  batch_first=batch_first, norm_first=norm_first)
    grads = [True, True, False, False, False]
    compare_layer(layer, arrays, dtype, forward=forward, grad_inputs=grads)
    compare_layer(lambda nn: nn.TransformerDecoder(layer(nn), 2, norm=nn.LayerNorm(E)), arrays, dtype,
                  forward=forward, grad_inputs=grads)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("batch_first", [False, True])
def test_full_transformer(batch_first, dtype):
    S, T, N = 5, 4, 2
    shape = (lambda n: (N, n, E)) if batch_first else (lambda n: (n, N, E))

    def make(nn):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return nn.Transformer(E, HEADS, 2, 2, 16, dropout=0.0, batch_first=batch_first)

    def forward(m, src, tgt, pad):
        mask = m.generate_square_subsequent_mask(T, dtype=src.dtype)
        return m(src, tgt, tgt_mask=mask, src_key_padding_mask=pad, memory_key_padding_mask=pad)

    compare_layer(make, [_x(shape(S), 17), _x(shape(T), 18), _padding(N, S)], dtype, forward=forward,
                  grad_inputs=[True, True, False])


def test_eval_mode_turns_dropout_off():
    make = lambda nn: nn.TransformerEncoderLayer(E, HEADS, 16, batch_first=True).eval()  # noqa: E731
    compare_layer(make, [_x((2, 3, E), 19)])


def test_structure_repr_state_dict_warnings_and_errors():
    with warnings.catch_warnings(record=True) as g_warn:
        warnings.simplefilter("always")
        g = gradviz.nn.Transformer(E, HEADS, 1, 1, 16)
    with warnings.catch_warnings(record=True) as t_warn:
        warnings.simplefilter("always")
        t = torch.nn.Transformer(E, HEADS, 1, 1, 16)
    assert [str(w.message) for w in g_warn] == [str(w.message) for w in t_warn]
    assert repr(g) == repr(t)
    assert [(n, tuple(p.shape)) for n, p in g.state_dict().items()] == [(n, tuple(p.shape)) for n, p in t.state_dict().items()]
    for kw in [dict(norm_first=True), dict(batch_first=True, activation="gelu"), dict(bias=False)]:
        gl, tl = gradviz.nn.TransformerDecoderLayer(E, HEADS, 16, **kw), torch.nn.TransformerDecoderLayer(E, HEADS, 16, **kw)
        assert repr(gl) == repr(tl) and list(gl.state_dict()) == list(tl.state_dict())
    # the encoder's layers are copies, not the same module
    layer = gradviz.nn.TransformerEncoderLayer(E, HEADS, 16, batch_first=True)
    encoder = gradviz.nn.TransformerEncoder(layer, 2)
    assert encoder.layers[0] is not encoder.layers[1] and encoder.layers[0].linear1.weight is not layer.linear1.weight
    close(gradviz.nn.Transformer.generate_square_subsequent_mask(4),
          torch.nn.Transformer.generate_square_subsequent_mask(4), "causal mask")

    def both(call, phrase):
        same_error(lambda: call(gradviz), lambda: call(torch), phrase)

    def model(m):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return m.nn.Transformer(E, HEADS, 1, 1, 16)

    both(lambda m: model(m)(m.zeros(5, 2, E), m.zeros(4, 3, E)), "the batch number of src and tgt must be equal")
    both(lambda m: model(m)(m.zeros(5, 2, E), m.zeros(4, 2, 6)), "the feature number of src and tgt must be equal to d_model")


@pytest.mark.filterwarnings("ignore:The PyTorch API of nested tensors")  # torch's own, internal
@pytest.mark.parametrize("norm", [False, True])
@pytest.mark.parametrize("grad", [False, True])
@pytest.mark.parametrize("pad_rows", [[[0, 0, 1, 1], [0, 0, 0, 0]], [[0, 1, 0, 1], [0, 0, 0, 1]]],
                         ids=["left-aligned", "not left-aligned"])
def test_encoder_inference_path_zeros_padded_positions(pad_rows, grad, norm):
    """torch runs an eval() encoder without gradients on nested tensors: padded positions come
    back as zeros (then the final norm); with gradients, or a mask that is not left-aligned, it
    keeps the padded path."""
    x, pad = _x((2, 4, E), 20).astype(np.float32), np.array(pad_rows, dtype=bool)
    outs = []
    for lib in (gradviz, torch):
        layer = lib.nn.TransformerEncoderLayer(E, HEADS, 16, batch_first=True)
        model = lib.nn.TransformerEncoder(layer, 2, norm=lib.nn.LayerNorm(E) if norm else None)
        outs.append(model)
    load = {k: gradviz.tensor(v.numpy()) for k, v in outs[1].state_dict().items()}
    outs[0].load_state_dict(load)
    results = []
    for lib, model in zip((gradviz, torch), outs):
        model.eval()
        with lib.set_grad_enabled(grad):
            results.append(model(lib.tensor(x), src_key_padding_mask=lib.tensor(pad)))
    close(results[0], results[1], "encoder output")
