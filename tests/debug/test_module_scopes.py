"""Module paths (Note [Module paths]) and parameter names on gradviz and PyTorch graphs.

The expected paths are the keys of ``named_modules()`` (split at the dots) of the same model,
and the expected leaf names those of ``named_parameters()``: the names the user already sees.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest
import torch

import gradviz
from gradviz.debug._torch_recorder import _record

HOSTILE = '<img src=x onerror="alert(1)">'


def models(nn):
    """A transformer-style block stack, an RNN cell and a nested Sequential, for ``nn``
    (``gradviz.nn`` or ``torch.nn``)."""

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.qkv = nn.Linear(4, 12)
            self.out = nn.Linear(4, 4)

        def forward(self, x):
            q, k, v = self.qkv(x).chunk(3, dim=-1)
            weights = (q @ k.transpose(-1, -2)).softmax(dim=-1)
            return self.out(weights @ v)

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.norm = nn.LayerNorm(4)
            self.attn = Attention()
            self.mlp = nn.Sequential(nn.Linear(4, 8), nn.Tanh(), nn.Linear(8, 4))

        def forward(self, x):
            x = x + self.attn(self.norm(x))
            return x + self.mlp(x)

    class Transformer(nn.Module):
        def __init__(self, depth=3):
            super().__init__()
            self.blocks = nn.ModuleList([Block() for _ in range(depth)])
            self.head = nn.Linear(4, 1)

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return self.head(x).sum()

    class Unrolled(nn.Module):
        def __init__(self, steps=5):
            super().__init__()
            self.cell = nn.RNNCell(3, 4)
            self.steps = steps

        def forward(self, x):
            h = None
            for _ in range(self.steps):
                h = self.cell(x, h)
            return h.sum()

    return Transformer, Unrolled


def copy_weights(source, target):
    """Give the torch twin ``target`` the gradviz model's weights (same registration order)."""
    with torch.no_grad():
        for (name, p), (name_t, q) in zip(source.named_parameters(), target.named_parameters()):
            assert name == name_t
            q.copy_(torch.from_numpy(p.detach().numpy().copy()))


def paths(graph) -> dict:
    """``{dotted module path: set of node names}`` of a graph dict."""
    found = {}
    for node in graph["nodes"]:
        if "module" in node:
            found.setdefault(".".join(node["module"]), set()).add(node["name"])
    return found


def test_transformer_paths_are_the_named_modules_keys():
    Transformer, _ = models(gradviz.nn)
    model = Transformer()
    loss = model(gradviz.randn(2, 5, 4))
    session = gradviz.debug.backward(loss)
    graph = session.graph()
    found = paths(graph)
    modules = {name for name, _ in model.named_modules()}
    assert set(found) <= modules
    # every leaf module that ran shows up, with its own ops
    assert {"blocks.0.attn.qkv", "blocks.2.mlp.0", "blocks.2.mlp.1", "blocks.1.norm",
            "head"} <= set(found)
    assert "TanhBackward0" in found["blocks.1.mlp.1"]
    assert "AddmmBackward0" in found["blocks.2.mlp.2"] or "AddBackward0" in found["blocks.2.mlp.2"]
    assert "SoftmaxBackward0" in found["blocks.0.attn"]
    # the residual adds belong to the Block, the final sum to the model itself
    assert "AddBackward0" in found["blocks.1"]
    assert "SumBackward0" in found[""]
    types = {".".join(n["module"]): n["module_types"] for n in graph["nodes"] if "module" in n}
    assert types["blocks.1.attn.qkv"] == ["ModuleList", "Block", "Attention", "Linear"]
    assert types["blocks.0.mlp.1"] == ["ModuleList", "Block", "Sequential", "Tanh"]


