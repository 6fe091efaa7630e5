"""``node_created`` events are what the former code built, key for key and in order.

The recorder builds them faster (Note [The cost of node_created] in
gradviz/instrument/_nodes.py): built-in op nodes read off their fields, the source line's text
kept per file and line, module paths found without a tuple per module passed. The reference
below is the former code, kept as it was: a ``_Reference`` observer records every program
alongside a ``Recorder`` (both observe the same forward), resolves module paths with the former
search and its own per-frame cache (not the frames' ``resolved``), and reads the source line
through ``linecache.getline`` each time.
"""

from __future__ import annotations

import importlib.util
import linecache
import os
import random
import sys

import numpy as np
import pytest

import gradviz
from gradviz import nn
from gradviz.autograd._scopes import relative_names, scope
from gradviz.autograd.graph import saved_tensors_hooks
from gradviz.instrument import Recorder, _nodes
from gradviz.instrument._nodes import (
    _BUILTIN_NODES,
    _ENGINE_NODES,
    _OP_NODE,
    _dtype_name,
    _is_user_file,
    forward_line,
    node_created_payload,
    saved_array,
    saved_tensors_of,
    user_frame,
)
from gradviz.instrument._observers import observe
from gradviz_ext import engine as _engine

# ---- the former code --------------------------------------------------------------------


def old_saved_tensors_of(node) -> list:
    if isinstance(node, _ENGINE_NODES):
        return []
    if isinstance(node, _OP_NODE) and node._kept_inputs is None and node._saved_output is None:
        return []
    found = []
    saved = None if isinstance(node, _OP_NODE) else getattr(node, "_saved", None)
    if isinstance(saved, (list, tuple)):
        for index, item in enumerate(saved):
            if isinstance(item, _engine.SavedTensor):
                found.append((f"saved_tensors[{index}]", item))
    inputs = getattr(node, "_saved_inputs", None)
    if isinstance(inputs, dict):
        for index in sorted(inputs):
            item = inputs[index]
            if isinstance(item, _engine.SavedTensor):
                found.append((f"input {index}", item))
    output = getattr(node, "_saved_output", None)
    if isinstance(output, _engine.SavedTensor):
        found.append(("output", output))
    return found


def _old_saved_info(slot, label, saved) -> dict:
    data = saved_array(saved)
    if data is not None:
        shape, dtype = list(data.shape), _dtype_name(data.dtype)
    else:
        shape, dtype = [], "unknown"
    return {"slot": slot, "label": label, "shape": shape, "dtype": dtype,
            "hooked": bool(saved._has_hooks)}


def _old_meta(meta):
    if meta is None:
        return None
    return {"shape": list(meta.shape), "dtype": None if meta.dtype is None else meta.dtype.name}


def old_relative_names(owner, module):
    stack = [(owner, (), ())]
    seen = set()
    while stack:
        current, names, classes = stack.pop()
        if id(current) in seen:
            continue
        seen.add(id(current))
        if current is module and names:
            return names, classes
        children = [(child, names + (str(key),), classes + (type(child).__name__,))
                    for key, child in current.__dict__.get("_modules", {}).items()
                    if child is not None]
        stack.extend(reversed(children))
    name = type(module).__name__
    return (name,), (name,)


class _OldPaths:
    """The former ``frame_path``, with its own cache instead of the frames' ``resolved``."""

    def __init__(self):
        self.resolved: dict[int, tuple] = {}  # id(frame) -> (frame, (path, types))

    def get(self, frame):
        entry = self.resolved.get(id(frame))
        return None if entry is None else entry[1]

    def path(self, frame) -> tuple:
        if self.get(frame) is None:
            chain = []
            current = frame
            while current is not None and self.get(current) is None:
                chain.append(current)
                current = current.parent
            for current in reversed(chain):
                parent = current.parent
                path, types = ((), ()) if parent is None else self.get(parent)
                if current.module is None:
                    names, classes = (str(current.label),), ("",)
                else:
                    owner = parent
                    while owner is not None and owner.module is None:
                        owner = owner.parent
                    if owner is None:
                        names, classes = (), ()
                    else:
                        names, classes = old_relative_names(owner.module, current.module)
                self.resolved[id(current)] = (current, (path + names, types + classes))
        return self.get(frame)[0]


