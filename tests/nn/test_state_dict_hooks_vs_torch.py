"""The state-dict hooks of ``Module`` against torch: the calls each hook receives and their
order, what returned values do, edits made in place, ``RemovableHandle`` removal, and the errors
(Note [State dict walk and hooks] in ``gradviz/nn/_state_dict.py``). Every program runs on
gradviz and on torch and records the same log."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz


def _model(lib):
    lib.manual_seed(0)
    model = lib.nn.Sequential(lib.nn.Linear(2, 3), lib.nn.Sequential(lib.nn.BatchNorm1d(3), lib.nn.Linear(3, 1)))
    with lib.no_grad():
        for index, parameter in enumerate(model.parameters()):
            parameter.copy_(lib.tensor(np.linspace(-1, 1, parameter.numel()).reshape(tuple(parameter.shape)) + index,
                                       dtype=lib.float32))
    return model


def _describe(value):
    """Hook arguments as comparable text: modules by class, tensors by shape, dicts by keys."""
    if isinstance(value, (gradviz.nn.Module, torch.nn.Module)):
        return type(value).__name__
    if isinstance(value, (gradviz.Tensor, torch.Tensor)):
        return ("tensor", tuple(value.shape))
    if isinstance(value, dict):
        return ("dict", tuple(value))
    if isinstance(value, (list, tuple)) and not hasattr(value, "_fields"):
        return [_describe(v) for v in value]
    if hasattr(value, "_fields"):
        return (type(value).__name__, list(value.missing_keys), list(value.unexpected_keys))
    return value


def _recorder(log, label, result=None):
    def hook(*arguments):
        log.append((label, [_describe(a) for a in arguments]))
        return result(*arguments) if result is not None else None
    return hook


def test_state_dict_hooks_run_in_torchs_order_with_torchs_arguments():
    def run(lib):
        log = []
        model = _model(lib)
        for name, module in model.named_modules():
            module.register_state_dict_pre_hook(_recorder(log, "pre " + name))
            module.register_state_dict_post_hook(_recorder(log, "post " + name))
        state = model.state_dict(prefix="top.", keep_vars=True)
        return log, list(state), dict(state._metadata)

    assert run(gradviz) == run(torch)


def test_private_post_hook_may_replace_the_state_dict_and_public_must_return_none():
    def run(lib):
        model = _model(lib)
        inner = model[1]
        inner._register_state_dict_hook(
            lambda module, state, prefix, metadata: type(state)((k, v) for k, v in state.items() if "running" not in k))
        keys = list(model.state_dict())
        handle = model.register_state_dict_post_hook(lambda module, state, prefix, metadata: state)
        with pytest.raises(RuntimeError, match="state_dict post-hook must return None"):
            model.state_dict()
        handle.remove()
        hook = lambda module, state, prefix, metadata: None  # noqa: E731
        model.register_state_dict_post_hook(hook)
        with pytest.raises(RuntimeError, match="Cannot register the same function as the state dict post hook"):
            model._register_state_dict_hook(hook)
        return keys, list(model.state_dict())

    assert run(gradviz) == run(torch)


def test_load_hooks_run_in_torchs_order_with_torchs_arguments():
    def run(lib):
        log = []
        source = _model(lib).state_dict()
        model = _model(lib)
        for name, module in model.named_modules():
            module.register_load_state_dict_pre_hook(_recorder(log, "pre " + name))
            module._register_load_state_dict_pre_hook(_recorder(log, "private pre " + name))
            module._register_load_state_dict_pre_hook(_recorder(log, "private pre with module " + name),
                                                      with_module=True)
            module.register_load_state_dict_post_hook(_recorder(log, "post " + name))
        del source["1.1.bias"]
        source["extra"] = lib.zeros(1)
        result = model.load_state_dict(source, strict=False)
        return log, repr(result)

    assert run(gradviz) == run(torch)


def test_load_pre_hook_can_rename_keys_and_post_hook_can_clear_them():
    def run(lib):
        source = {("old_" + k if k.startswith("0.") else k): v for k, v in _model(lib).state_dict().items()}
        model = _model(lib)

        def rename(module, state, prefix, *rest):
            for key in [k for k in state if k.startswith("old_")]:
                state[key[4:]] = state.pop(key)

        def forgive(module, keys):
            keys.unexpected_keys.clear()

        model.register_load_state_dict_pre_hook(rename)
        with lib.no_grad():
            model[0].weight.zero_()
        model[1].register_load_state_dict_post_hook(forgive)  # runs before the root's check
        source["1.surplus"] = lib.ones(1)
        result = model.load_state_dict(source)
        return repr(result), model[0].weight.detach().numpy().tolist()

    assert run(gradviz) == run(torch)


def test_post_hook_returning_a_value_raises_torchs_assertion():
    for lib in (gradviz, torch):
        model = _model(lib)
        model.register_load_state_dict_post_hook(lambda module, keys: keys)
        with pytest.raises(AssertionError, match="are not expected to return new values"):
            model.load_state_dict(model.state_dict())


def test_removed_hooks_are_not_called_and_handles_number_in_order():
    def run(lib):
        log = []
        model = _model(lib)
        handles = [model.register_state_dict_pre_hook(_recorder(log, "a")),
                   model.register_load_state_dict_pre_hook(_recorder(log, "b")),
                   model.register_load_state_dict_post_hook(_recorder(log, "c"))]
        with handles[0]:  # a handle is a context manager that removes its hook
            model.state_dict()
        handles[1].remove()
        handles[1].remove()  # twice is harmless
        model.load_state_dict(model.state_dict())
        handles[2].remove()
        model.load_state_dict(model.state_dict())
        return log, [h.id - handles[0].id for h in handles]

    assert run(gradviz) == run(torch)


def test_load_errors_after_hooks_keep_torchs_wording():
    for lib in (gradviz, torch):
        model = _model(lib)
        state = model.state_dict()
        state["0.weight"] = lib.zeros(5, 5)
        del state["1.1.bias"]
        state["surplus"] = lib.zeros(1)
        with pytest.raises(RuntimeError) as caught:
            model.load_state_dict(state)
        message = str(caught.value)
        assert message.startswith("Error(s) in loading state_dict for Sequential:\n\tMissing key(s) in "
                                  "state_dict: \"1.1.bias\". \n\tUnexpected key(s) in state_dict: \"surplus\". ")
        assert "size mismatch for 0.weight: copying a param with shape" in message


def test_extra_state_is_saved_and_loaded_as_torch():
    def run(lib):
        class Counter(lib.nn.Module):
            def __init__(self):
                super().__init__()
                self.linear = lib.nn.Linear(1, 1)
                self.steps = 0

            def get_extra_state(self):
                return {"steps": self.steps}

            def set_extra_state(self, state):
                self.steps = state["steps"] + 100

        model = lib.nn.Sequential(Counter())
        model[0].steps = 7
        state = model.state_dict()
        keys = list(state)
        model.load_state_dict(state)
        missing = model.load_state_dict({k: v for k, v in state.items() if "extra" not in k}, strict=False)
        plain = lib.nn.Sequential(lib.nn.Linear(1, 1))
        surplus = plain.load_state_dict({**plain.state_dict(), "0._extra_state": 1}, strict=False)
        return keys, state["0._extra_state"], model[0].steps, repr(missing), repr(surplus)

    assert run(gradviz) == run(torch)
