"""``gradcheck`` and ``gradgradcheck``: compare analytical gradients with finite differences,
as ``torch.autograd.gradcheck`` does.

Note [Gradcheck]
----------------
For every differentiable input ``i`` and differentiable output ``k``:

* the numerical Jacobian comes from central differences, ``(f(x + eps) - f(x - eps)) / 2eps``,
  one input element at a time, perturbing the input's own storage in its own dtype (float64
  is needed for the default tolerances; other dtypes get PyTorch's warning);
* the analytical Jacobian comes from ``autograd.grad`` with a unit cotangent for each output
  element (one row of the Jacobian per backward pass);
* entries agree when ``|analytical - numerical| <= atol + rtol * |numerical|`` (``allclose``).

A mismatch raises :class:`GradcheckError` (a ``RuntimeError``, as in PyTorch) that keeps
PyTorch's first line, "Jacobian mismatch for output k with respect to input i," and then lists
the worst entries instead of both full Jacobians. Inputs are numbered by their position in
``inputs``.

After the Jacobians, two checks of PyTorch's that the Jacobians cannot see:

* zero output gradients must give zero (or no) input gradients: a backward that forgets to
  multiply by its ``grad_output`` can have the right Jacobian ("backward not multiplied by
  grad_output");
* with ``check_undefined_grad``, backward must cope with undefined (``None``) output
  gradients, all at once and, for several outputs, one at a time; the outputs pass through
  :class:`UndefinedGrad`, whose backward gives none (a custom Function that called
  ``ctx.set_materialize_grads(False)`` receives ``None``).
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

import numpy as np

from .. import ops
from .._tensor import Tensor, _wrap
from ..func._vmap import _Randomness
from . import forward_ad, grad_mode
from ._functional import grad as _grad
from .function import Function

__all__ = ["GradcheckError", "gradcheck", "gradgradcheck"]

_SHOWN_ENTRIES = 5


class GradcheckError(RuntimeError):
    """Raised by :func:`gradcheck` and :func:`gradgradcheck` when a check fails."""


def _as_tuple(value):
    if isinstance(value, Tensor):
        return (value,)
    if isinstance(value, Sequence) and not isinstance(value, str):
        return tuple(value)
    return (value,)


def _differentiable(value):
    return isinstance(value, Tensor) and value.requires_grad and value.dtype.is_floating_point


def _outputs(func, inputs):
    return _as_tuple(func(*inputs))


def _output_values(func, inputs):
    """Copies of the outputs' values (an output may be a view of the perturbed input)."""
    return [out._data.copy() if isinstance(out, Tensor) else None
            for out in _outputs(func, inputs)]


def _numerical_jacobians(func, inputs, positions, eps):
    """``{(k, i): J}`` with ``J[a, b] = d out_k[b] / d in_i[a]`` for every tensor output ``k``
    and differentiable input position ``i`` (central differences)."""
    reference = _outputs(func, inputs)
    out_positions = [k for k, out in enumerate(reference) if isinstance(out, Tensor)]
    jacobians = {(k, i): np.zeros((inputs[i].numel(), reference[k].numel()))
                 for k in out_positions for i in positions}
    for i in positions:
        data = inputs[i]._data
        for a, index in enumerate(np.ndindex(data.shape)):
            original = data[index].copy()
            data[index] = original + eps
            plus = _output_values(func, inputs)
            data[index] = original - eps
            minus = _output_values(func, inputs)
            data[index] = original
            for k in out_positions:
                difference = plus[k] - minus[k]
                jacobians[(k, i)][a] = (np.asarray(difference, dtype=np.float64).reshape(-1)
                                        / (2 * eps))
    return reference, jacobians


def _reentrant_jacobians(outputs, inputs, positions, nondet_tol):
    """:func:`_analytical_jacobians`, computed twice, as torch does: two runs of backward with
    the same cotangents must agree within ``nondet_tol`` (PyTorch calls a backward that does
    not "reentrant")."""
    first = _analytical_jacobians(outputs, inputs, positions)
    second = _analytical_jacobians(outputs, inputs, positions)
    for key, jacobian in first.items():
        if not np.all(np.abs(jacobian - second[key]) <= nondet_tol):
            raise GradcheckError(_NONDET_MESSAGE.format(tol=nondet_tol))
    return first


