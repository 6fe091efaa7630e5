"""Note [Stealing the gradient]: a leaf's first gradient becomes ``.grad`` without a copy
when nothing else can see it, and is copied whenever something can."""

import weakref

import numpy as np
import torch

import gradviz as gv
import gradviz_ext


def _identity(backward):
    """A Function that copies its input forward and runs ``backward(g)`` backward."""

    class Identity(gv.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return backward(g)

    return Identity


_returned = []  # weak references to what _Fresh's backward returned
_kept = []  # what _Kept's and _SliceOfKept's backwards returned, or the array they sliced


def _fresh_backward(g):
    out = g * 2
    _returned.append(weakref.ref(out))
    return out


def _kept_backward(g):
    out = g * 2
    _kept.append(out)
    return out


def _slice_of_kept_backward(g):
    big = gv.cat([g * 2, g * 3])
    _kept.append(big)
    return big[: g.shape[0]]


_Fresh = _identity(_fresh_backward)  # returns a new tensor, remembered only weakly
_Kept = _identity(_kept_backward)  # keeps the tensor it returns
_SliceOfKept = _identity(_slice_of_kept_backward)  # returns a view into an array it keeps


def _expected_grad(x):
    return np.full(x.shape, 2.0, dtype=np.float32)


def test_a_gradient_nobody_else_holds_becomes_grad():
    x = gv.ones(3, requires_grad=True)
    _returned.clear()
    _Fresh.apply(x).sum().backward()
    # compiled, no copy was made; interpreted (reference counts differ) it is always copied
    assert (_returned[0]() is x.grad) == gradviz_ext.COMPILED
    np.testing.assert_array_equal(x.grad.numpy(), _expected_grad(x))


def test_a_gradient_the_backward_kept_is_copied():
    _kept.clear()
    x = gv.ones(3, requires_grad=True)
    _Kept.apply(x).sum().backward()
    kept = _kept[0]
    assert x.grad is not kept and not np.shares_memory(x.grad.numpy(), kept.numpy())
    x.grad.add_(1.0)  # .grad is summed into in place later: the kept tensor must not change
    np.testing.assert_array_equal(kept.numpy(), _expected_grad(x))


def test_a_gradient_a_hook_kept_is_copied():
    stash = []
    x = gv.ones(3, requires_grad=True)
    x.register_hook(lambda g: stash.append(g))
    (x * 2).sum().backward()
    assert x.grad is not stash[0] and not np.shares_memory(x.grad.numpy(), stash[0].numpy())
    (x * 2).sum().backward()  # the second backward sums into .grad in place
    np.testing.assert_array_equal(stash[0].numpy(), [2.0, 2.0, 2.0])
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0, 4.0])


def test_the_users_upstream_gradient_is_never_grad():
    x = gv.ones(3, requires_grad=True)
    upstream = gv.tensor([1.0, 2.0, 3.0])
    (x + 0).backward(upstream)  # add passes the upstream tensor through unchanged
    assert x.grad is not upstream and not np.shares_memory(x.grad.numpy(), upstream.numpy())
    (x + 0).backward(upstream)
    np.testing.assert_array_equal(upstream.numpy(), [1.0, 2.0, 3.0])
    np.testing.assert_array_equal(x.grad.numpy(), [2.0, 4.0, 6.0])


def test_one_gradient_for_two_leaves_gives_two_grads():
    x = gv.ones(3, requires_grad=True)
    y = gv.ones(3, requires_grad=True)
    (x + y).sum().backward()  # the same tensor reaches both leaves
    assert x.grad is not y.grad and not np.shares_memory(x.grad.numpy(), y.grad.numpy())
    x.grad.add_(1.0)
    np.testing.assert_array_equal(y.grad.numpy(), [1.0, 1.0, 1.0])


def test_a_view_is_copied():
    # t()'s fast backward returns a transposed view of the incoming gradient
    w = gv.ones((2, 3), requires_grad=True)
    g = gv.arange(6.0).reshape(3, 2)
    w.t().backward(g)
    assert not np.shares_memory(w.grad.numpy(), g.numpy())
    assert w.grad.numpy().flags.c_contiguous
    np.testing.assert_array_equal(w.grad.numpy(), g.numpy().T)


def test_training_steps_match_torch_with_stolen_gradients():
    rng = np.random.default_rng(0)
    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    x0 = rng.standard_normal((5, 3)).astype(np.float32)
    results = []
    for m in (gv, torch):
        w = m.tensor(w0.copy(), requires_grad=True)
        x = m.tensor(x0)
        opt = m.optim.SGD([w], lr=0.1)
        for _ in range(3):
            opt.zero_grad()
            (x @ w.t()).relu().pow(2).sum().backward()
            opt.step()
        results.append(w.detach().numpy().copy())
    np.testing.assert_allclose(results[0], results[1], rtol=1e-6, atol=1e-6)


def test_a_view_into_a_kept_array_is_copied():
    _kept.clear()
    x = gv.ones(3, requires_grad=True)
    _SliceOfKept.apply(x).sum().backward()
    big = _kept[0]
    assert not np.shares_memory(x.grad.numpy(), big.numpy())
    x.grad.add_(1.0)
    np.testing.assert_array_equal(big.numpy(), [2.0, 2.0, 2.0, 3.0, 3.0, 3.0])


def test_linear_weight_gradients_are_their_own_memory():
    # the weight's gradient arrives as the transposed product (row-major matmul rule):
    # stolen whole, it must still be a separate, C-contiguous array per layer
    layers = [gv.nn.Linear(4, 4) for _ in range(2)]
    x = gv.ones((3, 4))
    layers[1](layers[0](x).relu()).sum().backward()
    grads = [p.grad.numpy() for layer in layers for p in layer.parameters()]
    for i, a in enumerate(grads):
        assert a.flags.c_contiguous and a.flags.writeable
        for b in grads[i + 1:]:
            assert not np.shares_memory(a, b)
