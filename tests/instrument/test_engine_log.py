"""Note [Records the engine appends] (gradviz_ext/_task.py): while a recorder defers, the engine
appends the records of node_ready, first contributions and built-in nodes' start and finish
itself. The events built from them must be exactly those built from the recorder's own
callbacks, wherever the recorder stops deferring (hooks, custom backwards, saved-tensor hooks,
its byte budget), and a recorder that overrides a callback must still get every call.
"""

from __future__ import annotations

import threading

import numpy as np
import pytest

import gradviz
from gradviz.debug._session import _SessionRecorder
from gradviz.instrument import Recorder, _recorder
from gradviz.instrument._trace import _TraceRecorder
from gradviz_ext import task as _task

WIDTH = 40


def _leaf(rng, *shape):
    return gradviz.tensor(rng.standard_normal(shape).astype(np.float32), requires_grad=True)


class _Block:
    """A residual block with a fan-in, a broadcast bias, a leaf read twice and a transposed
    weight; the same values on every construction."""

    def __init__(self):
        rng = np.random.default_rng(3)
        self.w1 = _leaf(rng, WIDTH, WIDTH)
        self.b1 = _leaf(rng, WIDTH)
        self.w2 = _leaf(rng, WIDTH, WIDTH)
        self.x = gradviz.tensor(rng.standard_normal((6, WIDTH)).astype(np.float32))

    def params(self):
        return [self.w1, self.b1, self.w2]

    def hidden(self):
        return (self.x @ self.w1 + self.b1).tanh()

    def loss(self, hidden=None):
        h = self.hidden() if hidden is None else hidden
        r = h + h @ self.w2.t() + h * 0.5
        return ((r * self.w1[0]).softmax(-1) ** 2).sum()