def old_payload(node, source, paths) -> dict:
    kind = node._kind()
    needs = None if isinstance(node, _ENGINE_NODES) else getattr(node, "needs_input_grad", None)
    if needs is None:
        needs = tuple(n is not None for n, _ in node.next_functions)
    custom = not isinstance(node, _BUILTIN_NODES)
    declared = getattr(node, "_output_grad_dtypes", None) if custom else None
    payload = {
        "name": _engine.display_name(node),
        "node_kind": kind,
        "edges": [{"node": None if n is None else n.node_id, "input_nr": nr}
                  for n, nr in node.next_functions],
        "outputs": [_old_meta(node.input_metadata(slot)) for slot in range(node.num_inputs)],
        "needs_input_grad": [bool(flag) for flag in needs],
        "saved": [_old_saved_info(slot, label, saved)
                  for slot, (label, saved) in enumerate(old_saved_tensors_of(node))],
        "materialize_grads": bool(node._materializes_grads()),
        "dirty_outputs": list(getattr(node, "_dirty_outputs", ())) if custom else [],
        "non_differentiable_outputs": (list(getattr(node, "_non_differentiable_outputs", ()))
                                       if custom else []),
        "grad_dtypes": None if declared is None else [
            None if dtype is None else dtype.name for dtype in declared],
        "source": source,
    }
    frame = getattr(node, "_scope", None)
    if frame is not None:
        payload["module"] = list(paths.path(frame))
    return payload


def old_forward_source(frame) -> dict | None:
    """The former ``forward_source``, walking up from ``frame`` (the caller of the
    observer's ``node_created``: every frame below it is gradviz's or this file's)."""
    while frame is not None and not _is_user_file(frame.f_code.co_filename):
        frame = frame.f_back
    if frame is None:
        return None
    filename = frame.f_code.co_filename
    line = frame.f_lineno
    code = linecache.getline(filename, line).strip()
    return {"file": filename, "line": line, "function": frame.f_code.co_name, "code": code}


class _Reference(_engine.Observer):
    """The former ``Recorder.node_created`` and ``_flush_packs`` (forward events only)."""

    def __init__(self):
        self.events: list[dict] = []
        self.pending: list = []
        self.paths = _OldPaths()

    def _add(self, kind, node, text, payload):
        event = {"kind": kind, "seq": len(self.events), "task": None, "node": node.node_id,
                 "time": 0.0, "text": text}
        event.update(payload)
        self.events.append(event)

    def node_created(self, node):
        payload = old_payload(node, old_forward_source(sys._getframe(1)), self.paths)
        name = payload["name"]
        where = ""
        source = payload["source"]
        if source is not None:
            where = f" at {source['file'].rsplit('/', 1)[-1]}:{source['line']}"
            if source["code"]:
                where += f" ({source['code']})"
        saved = len(payload["saved"])
        saves = (f"; it saves {saved} tensor{'' if saved == 1 else 's'} for backward"
                 if saved else "")
        self._add("node_created", node, f"Forward recorded {name}{where}{saves}.", payload)
        if self.pending:
            slots = {id(item): (slot, label)
                     for slot, (label, item) in enumerate(old_saved_tensors_of(node))}
            matched, unmatched = [], []
            for saved_tensor, hook in self.pending:
                found = slots.get(id(saved_tensor))
                if found is None:
                    unmatched.append((saved_tensor, hook))
                else:
                    matched.append((found, hook))
            self.pending = unmatched[-64:]
            for (slot, label), hook in sorted(matched, key=lambda item: item[0][0]):
                hook_name = _engine._hook_name(hook)
                self._add("saved_packed", node,
                          f"{_engine.display_name(node)} packed {label} with the saved-tensor "
                          f"hook {hook_name}.", {"slot": slot, "label": label, "hook": hook_name})

    def saved_packed(self, saved, hook):
        self.pending.append((saved, hook))


