"""Optimizers: the update rules of ``torch.optim``'s ``SGD``, ``Adam``, ``AdamW``, ``RMSprop``,
``Adagrad``, ``Adamax``, ``NAdam``, ``RAdam`` and ``Adadelta``.

Each ``step()`` runs under ``no_grad`` and updates parameters with in-place ops (so their
version counters advance, as in PyTorch), in the order of ``torch.optim``'s single-tensor
(``foreach=False``) implementations. The loop over groups and parameters is written once, in
``Optimizer.step``; each optimizer writes only its per-parameter rule, ``_single_tensor_step``
(Note [One optimizer loop]).
"""

from __future__ import annotations

import functools
import math
import warnings
from collections import defaultdict

import numpy as np

from gradviz_ext import ops as _ext_ops
from gradviz_ext._hooks import HookList, RemovableHandle

from .._tensor import Tensor
from ..autograd import enable_grad, no_grad
from ..nn._module import _zero_grad
from ..ops import full, maximum, where, zeros_like
from ..ops._inplace import _check_no_partial_overlap, refresh_views, write_scaled

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam", "RAdam",
           "Adadelta", "Rprop", "ASGD"]


class _Required:
    def __repr__(self) -> str:
        return "<required parameter>"


required = _Required()


# hooks of every optimizer's step (torch.optim.optimizer.register_optimizer_step_pre_hook, ...)
_global_optimizer_pre_hooks = HookList()
_global_optimizer_post_hooks = HookList()


def register_optimizer_step_pre_hook(hook):
    """Call ``hook(optimizer, args, kwargs)`` before every optimizer's ``step``."""
    _global_optimizer_pre_hooks.append(hook)
    return RemovableHandle(_global_optimizer_pre_hooks, hook)


def register_optimizer_step_post_hook(hook):
    """Call ``hook(optimizer, args, kwargs)`` after every optimizer's ``step``."""
    _global_optimizer_post_hooks.append(hook)
    return RemovableHandle(_global_optimizer_post_hooks, hook)


def _with_step_hooks(step):
    """``step`` running the step hooks around it, as torch wraps every optimizer's step: pre
    hooks (global first) may replace the arguments, post hooks (global last) see them. As in
    torch, the hooks' ``args`` start with the optimizer itself."""

    @functools.wraps(step)
    def hooked_step(*args, **kwargs):
        self = args[0]
        for hook in [*_global_optimizer_pre_hooks, *self.__dict__.get("_step_pre_hooks", ())]:
            result = hook(self, args, kwargs)
            if result is not None:
                if not (isinstance(result, tuple) and len(result) == 2):
                    raise RuntimeError(f"{step} must return None or a tuple of (new_args, "
                                       f"new_kwargs), but got {result}.")
                args, kwargs = result
        out = step(*args, **kwargs)
        for hook in [*self.__dict__.get("_step_post_hooks", ()), *_global_optimizer_post_hooks]:
            hook(self, args, kwargs)
        return out

    hooked_step._with_step_hooks = True
    return hooked_step


