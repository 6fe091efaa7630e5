"""Instrumentation: the engine's observer interface, the event recorder, tensor summaries, the
versioned event schema and recorded traces (``record``, ``Trace``, ``load_trace``)."""

from gradviz_ext import engine as _engine

Observer = _engine.Observer

from ._observers import ObserverHandle, observe
from ._recorder import EVENT_KINDS, SCHEMA_VERSION, Recorder
from ._summary import summarize
from ._trace import (MAX_TRACE_BYTES, MAX_TRACE_CONTAINERS, MAX_TRACE_VALUES, Trace, load_trace,
                     load_trace_from_json, record)

__all__ = ["Observer", "Recorder", "EVENT_KINDS", "SCHEMA_VERSION", "summarize", "observe",
           "ObserverHandle", "Trace", "record", "load_trace", "load_trace_from_json",
           "MAX_TRACE_BYTES", "MAX_TRACE_VALUES", "MAX_TRACE_CONTAINERS"]
