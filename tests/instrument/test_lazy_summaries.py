"""Note [Lazy summaries]: a debug session computes a large gradient's summary when it is first
read. What it shows must be exactly what a session that summarizes every tensor at its event
shows, whatever the user writes once they have control: a leaf's ``.grad`` (in place through
the API, through numpy, by an optimizer or ``clip_grad_norm_``), the gradient they passed to
backward, a tensor ``session.tensor()`` handed them, or a hook's or custom backward's writes.
"""

from __future__ import annotations

import copy
import json
import pickle
import weakref

import numpy as np
import pytest

import gradviz
from gradviz.debug._session import _SessionRecorder
from gradviz.instrument._summary import SMALL_NUMEL, LazySummary, summarize_array
from gradviz.instrument._trace import _TraceRecorder

WIDTH = 48  # entries per row: every gradient below has more than SMALL_NUMEL entries
assert WIDTH > SMALL_NUMEL

_SUMMARIES = ("grads_in", "grads_out", "grad", "sum", "before", "after", "grad_inputs")


def _summaries_of(event):
    for key in _SUMMARIES:
        value = event.get(key)
        for summary in value if isinstance(value, list) else [value]:
            if summary is not None:
                yield summary


def _comparable(events):
    """Each event's kind, text and summaries as plain data (node ids differ between runs)."""
    return [(event["kind"], event["text"],
             json.loads(json.dumps({k: event[k] for k in _SUMMARIES if k in event})))
            for event in events]


def _pending(events) -> int:
    return sum(1 for event in events for summary in _summaries_of(event)
               if isinstance(summary, LazySummary) and summary.pending)