class Optimizer:
    """Base class: ``param_groups`` (dicts with ``"params"`` and hyperparameters) and ``state``."""

    def __init_subclass__(cls, **kwargs):
        super().__init_subclass__(**kwargs)
        step = cls.__dict__.get("step")
        if step is not None and not getattr(step, "_with_step_hooks", False):
            cls.step = _with_step_hooks(step)

    def _hooks(self, name):
        hooks = self.__dict__.get(name)
        if hooks is None:
            hooks = HookList()
            self.__dict__[name] = hooks
        return hooks

    def _add_hook(self, name, hook, prepend=False):
        hooks = self._hooks(name)
        hooks.insert(0, hook) if prepend else hooks.append(hook)
        return RemovableHandle(hooks, hook)

    def register_step_pre_hook(self, hook):
        """Call ``hook(optimizer, args, kwargs)`` before each ``step``; it may return
        ``(new_args, new_kwargs)``. Returns a handle whose ``remove()`` unregisters it."""
        return self._add_hook("_step_pre_hooks", hook)

    def register_step_post_hook(self, hook):
        """Call ``hook(optimizer, args, kwargs)`` after each ``step``."""
        return self._add_hook("_step_post_hooks", hook)

    def register_state_dict_pre_hook(self, hook, prepend: bool = False):
        """Call ``hook(optimizer)`` before ``state_dict()`` builds the dict."""
        return self._add_hook("_state_dict_pre_hooks", hook, prepend)

    def register_state_dict_post_hook(self, hook, prepend: bool = False):
        """Call ``hook(optimizer, state_dict)`` on the built dict; a non-None result replaces it."""
        return self._add_hook("_state_dict_post_hooks", hook, prepend)

    def register_load_state_dict_pre_hook(self, hook, prepend: bool = False):
        """Call ``hook(optimizer, state_dict)`` before loading; a non-None result is loaded
        instead."""
        return self._add_hook("_load_state_dict_pre_hooks", hook, prepend)

    def register_load_state_dict_post_hook(self, hook, prepend: bool = False):
        """Call ``hook(optimizer)`` after loading."""
        return self._add_hook("_load_state_dict_post_hooks", hook, prepend)

    def __init__(self, params, defaults: dict):
        self.defaults = defaults
        self.state = defaultdict(dict)
        self.param_groups = []
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            f"Tensors or dicts, but got {params.type()}")
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for group in groups:
            self.add_param_group(group)

    def add_param_group(self, param_group: dict) -> None:
        """Add a group (a dict with ``"params"`` and optional hyperparameters; the others take
        the optimizer's defaults). ``params`` may hold ``(name, tensor)`` pairs, as
        ``model.named_parameters()`` gives: the names are kept in ``"param_names"``."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError(
                "optimizer parameters need to be organized in ordered collections, but the "
                "ordering of tensors in sets will change between runs. Please use a list instead.")
        params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        group["params"] = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param "
                                 "names are missing")
            group["param_names"] = names
        for p in group["params"]:
            if not isinstance(p, Tensor):
                raise TypeError(f"optimizer can only optimize Tensors, but one of the params is "
                                f"{type(p).__name__}")
            if not p.is_leaf:
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError(f"parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        if len({id(p) for p in group["params"]}) != len(group["params"]):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        for g in self.param_groups:
            if ("param_names" in group) != ("param_names" in g):
                which = "with names" if "param_names" in group else "without names"
                raise ValueError("all optimizer param groups should be with/without names. "
                                 f"cannot add param group {which} to the optimizer")
        existing = {id(p) for g in self.param_groups for p in g["params"]}
        if any(id(p) in existing for p in group["params"]):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none: bool = True) -> None:
        """Reset the gradients of all optimized parameters (to None by default)."""
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    # Note [One optimizer loop]
    # torch.optim's optimizers share one structure: step() evaluates the closure, gathers each
    # group's parameters that have a gradient (_init_group) and hands them to the rule, one
    # tensor at a time (_single_tensor_<name>) or all at once (_multi_tensor_<name>, foreach).
    # gradviz keeps the single-tensor form: this loop is written once, here, and each optimizer
    # writes only its rule, _single_tensor_step(p, grad, group), which creates the parameter's
    # state on first use as torch's _init_group does (SGD without momentum creates none).
    # An optimizer may also update a run of a group's parameters in one call,
    # _group_on_arrays(group, start), which returns the index of the first parameter it left
    # to the rule (Adam: Note [Adam's parameter group in one call]).
    @no_grad()
    def step(self, closure=None):
        """One optimization step: ``closure`` (if given) re-evaluates the loss with grad
        enabled; then every parameter with a gradient is updated in place by the optimizer's
        rule (the negated gradient with ``maximize=True``). Returns the closure's loss."""
        loss = self._closure_loss(closure)
        negate = not self._rule_maximizes
        on_arrays = self._group_on_arrays
        for group in self.param_groups:
            params = group["params"]
            index = 0 if on_arrays is None else on_arrays(group, 0)
            while index < len(params):
                p = params[index]
                index += 1
                if p.grad is not None:
                    grad = -p.grad if negate and group["maximize"] else p.grad
                    self._single_tensor_step(p, grad, group)
                if on_arrays is not None:
                    index = on_arrays(group, index)
        return loss

    _group_on_arrays = None

    # whether _single_tensor_step gets the gradient as it is and negates it itself under
    # maximize=True (Adam: in its one-pass update, Note [Optimizer steps on arrays])
    _rule_maximizes = False

    def _single_tensor_step(self, p, grad, group):
        """Update ``p`` in place from ``grad`` with the hyperparameters of ``group``."""
        raise NotImplementedError(f"{type(self).__name__} defines no update rule (_single_tensor_step)")

    def state_dict(self) -> dict:
        """``{"state": ..., "param_groups": ...}`` with parameters named by their index, as in
        ``torch.optim.Optimizer.state_dict``."""
        for hook in list(self.__dict__.get("_state_dict_pre_hooks", ())):
            hook(self)
        index = {}
        groups = []
        for group in self.param_groups:
            packed = {k: v for k, v in group.items() if k != "params"}
            for p in group["params"]:
                index.setdefault(id(p), len(index))
            packed["params"] = [index[id(p)] for p in group["params"]]
            groups.append(packed)
        state = {index[id(p)]: value for p, value in self.state.items() if id(p) in index}
        state_dict = {"state": state, "param_groups": groups}
        for hook in list(self.__dict__.get("_state_dict_post_hooks", ())):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        return state_dict

    def load_state_dict(self, state_dict: dict) -> None:
        for hook in list(self.__dict__.get("_load_state_dict_pre_hooks", ())):
            result = hook(self, state_dict)
            if result is not None:
                state_dict = result
        groups = state_dict["param_groups"]
        if len(groups) != len(self.param_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        params = [p for g in self.param_groups for p in g["params"]]
        by_index = {}
        for saved, group in zip(groups, self.param_groups):
            if len(saved["params"]) != len(group["params"]):
                raise ValueError("loaded state dict contains a parameter group that doesn't match "
                                 "the size of optimizer's group")
            for i, p in zip(saved["params"], group["params"]):
                by_index[i] = p
            group.update({k: v for k, v in saved.items() if k != "params"})
        self.state = defaultdict(dict)
        for i, value in state_dict["state"].items():
            p = by_index.get(i, params[i] if i < len(params) else None)
            if p is not None:
                # like torch: the state's tensors are taken as they are (not copied), so an
                # optimizer loaded from another's live state_dict shares its buffers
                self.state[p] = dict(value)
        for hook in list(self.__dict__.get("_load_state_dict_post_hooks", ())):
            hook(self)

    def _closure_loss(self, closure):
        if closure is None:
            return None
        with enable_grad():
            return closure()

    def __repr__(self) -> str:
        lines = [type(self).__name__ + " ("]
        for i, group in enumerate(self.param_groups):
            if i:
                lines.append("")  # torch leaves a blank line between groups
            lines.append(f"Parameter Group {i}")
            for key in sorted(group):
                if key != "params":
                    lines.append(f"    {key}: {group[key]}")
        lines.append(")")
        return "\n".join(lines)


Optimizer.step = _with_step_hooks(Optimizer.step)


class SGD(Optimizer):
    """Stochastic gradient descent with optional momentum, dampening, Nesterov, weight decay.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, momentum: float = 0, dampening: float = 0,
                 weight_decay: float = 0, nesterov: bool = False, *, maximize: bool = False,
                 foreach=None, differentiable: bool = False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        super().__init__(params, dict(lr=lr, momentum=momentum, dampening=dampening,
                                      weight_decay=weight_decay, nesterov=nesterov,
                                      maximize=maximize, foreach=foreach,
                                      differentiable=differentiable, fused=fused))

    def _single_tensor_step(self, p, grad, group):
        lr, momentum = group["lr"], group["momentum"]
        dampening, weight_decay = group["dampening"], group["weight_decay"]
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        if momentum != 0:
            state = self.state[p]
            buf = state.get("momentum_buffer")
            if buf is None:
                buf = grad.clone().detach()
                state["momentum_buffer"] = buf
            elif _momentum_on_arrays(p, grad, buf, group):
                return
            else:
                buf.mul_(momentum).add_(grad, alpha=1 - dampening)
            grad = grad.add(buf, alpha=momentum) if group["nesterov"] else buf
        p.add_(grad, alpha=-lr)


class Adam(Optimizer):
    """Adam (Kingma & Ba) with bias correction, L2 ``weight_decay`` and optional AMSGrad.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    _decoupled = False  # AdamW: weight decay applied to the parameter, not the gradient
    _rule_maximizes = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, amsgrad: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False,
                 fused=None, decoupled_weight_decay: bool = None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if decoupled_weight_decay is None:
            decoupled_weight_decay = self._decoupled
        super().__init__(params, dict(lr=lr, betas=tuple(betas), eps=eps,
                                      weight_decay=weight_decay, amsgrad=amsgrad,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      differentiable=differentiable, fused=fused,
                                      decoupled_weight_decay=decoupled_weight_decay))

    def _group_on_arrays(self, group, start):
        """The parameters of ``group`` from ``start`` on, updated in one compiled call up to
        the first one left to ``_single_tensor_step``: its index (Note [Adam's parameter group
        in one call])."""
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay = group["weight_decay"]
        if (type(self)._single_tensor_step is not Adam._single_tensor_step
                or _ext_ops._forward_ad is not None
                or not all(type(number) in _NUMBERS
                           for number in (lr, beta1, beta2, eps, weight_decay))):
            return start
        decoupled = weight_decay != 0 and group["decoupled_weight_decay"]
        l2 = weight_decay != 0 and not decoupled
        return _ext_ops.adam_params(group["params"], start, self.state, Tensor, refresh_views,
                                    1 - beta1, beta1, beta2, 1 - beta2, eps, lr,
                                    group["maximize"], group["amsgrad"],
                                    weight_decay if l2 else None,
                                    1 - lr * weight_decay if decoupled else None)

    def _single_tensor_step(self, p, grad, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        amsgrad = group["amsgrad"]
        state = self.state[p]
        if not state:
            state["step"] = _step_counter()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
            if amsgrad:
                state["max_exp_avg_sq"] = zeros_like(p)
        if _adam_on_arrays(p, grad, group, state):
            return
        if group["maximize"]:
            grad = -grad
        state["step"].add_(1)
        step = state["step"].item()
        grad = _decayed(p, grad, group, lr)
        exp_avg, exp_avg_sq = _update_moments(state, grad, beta1, beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        bias_correction2_sqrt = math.sqrt(bias_correction2)
        if amsgrad:
            state["max_exp_avg_sq"].copy_(maximum(state["max_exp_avg_sq"], exp_avg_sq))
            second = state["max_exp_avg_sq"]
        else:
            second = exp_avg_sq
        denom = (second.sqrt() / bias_correction2_sqrt).add_(eps)
        # torch: p.addcdiv_(exp_avg, denom, value=-step_size)
        p.add_(exp_avg / denom, alpha=-step_size)


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter): ``p *= 1 - lr * weight_decay``
    before the Adam step.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.AdamW([w], lr=0.1, weight_decay=0.5)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.8500, -1.8000], requires_grad=True)
    """

    _decoupled = True

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 1e-2, amsgrad: bool = False, *, maximize: bool = False,
                 foreach=None, capturable: bool = False, differentiable: bool = False,
                 fused=None):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, foreach=foreach,
                         maximize=maximize, capturable=capturable,
                         differentiable=differentiable, fused=fused, decoupled_weight_decay=True)


class RMSprop(Optimizer):
    """RMSprop (Hinton): divide the gradient by a running root mean square, with optional
    momentum and centering.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-2, alpha: float = 0.99, eps: float = 1e-8,
                 weight_decay: float = 0, momentum: float = 0, centered: bool = False,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if momentum < 0.0:
            raise ValueError(f"Invalid momentum value: {momentum}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if alpha < 0.0:
            raise ValueError(f"Invalid alpha value: {alpha}")
        super().__init__(params, dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps,
                                      centered=centered, weight_decay=weight_decay,
                                      capturable=capturable, foreach=foreach, maximize=maximize,
                                      differentiable=differentiable))

    def _single_tensor_step(self, p, grad, group):
        lr, alpha, eps = group["lr"], group["alpha"], group["eps"]
        momentum, weight_decay = group["momentum"], group["weight_decay"]
        state = self.state[p]
        if not state:
            state["step"] = _step_counter()
            state["square_avg"] = zeros_like(p)
            if momentum > 0:
                state["momentum_buffer"] = zeros_like(p)
            if group["centered"]:
                state["grad_avg"] = zeros_like(p)
        state["step"].add_(1)
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg = state["square_avg"]
        # torch: square_avg.mul_(alpha).addcmul_(grad, grad, value=1 - alpha)
        square_avg.mul_(alpha).add_(grad * grad, alpha=1 - alpha)
        if group["centered"]:
            grad_avg = state["grad_avg"]
            grad_avg.add_((grad - grad_avg) * (1 - alpha))  # torch: lerp_
            avg = (square_avg - grad_avg * grad_avg).sqrt_()
        else:
            avg = square_avg.sqrt()
        avg = avg.add_(eps)
        if momentum > 0:
            buf = state["momentum_buffer"]
            buf.mul_(momentum).add_(grad / avg)
            p.add_(buf, alpha=-lr)
        else:
            p.add_(grad / avg, alpha=-lr)


