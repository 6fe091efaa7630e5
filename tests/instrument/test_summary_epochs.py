"""Note [Summary epochs]: the recorder reuses a gradient's summary until code the engine does
not control may have written it. Each program below writes gradients behind their version
counters (through ``.numpy()``) at one of those points, and the events must be exactly those of
a recorder that summarizes every tensor afresh at every event."""

from __future__ import annotations

import pytest

import gradviz
from gradviz.autograd._functional import make_graph_task
from gradviz.debug._session import _SessionRecorder
from gradviz.instrument import Recorder
from gradviz.instrument._summary import summarize


class _Fresh:
    """A summary cache that never hits: the definition the cache must match."""

    hits = 0
    lazy = False  # every summary at its event

    def summarize(self, tensor, now=False):
        return summarize(tensor)

    def new_epoch(self):
        pass

    def clear(self):
        pass

    def flush(self):
        pass

    def flush_owners(self, arrays):
        pass


def _handed_out(session):
    """The gradients that arrived at each node that has run, as ``session.tensor()`` hands
    them out (live: the user may write them)."""
    tensors = []
    for info in session.graph()["nodes"]:
        for slot in range(4):
            try:
                tensor = session.tensor(info["id"], "grads_in", slot)
            except (LookupError, IndexError):
                continue
            if tensor is not None:
                tensors.append(tensor)
    return tensors


def _without_cache(recorder):
    recorder._summary_cache = _Fresh()
    return recorder


_SUMMARIES = ("grads_in", "grads_out", "grad", "sum", "before", "after", "grad_inputs")


def _comparable(events):
    """What each event says and every summary it carries (node ids differ between runs)."""
    return [(event["kind"], event["text"], {k: event[k] for k in _SUMMARIES if k in event})
            for event in events]


WRITES = []


def _scribble(tensor, value):
    """Write ``value`` into ``tensor`` behind its version counter's back (a broadcast, read-only
    gradient is left alone); WRITES counts the writes, so a program that writes nothing fails."""
    array = tensor.numpy()
    if array.flags.writeable:
        array[...] = value
        WRITES.append(value)


def _graph(write_point):
    """A small graph with fan-in, a view and a custom Function, where ``write_point``
    scribbles on a gradient that a later event summarizes again."""
    x = gradviz.arange(1.0, 9.0, requires_grad=True)
    w = gradviz.full((8,), 0.5, requires_grad=True)

    class Scale(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, a):
            return a * 3

        @staticmethod
        def backward(ctx, grad):
            if write_point == "custom_backward":
                _scribble(grad, 7.0)  # its own grad_output, shown again at node_finished
            return grad * 3

    h = x * w
    if write_point == "tensor_hook":
        h.register_hook(lambda g: _scribble(g, 2.0))
    m = h.view(2, 4) * 1.5
    a = m.sum(1)
    b = (Scale.apply(h) ** 2).sum()
    if write_point == "node_prehook":
        a.grad_fn.register_prehook(lambda grads: _scribble(grads[0], 4.0))
    if write_point == "posthook":
        m.grad_fn.register_hook(lambda grad_inputs, grad_outputs: _scribble(grad_inputs[0], 5.0))
    if write_point == "post_accumulate":
        kept = []
        w.register_hook(kept.append)  # holds w's gradient: copied into .grad in both runs
        w.register_post_accumulate_grad_hook(lambda p: _scribble(p.grad, 6.0))
    return (a * a).sum() + b + (h * h).sum()


WRITE_POINTS = ["tensor_hook", "node_prehook", "posthook", "custom_backward", "post_accumulate"]


def _values(events):
    return [value for _, _, summaries in events for summary_list in summaries.values()
            for summary in (summary_list if isinstance(summary_list, list) else [summary_list])
            if summary for value in summary["values"]]


@pytest.mark.parametrize("write_point", WRITE_POINTS)
def test_a_recorder_with_the_cache_reports_what_a_fresh_summary_reports(write_point):
    runs = []
    for recorder in (Recorder(), _without_cache(Recorder())):
        WRITES.clear()
        make_graph_task(_graph(write_point), observer=recorder).run()
        assert WRITES, f"the program wrote nothing at {write_point}"
        runs.append(_comparable(recorder.events))
    assert runs[0] == runs[1]
    assert WRITES[0] in _values(runs[0])  # the write shows in some event