_NONDET_MESSAGE = (
    "Backward is not reentrant, i.e., running backward with same input and grad_output "
    "multiple times gives different values, although analytical gradient matches numerical "
    "gradient.The tolerance for nondeterminism was {tol}.\n\nNOTE: If your op relies on "
    "non-deterministic operations, this failure might be expected: call gradcheck/gradgradcheck "
    "with `nondet_tol=<tol>` as a keyword argument.")


def _check_output_types(outputs):
    """PyTorch reads ``requires_grad`` of every output: anything but a tensor fails there."""
    for out in outputs:
        if not isinstance(out, Tensor):
            raise AttributeError(
                f"'{type(out).__name__}' object has no attribute 'requires_grad'")


def _analytical_jacobians(outputs, inputs, positions):
    """``{(k, i): J}`` for each differentiable output ``k``, one backward pass per element."""
    diff_inputs = [inputs[i] for i in positions]
    jacobians = {}
    for k, out in enumerate(outputs):
        if not _differentiable(out):
            continue
        n_out = out.numel()
        for i in positions:
            jacobians[(k, i)] = np.zeros((inputs[i].numel(), n_out))
        for b in range(n_out):
            unit = np.zeros(n_out, dtype=out._data.dtype)
            unit[b] = 1
            grads = _grad(out, diff_inputs, _wrap(unit.reshape(out._data.shape)),
                          retain_graph=True, allow_unused=True)
            for i, g in zip(positions, grads):
                if g is not None:
                    if tuple(g.shape) != tuple(inputs[i].shape):
                        raise GradcheckError(
                            f"Analytical gradient has incorrect size: the gradient of output "
                            f"{k} with respect to input {i} has shape {list(g.shape)}, but the "
                            f"input has shape {list(inputs[i].shape)}"
                        )
                    jacobians[(k, i)][:, b] = np.asarray(g._data, dtype=np.float64).reshape(-1)
    return jacobians


def _forward_jacobians(func, inputs, positions):
    """``{(k, i): J}`` by forward-mode AD: every differentiable input becomes a dual tensor
    with a zero tangent, and one tangent element at a time is set to 1 before ``func`` runs
    again (PyTorch's ``check_forward_ad`` does the same). A float output without a tangent
    contributes a zero column."""
    jacobians: dict = {}
    with forward_ad.dual_level():
        duals = list(inputs)
        tangents = {}
        for i in positions:
            duals[i] = forward_ad.make_dual(inputs[i].detach(), ops.zeros_like(inputs[i]))
            tangents[i] = forward_ad.unpack_dual(duals[i]).tangent
        for i in positions:
            flat_tangent = tangents[i]._data.reshape(-1)
            for a in range(flat_tangent.size):
                flat_tangent[a] = 1.0
                outputs = _outputs(func, duals)
                flat_tangent[a] = 0.0
                for k, out in enumerate(outputs):
                    if not (isinstance(out, Tensor) and out.dtype.is_floating_point):
                        continue
                    jacobian = jacobians.setdefault(
                        (k, i), np.zeros((inputs[i].numel(), out.numel())))
                    tangent = forward_ad.unpack_dual(out).tangent
                    if tangent is not None:
                        jacobian[a, :] = np.asarray(tangent._data, dtype=np.float64).reshape(-1)
    return jacobians


def _index_text(flat, shape):
    if not shape:
        return "[]"
    return "[" + ", ".join(str(int(v)) for v in np.unravel_index(flat, shape)) + "]"