class Adagrad(Optimizer):
    """Adagrad (Duchi et al.): divide the gradient by the root of the sum of its squares.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-2, lr_decay: float = 0, weight_decay: float = 0,
                 initial_accumulator_value: float = 0, eps: float = 1e-10, foreach=None, *,
                 maximize: bool = False, differentiable: bool = False, fused=None):
        if lr < 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if lr_decay < 0.0:
            raise ValueError(f"Invalid lr_decay value: {lr_decay}")
        if weight_decay < 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        if initial_accumulator_value < 0.0:
            raise ValueError(f"Invalid initial_accumulator_value value: {initial_accumulator_value}")
        if eps < 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        super().__init__(params, dict(lr=lr, lr_decay=lr_decay, eps=eps,
                                      weight_decay=weight_decay,
                                      initial_accumulator_value=initial_accumulator_value,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, fused=fused))
        for group in self.param_groups:  # torch creates the state up front
            for p in group["params"]:
                self.state[p]["step"] = _step_counter()
                self.state[p]["sum"] = full(p.shape, group["initial_accumulator_value"],
                                            dtype=p.dtype)

    def _single_tensor_step(self, p, grad, group):
        lr, lr_decay, eps = group["lr"], group["lr_decay"], group["eps"]
        weight_decay = group["weight_decay"]
        state = self.state[p]
        state["step"].add_(1)
        step = state["step"].item()
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        clr = lr / (1 + (step - 1) * lr_decay)
        state["sum"].add_(grad * grad)  # torch: addcmul_(grad, grad, value=1)
        std = state["sum"].sqrt().add_(eps)
        p.add_(grad / std, alpha=-clr)  # torch: addcdiv_(grad, std, value=-clr)


# Note [Optimizer steps on arrays]
# Written with tensor ops, an Adam step is eleven gradviz calls per parameter (five of them
# in place), each paying for its checks, its wrapping and its version bump: on the 2-block
# GPT of bench/models.py (30 parameters, 110k values) about 1 ms of an 11 ms training step.
# When nothing can tell the difference, the step runs on the tensors' arrays instead: the
# same numpy ufuncs (and the same fused add, Note [Direct in-place arithmetic] in
# ops/_inplace.py) on the same operands in the same order, into temporaries of the same
# layout, so the bits are the tensor ops' bits (tests/optim/test_optimizer_steps_on_arrays.py),
# with numpy's warnings off as in those ops; each written tensor's version counter is bumped
# once per in-place op of the tensor path, in its order, and the live views of a written
# tensor get their history renewed as after those ops (a linear layer's weight has its
# transpose among its views). "Nothing can tell" means: no forward-AD level (whose tangents
# the tensor path updates), hyperparameters that are Python numbers, and a gradient,
# parameter and state tensors that are C-contiguous float32 or float64 arrays of one dtype
# and shape, the written ones writeable. Anything else takes the tensor path. SGD's momentum
# update (after its first step, which makes the buffer) takes the same route. Adam's and
# AdamW's numpy calls are one compiled pass where their fused adds are FMA
# (gradviz_ext/c/adam_step.h, the same bits again), with maximize's negation, the weight
# decay (L2 or decoupled) and AMSGrad's maximum folded in: Adam negates the gradient itself
# (Optimizer._rule_maximizes), so that no negated copy is made. The pass runs on AVX vectors
# (8 float32 values at a time); one value at a time, as GCC compiled the loop by itself (its
# sqrt must be able to set errno), it took four times as long. Measured (medians of 200
# optimizer steps, the old and new builds alternating, a shared machine): the GPT's Adam step
# 0.98 ms with tensor ops, 0.54 ms with the numpy calls, 0.45 ms with the scalar pass (its
# loop 286 us), 0.23 ms with the vector pass (71 us); torch's, inside its training step:
# 1.4 ms. The LSTM's: 0.20, 0.11, 0.095 and 0.047 ms (loop 65 -> 16 us; torch's: 0.39 ms).
# cnn_bn's SGD with momentum 0.097 -> 0.061 ms (torch's: 0.078 ms).
_STEP_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_NUMBERS = (float, int)

# Note [Adam's parameter group in one call]
# With its update one compiled pass, Adam's step on a small model was mostly Python: per
# parameter, the state's lookups, the checks of _adam_on_arrays, the counter's increment and
# the bias corrections in Python floats, four version bumps (about 6 us; the GPT of
# bench/models.py has 30 parameters). Adam._group_on_arrays hands the group's parameter list
# to one compiled call (``adam_params`` in gradviz_ext/_ops.py), which does, per parameter in
# the list's order, what the per-parameter path does: the same checks, the counter incremented
# in its dtype as ``np.add(counter, 1, out=counter)`` does, ``sqrt(1 - beta2 ** t)`` and
# ``-(lr / (1 - beta1 ** t))`` with the C library's ``pow`` and ``sqrt`` (which Python's float
# power and math.sqrt are, for 0 <= beta < 1 and a finite t >= 1), the one-pass update, the
# version bumps and view renewals in the same order. It stops at the first parameter it does
# not cover (no gradient, no state yet, a case _adam_on_arrays leaves to the tensor ops, an
# inference tensor, a power Python would refuse) before writing anything of it, and returns
# its index; Optimizer.step runs that parameter's rule and hands the rest of the list back. So
# the order of the updates, their bits, the versions and the errors are the per-parameter
# path's (tests/optim/test_optimizer_steps_on_arrays.py compares them on mixed groups and
# unusual states). The GPT's ``opt.step()`` 250 -> 74 us (torch's, measured the same way:
# 870 us), medians of 300 steps alternating the two paths in one process.


def _plain(tensor, dtype, shape):
    """Whether ``tensor`` may be written through its array (Note [Optimizer steps on
    arrays]): a C-contiguous writeable array of ``dtype`` and ``shape``."""
    if not isinstance(tensor, Tensor):
        return False
    data = tensor._data
    return (data.dtype == dtype and data.shape == shape and data.flags.c_contiguous
            and data.flags.writeable)


def _written(tensor):
    """What an in-place op does after writing into ``tensor``'s array: bump its version and
    renew the history of its base's live views (Note [Direct in-place arithmetic])."""
    tensor._version_counter.bump()
    root = tensor if tensor._base is None else tensor._base
    if root._views is not None:
        refresh_views(root)