def test_parameters_are_named_without_params_and_sit_in_their_module():
    Transformer, _ = models(gradviz.nn)
    model = Transformer(depth=2)
    session = gradviz.debug.backward(model(gradviz.randn(2, 5, 4)))
    leaves = {n["leaf_name"]: n for n in session.graph()["nodes"] if "leaf_name" in n}
    assert set(leaves) == {name for name, _ in model.named_parameters()}
    assert leaves["blocks.1.mlp.0.weight"]["module"] == ["blocks", "1", "mlp", "0"]
    assert leaves["blocks.0.norm.bias"]["module_types"] == ["ModuleList", "Block", "LayerNorm"]
    assert all("module_call" not in node for node in leaves.values())
    # the inspector shows the same name, and params= for plain tensors still wins
    w = gradviz.ones(4, requires_grad=True)
    named = gradviz.debug.backward((model(gradviz.randn(1, 2, 4)) * w).sum(),
                                   params={"scale": w, "renamed": model.head.bias})
    by_name = {n["leaf_name"]: n for n in named.graph()["nodes"] if "leaf_name" in n}
    assert "scale" in by_name and "renamed" in by_name and "head.bias" not in by_name
    assert named.node(by_name["blocks.0.attn.out.weight"]["id"])["leaf_name"] == \
        "blocks.0.attn.out.weight"


def test_an_unrolled_cell_is_one_path_applied_n_times():
    _, Unrolled = models(gradviz.nn)
    model = Unrolled(steps=6)
    graph = gradviz.debug.backward(model(gradviz.randn(2, 3))).graph()
    cell = [n for n in graph["nodes"] if n.get("module") == ["cell"]]
    ops = [n for n in cell if n["kind"] != "accumulate_grad"]
    assert sorted({n["module_call"] for n in ops}) == list(range(6))
    # each call builds the same ops; the call numbers follow forward order (node ids)
    per_call = {}
    for node in ops:
        per_call.setdefault(node["module_call"], []).append(node)
    assert len({len(nodes) for nodes in per_call.values()}) == 1
    firsts = [min(n["id"] for n in per_call[k]) for k in range(6)]
    assert firsts == sorted(firsts)
    leaves = sorted(n["leaf_name"] for n in cell if n["kind"] == "accumulate_grad")
    assert leaves == ["cell.bias_hh", "cell.bias_ih", "cell.weight_hh", "cell.weight_ih"]


def test_nested_sequential_and_user_scopes_nest():
    nn = gradviz.nn
    model = nn.Sequential(nn.Sequential(nn.Linear(2, 2), nn.ReLU()), nn.Linear(2, 1))
    x = gradviz.ones(1, 2, requires_grad=True)
    with gradviz.debug.scope("encoder"):
        with gradviz.debug.scope(HOSTILE):
            y = model(x)
        z = y * 2
    loss = z.sum()
    assert gradviz.debug.module_path(loss.grad_fn) is None
    assert gradviz.debug.module_path(z.grad_fn) == ("encoder",)
    found = paths(gradviz.debug.backward(loss).graph())
    assert found[f"encoder.{HOSTILE}.0.1"] == {"ReluBackward0"}
    assert "MulBackward0" in found["encoder"]
    node = next(n for n in gradviz.debug.backward(model(x).sum()).graph()["nodes"]
                if n["name"] == "ReluBackward0")
    assert node["module"] == ["0", "1"] and node["module_types"] == ["Sequential", "ReLU"]
    with pytest.raises(TypeError, match="takes a str"):
        gradviz.debug.scope(3)


def test_hostile_module_names_are_kept_as_plain_strings():
    nn = gradviz.nn
    model = nn.Module()
    model.add_module(HOSTILE, nn.Linear(2, 2))

    def forward(x):
        return getattr(model, HOSTILE)(x).sum()

    model.forward = forward
    graph = gradviz.debug.backward(model(gradviz.ones(1, 2))).graph()
    assert paths(graph)[HOSTILE] >= {"AddmmBackward0"}
    assert {n["leaf_name"] for n in graph["nodes"] if "leaf_name" in n} == \
        {f"{HOSTILE}.weight", f"{HOSTILE}.bias"}