def test_a_saved_tensor_unpack_hook_that_writes_a_gradient_is_seen():
    """The unpack hook writes the grad_output of the node whose backward unpacks (kept by a
    tensor hook); that node's node_finished summarizes it again."""
    stash = []

    def pack(t):
        return t

    def unpack(t):
        if stash:
            _scribble(stash[0], 9.0)
        return t

    runs = []
    for recorder in (Recorder(), _without_cache(Recorder())):
        stash.clear()
        WRITES.clear()
        v = gradviz.arange(1.0, 5.0, requires_grad=True)
        with gradviz.autograd.graph.saved_tensors_hooks(pack, unpack):
            square = v * v  # MulBackward0 unpacks v twice in backward
        square.register_hook(stash.append)
        make_graph_task((square * 1.5).sum(), observer=recorder).run()
        assert WRITES
        runs.append(_comparable(recorder.events))
    assert runs[0] == runs[1]
    assert 9.0 in _values(runs[0])


@pytest.mark.parametrize("how", ["step", "step_event", "continue_to_breakpoint", "when"])
def test_a_debug_session_sees_what_the_user_wrote_while_paused(how, monkeypatch):
    """Paused, the user writes into a gradient the session shows; what the session records
    after resuming matches a session that summarizes afresh."""
    runs = []
    for fresh in (False, True):
        if fresh:
            original = _SessionRecorder.__init__

            def init(self, original=original):
                original(self)
                _without_cache(self)

            monkeypatch.setattr(_SessionRecorder, "__init__", init)
        WRITES.clear()
        session = gradviz.debug.backward(_graph("none"))
        seen = []
        if how == "when":
            def predicate(event):
                for tensor in _handed_out(session):
                    _scribble(tensor, 3.0)
                seen.append(event["kind"])
                return False

            session.break_on(when=predicate)
            session.continue_()
        else:
            for _ in range(3):
                if how == "step_event":
                    session.step_event()
                else:
                    session.step()
            for tensor in _handed_out(session):
                _scribble(tensor, 8.0)
            if how == "continue_to_breakpoint":
                session.break_on(function="SumBackward1")
                session.continue_()
            session.continue_()
        assert WRITES
        runs.append(_comparable(session._recorder.events))
        monkeypatch.undo()
    assert runs[0] == runs[1]


# ---- Note [Shared summaries]: events share summary dicts, so no reader may change one -----


def test_every_reader_leaves_the_shared_summaries_as_they_were_emitted(monkeypatch, tmp_path):
    """Each event is deep-copied as it is emitted; after a debug session has been stepped,
    inspected node by node, given overlays, shown in a widget and turned into a trace, a page
    and a replay, every event (and every summary it shares with others) is as emitted."""
    import copy

    from gradviz.widget import display_session

    emitted = []  # (event, its deep copy at emission)
    original_emit = Recorder.emit

    def emit(self, event):
        emitted.append((event, copy.deepcopy(event)))
        original_emit(self, event)

    monkeypatch.setattr(Recorder, "emit", emit)
    with gradviz.record() as trace:
        loss = _graph("posthook")
        session = gradviz.debug.backward(loss, retain_graph=True)
        widget = display_session(session)
        while not session.finished:
            session.step()
            for node in session.graph()["nodes"]:
                session.node(node["id"])
            session.overlays()
        session.doctor()
        loss.backward()
    summaries = [summary for event in session.events for key in ("grads_in", "grads_out")
                 for summary in event.get(key) or () if summary is not None]
    assert len({id(s) for s in summaries}) < len(summaries), (
        "no summary is shared between events: this test would not see a reader change one")
    trace.to_html(tmp_path / "page.html")
    replayed = gradviz.debug.replay(trace)
    replayed.continue_()
    for node in replayed.graph()["nodes"]:
        replayed.node(node["id"])
    widget.close()
    assert len(emitted) > 50
    changed = [(event["kind"], event["text"]) for event, at_emission in emitted
               if event != at_emission]
    assert not changed