def _arrays_allowed(p, grad, *numbers):
    """Whether a step of ``p`` from ``grad`` may run on their arrays (Note [Optimizer steps
    on arrays]), the state aside."""
    if _ext_ops._forward_ad is not None:
        return False
    for number in numbers:
        if type(number) not in _NUMBERS:
            return False
    data, g = p._data, grad._data
    return (data.dtype in _STEP_DTYPES and _plain(p, data.dtype, data.shape)
            and g.dtype == data.dtype and g.shape == data.shape and g.flags.c_contiguous)


def _momentum_on_arrays(p, grad, buf, group):
    """SGD's ``buf.mul_(momentum).add_(grad, alpha=1 - dampening)`` and the parameter's
    update on the arrays: True when done, False (nothing written) when the tensor ops must
    run (Note [Optimizer steps on arrays])."""
    lr, momentum, dampening = group["lr"], group["momentum"], group["dampening"]
    if group["nesterov"] or not (_arrays_allowed(p, grad, lr, momentum, dampening)
                                 and _plain(buf, p._data.dtype, p._data.shape)):
        return False
    b = buf._data
    with np.errstate(all="ignore"):
        np.multiply(b, momentum, out=b)
        _written(buf)
        _check_no_partial_overlap(buf, (grad,))
        write_scaled(b, np.add, grad._data, 1 - dampening)
        _written(buf)
        _check_no_partial_overlap(p, (buf,))
        write_scaled(p._data, np.add, b, -lr)
    _written(p)
    return True