# ---- comparing ------------------------------------------------------------------------------


def _without_time(events):
    return [{key: (0.0 if key == "time" else value) for key, value in event.items()}
            for event in events if event["kind"] in ("node_created", "saved_packed")]


def recorded_alongside(program, *args):
    """Run ``program(*args)`` observed by the reference and then a Recorder; returns what
    the program returned, the reference's events and the recorder's."""
    reference, recorder = _Reference(), Recorder()
    handles = [observe(reference, backward=False), observe(recorder, backward=False)]
    try:
        result = program(*args)
    finally:
        for handle in handles:
            handle.remove()
    return result, reference.events, recorder.events


def assert_same_events(program, *args):
    result, expected, events = recorded_alongside(program, *args)
    assert events, "the program recorded nothing"
    # repr: the order of every dict's keys, lists (not tuples), True (not 1) alike
    assert repr(_without_time(events)) == repr(_without_time(expected))
    created = [e for e in events if e["kind"] == "node_created"]
    return result, created


# ---- programs -------------------------------------------------------------------------------


class Block(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.norm = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 2 * width), nn.GELU(), nn.Linear(2 * width, width))

    def forward(self, x):
        return x + self.mlp(self.norm(x))


class Net(nn.Module):
    def __init__(self, width=6, blocks=3, outsider=None):
        super().__init__()
        # a module called from forward but registered nowhere below the model
        self.__dict__["outsider"] = outsider if outsider is not None else nn.Linear(width, width)
        self.embed = nn.Linear(4, width)
        self.blocks = nn.ModuleList([Block(width) for _ in range(blocks)])
        self.shared = nn.Linear(width, width)
        self.alias = self.shared  # one module registered twice: named at its first place
        self.head = nn.Sequential(nn.Sequential(nn.Tanh(), nn.Linear(width, 3)))

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        x = self.shared(x)
        with scope("twice"):
            x = self.alias(x).relu()  # the same module again, inside a scope
        return self.head(x + self.outsider(x))


def test_nested_and_reused_modules():
    model = Net()
    x = gradviz.randn(5, 4)
    loss, created = assert_same_events(lambda: model(x).sum())
    paths = {tuple(e["module"]) for e in created if "module" in e}
    assert ("blocks", "2", "mlp", "0") in paths and ("twice", "shared") in paths
    assert ("Linear",) in paths and ("head", "0", "1") in paths
    assert all(e["source"]["code"] for e in created)
    # again, and after a submodule is replaced (paths are found afresh at each call)
    assert_same_events(lambda: model(x).sum())
    model.blocks[1] = model.blocks[0]
    model.shared = nn.Linear(6, 6)
    assert_same_events(lambda: model(x).sum())
    loss.backward()


class Recursive(nn.Module):
    def __init__(self, depth):
        super().__init__()
        self.inner = Recursive(depth - 1) if depth else None
        self.scale = nn.Linear(3, 3)

    def forward(self, x):
        x = self.scale(x)
        return self.inner(x) if self.inner is not None else x


def test_deep_and_recursive_modules():
    deep = nn.Sequential(*[nn.Sequential(nn.Linear(3, 3), nn.Sigmoid()) for _ in range(12)])
    assert_same_events(lambda: deep(gradviz.randn(2, 3)).mean())
    assert_same_events(lambda: Recursive(6)(gradviz.randn(2, 3)).sum())


class Scale(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x, k):
        ctx.save_for_backward(x)
        ctx.set_materialize_grads(False)
        ctx.set_output_grad_dtype(gradviz.float64)
        return (x * k).double()

    @staticmethod
    def backward(ctx, grad):
        return grad.float() * 2, None


