"""Debugger widgets in the built documentation: each one becomes an offline replay page.

Note [Widgets in the built docs]
--------------------------------
The documentation site executes the notebooks when it is built (``docs/conf.py``), but a page
has no kernel, so a live widget cannot be drawn there. While ``GRADVIZ_DOCS_PAGES`` names a
folder (the docs build sets it; nothing else does), a :class:`DebuggerWidget` adds a
``text/html`` entry to its display data: an ``<iframe>`` showing an offline replay page (the
page of :meth:`gradviz.instrument.Trace.to_html`) of the widget's session, written into that
folder and published by the site under ``GRADVIZ_DOCS_PAGES_URL`` (relative to the notebook's
page). The reader steps through the recorded pass there, with the same view.

A widget is usually displayed before the cells that step its session, and some are left for
the reader to click through ("your turn"), so the page cannot be final at display time. It is
written when the widget is displayed (so a page always exists) and again when the kernel exits
(``atexit``): a live session still paused then is first run to its end (Continue until it is no
longer paused, through any breakpoints), so the page replays the whole pass, as clicking
through it in the notebook would. Sessions that have no trace to replay (a threaded
``runcall`` session) add nothing and keep the widget's own output; a diff view's page is the
diff's own offline page.

Without the variable, display data are exactly the widget's: notebooks in Jupyter are
unchanged.
"""

from __future__ import annotations

import atexit
import html
import os
import uuid
import warnings
from pathlib import Path
from typing import Any

from ..instrument import Trace

__all__ = ["DOCS_PAGES_ENV", "DOCS_PAGES_URL_ENV", "docs_embed", "finish_pass", "session_trace",
           "write_session_page"]

#: The folder to write the replay pages into; set by the docs build only.
DOCS_PAGES_ENV = "GRADVIZ_DOCS_PAGES"
#: Where the site publishes that folder, relative to a notebook's page (default ``"../replays/"``).
DOCS_PAGES_URL_ENV = "GRADVIZ_DOCS_PAGES_URL"
DEFAULT_URL = "../replays/"
#: The replay page's title, and the iframe's.
PAGE_TITLE = "gradviz debugger"
FRAME_HEIGHT = 680

# (writer, page path) of every widget displayed in this process; each is rewritten at exit.
_pages: list[tuple[Any, Path]] = []
_exit_hook_registered = False


def session_trace(session: Any) -> Trace | None:
    """The trace a replay page of ``session`` shows: ``session.trace()`` of a live session,
    ``session.trace`` of a replay, the graph and events of a ``runcall`` session; None for a
    session without them."""
    trace = getattr(session, "trace", None)
    if callable(trace):
        trace = trace()
    events = getattr(session, "events", None)
    if trace is None and callable(getattr(session, "graph", None)) and isinstance(events, list):
        trace = Trace(session.graph(), [dict(event) for event in events])
    return trace if isinstance(trace, Trace) else None


#: At most this many Continues (each stops at a breakpoint hit) to finish a pass at exit.
MAX_CONTINUES = 10_000


def finish_pass(session: Any) -> None:
    """Run a paused live or ``runcall`` session to its end (at exit, for the docs' page); an
    error of the pass stays in the session, as the widget would show it."""
    if isinstance(getattr(session, "trace", None), Trace):
        return  # a replay's trace is already whole
    for _ in range(MAX_CONTINUES):
        if getattr(session, "status", None) != "paused":
            return
        try:
            session.continue_()
        except Exception:  # the pass failed: the session shows the error, so does the page
            return


def write_session_page(session: Any, path: Path, final: bool = False, title: str = PAGE_TITLE) -> bool:
    """Write the replay page of ``session``'s trace to ``path`` (``final``: at exit, after
    :func:`finish_pass`); False when it has no trace."""
    if final:
        finish_pass(session)
    trace = session_trace(session)
    if trace is None:
        return False
    with warnings.catch_warnings():  # a left-out inspector snapshot is said on the page itself
        warnings.simplefilter("ignore", UserWarning)
        trace.to_html(path, title=title)
    return True


def docs_embed(writer: Any, title: str = PAGE_TITLE) -> str | None:
    """The ``text/html`` a widget shows in the built docs (Note [Widgets in the built docs]):
    an iframe of the page ``writer(path, final)`` writes (``final`` at exit; it returns False
    when it has none to write), or None outside a docs build."""
    folder = os.environ.get(DOCS_PAGES_ENV)
    if not folder:
        return None
    target = Path(folder)
    target.mkdir(parents=True, exist_ok=True)
    name = f"replay-{uuid.uuid4().hex[:16]}.html"
    path = target / name
    try:
        written = writer(path, False)
    except Exception as exc:  # the notebook still shows the widget's own output
        warnings.warn(f"gradviz: no docs replay page for this widget: {exc!r}", UserWarning, stacklevel=2)
        return None
    if not written:
        return None
    _pages.append((writer, path))
    _register_exit_hook()
    url = os.environ.get(DOCS_PAGES_URL_ENV, DEFAULT_URL) + name
    return (f'<iframe class="gradviz-replay" src="{html.escape(url, quote=True)}" '
            f'title="{html.escape(title, quote=True)}" loading="lazy" '
            f'style="width: 100%; height: {FRAME_HEIGHT}px; border: 1px solid #d0d7de; '
            f'border-radius: 4px;"></iframe>')


def _rewrite_all() -> None:
    for writer, path in _pages:
        try:
            writer(path, True)
        except Exception as exc:  # at exit: say which page kept its display-time state
            print(f"gradviz: the docs replay page {path.name} keeps the pass as displayed: {exc!r}")


def _register_exit_hook() -> None:
    global _exit_hook_registered
    if not _exit_hook_registered:
        atexit.register(_rewrite_all)
        _exit_hook_registered = True
