"""The notebook widget of gradviz's backward debugger (Python side).

The front end lives in ``labextension/`` and is bundled into ``static/widget.js``; the traits
and messages between the two are documented in ``docs/widget_protocol.md``.
"""

from ._html import trace_to_html
from ._trace_view import TRACE_VIEW_MIME, TraceView, load_trace_view
from ._widget import DebuggerWidget, display_session

__all__ = ["DebuggerWidget", "display_session", "trace_to_html", "TraceView", "load_trace_view",
           "TRACE_VIEW_MIME"]