def test_scopes_belong_to_their_thread():
    x = gradviz.ones(2, requires_grad=True)
    results = {}
    inside, release = threading.Event(), threading.Event()

    def other():
        inside.wait()
        results["other"] = gradviz.debug.module_path((x * 2).grad_fn)
        release.set()

    thread = threading.Thread(target=other)
    thread.start()
    with gradviz.debug.scope("main"):
        inside.set()
        release.wait()
        results["main"] = gradviz.debug.module_path((x * 2).grad_fn)
    thread.join()
    assert results == {"other": None, "main": ("main",)}


def test_node_created_events_and_traces_carry_the_path(tmp_path):
    nn = gradviz.nn
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())
    with gradviz.record() as trace:
        model(gradviz.ones(1, 2)).sum().backward()
    created = {e["node"]: e for e in trace.events if e["kind"] == "node_created"}
    graph = {n["id"]: n for n in trace.graph["nodes"]}
    tanh = next(i for i, n in graph.items() if n["name"] == "TanhBackward0")
    assert created[tanh]["module"] == ["1"] and graph[tanh]["module"] == ["1"]
    path = tmp_path / "t.json"
    trace.save(path)
    loaded = gradviz.load_trace(path)  # the schema accepts the new optional fields
    assert loaded.graph["nodes"] == trace.graph["nodes"]


def test_torch_models_get_the_same_paths_as_their_gradviz_twins():
    for make in models(gradviz.nn):
        twin = dict(zip(("Transformer", "Unrolled"), models(torch.nn)))[make.__name__]
        ours, theirs = make(), twin()
        copy_weights(ours, theirs)
        x = np.random.default_rng(0).standard_normal(
            (2, 5, 4) if make.__name__ == "Transformer" else (2, 3)).astype(np.float32)
        graph = gradviz.debug.backward(ours(gradviz.tensor(x))).graph()
        with gradviz.debug.torch_scopes():
            loss = theirs(torch.from_numpy(x))
        trace = gradviz.debug.record_torch(loss, params=theirs)

        def summary(graph):
            return sorted((".".join(n["module"]), n.get("module_call", -1),
                           n.get("leaf_name", "")) for n in graph["nodes"] if "module" in n)

        assert set(summary(trace.graph)) == set(summary(graph)), make.__name__
        created = {e["node"]: e for e in trace.events if e["kind"] == "node_created"}
        for node in trace.graph["nodes"]:
            assert created[node["id"]].get("module") == node.get("module")
        # and the class names along the paths agree too
        types = {tuple(n["module"]): n["module_types"] for n in graph["nodes"] if "module" in n}
        for node in trace.graph["nodes"]:
            if "module" in node:
                assert node["module_types"] == types[tuple(node["module"])]


def test_torch_scopes_leave_no_hook_and_tag_nothing_outside():
    model = torch.nn.Sequential(torch.nn.Linear(2, 2))
    with gradviz.debug.torch_scopes():
        inside = model(torch.ones(1, 2)).sum()
    outside = model(torch.ones(1, 2)).sum()
    trace, _ = _record(outside)
    # (the parameters' AccumulateGrad nodes are shared with the graph built inside)
    assert not any("module" in n for n in trace.graph["nodes"] if n["kind"] == "builtin")
    trace, _ = _record(inside)
    assert any("module" in n for n in trace.graph["nodes"])
    assert not torch.nn.modules.module._global_forward_hooks
    assert not torch.nn.modules.module._global_forward_pre_hooks


# ---- roll-up --------------------------------------------------------------------------------