def _mismatch_message(k, i, numerical, analytical, atol, rtol, in_shape, out_shape, what,
                      mode=""):
    excess = np.abs(analytical - numerical) - (atol + rtol * np.abs(numerical))
    bad = np.argwhere(~(excess <= 0))  # NaN counts as a mismatch
    order = np.argsort(-np.nan_to_num(excess[tuple(bad.T)], nan=np.inf), kind="stable")
    lines = [
        f"Jacobian {mode}mismatch for output {k} with respect to input {i},",
        f"{len(bad)} of {numerical.size} entries of d(output {k})/d(input {i}) differ "
        f"(atol={atol:g}, rtol={rtol:g}); the worst:",
        f"  {'input index':>12} {'output index':>13} {'numerical':>14} {what:>14} "
        f"{'difference':>12}",
    ]
    for row in bad[order[:_SHOWN_ENTRIES]]:
        a, b = int(row[0]), int(row[1])
        n, g = numerical[a, b], analytical[a, b]
        lines.append(f"  {_index_text(a, in_shape):>12} {_index_text(b, out_shape):>13} "
                     f"{n:>14.6g} {g:>14.6g} {g - n:>12.3g}")
    if len(bad) > _SHOWN_ENTRIES:
        lines.append(f"  ... and {len(bad) - _SHOWN_ENTRIES} more")
    ratio = _common_ratio(numerical, analytical)
    if ratio == 0.0:
        lines.append(f"Hint: the {what} Jacobian is zero where the numerical one is not (a "
                     "detached tensor, or a missing gradient?).")
    elif ratio is not None:
        lines.append(f"Hint: the {what} Jacobian is {ratio:.4g} times the numerical one "
                     "everywhere (a missing or extra constant factor?).")
    return "\n".join(lines)


def _common_ratio(numerical, analytical):
    mask = np.abs(numerical) > 1e-8
    if not mask.any() or not np.all(np.isfinite(analytical)):
        return None
    ratios = analytical[mask] / numerical[mask]
    if np.all(np.abs(analytical[~mask]) <= 1e-8) and np.allclose(ratios, ratios[0], rtol=1e-3) \
            and not np.isclose(ratios[0], 1.0):
        return float(ratios[0])
    return None


class UndefinedGrad(Function):
    """The identity, whose backward gives no gradient: PyTorch's
    ``torch._C._functions.UndefinedGrad``, for the undefined-gradient check."""

    @staticmethod
    def forward(ctx, tensor):
        return tensor.clone()

    @staticmethod
    def backward(ctx, grad):
        return None


_UNDEFINED_NOT_HANDLED = (
    "Expected backward function to handle undefined output grads. Please look at \"Notes about "
    "undefined output gradients\" in \"tools/autograd/derivatives.yaml\"")
_UNDEFINED_NOT_ZERO = (
    "Expected all input grads to be undefined or zero when all output grads are undefined or "
    "zero. Please look at \"Notes about undefined output gradients\" in "
    "\"tools/autograd/derivatives.yaml\"")


def _warn_undefined_check():
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled "
        "by default, but it may break existing callers of this function. If this is true for "
        "you, you can call this function with \"check_undefined_grad=False\" to disable the "
        "feature", UserWarning, stacklevel=4)


def _zero_cotangents(outputs):
    return [_wrap(np.zeros_like(out._data)) for out in outputs]