def _adam_on_arrays(p, grad, group, state):
    """Adam's ``_single_tensor_step`` once the state is made, on the arrays, from the gradient
    as it is (negated here under ``maximize``): True when done, False (nothing written) when
    the tensor ops must run (Note [Optimizer steps on arrays])."""
    lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
    weight_decay, amsgrad = group["weight_decay"], group["amsgrad"]
    if not _arrays_allowed(p, grad, lr, beta1, beta2, eps, weight_decay):
        return False
    dtype, shape = p._data.dtype, p._data.shape
    step, exp_avg, exp_avg_sq = state.get("step"), state.get("exp_avg"), state.get("exp_avg_sq")
    largest = state.get("max_exp_avg_sq")
    if not (isinstance(step, Tensor) and step._data.dtype in _STEP_DTYPES
            and _plain(step, step._data.dtype, ())
            and _plain(exp_avg, dtype, shape) and _plain(exp_avg_sq, dtype, shape)
            and (not amsgrad or _plain(largest, dtype, shape))):
        return False
    counter = step._data
    np.add(counter, 1, out=counter)
    _written(step)
    t = counter.item()
    m, v = exp_avg._data, exp_avg_sq._data
    correction2, rate = math.sqrt(1 - beta2 ** t), -(lr / (1 - beta1 ** t))
    decoupled = weight_decay != 0 and group["decoupled_weight_decay"]
    l2 = weight_decay != 0 and not decoupled
    # one per in-place op of the tensor path, in order: p.mul_ (decoupled decay), the moments'
    # three, AMSGrad's maximum, the parameter's update
    written = ((p,) * decoupled + (exp_avg, exp_avg_sq, exp_avg_sq) + (largest,) * amsgrad
               + (p,))
    # all the numpy calls below in one pass, the same bits; not for an inference tensor, whose
    # version bump raises right after its own write
    if (not any(x._version_counter.inference for x in written)
            and _ext_ops.adam_step(p._data, grad._data, m, v, largest._data if amsgrad else None,
                                   1 - beta1, beta2, 1 - beta2, correction2, eps, rate,
                                   group["maximize"], weight_decay if l2 else None,
                                   1 - lr * weight_decay if decoupled else None)):
        for tensor in written:
            _written(tensor)
        return True
    if group["maximize"]:
        grad = -grad
    grad = _decayed(p, grad, group, lr)  # tensor ops: none, or one with weight decay
    g = grad._data
    with np.errstate(all="ignore"):
        scratch = np.subtract(g, m, out=np.empty_like(m))  # _update_moments; 0-d too
        np.multiply(scratch, 1 - beta1, out=scratch)
        np.add(m, scratch, out=m)
        _written(exp_avg)
        np.multiply(v, beta2, out=v)
        _written(exp_avg_sq)
        np.multiply(g, g, out=scratch)
        write_scaled(v, np.add, scratch, 1 - beta2)
        _written(exp_avg_sq)
        second = v
        if amsgrad:
            second = largest._data
            np.maximum(second, v, out=second)
            _written(largest)
        np.sqrt(second, out=scratch)
        np.divide(scratch, correction2, out=scratch)
        np.add(scratch, eps, out=scratch)
        np.divide(m, scratch, out=scratch)
        write_scaled(p._data, np.add, scratch, rate)
    _written(p)
    return True