class Dirty(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x, y):
        x.mul_(2)
        ctx.mark_dirty(x)
        index = y.argmax()
        ctx.mark_non_differentiable(index)
        ctx.save_for_backward(y)
        return x, index, y * 1

    @staticmethod
    def backward(ctx, gx, gindex, gy):
        return gx * 2, gy


def test_custom_functions():
    def program():
        x = gradviz.randn(4, requires_grad=True)
        y = gradviz.randn(4, requires_grad=True)
        a = Scale.apply(x, 3.0)
        b = x.clone()
        out, index, c = Dirty.apply(b, y)
        return a.sum() + out.sum() + c.sum()

    loss, created = assert_same_events(program)
    assert {e["node_kind"] for e in created} == {"builtin", "custom"}
    assert any(e["dirty_outputs"] for e in created)
    loss.backward()


def test_views_in_place_no_grad_and_saved_outputs():
    def program():
        x = gradviz.randn(4, 6, requires_grad=True)
        w = gradviz.randn(6, 3, dtype=gradviz.float64, requires_grad=True)
        base = x * 1
        base[1:3].mul_(0.5)  # an in-place op on a view: CopySlices
        view = base.t().reshape(6, 4)[::2]
        view.add_(1.0)
        with gradviz.no_grad():
            ignored = x * 3
        e, s, t = x.exp(), x.sigmoid(), x.tanh()  # save their outputs
        parts = x.split(2, dim=1) + x.unbind(0)
        top, where = x.max(dim=1)
        mixed = x.double() @ w
        many = gradviz.cat([x, e, s, t, *parts[:2]], dim=1)
        probs = gradviz.softmax(many, dim=1).log()
        expanded = x[:, :1].expand(4, 6) + ignored
        return (probs.sum() + top.sum() + mixed.sum() + expanded.sum() + view.sum()
                + parts[-1].sum() + where.float().sum())

    loss, created = assert_same_events(program)
    names = {e["name"] for e in created}
    assert {"CopySlices", "ExpBackward0", "MaxBackward0"} <= names
    assert any(len(e["saved"]) >= 2 for e in created)
    assert any(s["label"] == "output" for e in created for s in e["saved"])
    assert any(len(e["edges"]) > 2 for e in created)
    loss.backward()


def test_saved_tensor_hooks():
    def pack(tensor):
        return tensor * 1  # records ops of its own while the saving node does not exist yet

    def program():
        x = gradviz.randn(3, 3, requires_grad=True)
        with saved_tensors_hooks(pack, lambda t: t):
            y = (x * x).sin()
            z = y @ x.t()
        with saved_tensors_hooks(lambda t: t, lambda t: t):
            w = z.exp().tanh()
        return w.sum()

    result, expected, events = recorded_alongside(program)
    packed = [e for e in events if e["kind"] == "saved_packed"]
    assert packed and any(s["hooked"] for e in events if e["kind"] == "node_created"
                          for s in e["saved"])
    assert repr(_without_time(events)) == repr(_without_time(expected))


def test_the_node_keeps_its_forward_line():
    def program():
        x = gradviz.ones(2, requires_grad=True)
        return (x * 2).sum()

    loss, created = assert_same_events(program)
    assert loss.grad_fn._forward_site is created[-1]["source"]
    assert loss.grad_fn.next_functions[0][0]._forward_site == created[0]["source"]