def _check_backward_multiplies_grad_output(func, inputs, positions):
    """Zero output gradients must give zero input gradients (Note [Gradcheck])."""
    outputs = [out for out in _outputs(func, inputs) if _differentiable(out)]
    diff_inputs = [inputs[i] for i in positions]
    grads = _grad(outputs, diff_inputs, _zero_cotangents(outputs), allow_unused=True)
    for grad, tensor in zip(grads, diff_inputs):
        if grad is None:
            continue
        if np.any(grad._data != 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if grad.dtype is not tensor.dtype:
            raise GradcheckError("grad is incorrect type")
        if tuple(grad.shape) != tuple(tensor.shape):
            raise GradcheckError("grad is incorrect size")


def _check_undefined_grad(func, inputs, positions):
    """Backward must cope with undefined output gradients (Note [Gradcheck])."""
    diff_inputs = [inputs[i] for i in positions]
    count = sum(1 for out in _outputs(func, inputs) if _differentiable(out))
    cases = [None] + (list(range(count)) if count > 1 else [])
    for undefined in cases:  # None: every output's gradient is undefined
        outputs = [UndefinedGrad.apply(out) if undefined is None or k == undefined else out
                   for k, out in enumerate(o for o in _outputs(func, inputs)
                                           if _differentiable(o))]
        try:
            grads = _grad(outputs, diff_inputs, _zero_cotangents(outputs), allow_unused=True)
        except RuntimeError as error:
            _warn_undefined_check()
            raise GradcheckError(_UNDEFINED_NOT_HANDLED) from error
        if any(grad is not None and np.any(grad._data != 0) for grad in grads):
            _warn_undefined_check()
            raise GradcheckError(_UNDEFINED_NOT_ZERO)


_BATCHED_HELP = (
    "gradcheck or gradgradcheck failed while testing batched gradient computation: the "
    "gradients computed under vmap for a batch of {what} differ from the ones computed one at "
    "a time, or could not be computed. If the function is meant to be used without vmap, call "
    "gradcheck/gradgradcheck with `{flag}=False`. (gradviz's vmap runs the function once per "
    "example (Note [vmap is a loop] in gradviz/func/_vmap.py), so it accepts some operations "
    "that torch's vmap refuses in a backward, such as .item() or writing a batched gradient "
    "into an unbatched tensor; random operations are refused, as in torch.)")


def _batched_error(error, what, flag):
    return GradcheckError(f"While computing batched gradients, got: {error}\n\n"
                          + _BATCHED_HELP.format(what=what, flag=flag))


def _batched_mismatch(k, i, got, expected, what, flag):
    return GradcheckError(f"For output {k} and input {i}:\n\n"
                          + _BATCHED_HELP.format(what=what, flag=flag)
                          + f"\n\nGot:\n{got}\n\nExpected:\n{expected}")


def _batched(fn, stacked):
    """``fn`` over the examples of ``stacked``, the outputs stacked: torch's gradcheck uses its
    legacy ``vmap`` (``torch._vmap_internals``), which refuses random operations but, unlike
    ``torch.func.vmap``, applies custom Functions without asking for their vmap support. So
    this is gradviz's vmap loop (Note [vmap is a loop]) without the transform state that
    makes custom Functions check theirs."""
    with _Randomness("error"):
        results = [fn(ops.select(stacked, 0, index)) for index in range(stacked.shape[0])]
    return [ops.stack(shards) for shards in zip(*results)]


def _zeros_for_none(grads, tensors):
    return tuple(ops.zeros_like(t) if g is None else g for g, t in zip(grads, tensors))


def _check_batched_grad(outputs, inputs, positions):
    """torch's ``check_batched_grad``: for each differentiable output, the vector-Jacobian
    products of two random cotangents computed by ``vmap`` over the stacked cotangents must
    equal the ones computed one at a time."""
    diff_inputs = [inputs[i] for i in positions]
    for k, out in enumerate(outputs):
        if not _differentiable(out):
            continue

        def vjp(v, out=out):
            grads = _grad(out, diff_inputs, v, retain_graph=True, allow_unused=True)
            return _zeros_for_none(grads, diff_inputs)

        cotangents = [ops.randn_like(out) for _ in range(2)]
        expected = [ops.stack(shards) for shards in zip(*(vjp(v) for v in cotangents))]
        try:
            result = _batched(vjp, ops.stack(cotangents))
        except RuntimeError as error:
            raise _batched_error(error, "cotangents", "check_batched_grad") from error
        for i, (got, want) in zip(positions, zip(result, expected)):
            if not ops.allclose(got, want):
                raise _batched_mismatch(k, i, got, want, "cotangents", "check_batched_grad")


def _check_batched_forward_grad(func, inputs, positions):
    """torch's ``check_batched_forward_grad``: for each differentiable input, the
    Jacobian-vector products of two random tangents computed by ``vmap`` over the stacked
    tangents must equal the ones computed one at a time."""
    for i in positions:
        def jvp(tangent, i=i):
            with forward_ad.dual_level():
                duals = [x.detach() if isinstance(x, Tensor) else x for x in inputs]
                duals[i] = forward_ad.make_dual(inputs[i].detach(), tangent)
                tangents = []
                for out in _outputs(func, duals):
                    if out is None:
                        continue
                    primal, tangent_out = forward_ad.unpack_dual(out)
                    tangents.append(ops.zeros_like(primal) if tangent_out is None
                                    else tangent_out)
                return tuple(tangents)

        tangents = [ops.randn_like(inputs[i]) for _ in range(2)]
        expected = [ops.stack(shards) for shards in zip(*(jvp(t) for t in tangents))]
        try:
            result = _batched(jvp, ops.stack(tangents))
        except RuntimeError as error:
            raise _batched_error(error, "tangents", "check_batched_forward_grad") from error
        for got, want in zip(result, expected):
            if not ops.allclose(got, want):
                raise _batched_mismatch(i, i, got, want, "tangents",
                                        "check_batched_forward_grad")


def _fail(message, raise_exception):
    if raise_exception:
        raise GradcheckError(message)
    return False


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False, check_forward_ad=False,
              check_backward_ad=True, fast_mode=False, masked=None):
    """Check the gradients of ``func`` at ``inputs`` against central finite differences.

    Parameters
    ----------
    func : callable
        Takes the tensors of ``inputs`` and returns a Tensor or a tuple of Tensors.
    inputs : Tensor or tuple
        The point to check at. Tensors with ``requires_grad=True`` are differentiated; use
        float64 (other dtypes warn, as in PyTorch).
    eps, atol, rtol : float
        Finite-difference step and the ``allclose`` tolerances.
    raise_exception : bool
        Raise :class:`GradcheckError` on failure (default) or return False.
    check_undefined_grad : bool
        Also check that backward copes with undefined (``None``) output gradients.
    nondet_tol : float
        Backward runs twice per Jacobian row; the two results may differ by this much
        (torch's "Backward is not reentrant" check).
    check_forward_ad, check_backward_ad : bool
        Compare the Jacobian that forward-mode AD gives (one tangent element at a time) and
        the one backward gives with the numerical one; at least one must be on.
    check_batched_grad, check_batched_forward_grad : bool
        Also compare vector-Jacobian (Jacobian-vector) products of two random cotangents
        (tangents) computed batched with the same products computed one at a time, as torch
        does with its legacy ``vmap``. gradviz batches with a loop (Note [vmap is a loop]), so
        it refuses random operations, as torch, but fewer backward formulas than torch
        (``.item()``, numpy round trips, in-place writes of a batched gradient).

    ``check_grad_dtypes``, ``fast_mode`` and ``masked`` are accepted for PyTorch
    compatibility: the full Jacobian is always compared, which is what ``fast_mode=False``
    does.

    Returns
    -------
    bool
        True when every Jacobian agrees.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    >>> torch.autograd.gradcheck(lambda t: (t * t).sin(), (x,))
    True
    >>> class Twice(torch.autograd.Function):
    ...     @staticmethod
    ...     def forward(ctx, t):
    ...         return t * 2
    ...     @staticmethod
    ...     def backward(ctx, g):
    ...         return g * 3  # wrong
    >>> torch.autograd.gradcheck(Twice.apply, (x,), raise_exception=False)
    False
    """
    # torch's argument checks (AssertionErrors in torch)
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError(
            "Expected at least one of check_forward_ad or check_backward_ad to be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_backward_ad to be True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError(
            "Setting check_batched_forward_grad=True requires check_forward_ad to be True")
    del check_grad_dtypes, fast_mode, masked
    if not raise_exception:
        try:
            return gradcheck(func, inputs, eps=eps, atol=atol, rtol=rtol, nondet_tol=nondet_tol,
                             check_undefined_grad=check_undefined_grad,
                             check_batched_grad=check_batched_grad,
                             check_batched_forward_grad=check_batched_forward_grad,
                             check_forward_ad=check_forward_ad,
                             check_backward_ad=check_backward_ad)
        except GradcheckError:
            return False
    inputs = _as_tuple(inputs)
    positions = [i for i, x in enumerate(inputs) if _differentiable(x)]
    if not any(isinstance(x, Tensor) and x.requires_grad for x in inputs):
        raise ValueError(
            "gradcheck expects at least one input tensor to require gradient, but none of "
            "them have requires_grad=True."
        )
    for i in positions:
        if inputs[i].dtype.name != "float64":
            warnings.warn(
                f"Input #{i} requires gradient and is not a double precision floating point "
                "or complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ",
                UserWarning, stacklevel=2)
    with grad_mode.enable_grad():
        _check_output_types(_outputs(func, inputs))
    if check_forward_ad:
        with grad_mode.enable_grad():
            reference, numerical = _numerical_jacobians(func, inputs, positions, eps)
            forward = _forward_jacobians(func, inputs, positions)
        for (k, i), jacobian in numerical.items():
            expected = forward.get((k, i))
            if expected is not None and not np.allclose(expected, jacobian, rtol=rtol, atol=atol):
                return _fail(_mismatch_message(k, i, jacobian, expected, atol, rtol,
                                               tuple(inputs[i].shape), tuple(reference[k].shape),
                                               "forward AD", mode="computed with forward mode "),
                             raise_exception)
    if check_batched_forward_grad:
        with grad_mode.enable_grad():
            _check_batched_forward_grad(func, inputs, positions)
    if not check_backward_ad:
        return True

    with grad_mode.enable_grad():
        outputs = _outputs(func, inputs)
        analytical = _reentrant_jacobians(outputs, inputs, positions, nondet_tol)
        _, numerical = _numerical_jacobians(func, inputs, positions, eps)

    for (k, i), jacobian in numerical.items():
        out = outputs[k]
        if (k, i) not in analytical:
            if _differentiable(out) or not out.dtype.is_floating_point:
                continue
            if np.any(jacobian != 0):
                return _fail(
                    f"Numerical gradient for function expected to be zero: output {k} does not "
                    f"require grad, but changes with input {i} (largest finite difference "
                    f"{np.max(np.abs(jacobian)):.6g}).", raise_exception)
            continue
        expected = analytical[(k, i)]
        if not np.allclose(expected, jacobian, rtol=rtol, atol=atol):
            return _fail(_mismatch_message(k, i, jacobian, expected, atol, rtol,
                                           tuple(inputs[i].shape), tuple(out.shape),
                                           "analytical"), raise_exception)
    with grad_mode.enable_grad():
        if check_batched_grad:
            _check_batched_grad(outputs, inputs, positions)
        _check_backward_multiplies_grad_output(func, inputs, positions)
        if check_undefined_grad:
            _check_undefined_grad(func, inputs, positions)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: :func:`gradcheck` of the map
    ``(inputs, grad_outputs) -> autograd.grad(func(inputs), inputs, grad_outputs,
    create_graph=True)``.

    ``grad_outputs`` default to random (normally distributed, fixed seed) tensors shaped like
    the differentiable outputs; they require grad, so the check covers the dependence on them.

    Examples
    --------
    >>> import gradviz as torch
    >>> x = torch.tensor([0.5, -1.0], dtype=torch.float64, requires_grad=True)
    >>> torch.autograd.gradgradcheck(lambda t: (t * t).sin(), (x,))
    True
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError(
            "Expected at least one of check_fwd_over_rev or check_rev_over_rev to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_undefined_grad=True requires check_rev_over_rev to be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError(
            "Setting check_batched_grad=True requires check_rev_over_rev to be True")
    del gen_non_contig_grad_outputs
    inputs = _as_tuple(inputs)
    positions = [i for i, x in enumerate(inputs) if _differentiable(x)]
    if grad_outputs is None:
        with grad_mode.enable_grad():
            outputs = _outputs(func, inputs)
        rng = np.random.default_rng(0)
        grad_outputs = tuple(
            _wrap(rng.standard_normal(out._data.shape).astype(out._data.dtype),
                  requires_grad=True)
            for out in outputs if _differentiable(out))
    else:
        grad_outputs = _as_tuple(grad_outputs)
    n_inputs = len(inputs)

    def first_derivatives(*args):
        # forward-mode checks pass detached dual tensors: they require grad again, as in torch
        for i in positions:
            if not args[i].requires_grad:
                args[i].requires_grad_()
        for arg in args[n_inputs:]:
            if isinstance(arg, Tensor) and not arg.requires_grad:
                arg.requires_grad_()
        outs = [out for out in _outputs(func, args[:n_inputs]) if _differentiable(out)]
        diff_inputs = [args[i] for i in positions]
        grads = _grad(outs, diff_inputs, list(args[n_inputs:]), create_graph=True,
                      allow_unused=True)
        return tuple(g for g in grads if g is not None)

    try:
        return gradcheck(first_derivatives, inputs + tuple(grad_outputs), eps=eps, atol=atol,
                         rtol=rtol, raise_exception=raise_exception, nondet_tol=nondet_tol,
                         check_undefined_grad=check_undefined_grad,
                         check_grad_dtypes=check_grad_dtypes,
                         check_batched_grad=check_batched_grad, fast_mode=fast_mode,
                         check_forward_ad=check_fwd_over_rev,
                         check_backward_ad=check_rev_over_rev, masked=masked)
    except GradcheckError as error:
        raise GradcheckError(
            f"{error}\n(gradgradcheck: output j is the first derivative with respect to the "
            f"j-th input that requires grad; inputs {n_inputs} and above are the grad_outputs)"
        ) from None