def _step_counter():
    """The ``step`` entry of an optimizer's state: a float32 0-d tensor, as in torch."""
    return full((), 0.0)


def _decayed(p, grad, group, lr):
    """The gradient after the group's weight decay: L2, ``grad + weight_decay * p``; or
    decoupled (``decoupled_weight_decay``: AdamW and the W variants), ``p`` shrunk by
    ``1 - lr * weight_decay`` in place and the gradient as it is."""
    weight_decay = group["weight_decay"]
    if weight_decay == 0:
        return grad
    if group["decoupled_weight_decay"]:
        p.mul_(1 - lr * weight_decay)
        return grad
    return grad.add(p, alpha=weight_decay)


def _update_moments(state, grad, beta1, beta2):
    """Adam's running moments, in place, in torch's arithmetic: ``exp_avg`` moves toward the
    gradient by ``1 - beta1`` (torch: ``lerp_``), ``exp_avg_sq`` is ``beta2`` of itself plus
    ``1 - beta2`` of the squared gradient (torch: ``addcmul_``). Returns both."""
    exp_avg, exp_avg_sq = state["exp_avg"], state["exp_avg_sq"]
    exp_avg.add_((grad - exp_avg) * (1 - beta1))
    exp_avg_sq.mul_(beta2).add_(grad * grad, alpha=1 - beta2)
    return exp_avg, exp_avg_sq


def _check_betas(lr, eps, betas, weight_decay):
    """The argument checks torch's Adam-family constructors share, with torch's messages."""
    if not lr >= 0.0:
        raise ValueError(f"Invalid learning rate: {lr}")
    if not eps >= 0.0:
        raise ValueError(f"Invalid epsilon value: {eps}")
    if not 0.0 <= betas[0] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
    if not 0.0 <= betas[1] < 1.0:
        raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
    if not weight_decay >= 0.0:
        raise ValueError(f"Invalid weight_decay value: {weight_decay}")