def test_source_lines_that_change_or_are_missing(tmp_path, monkeypatch):
    monkeypatch.setattr(_nodes, "_MAX_FILES", 1)  # the files' lines are forgotten often too
    path = tmp_path / "changing_program.py"
    modules = []

    def load(text):
        path.write_text(text)
        os.utime(path, (1, 1))  # checkcache compares the size and the mtime
        linecache.checkcache(str(path))
        spec = importlib.util.spec_from_file_location("changing_program", path)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        modules.append(module)
        return module.run

    first = load("def run(x):\n    return (x * 2).exp()\n")
    x = gradviz.ones(3, requires_grad=True)
    _, created = assert_same_events(first, x)
    assert created[0]["source"]["code"] == "return (x * 2).exp()"
    _, created = assert_same_events(first, x)  # the lines the recorder keeps
    second = load("def run(x):\n    return (x * 3).sigmoid().neg()\n")
    _, created = assert_same_events(second, x)
    assert created[0]["source"]["code"] == "return (x * 3).sigmoid().neg()"
    linecache.clearcache()  # read again from the file
    assert_same_events(second, x)
    assert_same_events(first, gradviz.ones(2, requires_grad=True))  # a line of another file
    linecache.clearcache()
    assert linecache.lazycache(str(path), modules[-1].__dict__)  # read when first asked
    assert_same_events(second, x)
    path.unlink()
    linecache.clearcache()  # no file: no text
    _, created = assert_same_events(second, x)
    assert created[0]["source"]["code"] == ""
    assert created[0]["text"].endswith(f"{path.name}:2.")
    namespace: dict = {}
    exec(compile("def run(x):\n    return x.cos() * 2\n", "<generated>", "exec"), namespace)
    _, created = assert_same_events(namespace["run"], x)
    assert created[0]["source"]["file"] == "<generated>"


def test_a_stack_shallower_than_the_search_start_has_no_user_line():
    assert user_frame(10**6) is None
    assert forward_line(10**6) == (None, "")


@pytest.mark.parametrize("dtype", [gradviz.float32, gradviz.float64])
def test_payloads_read_after_the_forward_and_the_backward(dtype):
    """``node_created_payload(node, source=False)`` (the debug session reads nodes after their
    forward): the same as before, while the tensors are saved and once they are released."""
    model = Net(outsider=nn.Linear(6, 6).to(dtype)).to(dtype)
    loss = model(gradviz.randn(3, 4, dtype=dtype)).sum()
    paths = _OldPaths()
    nodes, stack = [], [loss.grad_fn]
    while stack:
        node = stack.pop()
        if node is not None and node not in nodes:
            nodes.append(node)
            stack.extend(n for n, _ in node.next_functions)
    for node in nodes:
        assert repr(node_created_payload(node, source=False)) == repr(old_payload(node, None, paths))
        assert repr(saved_tensors_of(node)) == repr(old_saved_tensors_of(node))
    loss.backward()
    for node in nodes:
        assert repr(node_created_payload(node, source=False)) == repr(old_payload(node, None, paths))


def _random_tree(rng, modules, depth):
    module = nn.Module() if rng.random() < 0.5 else nn.Sequential()
    for index in range(rng.randrange(4) if depth else 0):
        if modules and rng.random() < 0.3:
            child = rng.choice(modules)  # registered twice
        elif rng.random() < 0.1:
            child = None
        else:
            child = _random_tree(rng, modules, depth - 1)
        module._modules[rng.choice([str(index), f"m{index}", index])] = child
    modules.append(module)
    return module


def test_relative_names_as_before():
    rng = random.Random(0)
    for _ in range(60):
        modules: list = []
        root = _random_tree(rng, modules, 4)
        for _ in range(rng.randrange(3)):  # cycles: a module below itself
            rng.choice(modules)._modules["back"] = rng.choice(modules)
        strangers = [nn.Linear(1, 1), root]
        for owner in modules:
            for module in modules + strangers:
                assert relative_names(owner, module) == old_relative_names(owner, module)


def test_gradients_unchanged_under_recording():
    model = Net()
    x = gradviz.randn(5, 4)
    loss, _ = assert_same_events(lambda: model(x).sum())
    loss.backward()
    recorded = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    for got, want in zip(recorded, [p.grad.numpy() for p in model.parameters()]):
        assert np.array_equal(got, want)