def test_rollup_of_a_transformer_groups_the_blocks_and_picks_a_fold_depth():
    Transformer, _ = models(gradviz.nn)
    model = Transformer(depth=12)
    session = gradviz.debug.backward(model(gradviz.randn(2, 5, 4)))
    graph = session.graph()
    summary = session.rollup()
    assert summary == gradviz.debug.rollup(graph, states=session.node_states())
    modules = {m["name"]: m for m in summary["modules"]}
    # counts are honest: every node is in the model's box, a block holds its sub-modules
    assert modules[""]["count"] + len(summary["outside"]) == len(graph["nodes"])
    block = modules["blocks.3"]
    assert block["type"] == "Block" and block["calls"] == 1
    assert block["count"] == sum(modules[c]["count"] for c in block["children"]) + \
        len(block["own_nodes"])
    assert set(block["children"]) == {"blocks.3.norm", "blocks.3.attn", "blocks.3.mlp"}
    assert {p["name"] for p in modules["blocks.3.norm"]["parameters"]} == \
        {"blocks.3.norm.weight", "blocks.3.norm.bias"}
    assert modules["blocks.3"]["parameters"] == []  # its sub-modules own them
    # states: nothing has run yet; after some steps the counts follow the session
    assert block["states"] == {"pending": block["count"]}
    for _ in range(40):
        session.step()
    states = session.node_states()
    for module in session.rollup()["modules"]:
        expected = {}
        for node_id in module["nodes"]:
            expected[states[node_id]] = expected.get(states[node_id], 0) + 1
        assert module["states"] == expected
    assert modules["blocks"]["type"] == "ModuleList"
    group = next(g for g in summary["groups"] if g["parent"] == "blocks")
    assert group["type"] == "Block" and group["label"] == "+11 more Block"
    assert group["members"] == [f"blocks.{i}" for i in range(12)]
    mlp_group = next(g for g in summary["groups"] if g["parent"] == "blocks.0.mlp")
    assert mlp_group["members"] == ["blocks.0.mlp.0", "blocks.0.mlp.2"]  # the Linears
    # Note [Fold depth]: recount the boxes from the graph itself
    for depth, count in enumerate(summary["boxes"]):
        expected = len({tuple(n["module"][:depth]) if len(n.get("module", [])) >= depth
                        else ("node", n["id"]) for n in graph["nodes"] if "module" in n})
        assert count == expected + len(summary["outside"])
    assert len(graph["nodes"]) > 150
    depth = summary["fold_depth"]
    assert summary["boxes"][depth] <= 150
    assert depth == summary["max_depth"] or summary["boxes"][depth + 1] > 150
    assert gradviz.debug.rollup(graph, max_boxes=10_000)["fold_depth"] is None
    with pytest.raises(ValueError, match="positive int"):
        gradviz.debug.rollup(graph, max_boxes=0)


def test_rollup_counts_the_applications_of_an_unrolled_cell():
    _, Unrolled = models(gradviz.nn)
    graph = gradviz.debug.backward(Unrolled(steps=7)(gradviz.randn(2, 3))).graph()
    modules = {m["name"]: m for m in gradviz.debug.rollup(graph)["modules"]}
    assert modules["cell"]["calls"] == 7 and modules["cell"]["type"] == "RNNCell"
    assert modules[""]["calls"] == 1


def test_rollup_reads_a_saved_torch_trace(tmp_path):
    _, Unrolled = models(torch.nn)
    with gradviz.debug.torch_scopes():
        loss = Unrolled(steps=4)(torch.randn(2, 3))
    trace = gradviz.debug.record_torch(loss)
    trace.save(tmp_path / "rnn.json")
    summary = gradviz.debug.rollup(gradviz.load_trace(tmp_path / "rnn.json").graph)
    assert {m["name"]: m["calls"] for m in summary["modules"]}["cell"] == 4


# ---- diff -----------------------------------------------------------------------------------

def twin_traces(kind, seed_bug=None, **size):
    """A gradviz model and its torch twin with the same weights and input, each recorded;
    ``seed_bug(model)`` changes the gradviz model before its forward."""
    make = dict(zip(("Transformer", "Unrolled"), models(gradviz.nn)))[kind]
    make_torch = dict(zip(("Transformer", "Unrolled"), models(torch.nn)))[kind]
    ours, theirs = make(**size), make_torch(**size)
    copy_weights(ours, theirs)
    shape = (2, 5, 4) if kind == "Transformer" else (2, 3)
    x = np.random.default_rng(1).standard_normal(shape).astype(np.float32)
    if seed_bug is not None:
        seed_bug(ours)
    with gradviz.record() as trace_a:
        ours(gradviz.tensor(x)).backward()
    with gradviz.debug.torch_scopes():
        loss = theirs(torch.from_numpy(x))
    return trace_a, gradviz.debug.record_torch(loss, params=theirs)


