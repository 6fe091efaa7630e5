"""What the user's code says while the widget runs it: its printed output and its errors.

A button click (Step, Continue...) runs the session's method inside the kernel's comm-message
handler. Whatever user code prints there (a ``print()`` in a custom backward) is not a cell's
output: JupyterLab sends it to its Log Console, Notebook 7 shows it nowhere. The widget
therefore copies the text written to ``sys.stdout`` and ``sys.stderr`` while it runs a command
into its ``output`` trait, which the view shows in a collapsible panel (``OutputCapture``).

An exception raised by user code during a command travels up through gradviz's own frames
(the widget, the session, the engine's task); ``describe_exception`` lists the user's frames
first, then the full traceback.

Note [Output capture]: the streams are swapped for the duration of one command (the kernel
runs one message handler at a time, and the widget runs one command at a time), and every
write still goes to the stream it replaced, so nothing that reached the Log Console before is
lost. A session that runs user code in a worker thread writes through the same swapped
``sys.stdout`` while the command waits for it; text written after the command returned is
not captured (it goes where the kernel sends it).
"""

from __future__ import annotations

import os
import sys
import threading
import traceback
from collections.abc import Callable
from typing import Any, TextIO

__all__ = ["OutputCapture", "describe_exception", "user_frames", "OUTPUT_LIMIT"]

# The output panel keeps the last this many characters (older text is cut, and says so).
OUTPUT_LIMIT = 20_000

_PACKAGE_DIRECTORY = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# gradviz's own code: the package and the compiled engine (gradviz_ext), next to it.
_INTERNAL_DIRECTORIES = (
    _PACKAGE_DIRECTORY + os.sep,
    os.path.join(os.path.dirname(_PACKAGE_DIRECTORY), "gradviz_ext") + os.sep,
)
# The standard library's plumbing between the widget and a session's worker thread.
_PLUMBING = {"threading.py", "queue.py", "contextlib.py", "concurrent", "traceback.py"}


def _is_internal(filename: str) -> bool:
    path = os.path.abspath(filename)
    if path.startswith(_INTERNAL_DIRECTORIES) or "gradviz_ext" in path.split(os.sep):
        return True
    return os.path.basename(path) in _PLUMBING


def user_frames(exc: BaseException) -> list[traceback.FrameSummary]:
    """The frames of ``exc``'s traceback that are not gradviz's own (nor thread plumbing),
    innermost last; an exception chained as a cause counts too (a session re-raising the
    worker thread's exception keeps the user's frames there)."""
    frames: list[traceback.FrameSummary] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        frames = [frame for frame in traceback.extract_tb(current.__traceback__)
                  if not _is_internal(frame.filename)] + frames
        current = current.__cause__ or current.__context__
    return frames


def describe_exception(exc: BaseException) -> str:
    """What went wrong first (the line a user reads), then where in the user's code, then the
    full traceback for the details.

    The error box shows a few lines and scrolls; the exception's own line comes last in a
    traceback, and the frames of gradviz's internals (``_widget.py``, ``_session.py``, the
    engine) would push the user's backward line out of sight.

    Examples
    --------
    >>> def backward_of_mine():
    ...     raise ValueError("shape mismatch")
    >>> try:
    ...     backward_of_mine()
    ... except ValueError as exc:
    ...     text = describe_exception(exc)
    >>> text.splitlines()[0]
    'ValueError: shape mismatch'
    >>> "in backward_of_mine" in text.split("Full traceback")[0]
    True
    """
    summary = "".join(traceback.format_exception_only(type(exc), exc)).rstrip()
    details = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__)).rstrip()
    mine = user_frames(exc)
    if not mine:
        return f"{summary}\n\n{details}"
    where = "".join(traceback.format_list(mine)).rstrip()
    return f"{summary}\n\nIn your code (innermost last):\n{where}\n\nFull traceback:\n{details}"


class _Tee:
    """A text stream that copies each write to ``sink`` and to the stream it stands in for."""

    def __init__(self, original: TextIO, sink: Callable[[str], None]) -> None:
        self._original = original
        self._sink = sink

    def write(self, text: str) -> int:
        try:
            self._sink(text)
        finally:
            written = self._original.write(text)
        return written if isinstance(written, int) else len(text)

    def flush(self) -> None:
        self._original.flush()

    def __getattr__(self, name: str) -> Any:  # encoding, isatty, fileno...: the original's
        return getattr(self._original, name)


class OutputCapture:
    """Collects what is printed while the widget runs commands (Note [Output capture]).

    ``publish(text)`` receives the whole collected text (at most ``OUTPUT_LIMIT``
    characters) after each command that printed something.

    Examples
    --------
    >>> shown = []
    >>> capture = OutputCapture(shown.append)
    >>> with capture.command("step"):
    ...     print("inside backward")
    inside backward
    >>> shown[-1]
    '[step]\\ninside backward\\n'
    """

    def __init__(self, publish: Callable[[str], None]) -> None:
        self._publish = publish
        self._lock = threading.Lock()
        self._text = ""
        self._pending: list[str] = []

    @property
    def text(self) -> str:
        """Everything collected so far (the last ``OUTPUT_LIMIT`` characters)."""
        return self._text

    def _write(self, text: str) -> None:
        if text:
            with self._lock:
                self._pending.append(text)

    def command(self, name: str) -> _Capturing:
        """A context manager that captures stdout and stderr while command ``name`` runs."""
        return _Capturing(self, name)

    def _finish(self, name: str) -> None:
        with self._lock:
            written, self._pending = "".join(self._pending), []
        if not written:
            return
        if not written.endswith("\n"):
            written += "\n"
        text = f"{self._text}[{name}]\n{written}"
        if len(text) > OUTPUT_LIMIT:
            text = "… (earlier output cut)\n" + text[-OUTPUT_LIMIT:]
        self._text = text
        self._publish(text)


class _Capturing:
    def __init__(self, capture: OutputCapture, name: str) -> None:
        self._capture = capture
        self._name = name
        self._saved: tuple[Any, Any] | None = None

    def __enter__(self) -> _Capturing:
        self._saved = (sys.stdout, sys.stderr)
        sys.stdout = _Tee(sys.stdout, self._capture._write)
        sys.stderr = _Tee(sys.stderr, self._capture._write)
        return self

    def __exit__(self, *exc_info: object) -> None:
        assert self._saved is not None
        sys.stdout, sys.stderr = self._saved
        self._capture._finish(self._name)
