"""Instrumentation: the engine's observer interface, the event recorder and tensor summaries."""

from gradviz_ext import engine as _engine

Observer = _engine.Observer

from ._recorder import EVENT_KINDS, SCHEMA_VERSION, Recorder
from ._summary import summarize

__all__ = ["Observer", "Recorder", "EVENT_KINDS", "SCHEMA_VERSION", "summarize"]