class Adamax(Optimizer):
    """Adamax (Kingma & Ba): Adam with the infinity norm in place of the second moment.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, foreach=None, *, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        _check_betas(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      foreach=foreach, maximize=maximize,
                                      differentiable=differentiable, capturable=capturable))

    def _single_tensor_step(self, p, grad, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        weight_decay = group["weight_decay"]
        state = self.state[p]
        if not state:
            state["step"] = _step_counter()
            state["exp_avg"] = zeros_like(p)
            state["exp_inf"] = zeros_like(p)
        state["step"].add_(1)
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        exp_avg, exp_inf = state["exp_avg"], state["exp_inf"]
        exp_avg.add_((grad - exp_avg) * (1 - beta1))  # torch: lerp_
        # torch: torch.maximum(exp_inf.mul_(beta2), grad.abs().add_(eps), out=exp_inf)
        exp_inf.copy_(maximum(exp_inf.mul_(beta2), grad.abs().add_(eps)))
        clr = lr / (1 - beta1 ** state["step"].item())
        p.add_(exp_avg / exp_inf, alpha=-clr)  # torch: addcdiv_(exp_avg, exp_inf)


class NAdam(Optimizer):
    """NAdam (Dozat): Adam with Nesterov momentum, whose momentum warms up by
    ``momentum_decay``; ``decoupled_weight_decay=True`` gives NAdamW.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.8944, -1.8944], requires_grad=True)
    """

    def __init__(self, params, lr: float = 2e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, momentum_decay: float = 4e-3,
                 decoupled_weight_decay: bool = False, *, foreach=None, maximize: bool = False,
                 capturable: bool = False, differentiable: bool = False):
        _check_betas(lr, eps, betas, weight_decay)
        if not momentum_decay >= 0.0:
            raise ValueError(f"Invalid momentum_decay value: {momentum_decay}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      momentum_decay=momentum_decay,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      maximize=maximize, foreach=foreach,
                                      capturable=capturable, differentiable=differentiable))

    def _single_tensor_step(self, p, grad, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        momentum_decay = group["momentum_decay"]
        state = self.state[p]
        if not state:
            state["step"] = _step_counter()
            state["mu_product"] = full((), 1.0)  # float32, as in torch
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        state["step"].add_(1)
        step = state["step"].item()
        bias_correction2 = 1 - beta2 ** step
        grad = _decayed(p, grad, group, lr)
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product = state["mu_product"].mul_(mu).item()
        mu_product_next = mu_product * mu_next
        exp_avg, exp_avg_sq = _update_moments(state, grad, beta1, beta2)
        denom = (exp_avg_sq / bias_correction2).sqrt().add_(eps)
        # torch: two addcdiv_ calls, the gradient's share and the momentum's
        p.add_(grad / denom, alpha=-lr * (1.0 - mu) / (1.0 - mu_product))
        p.add_(exp_avg / denom, alpha=-lr * mu_next / (1.0 - mu_product_next))


class RAdam(Optimizer):
    """RAdam (Liu et al.): Adam whose adaptive step is rectified by the variance of its
    second-moment estimate, plain momentum SGD while that estimate is too young
    (``rho_t <= 5``); ``decoupled_weight_decay=True`` gives RAdamW.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 weight_decay: float = 0, decoupled_weight_decay: bool = False, *, foreach=None,
                 maximize: bool = False, capturable: bool = False, differentiable: bool = False):
        _check_betas(lr, eps, betas, weight_decay)
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, foreach=foreach, capturable=capturable,
                                      decoupled_weight_decay=decoupled_weight_decay,
                                      differentiable=differentiable))

    def _single_tensor_step(self, p, grad, group):
        lr, (beta1, beta2), eps = group["lr"], group["betas"], group["eps"]
        state = self.state[p]
        if not state:
            state["step"] = _step_counter()
            state["exp_avg"] = zeros_like(p)
            state["exp_avg_sq"] = zeros_like(p)
        state["step"].add_(1)
        step = state["step"].item()
        grad = _decayed(p, grad, group, lr)
        exp_avg, exp_avg_sq = _update_moments(state, grad, beta1, beta2)
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        bias_corrected_exp_avg = exp_avg / bias_correction1
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        if rho_t > 5.0:
            rect = ((rho_t - 4) * (rho_t - 2) * rho_inf
                    / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) ** 0.5
            adaptive_lr = (bias_correction2 ** 0.5) / exp_avg_sq.sqrt().add_(eps)
            p.add_(bias_corrected_exp_avg * lr * adaptive_lr * rect, alpha=-1.0)
        else:
            p.add_(bias_corrected_exp_avg * lr, alpha=-1.0)