@pytest.mark.parametrize("kind,size", [("Transformer", {"depth": 3}), ("Unrolled", {"steps": 5})])
def test_diff_of_a_gradviz_pass_and_its_torch_twin_finds_nothing(kind, size):
    trace_a, trace_b = twin_traces(kind, **size)
    result = gradviz.debug.diff(trace_a, trace_b)
    real = [n for n in trace_a.graph["nodes"] if n["name"] != "GraphRoot"]
    assert len(result.pairs) == len(real) == len(trace_b.graph["nodes"])
    assert result.only_a == [] and result.only_b == []
    assert result.differences == [] and result.equal and result.first_difference is None
    assert all(pair.max_relative < 1e-4 for pair in result.pairs)
    # pairs really are the same node: same module, application and op
    for pair in result.pairs:
        assert pair.a["name"] == pair.b["name"]
        assert pair.a.get("module") == pair.b.get("module")
        assert pair.a.get("module_call") == pair.b.get("module_call")
    assert "0 differ" in repr(result)


def test_diff_points_at_the_node_a_backward_only_bug_is_in():
    def seed(model):  # blocks.1's MLP output gets its gradient scaled: forward is unchanged
        def forward_hook(module, args, output):
            output.register_hook(lambda grad: grad * 1.5)
        model.blocks[1].mlp.register_forward_hook(forward_hook)

    trace_a, trace_b = twin_traces("Transformer", seed, depth=3)
    result = gradviz.debug.diff(trace_a, trace_b)
    assert result.only_a == [] and result.only_b == []
    first = result.first_difference
    # the hook runs as a pre-hook of the node that made the MLP's output (the view back to 3-d
    # after the Linear's addmm, in both libraries): it is the first to return other
    # gradients, and everything that runs before it agrees
    assert first.a["module"] == ["blocks", "1", "mlp", "2"] and first.a["name"] == \
        "ViewBackward0" == first.b["name"]
    assert any(slot.what == "grads_out" and slot.differs for slot in first.slots)
    ratio = [float(s.a["norm"]) / float(s.b["norm"]) for s in first.slots
             if s.what == "grads_out" and s.differs]
    assert ratio and all(abs(r - 1.5) < 1e-3 for r in ratio)
    order = [p.key for p in result.pairs]
    assert all(not p.differs for p in result.pairs[:order.index(first.key)])
    assert "blocks.2" not in " ".join(p.key for p in result.differences)  # ran before the bug
    assert first.key in repr(result)


def test_diff_lists_the_nodes_a_detach_cut_off():
    def seed(model):  # blocks.1's attention reads a detached input: its norm gets no gradient
        attn = model.blocks[1].attn
        original = attn.forward
        attn.forward = lambda x: original(x.detach())

    trace_a, trace_b = twin_traces("Transformer", seed, depth=2)
    result = gradviz.debug.diff(trace_a, trace_b)
    assert result.only_a == []
    cut = {(".".join(n.get("module", [])), n.get("leaf_name")) for n in result.only_b}
    assert ("blocks.1.norm", "blocks.1.norm.weight") in cut
    assert ("blocks.1.norm", "blocks.1.norm.bias") in cut
    # only the norm and the view that flattened its output for the qkv Linear are cut off:
    # blocks.0 still gets its gradient through the residual
    assert {(".".join(n["module"]), n["name"]) for n in result.only_b} == {
        ("blocks.1.norm", "NativeLayerNormBackward0"), ("blocks.1.norm", "AccumulateGrad"),
        ("blocks.1.attn.qkv", "ViewBackward0")}
    assert not result.equal


