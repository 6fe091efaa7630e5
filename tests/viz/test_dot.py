"""``gradviz.viz.to_dot`` / ``render``: the DOT source of small graphs (nodes, edges, leaves,
saved tensors, custom Functions, several outputs), a deep chain, traces, hostile text, and the
optional ``graphviz`` package and ``dot`` program. No test runs the real ``dot`` program."""

from __future__ import annotations

import collections
import doctest
import os
import re
import shutil
import stat
import subprocess
import sys
import textwrap

import graphviz
import pytest

import gradviz
from gradviz.autograd.graph import saved_tensors_hooks
from gradviz.instrument import Trace, load_trace
from gradviz.viz import _dot, render, to_dot

# ---- a small DOT reader: checks the quoting of every statement ---------------------------

_TOKEN = re.compile(r'\s*(?:(?P<string>"(?:[^"\\]|\\.)*")|(?P<id>[A-Za-z0-9_.]+)|'
                    r'(?P<punct>->|[\[\]=;{}]))', re.DOTALL)
_ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "l": "\n", "r": "\n"}


def _tokens(line):
    tokens, position = [], 0
    while position < len(line):
        match = _TOKEN.match(line, position)
        assert match is not None and match.end() > position, \
            f"not valid DOT at column {position}: {line!r}"
        position = match.end()
        kind = match.lastgroup
        tokens.append((kind, match.group(kind)))
        if line[position:].strip() == "":
            break
    return tokens


def _unquote(token):
    kind, text = token
    if kind != "string":
        return text
    body, out, i = text[1:-1], [], 0
    while i < len(body):
        if body[i] == "\\":
            i += 1
            out.append(_ESCAPES.get(body[i], "\\" + body[i]))
        else:
            out.append(body[i])
        i += 1
    return "".join(out)


def _attrs(tokens):
    if not tokens:
        return {}
    assert tokens[0] == ("punct", "[") and tokens[-1] == ("punct", "]"), tokens
    inner, attrs = tokens[1:-1], {}
    assert len(inner) % 3 == 0, inner
    for i in range(0, len(inner), 3):
        key, equals, value = inner[i:i + 3]
        assert key[0] == "id" and equals == ("punct", "="), inner
        attrs[key[1]] = _unquote(value)
    return attrs


Parsed = collections.namedtuple("Parsed", "nodes edges")


def parse(dot):
    """``nodes``: id -> attrs (label decoded); ``edges``: [(tail, head, attrs)] in order."""
    lines = dot.source.splitlines()
    assert lines[0] == "digraph {" and lines[-1] == "}", lines[:1] + lines[-1:]
    nodes, edges = {}, []
    for line in lines[1:-1]:
        tokens = _tokens(line)
        if tokens[0] in (("id", "graph"), ("id", "node")):
            continue
        if len(tokens) > 1 and tokens[1] == ("punct", "->"):
            edges.append((_unquote(tokens[0]), _unquote(tokens[2]), _attrs(tokens[3:])))
        else:
            name = _unquote(tokens[0])
            assert name not in nodes, f"node {name} drawn twice"
            nodes[name] = _attrs(tokens[1:])
    for tail, head, _ in edges:
        assert tail in nodes and head in nodes, f"edge {tail} -> {head} to an undrawn node"
    return Parsed(nodes, edges)


def graph_nodes(parsed):
    return {k: v for k, v in parsed.nodes.items() if re.fullmatch(r"n\d+", k)}


def graph_edges(parsed):
    return [(t, h) for t, h, _ in parsed.edges if re.fullmatch(r"n\d+", t)
            and re.fullmatch(r"n\d+", h)]


def reachable(*tensors):
    """Independent walk: node_id -> node, and edges (next -> node) with multiplicity."""
    seen, edges = {}, []
    queue = collections.deque(t.grad_fn for t in tensors if t.grad_fn is not None)
    for fn in queue:
        seen[fn.node_id] = fn
    while queue:
        fn = queue.popleft()
        for nxt, _ in fn.next_functions:
            if nxt is None:
                continue
            edges.append((f"n{nxt.node_id}", f"n{fn.node_id}"))
            if nxt.node_id not in seen:
                seen[nxt.node_id] = nxt
                queue.append(nxt)
    return seen, edges