class _Model:
    """Two layers with a residual fan-in, a transposed weight, a column-major leaf, a broadcast
    bias, a reshape and a leaf read twice; the same values on every construction."""

    def __init__(self):
        rng = np.random.default_rng(7)

        def leaf(*shape):
            return gradviz.tensor(rng.standard_normal(shape).astype(np.float32),
                                  requires_grad=True)

        self.w1 = leaf(WIDTH, WIDTH)
        self.b1 = leaf(WIDTH)
        self.w2 = leaf(WIDTH, WIDTH)
        # column-major: its first .grad is a copy in its own layout (clone_obey_contract)
        self.w3 = leaf(WIDTH, WIDTH).detach().t().requires_grad_(True)
        self.x = gradviz.tensor(rng.standard_normal((4, WIDTH)).astype(np.float32))

    def params(self):
        return [self.w1, self.b1, self.w2, self.w3]

    def output(self):
        h = (self.x @ self.w1 + self.b1).tanh()
        # h fans out three ways: its buffer's sum is made, then added into in place
        r = h + h @ self.w2.t() + h * 0.5 + h @ self.w3
        return (r.reshape(8, WIDTH // 2) * 0.5).reshape(4, WIDTH) * self.w1[0]

    def loss(self):
        return (self.output() ** 2).sum()


def _session(lazy: bool, monkeypatch, make_loss, **options):
    monkeypatch.setattr(_SessionRecorder, "lazy_summaries", lazy)
    return gradviz.debug.backward(make_loss(), **options)


def _both(monkeypatch, run):
    """``run(lazy)`` for a lazy and an eager session; their comparable events."""
    results = []
    for lazy in (True, False):
        results.append(run(lazy))
        monkeypatch.undo()
    return results


# ---- a dict to every reader ------------------------------------------------------------

_DATA = np.linspace(-3.0, 5.0, 40, dtype=np.float32).reshape(5, 8)

READERS = {
    "==": lambda s, ref: s == ref,
    "reflected ==": lambda s, ref: ref == s,
    "!=": lambda s, ref: (s != ref) is False,
    "two pending": lambda s, ref: s == LazySummary(_DATA.copy(), "float32"),
    "in a list": lambda s, ref: [s] == [ref],
    "json": lambda s, ref: json.loads(json.dumps(s)) == json.loads(json.dumps(ref)),
    "json sorted": lambda s, ref: json.dumps(s, sort_keys=True) == json.dumps(ref, sort_keys=True),
    "repr": lambda s, ref: repr(s) == repr(ref),
    "str": lambda s, ref: str(s) == str(ref),
    "dict()": lambda s, ref: dict(s) == ref,
    "**": lambda s, ref: {**s} == ref,
    "|": lambda s, ref: (s | {}) == ref and ({} | s) == ref,
    "copy": lambda s, ref: copy.copy(s) == ref and s.copy() == ref,
    "deepcopy": lambda s, ref: copy.deepcopy(s) == ref,
    "pickle": lambda s, ref: pickle.loads(pickle.dumps(s)) == ref,
    "len": lambda s, ref: len(s) == len(ref),
    "bool": lambda s, ref: bool(s),
    "in": lambda s, ref: "norm" in s,
    "iter": lambda s, ref: list(s) == list(ref),
    "keys": lambda s, ref: list(s.keys()) == list(ref.keys()),
    "values": lambda s, ref: list(s.values()) == list(ref.values()),
    "items": lambda s, ref: list(s.items()) == list(ref.items()),
    "[]": lambda s, ref: s["max"] == ref["max"],
    "get": lambda s, ref: s.get("min") == ref["min"] and s.get("absent", 3) == 3,
    "format": lambda s, ref: f"{s}" == f"{ref}",
    "kwargs": lambda s, ref: (lambda **kw: kw)(**s) == ref,
}


@pytest.mark.parametrize("reader", READERS)
def test_a_lazy_summary_reads_as_the_summary_it_stands_for(reader):
    reference = summarize_array(_DATA, "float32")
    lazy = LazySummary(_DATA, "float32")
    assert lazy.pending and isinstance(lazy, dict)
    assert READERS[reader](lazy, reference)
    assert not lazy.pending
    assert lazy == reference


def test_a_lazy_summary_of_the_same_memory_under_another_shape():
    data = np.arange(48.0)
    source = LazySummary(data, "float64")
    reshaped = LazySummary(source, (6, 8))
    assert reshaped == summarize_array(data.reshape(6, 8), "float64")
    assert not source.pending
    assert source == summarize_array(data, "float64")


# ---- a session shows what eager summaries show -------------------------------------------

def test_a_session_defers_its_events_and_shows_what_eager_summaries_show(monkeypatch):
    # Note [Events when read]: nothing of the pass is built until something reads it
    deferred = []

    def run(lazy):
        session = _session(lazy, monkeypatch, _Model().loss)
        session.continue_()
        recorder = session._recorder
        deferred.append(recorder.event_count - len(recorder._events))
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager
    assert deferred[0] > 10, "the session built every event at its engine callback"
    assert deferred[1] == 0


def test_with_the_callers_gradient_a_session_defers_large_summaries(monkeypatch):
    # the caller may write the gradient they passed: events are built at once, their large
    # summaries computed when read
    pending = []

    def run(lazy):
        model = _Model()
        output = model.output()
        session = _session(lazy, monkeypatch, lambda: output,
                           gradient=gradviz.ones_like(output))
        session.continue_()
        recorder = session._recorder
        assert recorder.event_count == len(recorder._events)
        pending.append(_pending(session.events))
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager
    assert pending[0] > 10, "the lazy session computed every summary at its event"
    assert pending[1] == 0


def _write_handed_out(session, value):
    """Write ``value`` into every intermediate gradient ``session.tensor()`` hands out."""
    for info in session.graph()["nodes"]:
        for slot in range(4):
            try:
                tensor = session.tensor(info["id"], "grads_out", slot)
            except (LookupError, IndexError):
                continue
            if tensor is not None and tensor.numpy().flags.writeable:
                tensor.numpy()[...] = value


@pytest.mark.parametrize("read_while_paused", [False, True])
def test_tensors_handed_out_after_the_pass_may_be_written(read_while_paused, monkeypatch):
    # What was shown before the write stays: events deferred or built while paused (with
    # pending summaries) are complete before a live tensor is handed out.
    def run(lazy):
        session = _session(lazy, monkeypatch, _Model().loss)
        if read_while_paused:
            for _ in range(5):
                session.step()
            assert len(session.events) > 5  # builds what is recorded so far
        session.continue_()
        _write_handed_out(session, 13.0)
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager
    assert not any(13.0 in summary["values"] for _, _, summaries in lazy
                   for value in summaries.values()
                   for summary in (value if isinstance(value, list) else [value]) if summary)


WRITES = {
    "grad through numpy": lambda model, g: [p.grad.numpy().__setitem__(..., 7.0)
                                            for p in model.params()],
    "grad in place": lambda model, g: [p.grad.mul_(-2.0) for p in model.params()],
    "clip_grad_norm_": lambda model, g: gradviz.nn.utils.clip_grad_norm_(model.params(), 1e-3),
    "zero_grad(set_to_none=False)": lambda model, g: gradviz.optim.SGD(
        model.params(), lr=0.1).zero_grad(set_to_none=False),
    "optimizer step": lambda model, g: gradviz.optim.SGD(model.params(), lr=0.5).step(),
    "the gradient passed to backward": lambda model, g: g.numpy().__setitem__(..., -5.0),
}


# The caller's gradient: events built at once, large summaries pending. A scalar loss:
# events deferred (Note [Events when read]); w1 is read twice, so its .grad is the sum the
# engine made, which its AccumulateGrad's node_started and node_finished also describe.
_WRITE_CASES = [(write, root) for root in ("caller's gradient", "scalar loss") for write in WRITES
                if root == "caller's gradient" or write != "the gradient passed to backward"]


def _root(model, root):
    if root == "scalar loss":
        return model.loss, {}, None
    gradient = gradviz.full((4, WIDTH), 0.25)  # the caller's: they may write it later
    return model.output, {"gradient": gradient}, gradient


@pytest.mark.parametrize("write, root", _WRITE_CASES)
def test_what_the_user_writes_after_the_pass_changes_nothing_shown(write, root, monkeypatch):
    def run(lazy):
        model = _Model()
        make_loss, options, gradient = _root(model, root)
        session = _session(lazy, monkeypatch, make_loss, **options)
        session.continue_()
        with gradviz.no_grad():
            WRITES[write](model, gradient)
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager


@pytest.mark.parametrize("write, root", _WRITE_CASES)
def test_what_the_user_writes_while_paused_changes_nothing_shown(write, root, monkeypatch):
    def run(lazy):
        model = _Model()
        make_loss, options, gradient = _root(model, root)
        session = _session(lazy, monkeypatch, make_loss, **options)
        while not session.finished:
            session.step()
            if write == "the gradient passed to backward" or all(
                    p.grad is not None for p in model.params()):
                with gradviz.no_grad():
                    WRITES[write](model, gradient)
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager


def test_tensors_the_session_hands_out_may_be_written(monkeypatch):
    def run(lazy):
        session = _session(lazy, monkeypatch, _Model().loss)
        for _ in range(4):
            session.step()
        _write_handed_out(session, 11.0)
        session.continue_()
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager
    assert any(11.0 in summary["values"] for _, _, summaries in lazy
               for value in summaries.values()
               for summary in (value if isinstance(value, list) else [value]) if summary)


def _scribble(tensor, value):
    array = tensor.numpy()
    if array.flags.writeable:
        array[...] = value


HOOK_WRITES = ["tensor_hook", "node_prehook", "posthook", "post_accumulate", "custom_backward",
               "saved_tensor_unpack"]


def _hook_program(where):
    """A program whose hook (or custom backward) ``where`` writes, behind the version counter,
    a gradient kept from an earlier node: ``(make_loss, kept, written)``."""

    class Scale(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 3

        @staticmethod
        def backward(ctx, grad):
            if where == "custom_backward":
                scribble_kept(7.0)
            return grad * 3

    kept: list = []
    written: list = []

    def scribble_kept(value):
        for kept_grad in kept:
            _scribble(kept_grad, value)
            written.append(value)

    def unpack(t):
        scribble_kept(9.0)
        return t

    def make_loss():
        kept.clear()
        written.clear()
        model = _Model()
        if where == "saved_tensor_unpack":
            with gradviz.autograd.graph.saved_tensors_hooks(lambda t: t, unpack):
                s = model.x @ model.w2  # saves model.x, unpacked when its node runs
        else:
            s = model.x @ model.w2
        late = Scale.apply(s) if where == "custom_backward" else s * 1.0
        if where == "tensor_hook":
            late.register_hook(lambda g: scribble_kept(2.0))
        if where == "node_prehook":
            late.grad_fn.register_prehook(lambda grads: scribble_kept(4.0))
        if where == "posthook":
            late.grad_fn.register_hook(lambda gi, go: scribble_kept(5.0))
        if where == "post_accumulate":
            model.w2.register_post_accumulate_grad_hook(lambda p: scribble_kept(6.0))
        # recorded after s's branch, so its nodes run first (higher sequence numbers)
        h = (model.x @ model.w1).tanh()
        h.register_hook(kept.append)  # keeps h's gradient, summarized by earlier events
        return (late * late).sum() + (h * 3.0).sum()  # one contribution: not a sum

    return make_loss, kept, written


@pytest.mark.parametrize("where", HOOK_WRITES)
def test_code_the_engine_runs_for_the_user_may_write_any_gradient(where, monkeypatch):
    """A hook (or custom backward) writes a gradient it kept from an earlier node: the
    summaries of the events before must be the values then."""
    make_loss, _, written = _hook_program(where)

    def run(lazy):
        session = _session(lazy, monkeypatch, make_loss)
        session.continue_()
        assert written, "the program wrote nothing: this test would see nothing"
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager


@pytest.mark.parametrize("options", [{"create_graph": True}, {"retain_graph": True}])
def test_passes_with_options_show_what_eager_summaries_show(options, monkeypatch):
    def run(lazy):
        model = _Model()
        session = _session(lazy, monkeypatch, model.loss, **options)
        session.continue_()
        with gradviz.no_grad():
            for p in model.params():
                p.grad.mul_(3.0)
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager


def test_several_roots_with_the_callers_gradients(monkeypatch):
    def run(lazy):
        model = _Model()
        out = model.output()
        grads = [gradviz.full((4, WIDTH), 0.5), gradviz.full((WIDTH,), 2.0)]
        monkeypatch.setattr(_SessionRecorder, "lazy_summaries", lazy)
        session = gradviz.debug.backward([out, model.b1 * 3.0], grads)
        session.continue_()
        for g in grads:
            g.numpy()[...] = -1.0
        return _comparable(session.events)

    lazy, eager = _both(monkeypatch, run)
    assert lazy == eager


def test_a_builder_that_raises_leaves_its_record_and_the_rest_deferred(monkeypatch):
    eager_session = _session(False, monkeypatch, _Model().loss)
    eager_session.continue_()
    eager = _comparable(eager_session.events)
    monkeypatch.undo()
    build = _SessionRecorder._build_node_finished
    failures = []

    def failing(self, record):
        if failures:
            failures.pop()
            raise MemoryError("out of memory while building")
        build(self, record)

    monkeypatch.setattr(_SessionRecorder, "_build_node_finished", failing)
    session = _session(True, monkeypatch, _Model().loss)
    session.continue_()
    recorder = session._recorder
    count = recorder.event_count
    assert count > len(recorder._events) + 10
    failures.append(True)
    with pytest.raises(MemoryError):
        recorder.events
    assert recorder.event_count == count  # nothing lost, nothing built twice
    assert len(recorder._events) > 0  # what came before the failing record is built
    assert _comparable(recorder.events) == eager


def _without_ids(graph):
    """``graph()`` with node ids (the engine's, new in each run) replaced by positions."""
    position = {node["id"]: index for index, node in enumerate(graph["nodes"])}
    return {"nodes": [dict(node, id=position[node["id"]]) for node in graph["nodes"]],
            "edges": [dict(edge, source=position[edge["source"]], target=position[edge["target"]])
                      for edge in graph["edges"]],
            "roots": [position[root] for root in graph["roots"]]}


@pytest.mark.parametrize("read_first", ["graph", "events", "nothing"])
def test_a_deferred_graph_is_described_named_and_numbered_as_an_eager_one(read_first,
                                                                          monkeypatch):
    # Note [Events when read]: the session's graph is described when first read; the names
    # of params, of module parameters and of the caller's variables, and the numbers, are
    # those of a session that described it at once, in its graph and in the narration
    results = []
    for lazy in (True, False):
        monkeypatch.setattr(_SessionRecorder, "lazy_summaries", lazy)
        model = gradviz.nn.Sequential(gradviz.nn.Linear(WIDTH, WIDTH), gradviz.nn.Tanh())
        scale = gradviz.full((WIDTH,), 0.5, requires_grad=True)  # named by this variable
        other = gradviz.full((WIDTH,), 2.0, requires_grad=True)
        x = gradviz.ones(4, WIDTH)
        loss = ((model(x) * scale).sum(0) * other).sum() + (model(x) * 3).sum()
        session = gradviz.debug.backward(loss, params={"other_leaf": other})
        recorder = session._recorder
        assert (recorder.event_count > len(recorder._events)) == lazy
        if read_first == "graph":
            session.graph()
        elif read_first == "events":
            recorder.events  # noqa: B018
        session.continue_()
        results.append((_without_ids(session.graph()), [e["text"] for e in session.events]))
        monkeypatch.undo()
    assert results[0] == results[1]
    graph, texts = results[0]
    names = {node.get("leaf_name") for node in graph["nodes"]}
    assert {"0.weight", "0.bias", "scale", "other_leaf"} <= names
    assert any("AccumulateGrad for scale" in text for text in texts)
    assert any("#" in text for text in texts)  # shared names are numbered


# ---- gradviz.record(): a trace's events are built when read ---------------------------------

def _recorded(defer: bool, monkeypatch, program):
    """``program(record)`` run with a trace recorder that defers (as ``gradviz.record()``
    does) or builds every event at once; the trace's events and graph as comparable data."""
    monkeypatch.setattr(_TraceRecorder, "lazy_summaries", defer)
    trace = program(gradviz.record)
    monkeypatch.undo()
    return _comparable(trace.events), _without_ids(trace.graph)


def _both_recorded(monkeypatch, program):
    deferred = _recorded(True, monkeypatch, program)
    eager = _recorded(False, monkeypatch, program)
    return deferred, eager


def _pending_records(trace) -> int:
    recorder = trace._recorder
    return 0 if recorder is None else recorder.event_count - len(recorder._events)


def test_a_recorded_step_is_built_when_read_as_an_eager_one_would_be(monkeypatch):
    pending = []

    def program(record):
        model = _Model()
        with record() as trace:
            model.loss().backward()
        pending.append(_pending_records(trace))
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager
    assert pending[0] > 10, "record() built every event at its engine callback"
    assert pending[1] == 0


@pytest.mark.parametrize("write", [w for w in WRITES if w != "the gradient passed to backward"])
def test_what_the_user_writes_after_a_recorded_pass_changes_nothing_in_the_trace(write,
                                                                              monkeypatch):
    def program(record):
        model = _Model()
        with record() as trace:
            model.loss().backward()
            with gradviz.no_grad():
                WRITES[write](model, None)
        with gradviz.no_grad():
            WRITES[write](model, None)  # and after the block, before the trace is read
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager


def test_a_recorded_pass_from_the_callers_gradient_is_built_at_once(monkeypatch):
    # they may write the gradient they passed: nothing is deferred, the summaries are computed
    # by the end of the pass
    pending = []

    def program(record):
        model = _Model()
        gradient = gradviz.full((4, WIDTH), 0.25)
        with record() as trace:
            model.output().backward(gradient)
            pending.append(_pending_records(trace))
            gradient.numpy()[...] = -5.0
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager
    assert pending == [0, 0]


@pytest.mark.parametrize("between", ["a training step", "another backward", "a read"])
def test_several_recorded_passes_are_built_in_order(between, monkeypatch):
    # a pass's records are built at the latest when the next pass starts or the next op is
    # recorded, with the summaries and names they had
    def program(record):
        model = _Model()
        optimizer = gradviz.optim.SGD(model.params(), lr=0.1)
        with record() as trace:
            loss = model.loss()
            for _ in range(3):
                optimizer.zero_grad()
                loss.backward(retain_graph=True)
                if between == "a training step":
                    optimizer.step()
                    loss = model.loss()
                elif between == "a read":
                    assert trace.events[-1]["kind"] == "backward_finished"
                with gradviz.no_grad():
                    for p in model.params():
                        p.grad.mul_(-3.0)
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager
    assert [event[0] for event in deferred[0]].count("backward_finished") == 3


def test_a_recorded_pass_names_the_callers_variables_as_they_were_then(monkeypatch):
    def program(record):
        rng = np.random.default_rng(3)
        w = gradviz.tensor(rng.standard_normal((WIDTH, WIDTH)).astype(np.float32),
                           requires_grad=True)
        bias = gradviz.tensor(rng.standard_normal(WIDTH).astype(np.float32), requires_grad=True)
        with record() as trace:
            ((w @ w).tanh() + bias).sum().backward()
        del w, bias  # the names are gone before the trace is read
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager
    texts = " ".join(text for _, text, _ in deferred[0])
    assert "AccumulateGrad for w " in texts and "AccumulateGrad for bias " in texts
    assert {node.get("leaf_name") for node in deferred[1]["nodes"]} >= {"w", "bias"}


def test_a_recorded_pass_over_its_byte_limit_goes_on_eagerly(monkeypatch):
    # the records would hold more gradients than deferred_bytes_limit: the pass is built as it
    # runs from there on, and the trace lets go of its recorder when the block ends
    monkeypatch.setattr(_TraceRecorder, "deferred_bytes_limit", 4 * WIDTH * WIDTH)
    model = _Model()
    with gradviz.record() as trace:
        model.loss().backward()
        assert _pending_records(trace) == 0
    assert trace._recorder is None
    limited = _comparable(trace.events)
    monkeypatch.undo()
    monkeypatch.setattr(_TraceRecorder, "lazy_summaries", False)
    model = _Model()
    with gradviz.record() as eager:
        model.loss().backward()
    assert limited == _comparable(eager.events)


def test_a_trace_lets_go_of_its_records_once_read():
    model = _Model()
    with gradviz.record() as trace:
        model.loss().backward()
    recorder = weakref.ref(trace._recorder)
    assert len(trace.events) > 10
    assert trace._recorder is None
    assert recorder() is None  # nor does anything else hold the records and their gradients


def test_a_trace_recorded_from_several_threads_is_built_at_once():
    model = _Model()
    with gradviz.record(all_threads=True) as trace:
        model.loss().backward()
        assert _pending_records(trace) == 0
    assert trace._recorder is None


@pytest.mark.parametrize("where", HOOK_WRITES)
def test_code_the_engine_runs_during_a_recorded_pass_may_write_any_gradient(where, monkeypatch):
    """As for a session: the trace shows the values at each event."""
    make_loss, _, written = _hook_program(where)

    def program(record):
        with record() as trace:
            make_loss().backward()
        assert written, "the program wrote nothing: this test would see nothing"
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager


def test_a_nested_backward_inside_a_recorded_pass(monkeypatch):
    # a custom backward that runs a backward of its own: the inner pass is not deferred
    # inside the outer one, and the events keep their order
    class Inner(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            ctx.save_for_backward(a)
            return a * 2

        @staticmethod
        def backward(ctx, grad):
            (a,) = ctx.saved_tensors
            with gradviz.enable_grad():
                b = a.detach().requires_grad_()
                (b * b).sum().backward()
            return grad * 2 + b.grad

    def program(record):
        model = _Model()
        with record() as trace:
            (Inner.apply(model.output()) ** 2).sum().backward()
        return trace

    deferred, eager = _both_recorded(monkeypatch, program)
    assert deferred == eager
    assert [event[0] for event in deferred[0]].count("backward_started") == 2


@pytest.mark.parametrize("how", ["pickle", "copy", "deepcopy"])
def test_a_copy_of_a_trace_not_read_yet_holds_its_events(how):
    model = _Model()
    with gradviz.record() as trace:
        model.loss().backward()
    assert _pending_records(trace) > 10
    duplicate = {"pickle": lambda t: pickle.loads(pickle.dumps(t)), "copy": copy.copy,
                 "deepcopy": copy.deepcopy}[how](trace)
    assert duplicate._recorder is None
    assert _comparable(duplicate.events) == _comparable(trace.events)
    assert duplicate.graph == trace.graph