class _Twice(gradviz.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def _plain_loss(block):
    return block.loss()


def _tensor_hook(block):
    h = block.hidden()
    h.register_hook(lambda grad: grad * 3)  # the recorder stops deferring before its node
    return block.loss(h)


def _custom_function(block):
    return block.loss(_Twice.apply(block.hidden()))


def _saved_tensor_hooks(block):
    with gradviz.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        h = block.hidden()
    return block.loss(h)


def _post_accumulate_hook(block):
    block.b1.register_post_accumulate_grad_hook(lambda p: None)
    return block.loss()


def _materialized(block):
    h = block.hidden()
    variance, _ = gradviz.var_mean(h, 1, keepdim=True)  # the mean's gradient is made zeros
    return block.loss(h + variance)


PROGRAMS = {"plain": _plain_loss, "materialized": _materialized, "tensor hook": _tensor_hook,
            "custom Function": _custom_function, "saved-tensor hooks": _saved_tensor_hooks,
            "post-accumulate hook": _post_accumulate_hook}


def _comparable(events):
    """Every field of every event but its clock, with node ids (new in each run) replaced by
    the order in which the events first name them."""
    order: dict = {}

    def position(node_id):
        return None if node_id is None else order.setdefault(node_id, len(order))

    def plain(value):
        if isinstance(value, dict):
            return {key: position(item) if key in ("node", "producer") else plain(item)
                    for key, item in value.items()
                    if key not in ("time", "duration", "dependencies")}  # keyed by node id
        if isinstance(value, list):
            return [plain(item) for item in value]
        return value

    return [repr(plain(event)) for event in events]


def _with_and_without_the_log(monkeypatch, run):
    """``run()`` with the engine appending records, then with every callback reaching the
    recorder; both results."""
    logged = run()
    monkeypatch.setattr(_recorder, "_logs_in_engine", lambda cls: False)
    called = run()
    monkeypatch.undo()
    return logged, called


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_session_shows_the_same_events_with_the_engine_log(program, monkeypatch):
    def run():
        block = _Block()
        session = gradviz.debug.backward(PROGRAMS[program](block))
        session.continue_()
        grads = [p.grad.numpy().copy() for p in block.params()]
        node = session.node(session.graph()["nodes"][1]["id"])
        return _comparable(session.events), grads, repr(node["grads_in"]), repr(node["grads_out"])

    logged, called = _with_and_without_the_log(monkeypatch, run)
    assert logged[0] == called[0]
    for got, want in zip(logged[1], called[1]):
        np.testing.assert_array_equal(got, want)
    assert logged[2:] == called[2:]


@pytest.mark.parametrize("program", PROGRAMS)
def test_a_trace_holds_the_same_events_with_the_engine_log(program, monkeypatch):
    def run():
        block = _Block()
        with gradviz.record() as trace:
            PROGRAMS[program](block).backward()
        return _comparable(trace.events)

    logged, called = _with_and_without_the_log(monkeypatch, run)
    assert logged == called


def test_a_session_stepped_event_by_event_shows_the_same_events_and_buffers(monkeypatch):
    def run():
        session = gradviz.debug.backward(_Block().loss())
        shown = []
        while not session.finished:
            event = session.step_event()
            if event is not None and event["kind"] == "buffer_added":
                node = session.node(event["node"])
                shown.append(repr(node["pending_buffer"]))
        return _comparable(session.events), shown

    logged, called = _with_and_without_the_log(monkeypatch, run)
    assert logged == called
    assert logged[1]  # some buffers were read while the display was behind


def test_a_trace_over_its_byte_budget_holds_the_same_events(monkeypatch):
    # the engine counts its node_finished records against the budget; the one that would
    # overdraw it is the recorder's call, which builds the pass and goes on eagerly
    monkeypatch.setattr(_TraceRecorder, "deferred_bytes_limit", 3 * WIDTH * WIDTH * 4)

    def run():
        with gradviz.record() as trace:
            _Block().loss().backward()
            assert trace._recorder.event_count == len(trace._recorder._events)  # eager by now
        return _comparable(trace.events)

    logged = run()
    with monkeypatch.context() as patch:
        patch.setattr(_recorder, "_logs_in_engine", lambda cls: False)
        called = run()
    assert logged == called


def test_the_engine_appends_the_records_while_the_recorder_defers(monkeypatch):
    # the callbacks the log replaces are not called at all (else the tests above compare the
    # recorder with itself)
    calls = {"node_ready": 0, "node_started": 0}
    for name in calls:
        original = getattr(Recorder, name)

        def counting(self, *args, _name=name, _original=original):
            calls[_name] += 1
            return _original(self, *args)
        monkeypatch.setattr(Recorder, name, counting)
    session = gradviz.debug.backward(_Block().loss())
    session.continue_()
    kinds = [event["kind"] for event in session.events]
    assert kinds.count("node_ready") > 10
    assert calls["node_ready"] == 1  # the root's, as the pass starts
    # only the leaves' AccumulateGrad nodes start through the recorder (it copies .grad)
    assert kinds.count("node_started") > 10
    assert calls["node_started"] == len(_Block().params())


class _CountingRecorder(Recorder):
    """A subclass that overrides a callback the engine could log: it must see every call."""

    lazy_summaries = True
    defer_events = True

    def __init__(self):
        super().__init__()
        self.ready = 0

    def node_ready(self, task, node):
        self.ready += 1
        super().node_ready(task, node)


def test_a_recorder_that_overrides_a_callback_gets_every_call():
    from gradviz.autograd._functional import make_graph_task

    recorder = _CountingRecorder()
    make_graph_task(_Block().loss(), None, observer=recorder).run()
    assert recorder._engine_log is None
    assert recorder.ready == [e["kind"] for e in recorder.events].count("node_ready") > 10


def test_no_log_while_the_display_keeps_buffers():
    session = gradviz.debug.backward(_Block().loss())
    recorder: _SessionRecorder = session._recorder
    assert recorder._engine_log is recorder._log is not None
    recorder.keep_buffers = True
    assert recorder._engine_log is None
    recorder.keep_buffers = False
    assert recorder._engine_log is recorder._log
    session.continue_()
    assert recorder._engine_log is None  # the pass is over


def test_the_dispatcher_offers_the_log_only_for_one_recording_of_this_thread(monkeypatch):
    from gradviz.instrument._observers import _default_slot

    with gradviz.record() as outer:
        dispatcher = _default_slot.dispatcher
        assert dispatcher._engine_log is None  # no pass yet: nothing deferred
        with gradviz.record() as inner:
            _Block().loss().backward()
            assert dispatcher._engine_log is None  # two recordings: each gets every call
        _Block().loss().backward()
    assert len(outer.events) > len(inner.events) > 10

    def other_thread():
        with gradviz.record():
            found.append(_default_slot.dispatcher._engine_log)

    found: list = []
    with gradviz.record() as here:
        recorder = here._recorder
        loss = _Block().loss()
        monkeypatch.setattr(recorder, "_engine_log", _task.EventLog([], 0, None, None, None, None))
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
        loss.backward()
    assert found == [None]


def test_runs_outside_code_is_the_engine_s_and_the_recorder_s():
    block = _Block()
    loss = block.loss()
    assert _recorder._runs_outside_code is _task.runs_outside_code
    assert not _task.runs_outside_code(loss.grad_fn)
    loss.grad_fn.register_prehook(lambda grads: None)
    assert _task.runs_outside_code(loss.grad_fn)
    assert _task.runs_outside_code(_Twice.apply(block.x * 1.0 + block.b1).grad_fn)


def test_the_engine_counts_its_records_against_the_byte_budget(monkeypatch):
    # the pass stops deferring at the first node whose gradients out take the records past
    # deferred_bytes_limit, whether the engine or the recorder appends its record
    from gradviz.autograd._functional import make_graph_task

    limit = 3 * WIDTH * WIDTH * 4
    monkeypatch.setattr(_TraceRecorder, "deferred_bytes_limit", limit)
    deferring = []
    with gradviz.record() as trace:
        task = make_graph_task(_Block().loss(), None)
        while not task.done:
            task.step()
            deferring.append(trace._recorder._deferring)
    held = 0
    expected = []
    for event in trace.events:
        if event["kind"] == "node_finished":
            held += sum(int(np.prod(s["shape"])) * np.dtype(s["dtype"]).itemsize
                        for s in event["grads_out"] if s is not None)
            expected.append(held <= limit)
    assert expected == deferring
    assert True in deferring and False in deferring