class Adadelta(Optimizer):
    """Adadelta (Zeiler): steps scaled by the ratio of running RMS of past updates to running
    RMS of gradients, so ``lr`` defaults to 1.

    Examples
    --------
    >>> import gradviz as torch
    >>> w = torch.nn.Parameter(torch.tensor([1.0, -2.0]))
    >>> opt = torch.optim.Adadelta([w])
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9968, -1.9968], requires_grad=True)
    """

    def __init__(self, params, lr: float = 1.0, rho: float = 0.9, eps: float = 1e-6,
                 weight_decay: float = 0, foreach=None, *, capturable: bool = False,
                 maximize: bool = False, differentiable: bool = False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        if not eps >= 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay,
                                      maximize=maximize, capturable=capturable,
                                      foreach=foreach, differentiable=differentiable))

    def _single_tensor_step(self, p, grad, group):
        lr, rho, eps = group["lr"], group["rho"], group["eps"]
        weight_decay = group["weight_decay"]
        state = self.state[p]
        if not state:
            state["step"] = _step_counter()
            state["square_avg"] = zeros_like(p)
            state["acc_delta"] = zeros_like(p)
        state["step"].add_(1)
        if weight_decay != 0:
            grad = grad.add(p, alpha=weight_decay)
        square_avg, acc_delta = state["square_avg"], state["acc_delta"]
        square_avg.mul_(rho).add_(grad * grad, alpha=1 - rho)
        std = square_avg.add(eps).sqrt_()
        delta = acc_delta.add(eps).sqrt_().div_(std).mul_(grad)
        acc_delta.mul_(rho).add_(delta * delta, alpha=1 - rho)
        p.add_(delta, alpha=-lr)


class SparseAdam(Optimizer):
    """PyTorch's Adam for sparse gradients (``nn.Embedding(sparse=True)``), which updates only
    the rows a gradient holds. gradviz has no sparse tensors (``sparse=True`` is refused where
    a layer takes it), so every gradient is dense and ``step`` raises the error PyTorch raises
    for a dense gradient; the constructor checks its arguments as PyTorch's does."""

    def __init__(self, params, lr: float = 1e-3, betas=(0.9, 0.999), eps: float = 1e-8,
                 maximize: bool = False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not lr > 0.0:  # NaN too
            raise ValueError(f"Invalid learning rate: {lr}")
        if not eps > 0.0:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        super().__init__(params, dict(lr=lr, betas=betas, eps=eps, maximize=maximize))

    def _single_tensor_step(self, p, grad, group):
        raise RuntimeError("SparseAdam does not support dense gradients, please consider Adam instead")


class Rprop(Optimizer):
    """Resilient backpropagation: each entry has its own step size, grown by ``etas[1]`` while
    the gradient keeps its sign and shrunk by ``etas[0]`` when it flips (that step is then
    skipped), within ``step_sizes``; the update is ``-sign(grad) * step_size``."""

    def __init__(self, params, lr: float = 1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 capturable: bool = False, foreach=None, maximize: bool = False,
                 differentiable: bool = False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        super().__init__(params, dict(lr=lr, etas=etas, step_sizes=step_sizes, foreach=foreach,
                                      maximize=maximize, differentiable=differentiable,
                                      capturable=capturable))

    def _single_tensor_step(self, p, grad, group):
        etaminus, etaplus = group["etas"]
        step_size_min, step_size_max = group["step_sizes"]
        state = self.state[p]
        if len(state) == 0:
            state["step"] = _step_counter()
            state["prev"] = zeros_like(p)
            state["step_size"] = full(tuple(grad.shape), group["lr"], dtype=grad.dtype)
        state["step"].add_(1)
        prev, step_size = state["prev"], state["step_size"]
        sign = grad.mul(prev).sign()
        factor = where(sign > 0, etaplus, where(sign < 0, etaminus, 1.0)).to(grad.dtype)
        step_size.mul_(factor).clamp_(step_size_min, step_size_max)
        grad = where(factor == etaminus, 0.0, grad).to(grad.dtype)
        p.addcmul_(grad.sign(), step_size, value=-1)
        prev.copy_(grad)


class ASGD(Optimizer):
    """Averaged SGD (Polyak and Juditsky): SGD with a decaying rate ``eta`` and a running
    average ``ax`` of the iterates, started after ``t0`` steps."""

    def __init__(self, params, lr: float = 1e-2, lambd: float = 1e-4, alpha: float = 0.75,
                 t0: float = 1e6, weight_decay: float = 0, foreach=None, maximize: bool = False,
                 differentiable: bool = False, capturable: bool = False):
        if not lr >= 0.0:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not weight_decay >= 0.0:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        super().__init__(params, dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0,
                                      weight_decay=weight_decay, foreach=foreach,
                                      maximize=maximize, capturable=capturable,
                                      differentiable=differentiable))

    def _single_tensor_step(self, p, grad, group):
        lr, lambd, alpha, t0 = group["lr"], group["lambd"], group["alpha"], group["t0"]
        state = self.state[p]
        if len(state) == 0:  # torch keeps eta and mu as float32 0-d tensors
            state["step"] = _step_counter()
            state["eta"] = full((), lr)
            state["mu"] = full((), 1.0)
            state["ax"] = zeros_like(p)
        state["step"].add_(1)
        if group["weight_decay"] != 0:
            grad = grad.add(p, alpha=group["weight_decay"])
        eta_value = state["eta"].item()
        p.mul_(1 - lambd * eta_value)
        p.add_(grad, alpha=-eta_value)
        ax, mu = state["ax"], state["mu"]
        if mu.item() != 1:
            ax.add_(p.sub(ax).mul_(mu))
        else:
            ax.copy_(p)
        step = state["step"].item()
        state["eta"].copy_(full((), lr / ((1 + lambd * lr * step) ** alpha)))
        mu.copy_(full((), 1 / max(1, step - t0)))