def diamond():
    x = gradviz.tensor([0.5, -1.0, 2.0], requires_grad=True)
    w = gradviz.tensor([[1.0, 2.0, 3.0], [-1.0, 0.0, 1.0]], requires_grad=True)
    h = (x * w).tanh()
    loss = (h * h + x.exp()).sum()
    return x, w, loss


class Square(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


class Split(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2, x * 3

    @staticmethod
    def backward(ctx, grad_a, grad_b):
        return grad_a * 2 + grad_b * 3


# ---- structure --------------------------------------------------------------------------

def test_returns_a_digraph_with_one_box_per_reachable_node():
    x, w, loss = diamond()
    dot = to_dot(loss)
    assert isinstance(dot, graphviz.Digraph)
    parsed = parse(dot)
    seen, _ = reachable(loss)
    assert set(graph_nodes(parsed)) == {f"n{i}" for i in seen}
    assert parsed.nodes["output0"]["fillcolor"] == "darkolivegreen1"
    assert parsed.nodes["output0"]["label"] == "()"
    assert (f"n{loss.grad_fn.node_id}", "output0") in [(t, h) for t, h, _ in parsed.edges]


def test_edges_follow_next_functions_with_multiplicity():
    x, w, loss = diamond()
    y = (x * x).sum() + loss  # x * x: the same edge twice
    parsed = parse(to_dot(y))
    _, edges = reachable(y)
    assert collections.Counter(graph_edges(parsed)) == collections.Counter(edges)
    mul = y.grad_fn.next_functions[0][0].next_functions[0][0]
    leaf = f"n{mul.next_functions[0][0].node_id}"
    assert graph_edges(parsed).count((leaf, f"n{mul.node_id}")) == 2


def test_node_labels_and_colours():
    x, w, loss = diamond()
    parsed = parse(to_dot(loss, show_saved=False))
    labels = {v["label"].split("\n")[0] for v in graph_nodes(parsed).values()
              if v["fillcolor"] == "lightgrey"}
    assert {"SumBackward0", "AddBackward0", "MulBackward0", "TanhBackward0",
            "ExpBackward0"} <= labels
    tanh = parsed.nodes[f"n{loss.grad_fn.next_functions[0][0].next_functions[0][0].node_id}"]
    assert tanh["label"].startswith("MulBackward0")


def test_leaves_are_named_from_params_by_identity():
    x, w, loss = diamond()
    twin = gradviz.tensor([0.5, -1.0, 2.0], requires_grad=True)  # equal values, other tensor
    parsed = parse(to_dot(loss, params={"weight": w, "twin": twin, "input": x}))
    leaves = {v["label"] for v in parsed.nodes.values() if v["fillcolor"] == "lightblue"}
    assert leaves == {"weight\n(2, 3)", "input\n(3)"}
    unnamed = parse(to_dot(loss))
    assert {v["label"] for v in unnamed.nodes.values()
            if v["fillcolor"] == "lightblue"} == {"(2, 3)", "(3)"}


def test_params_may_be_name_tensor_pairs():
    x, w, loss = diamond()
    parsed = parse(to_dot(loss, params=iter([("w", w)])))
    assert "w\n(2, 3)" in {v["label"] for v in parsed.nodes.values()}


@pytest.mark.parametrize("params, phrase", [
    ({"w": [1.0]}, "params['w'] must be a gradviz Tensor"),
    (42, "params must be a dict of name -> Tensor"),
    ([("w",)], "params must be a dict of name -> Tensor"),
])
def test_bad_params_raise_type_error(params, phrase):
    _, _, loss = diamond()
    with pytest.raises(TypeError, match=re.escape(phrase)):
        to_dot(loss, params=params)


@pytest.mark.parametrize("value", [42, None, (), [1.0], "loss"])
def test_other_inputs_raise_type_error(value):
    with pytest.raises(TypeError, match="to_dot expects a Tensor"):
        to_dot(value)


@pytest.mark.parametrize("value", [0, -1, 2.5, True])
def test_max_attr_chars_must_be_positive_int(value):
    _, _, loss = diamond()
    with pytest.raises(ValueError, match="max_attr_chars must be a positive int"):
        to_dot(loss, max_attr_chars=value)


def test_op_attributes_are_cut_to_max_attr_chars():
    x = gradviz.tensor([[1.0, 2.0]], requires_grad=True)
    y = x.sum(dim=1, keepdim=False) * 2.0
    full = parse(to_dot(y)).nodes
    cut = parse(to_dot(y, max_attr_chars=2)).nodes
    mul, total = f"n{y.grad_fn.node_id}", f"n{y.grad_fn.next_functions[0][0].node_id}"
    assert "keepdim: False" in full[total]["label"].split("\n")
    assert "keepdim: Fa..." in cut[total]["label"].split("\n")
    assert "other: 2.0" in full[mul]["label"].split("\n")  # a saved Python number


def test_a_dim_shows_once_as_the_op_uses_it():
    """An op keeps a negative dim as passed beside the normalized one (for ``_saved_dim``);
    the box shows the dim once."""
    x = gradviz.ones(2, 3, requires_grad=True)
    y = x.sum(dim=-1)
    lines = parse(to_dot(y)).nodes[f"n{y.grad_fn.node_id}"]["label"].split("\n")
    assert "dims: (1,)" in lines
    assert not any(line.startswith("dims_arg") for line in lines), lines


def test_tensor_without_history_is_just_the_output_box():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    parsed = parse(to_dot(x, params={"x": x}))
    assert parsed.nodes == {"output0": {"label": "x\n(2)", "fillcolor": "darkolivegreen1",
                                        "tooltip": "output 0"}}
    assert parsed.edges == []


# ---- saved tensors ----------------------------------------------------------------------

def _saved_boxes(parsed):
    return {k: v["label"] for k, v in parsed.nodes.items() if v["fillcolor"] == "orange"}


def test_saved_tensors_shown_and_hidden():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    w = gradviz.tensor([[1.0], [2.0]], requires_grad=True)
    y = (x * x.exp()).unsqueeze(0).mm(w).tanh().sum()
    parsed = parse(to_dot(y))
    mm = y.grad_fn.next_functions[0][0].next_functions[0][0]
    assert mm.name() == "MmBackward0"
    saved = _saved_boxes(parsed)
    assert saved[f"n{mm.node_id}_saved0"] == "self\n(1, 2)"
    assert saved[f"n{mm.node_id}_saved1"] == "other\n(2, 1)"
    assert "result\n(1, 1)" in saved.values()  # tanh saves its output
    for box in saved:
        owner = box.split("_")[0]
        assert (box, owner, {"dir": "none"}) in parsed.edges
    hidden = parse(to_dot(y, show_saved=False))
    assert _saved_boxes(hidden) == {}
    assert set(graph_nodes(hidden)) == set(graph_nodes(parsed))


def test_released_saved_tensors_are_skipped_and_the_node_marked():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    y = (x * x.exp()).sum()
    y.backward(retain_graph=True)
    kept = parse(to_dot(y))
    assert len(_saved_boxes(kept)) == 3
    assert not any("saved tensors freed" in v["label"] for v in kept.nodes.values())
    y.backward()
    freed = parse(to_dot(y))
    assert _saved_boxes(freed) == {}
    marked = {v["label"].split("\n")[0] for v in freed.nodes.values()
              if v["label"].endswith("saved tensors freed")}
    assert marked == {"MulBackward0", "ExpBackward0"}
    for node in freed.nodes.values():
        assert (node.get("style") == "filled,dashed") == node["label"].endswith("freed")


def test_saved_tensor_packed_by_a_hook():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with saved_tensors_hooks(lambda t: t, lambda t: t):
        y = (x * x).sum()
    saved = _saved_boxes(parse(to_dot(y)))
    assert sorted(saved.values()) == ["other\n(packed by a hook)", "self\n(packed by a hook)"]


# ---- custom Functions and several outputs -----------------------------------------------

def test_custom_function_is_marked():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    y = Square.apply(x).sum()
    node = y.grad_fn.next_functions[0][0]
    parsed = parse(to_dot(y))
    box = parsed.nodes[f"n{node.node_id}"]
    assert box["fillcolor"] == "thistle"
    assert box["label"] == "SquareBackward\ncustom Function"
    assert _saved_boxes(parsed) == {f"n{node.node_id}_saved0": "saved_tensors[0]\n(2)"}
    y.backward()
    after = parse(to_dot(y)).nodes[f"n{node.node_id}"]
    assert after["label"] == "SquareBackward\ncustom Function\nsaved tensors freed"


def test_multi_output_node_edges_are_labelled_with_the_output_index():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    a, b = Split.apply(x)
    node = f"n{a.grad_fn.node_id}"
    parsed = parse(to_dot((a, b)))
    assert [v["label"] for k, v in parsed.nodes.items() if k.startswith("output")] == \
        ["(2)", "(2)"]
    assert (node, "output0", {"label": "0"}) in parsed.edges
    assert (node, "output1", {"label": "1"}) in parsed.edges
    assert len(graph_nodes(parsed)) == 2  # the Function's node and the leaf
    y = a * b
    parsed = parse(to_dot(y))
    into_mul = [attrs.get("label") for t, h, attrs in parsed.edges
                if t == node and h == f"n{y.grad_fn.node_id}"]
    assert into_mul == ["0", "1"]
    single = [attrs for t, h, attrs in parsed.edges if h == node]
    assert single == [{}]  # the leaf has one output: no label


def test_deep_chain_does_not_recurse():
    x = gradviz.tensor([1.0], requires_grad=True)
    y = x
    for _ in range(100_000):
        y = y + 1.0
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        dot = to_dot(y)
    finally:
        sys.setrecursionlimit(limit)
    source = dot.source
    assert source.count("fillcolor=lightgrey") == 100_000
    assert source.count(" -> ") == 100_001
    assert source.count("fillcolor=lightblue") == 1


# ---- traces -----------------------------------------------------------------------------

def test_trace_round_trip(tmp_path):
    x, w, loss = diamond()
    with gradviz.record() as trace:
        x2, w2, loss2 = diamond()
        loss2.backward()
    parsed = parse(to_dot(trace))
    ids = {f"n{node['id']}" for node in trace.graph["nodes"]}
    assert set(graph_nodes(parsed)) == ids
    expected = [(f"n{e['target']}", f"n{e['source']}") for e in trace.graph["edges"]]
    assert collections.Counter(graph_edges(parsed)) == collections.Counter(expected)
    live = parse(to_dot(loss))  # the same program, live and before backward
    assert sorted(v["label"].split("\n")[0] for v in graph_nodes(parsed).values()
                  if v["fillcolor"] == "lightgrey") == \
        sorted(v["label"].split("\n")[0] for v in graph_nodes(live).values()
               if v["fillcolor"] == "lightgrey")
    assert parsed.nodes["output0"]["label"] == "()"
    assert (f"n{trace.graph['roots'][0]}", "output0", {}) in parsed.edges
    # backward freed the saved tensors: no orange boxes, the savers are marked, as live
    assert _saved_boxes(parsed) == {}
    loss.backward()

    def summary(p):
        return sorted((v["label"].split("\n")[0], v["label"].endswith("saved tensors freed"))
                      for v in graph_nodes(p).values() if v["fillcolor"] == "lightgrey")

    assert summary(parsed) == summary(parse(to_dot(loss)))
    assert sum(freed for _, freed in summary(parsed)) == 4  # x * w, tanh, h * h, exp
    path = tmp_path / "trace.json"
    trace.save(path)
    assert to_dot(load_trace(path)).source == to_dot(trace).source


def test_trace_with_retained_graph_shows_saved_tensors():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with gradviz.record() as trace:
        y = Square.apply(x.exp()).sum()
        y.backward(retain_graph=True)
    parsed = parse(to_dot(trace))
    assert sorted(_saved_boxes(parsed).values()) == ["result\n(2)", "saved_tensors[0]\n(2)"]
    custom = [v for v in parsed.nodes.values() if v["fillcolor"] == "thistle"]
    assert [v["label"] for v in custom] == ["SquareBackward\ncustom Function"]
    assert not _saved_boxes(parse(to_dot(trace, show_saved=False)))


def test_trace_of_several_roots_hides_graph_root():
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    a, b = (x * 2).sum(), x.exp().sum()
    with gradviz.record() as trace:
        gradviz.autograd.backward([a, b])
    parsed = parse(to_dot(trace))
    assert "GraphRoot" not in {v["label"] for v in parsed.nodes.values()}
    outputs = [(t, h) for t, h, _ in parsed.edges if h.startswith("output")]
    assert sorted(outputs) == sorted([(f"n{a.grad_fn.node_id}", "output0"),
                                      (f"n{b.grad_fn.node_id}", "output1")]) or \
        sorted(outputs) == sorted([(f"n{b.grad_fn.node_id}", "output0"),
                                   (f"n{a.grad_fn.node_id}", "output1")])
    # built before the block: no node_created events, so outputs are drawn without a shape
    assert {parsed.nodes[h]["label"] for _, h in outputs} == {"output"}


def test_trace_refuses_params():
    x = gradviz.tensor([1.0], requires_grad=True)
    with gradviz.record() as trace:
        (x * 2).sum().backward()
    with pytest.raises(ValueError, match="a Trace holds none"):
        to_dot(trace, params={"x": x})


# ---- hostile text -----------------------------------------------------------------------

HOSTILE = [
    'say "hi"',
    "<b>bold</b>",
    "<<table>>",
    "line\nbreak",
    "back\\slash",
    "ends with \\",
    'escaped \\" quote',
    "\\N \\G \\l \\n",
    '"; evil -> x [label="pwned"]; //',
    "tab\there",
    "bell\x07 nul\x00 del\x7f",
    "lone \udc80 surrogate",
    "ünïcødé ✓",
    "input x",
    "input 1",
    "",
]
SHOWN = {  # what the drawing must say, where it differs from the text itself
    "tab\there": "tab here",
    "bell\x07 nul\x00 del\x7f": "bell\\x07 nul\\x00 del\\x7f",
    "lone \udc80 surrogate": "lone \\udc80 surrogate",
}


@pytest.mark.parametrize("name", HOSTILE, ids=[repr(h) for h in HOSTILE])
def test_hostile_parameter_names_are_literal_text(name):
    w = gradviz.tensor([1.0, 2.0], requires_grad=True)
    dot = to_dot((w * 2).sum(), params={name: w})
    parsed = parse(dot)
    leaf = next(v for v in parsed.nodes.values() if v["fillcolor"] == "lightblue")
    assert leaf["label"] == SHOWN.get(name, name) + "\n(2)"
    assert "pwned" not in {v.get("label") for v in parsed.nodes.values()}
    assert len(parsed.nodes) == 4 and len(parsed.edges) == 3  # nothing injected
    dot.source.encode("utf-8")  # writable as a DOT file


def test_graphviz_quoting_agrees_on_hostile_text():
    # the package's own quoting of the same (escaped) text gives the same DOT string
    for name in HOSTILE:
        text = _dot._escape_text(name)
        assert graphviz.quoting.quote(graphviz.nohtml(text)) in (_dot._quoted_label([name]),
                                                                 text)


@pytest.mark.parametrize("name", HOSTILE[:9], ids=[repr(h) for h in HOSTILE[:9]])
def test_hostile_names_in_a_trace_file(name, tmp_path):
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with gradviz.record() as trace:
        Square.apply(x).sum().backward(retain_graph=True)
    data = trace.to_dict()
    for node in data["graph"]["nodes"]:
        node["name"] = name if node["kind"] == "custom" else node["name"]
        node["label"] = name if node["kind"] == "accumulate_grad" else node["label"]
    for event in data["events"]:
        for saved in event.get("saved", ()):
            saved["label"] = name
    parsed = parse(to_dot(Trace.from_dict(data)))
    labels = [v["label"] for v in parsed.nodes.values()]
    assert name + "\ncustom Function" in labels
    assert name in labels  # the leaf
    assert name + "\n(2)" in labels  # the saved tensor


@pytest.mark.parametrize("label, shown", [("input 1", "other"), ("input x", "input x"),
                                          ("input 7", "input 7"), ("output", "result")])
def test_saved_labels_from_a_trace(label, shown):
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    with gradviz.record() as trace:
        (x * x).sum().backward(retain_graph=True)
    data = trace.to_dict()
    for event in data["events"]:
        for saved in event.get("saved", ()):
            saved["label"] = label
    saved = _saved_boxes(parse(to_dot(Trace.from_dict(data))))
    assert sorted(saved.values()) == [shown + "\n(2)"] * 2


# ---- the optional graphviz package and the dot program -----------------------------------

def test_missing_graphviz_package_raises_import_error_with_the_pip_command():
    code = textwrap.dedent("""
        import sys
        sys.modules["graphviz"] = None  # import graphviz now raises ImportError
        import gradviz
        x = gradviz.tensor([1.0], requires_grad=True)
        try:
            gradviz.viz.to_dot((x * 2).sum())
        except ImportError as exc:
            print(exc)
    """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert "pip install 'gradviz[viz]'" in result.stdout
    assert "graphviz" in result.stdout


def test_render_without_dot_raises_a_clear_runtime_error(tmp_path, monkeypatch):
    x = gradviz.tensor([1.0], requires_grad=True)
    monkeypatch.setenv("PATH", "")
    with pytest.raises(RuntimeError, match=re.escape("apt-get install graphviz")) as info:
        render((x * 2).sum(), tmp_path / "g.svg")
    message = str(info.value)
    assert "rendering needs Graphviz's `dot` program" in message
    assert "brew install graphviz" in message
    assert "to_dot() itself needs nothing" in message
    assert not (tmp_path / "g.svg").exists()


def test_render_checks_shutil_which(tmp_path, monkeypatch):
    x = gradviz.tensor([1.0], requires_grad=True)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: None)
    with pytest.raises(RuntimeError, match="needs Graphviz's `dot` program"):
        render(to_dot((x * 2).sum()), tmp_path / "g.svg")


@pytest.mark.skipif(os.name != "posix", reason="the stand-in dot is a shell script")
def test_render_writes_what_dot_prints(tmp_path, monkeypatch):
    fake = tmp_path / "bin" / "dot"
    fake.parent.mkdir()
    fake.write_text("#!/bin/sh\ncat > /dev/null\nprintf '<svg>%s</svg>' \"$*\"\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("PATH", str(fake.parent))
    x = gradviz.tensor([1.0], requires_grad=True)
    out = render((x * 2).sum(), tmp_path / "graph.svg")
    assert out == str(tmp_path / "graph.svg")
    written = (tmp_path / "graph.svg").read_text()
    assert written.startswith("<svg>") and "-Tsvg" in written


def test_gradviz_exports_viz():
    assert gradviz.viz.to_dot is to_dot
    assert "viz" in gradviz.__all__
    assert set(gradviz.viz.__all__) == {"to_dot", "render"}


def test_docstring_examples():
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
    tests = [t for t in finder.find(_dot, globs={"gradviz": gradviz}) if t.examples]
    assert {t.name.rsplit(".", 1)[-1] for t in tests} >= {"to_dot", "render"}
    for test in tests:
        runner.run(test)
    assert runner.summarize(verbose=False).failed == 0
