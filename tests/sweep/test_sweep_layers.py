"""Conformance sweep, the layers of transformer, GAN and U-Net teaching code: a tiny
transformer language-model step, a DCGAN generator step, a U-Net up-sampling block, attention
weights with masks, sub-pixel super-resolution, PReLU, RMSNorm, Bilinear, Gumbel-softmax and the
errors these layers raise.

Each program runs with ``import gradviz as torch`` and with real PyTorch; ``sweep_harness``
compares everything observed (see its docstring). Weights are filled with fixed values in both
libraries; random draws only feed shapes and properties.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from sweep_harness import check, node_name, registry

program = registry()


def _fill(torch, module, scale=0.3):
    """Every parameter set to a scrambled sine (the same values in both libraries)."""
    with torch.no_grad():
        for i, (_, p) in enumerate(module.named_parameters()):
            values = np.sin(np.arange(p.numel()) * 0.7 + i) * scale
            p.copy_(torch.tensor(values.reshape(tuple(p.shape)), dtype=p.dtype))
    return module


def _data(torch, *shape, shift=0.0):
    n = math.prod(shape)
    return torch.tensor(np.cos(np.arange(n) * 1.3 + shift).reshape(shape), dtype=torch.float32)


# ---- transformers -----------------------------------------------------------------------------

class _TinyLM:
    """Embedding -> causal TransformerEncoderLayer -> Linear head (nanoGPT in miniature)."""

    def __init__(self, torch, vocab=11, d_model=8, context=6):
        nn = torch.nn
        self.torch, self.context = torch, context
        self.embed = nn.Embedding(vocab, d_model)
        self.position = nn.Embedding(context, d_model)
        self.block = nn.TransformerEncoderLayer(d_model, nhead=2, dim_feedforward=16, dropout=0.0,
                                                batch_first=True, norm_first=True, activation="gelu")
        self.head = nn.Linear(d_model, vocab)
        self.modules = nn.ModuleList([self.embed, self.position, self.block, self.head])
        _fill(torch, self.modules)

    def __call__(self, idx):
        torch = self.torch
        t = idx.shape[1]
        x = self.embed(idx) + self.position(torch.arange(t))
        mask = torch.nn.Transformer.generate_square_subsequent_mask(t)
        return self.head(self.block(x, src_mask=mask, is_causal=True))


@program(1e-4, atol=1e-5)
def tiny_transformer_lm_training_step(torch, o):
    F = torch.nn.functional
    model = _TinyLM(torch)
    text = torch.tensor([[1, 4, 2, 7, 3, 9, 5], [0, 2, 8, 8, 1, 6, 10]])
    x, y = text[:, :-1], text[:, 1:]
    optimizer = torch.optim.AdamW(model.modules.parameters(), lr=1e-2)
    losses = []
    for _ in range(3):
        logits = model(x)
        loss = F.cross_entropy(logits.view(-1, logits.size(-1)), y.reshape(-1))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    o("losses", losses)
    o("logits", logits)
    o("grads", [model.block.self_attn.in_proj_weight.grad, model.block.linear1.bias.grad,
                model.embed.weight.grad])
    o("head weight", model.head.weight)
    o("state keys", list(model.block.state_dict()))
    o("repr", repr(model.block))


@program(1e-4, atol=1e-5)
def multihead_attention_weights_and_masks(torch, o):
    mha = _fill(torch, torch.nn.MultiheadAttention(6, 3, batch_first=True))
    x = _data(torch, 2, 4, 6).requires_grad_()
    pad = torch.tensor([[False, False, False, True], [False, False, False, False]])
    causal = torch.nn.Transformer.generate_square_subsequent_mask(4)
    o("causal mask", causal)
    out, weights = mha(x, x, x, key_padding_mask=pad)
    o("out", out)
    o("weights", weights)
    o("rows sum to one", weights.sum(-1))
    o("padded key gets no weight", weights[0, :, 3])
    _, per_head = mha(x, x, x, attn_mask=causal, average_attn_weights=False)
    o("per head", per_head)
    out2, none = mha(x, x, x, attn_mask=causal < 0, need_weights=False)
    o("no weights", none)
    o("bool causal = float causal", out2)
    (out.sum() + out2.pow(2).sum()).backward()
    o("x grad", x.grad)
    o("grad names", [node_name(out.grad_fn), node_name(out2.grad_fn)])
    o("repr", repr(mha))
    o("params", [(n, p.shape) for n, p in mha.named_parameters()])


@program(1e-4, atol=1e-5)
def seq2seq_transformer_forward_backward(torch, o):
    model = o.warns("init", lambda: torch.nn.Transformer(d_model=8, nhead=2, num_encoder_layers=2,
                                                         num_decoder_layers=1, dim_feedforward=12,
                                                         dropout=0.0),
                    "enable_nested_tensor is True")
    _fill(torch, model, 0.2)
    src, tgt = _data(torch, 5, 2, 8), _data(torch, 4, 2, 8, shift=1.0)
    tgt_mask = model.generate_square_subsequent_mask(4)
    out = model(src, tgt, tgt_mask=tgt_mask,
                src_key_padding_mask=torch.tensor([[False] * 5, [False, False, False, True, True]]))
    o("out", out)
    out.pow(2).mean().backward()
    o("grads", [model.encoder.layers[1].linear2.weight.grad, model.decoder.norm.weight.grad,
                model.decoder.layers[0].multihead_attn.in_proj_bias.grad])
    o("n params", sum(p.numel() for p in model.parameters()))
    o("keys", list(model.state_dict())[:8])
    o.raises("batch mismatch", lambda: model(src, tgt[:, :1]), "the batch number of src and tgt must be equal")


# ---- GANs and U-Nets ------------------------------------------------------------------------

@program(1e-4, atol=1e-5)
def dcgan_generator_step(torch, o):
    nn = torch.nn
    generator = nn.Sequential(
        nn.ConvTranspose2d(4, 8, 4, 1, 0, bias=False), nn.BatchNorm2d(8), nn.ReLU(True),
        nn.ConvTranspose2d(8, 4, 4, 2, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(True),
        nn.ConvTranspose2d(4, 1, 4, 2, 1, bias=False), nn.Tanh())
    _fill(torch, generator)
    optimizer = torch.optim.Adam(generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
    z = _data(torch, 3, 4, 1, 1)
    fake = generator(z)
    o("fake shape", fake.shape)
    o("fake", fake)
    target = torch.ones(3, 1, 16, 16) * 0.5
    loss = torch.nn.functional.binary_cross_entropy((fake + 1) / 2, target)
    optimizer.zero_grad()
    loss.backward()
    optimizer.step()
    o("loss", loss)
    o("grads", [generator[0].weight.grad, generator[3].weight.grad, generator[6].weight.grad])
    o("weights after", generator[6].weight)
    o("node", node_name(generator[0](z).grad_fn))
    o("repr", repr(generator))


@program(1e-4, atol=1e-5)
def unet_upsampling_block(torch, o):
    nn, F = torch.nn, torch.nn.functional
    down = _fill(torch, nn.Conv2d(2, 4, 3, padding=1))
    up_conv = _fill(torch, nn.ConvTranspose2d(4, 2, kernel_size=2, stride=2))
    up_interp = nn.Upsample(scale_factor=2, mode="bilinear", align_corners=True)
    merge = _fill(torch, nn.Conv2d(6, 2, 3, padding=1))
    x = _data(torch, 1, 2, 6, 6).requires_grad_()
    skip = F.relu(down(x))
    bottom = F.max_pool2d(skip, 2)
    learned = up_conv(bottom)
    smooth = up_interp(bottom)[:, :2]
    y = merge(torch.cat([learned + smooth, skip], dim=1))
    o("shapes", [skip.shape, bottom.shape, learned.shape, smooth.shape, y.shape])
    o("y", y)
    y.pow(2).sum().backward()
    o("x grad", x.grad)
    o("weight grads", [up_conv.weight.grad, merge.bias.grad])
    o("nodes", [node_name(learned.grad_fn), node_name(up_interp(bottom).grad_fn)])
    o("upsample repr", repr(up_interp))
    o("fixed size", F.interpolate(bottom, size=(5, 4), mode="nearest"))
    o("output_size", up_conv(bottom, output_size=[7, 7]).shape)


@program(1e-5, atol=1e-6)
def sub_pixel_super_resolution(torch, o):
    nn = torch.nn
    model = nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.PReLU(), nn.Conv2d(8, 4, 3, padding=1),
                          nn.PixelShuffle(2))
    _fill(torch, model)
    lowres = _data(torch, 2, 1, 3, 3)
    highres = model(lowres)
    o("high-res", highres)
    o("node", node_name(highres.grad_fn))
    loss = torch.nn.functional.mse_loss(highres, torch.nn.functional.interpolate(lowres, scale_factor=2))
    loss.backward()
    o("loss", loss)
    o("prelu weight grad", model[1].weight.grad)
    o("repr", repr(model))
    o("unshuffle inverts", torch.equal(nn.PixelUnshuffle(2)(highres), model[:3](lowres)))


# ---- small layers ---------------------------------------------------------------------------

@program(1e-5, atol=1e-6)
def prelu_rmsnorm_bilinear(torch, o):
    nn = torch.nn
    act = nn.PReLU(3, init=0.2)
    norm = nn.RMSNorm(3)
    pair = _fill(torch, nn.Bilinear(3, 2, 4))
    x = _data(torch, 5, 3).requires_grad_()
    h = norm(act(x))
    y = pair(h, _data(torch, 5, 2, shift=2.0))
    o("y", y)
    y.sum().backward()
    o("grads", [x.grad, act.weight.grad, norm.weight.grad, pair.weight.grad, pair.bias.grad])
    o("reprs", [repr(act), repr(norm), repr(pair)])
    o("nodes", [node_name(act(x).grad_fn), node_name(h.grad_fn), node_name(y.grad_fn)])
    o("state", [list(act.state_dict()), list(norm.state_dict()), list(pair.state_dict())])
    o("rms by hand", torch.allclose(nn.RMSNorm(3, eps=1e-6, elementwise_affine=False)(x),
                                    x / (x.pow(2).mean(-1, keepdim=True) + 1e-6).sqrt()))


@program
def gumbel_softmax_shapes_and_properties(torch, o):
    F = torch.nn.functional
    torch.manual_seed(0)
    logits = torch.tensor([[1.0, 2.0, 0.5], [0.0, 0.0, 3.0]], requires_grad=True)
    soft = F.gumbel_softmax(logits, tau=0.5)
    hard = F.gumbel_softmax(logits, tau=0.5, hard=True)
    o("shapes", [soft.shape, hard.shape])
    o("soft sums", torch.allclose(soft.sum(-1), torch.ones(2)))
    o("hard is one-hot", [sorted(set(hard.detach().flatten().tolist())), hard.detach().sum(-1).tolist()])
    o("nodes", [node_name(soft.grad_fn), node_name(hard.grad_fn)])
    hard.sum().backward()  # the straight-through estimator: a sum of one-hots has zero gradient
    o("zero grad", torch.allclose(logits.grad, torch.zeros(2, 3), atol=1e-6))
    o("dim 0", F.gumbel_softmax(logits, dim=0).shape)
    o.warns("eps", lambda: F.gumbel_softmax(logits, eps=0.1), "`eps` parameter is deprecated")


@program
def conv_transpose_is_the_adjoint_of_conv(torch, o):
    F = torch.nn.functional
    w = torch.tensor(np.arange(18.0).reshape(1, 2, 3, 3) / 10)  # conv: 2 -> 1 channels; transposed: 1 -> 2
    x = torch.tensor(np.arange(50.0).reshape(1, 2, 5, 5) / 7, requires_grad=True)
    y = torch.tensor(np.cos(np.arange(9.0)).reshape(1, 1, 3, 3))
    up = F.conv_transpose2d(y, w, stride=2, padding=1)
    o("up", up)
    o("<conv(x), y> == <x, conv_t(y)>",
      [(F.conv2d(x, w, stride=2, padding=1) * y).sum(), (x * up).sum()])
    z = F.conv2d(x, w, stride=2, padding=1)
    g, = torch.autograd.grad(z, x, y)
    o("conv's input gradient is conv_transpose", torch.allclose(g, up))
    o("1-d", F.conv_transpose1d(torch.tensor([[[1.0, 2.0, 3.0]]]), torch.tensor([[[1.0, -1.0]]]), stride=2))
    o("groups", F.conv_transpose2d(x, torch.ones(2, 1, 2, 2, dtype=torch.float64), groups=2).shape)


@program
def layer_errors_beginners_hit(torch, o):
    nn, F = torch.nn, torch.nn.functional
    o.raises("heads", lambda: nn.MultiheadAttention(10, 3), "embed_dim must be divisible by num_heads")
    mha = nn.MultiheadAttention(4, 2)
    x = torch.zeros(5, 2, 4)
    o.raises("mask shape", lambda: mha(x, x, x, attn_mask=torch.zeros(4, 4)), "The shape of the 2D attn_mask is")
    o.raises("embed dim", lambda: mha(torch.zeros(5, 2, 6), torch.zeros(5, 2, 6), torch.zeros(5, 2, 6)),
             "was expecting embedding dimension of 4, but got 6")
    o.raises("4-D query", lambda: mha(x[None], x[None], x[None]), "query should be unbatched 2D or batched 3D tensor")
    o.raises("activation", lambda: nn.TransformerEncoderLayer(4, 2, activation="swish"), "activation should be relu/gelu")
    o.raises("deconv channels", lambda: nn.ConvTranspose2d(3, 2, 3)(torch.zeros(1, 4, 5, 5)),
             "expected input[1, 4, 5, 5] to have 3 channels, but got 4 channels instead")
    o.raises("output padding", lambda: nn.ConvTranspose2d(1, 1, 3, stride=1, output_padding=1)(torch.zeros(1, 1, 3, 3)),
             "output padding must be smaller than either stride or dilation")
    o.raises("upsample 2-D input", lambda: nn.Upsample(scale_factor=2, mode="bilinear")(torch.zeros(1, 2, 3)),
             "Got 3D input, but bilinear mode needs 4D input")
    o.raises("no size", lambda: F.interpolate(torch.zeros(1, 1, 3, 3)), "either size or scale_factor should be defined")
    o.raises("shuffle", lambda: nn.PixelShuffle(2)(torch.zeros(1, 3, 2, 2)), "is not divisible by 4")
    o.raises("prelu channels", lambda: nn.PReLU(3)(torch.zeros(2, 4)), "Mismatch of parameter numbers and input channel size")
    o.raises("bilinear", lambda: nn.Bilinear(3, 4, 2)(torch.zeros(2, 4), torch.zeros(2, 4)),
             "bilinear(): input1 size does not match weight size")
    o.raises("rms shape", lambda: nn.RMSNorm(5)(torch.zeros(2, 4)), "Given normalized_shape=[5]")
    o.warns("mismatched masks", lambda: mha(x, x, x, key_padding_mask=torch.zeros(2, 5, dtype=torch.bool),
                                            attn_mask=torch.zeros(5, 5)), "Support for mismatched key_padding_mask")
    o.warns("upsample is deprecated", lambda: F.upsample(torch.zeros(1, 1, 2), scale_factor=2), "is deprecated")


@pytest.mark.parametrize("fn", program.all, ids=[fn.__name__ for fn in program.all])
def test_program(fn):
    check(fn)