def test_diff_html_shows_user_names_as_text_and_bad_input_fails():
    nn = gradviz.nn
    model = nn.Module()
    model.add_module(HOSTILE, nn.Linear(2, 2))
    model.forward = lambda x: getattr(model, HOSTILE)(x).sum()
    with gradviz.record() as a:
        model(gradviz.ones(1, 2)).backward()
    with gradviz.record() as b:
        (model(gradviz.ones(1, 2)) * 3).backward()
    result = gradviz.debug.diff(a, b)
    page = result._repr_html_()
    assert HOSTILE not in page and html_escape(HOSTILE) in page
    assert result.differences and result.only_b
    with pytest.raises(TypeError, match="must be a gradviz.instrument.Trace"):
        gradviz.debug.diff(a, {"graph": {}})
    with pytest.raises(ValueError, match="rtol"):
        gradviz.debug.diff(a, b, rtol=-1)


def html_escape(text):
    import html

    return html.escape(text)


def test_replays_and_session_traces_keep_paths_and_roll_up(tmp_path):
    _, Unrolled = models(gradviz.nn)
    model = Unrolled(steps=3)
    session = gradviz.debug.backward(model(gradviz.randn(2, 3)))
    session.continue_()
    trace = session.trace()
    live = {n["id"]: n for n in session.graph()["nodes"]}
    for node in trace.graph["nodes"]:
        if node["id"] in live:
            for key in ("module", "module_types", "module_call", "leaf_name"):
                assert node.get(key) == live[node["id"]].get(key)
    trace.save(tmp_path / "rnn.json")
    replay = gradviz.debug.replay(str(tmp_path / "rnn.json"))
    modules = {m["name"]: m for m in replay.rollup()["modules"]}
    assert modules["cell"]["calls"] == 3
    replay.continue_()  # at the same point, the replay rolls up as the live session does
    assert replay.rollup() == session.rollup()


def test_runcall_sessions_see_the_paths():
    nn = gradviz.nn
    model = nn.Sequential(nn.Linear(2, 2), nn.Tanh())

    def train():
        model(gradviz.ones(1, 2)).sum().backward()

    session = gradviz.debug.runcall(train, breakpoints=[{"function": "TanhBackward0"}])
    try:
        assert session.status == "paused"
        found = paths(session.graph())
        assert found["1"] == {"TanhBackward0"} and "AddmmBackward0" in found["0"]
    finally:
        session.continue_()


def test_a_shared_module_and_a_tied_parameter_take_their_named_modules_names():
    """A module registered twice, and a parameter two modules share, are named where
    ``named_modules()`` / ``named_parameters()`` list them first (depth first)."""
    for nn in (gradviz.nn, torch.nn):
        shared = nn.Linear(2, 2)
        model = nn.Module()
        model.first = nn.Sequential(nn.Tanh(), shared)
        model.second = shared
        model.head = nn.Linear(2, 2)
        model.head.weight = shared.weight
        model.forward = lambda x: model.head(model.second(x)).sum()
        x = (gradviz if nn is gradviz.nn else torch).ones(1, 2)
        if nn is gradviz.nn:
            graph = gradviz.debug.backward(model(x)).graph()
        else:
            with gradviz.debug.torch_scopes():
                loss = model(x)
            graph = gradviz.debug.record_torch(loss, params=model).graph
        names = {n["leaf_name"] for n in graph["nodes"] if "leaf_name" in n}
        assert names == {name for name, _ in model.named_parameters()} == \
            {"first.1.weight", "first.1.bias", "head.bias"}
        assert "first.1" in paths(graph)  # model.second(x) is the module first.1


def test_custom_function_nodes_keep_their_class_name_inside_a_module():
    class Square(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return 2 * x * grad

    class Layer(gradviz.nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = gradviz.nn.Linear(2, 2)

        def forward(self, x):
            return Square.apply(self.linear(x))

    model = gradviz.nn.Sequential(Layer())
    graph = gradviz.debug.backward(model(gradviz.ones(1, 2)).sum()).graph()
    node = next(n for n in graph["nodes"] if n["kind"] == "custom")
    assert node["name"] == "SquareBackward" and node["module"] == ["0"]
    assert node["module_types"] == ["Layer"]
