"""List the PyTorch names teaching code uses that gradviz does not have yet.

Run with torch installed (the test environment has it)::

    PYTHONPATH=. python scripts/api_gaps.py          # the curated teaching names
    PYTHONPATH=. python scripts/api_gaps.py --all    # every public name torch has and gradviz lacks

The curated list is names met in PyTorch tutorials, course notebooks and blog posts (tensor
creation and math, reductions, indexing, linear algebra, ``torch.special``,
``torch.nn.functional``). A name counts as present when ``torch.X`` / ``Tensor.X`` /
``F.X`` exists in gradviz under the same access path as in torch.
"""

from __future__ import annotations

import argparse

import torch
import torch.nn.functional as torch_functional

import gradviz
import gradviz.nn.functional as gradviz_functional

TEACHING = """
abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr aminmax amax amin all allclose
any arange argmax argmin argsort argwhere asin asinh atan atan2 atanh atleast_1d atleast_2d
atleast_3d baddbmm bernoulli bincount bitwise_and bitwise_not bitwise_or bitwise_xor block_diag
bmm broadcast_shapes broadcast_tensors broadcast_to bucketize cartesian_prod cat cdist ceil chunk
clamp clamp_max clamp_min clip clone column_stack combinations copysign corrcoef cos cosh
count_nonzero cov cross cummax cummin cumprod cumsum cumulative_trapezoid deg2rad det diag
diag_embed diagflat diagonal diff digamma dist div divide dot dsplit dstack einsum empty
empty_like eq equal erf erfc erfinv exp exp2 expm1 eye flatten flip fliplr flipud float_power
floor floor_divide fmax fmin fmod frac full full_like gather gcd ge gt heaviside histc hsplit
hstack hypot index_add index_copy index_fill index_put index_reduce index_select inner inverse
isclose isfinite isin isinf isnan isneginf isposinf kron kthvalue lcm le lerp lgamma linspace
log log10 log1p log2 logaddexp logaddexp2 logcumsumexp logdet logical_and logical_not logical_or
logical_xor logit logspace logsumexp lt masked_fill masked_scatter masked_select matmul
matrix_power max maximum mean median meshgrid min minimum mm mode moveaxis movedim msort mul
multinomial multiply mv nan_to_num nanmean nanmedian nanquantile nansum narrow ne neg negative
nonzero norm normal numel ones ones_like outer pdist permute pinverse polygamma pow prod
quantile rad2deg rand rand_like randint randint_like randn randn_like randperm ravel reciprocal
relu remainder renorm repeat_interleave reshape result_type roll rot90 round rsqrt scatter
scatter_add scatter_reduce searchsorted select sgn sigmoid sign signbit sin sinc sinh slogdet
softmax sort split sqrt square squeeze stack std std_mean sub subtract sum svd swapaxes t take
take_along_dim tan tanh tensor tensor_split tensordot tile topk trace transpose trapezoid trapz
tril tril_indices triu triu_indices true_divide trunc unbind unflatten unique unique_consecutive
unravel_index unsqueeze vander var var_mean vdot view_as_real vsplit vstack where xlogy zeros
zeros_like
""".split()

TEACHING_METHODS = """
abs add addcdiv_ addcmul_ all any apply_ argmax argsort backward bernoulli_ bfloat16 bool byte
ceil char chunk clamp clamp_ clip clone contiguous copy_ cpu cuda cummax cumsum data_ptr detach
detach_ diag diagonal diff dim div double element_size eq exp exponential_ expand expand_as
fill_ fill_diagonal_ flatten flip float floor gather ge geometric_ half index_add_ index_fill_
index_put_ index_select int is_contiguous is_floating_point isnan item kthvalue le long
log_normal_ logsumexp lt map_ masked_fill masked_fill_ matmul max mean min mul_ nan_to_num
nanmean nansum narrow ndim ne nelement new_empty new_full new_ones new_tensor new_zeros nonzero
norm normal_ numel numpy permute pin_memory pow prod put_ random_ register_hook relu repeat
requires_grad_ reshape retain_grad round scatter_ scatter_add_ scatter_reduce sigmoid size
softmax sort split sqrt squeeze std storage_offset stride sub_ sum t to tolist topk transpose
tril type type_as unfold uniform_ unique unsqueeze var view view_as where zero_
""".split()

TEACHING_FUNCTIONAL = """
adaptive_avg_pool2d avg_pool2d batch_norm binary_cross_entropy binary_cross_entropy_with_logits
conv1d conv2d conv_transpose2d cosine_similarity cross_entropy dropout elu embedding gelu
gumbel_softmax hardtanh interpolate kl_div layer_norm leaky_relu linear log_softmax logsigmoid
max_pool2d mse_loss nll_loss normalize one_hot pad pixel_shuffle relu relu6 scaled_dot_product_attention
selu sigmoid silu smooth_l1_loss softmax softplus tanh triplet_margin_loss unfold
""".split()


def missing(names, torch_home, gradviz_home):
    return [n for n in names if hasattr(torch_home, n) and not hasattr(gradviz_home, n)]


def all_public(torch_home, gradviz_home):
    return sorted(n for n in dir(torch_home)
                  if not n.startswith("_") and not hasattr(gradviz_home, n))


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--all", action="store_true",
                        help="every public name of torch, Tensor and F that gradviz lacks")
    args = parser.parse_args()
    homes = [("torch", torch, gradviz, TEACHING), ("Tensor", torch.Tensor, gradviz.Tensor, TEACHING_METHODS),
             ("torch.nn.functional", torch_functional, gradviz_functional, TEACHING_FUNCTIONAL)]
    for label, torch_home, gradviz_home, names in homes:
        gaps = all_public(torch_home, gradviz_home) if args.all else missing(names, torch_home, gradviz_home)
        print(f"{label}: {len(gaps)} missing")
        print("  " + " ".join(gaps) if gaps else "  (none)")


if __name__ == "__main__":
    main()
