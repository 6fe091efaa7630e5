"""Anomaly mode's reports: where forward created a node, and PyTorch's error texts.

Plain Python, never compiled: nothing here runs unless anomaly mode is on. The engine
(``_engine.py``) and the graph task (``_task.py``) call in at the points Note [Anomaly mode]
lists.
"""

import os

# Note [Anomaly mode]
# -------------------
# ``gradviz.autograd.detect_anomaly`` sets the engine's ``_anomaly_enabled``. While it is set:
# * every node records where forward created it (``Node._forward_site``, a ForwardSite:
#   the user's frames, gradviz's own left out, and the node that was running if the node was
#   created by a backward under ``create_graph``); ``grad_fn.metadata`` shows it as PyTorch's
#   ``'traceback_'`` (``ForwardSite.stack()``) and ``'parent_'``, made on first access;
# * after a node's results are final (post-hooks ran), they are checked for NaN
#   (``check_nan``, unless ``check_nan=False``), with PyTorch's message;
# * any exception raised while a node runs is reported with that node's forward traceback,
#   as PyTorch does: a UserWarning "Error detected in <name>. Traceback of forward call that
#   caused the error:", and the same text added to the exception as a note.
# When the flag is off, each of these points costs one flag test.
_PACKAGE_DIRS = (
    os.path.dirname(os.path.abspath(__file__)) + os.sep,
    os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "gradviz") + os.sep,
)


class ForwardSite:
    """Where forward created a node (anomaly mode): frames outermost first, and the node
    whose backward was running at the time (``parent``, for higher-order graphs)."""

    def __init__(self, frames, parent):
        self.frames = frames  # list of (filename, lineno, function, line)
        self.parent = parent

    def stack(self):
        """One string per frame, as ``traceback.format_stack()``: ``  File "...", line N, in
        f`` and the source line (PyTorch's ``grad_fn.metadata['traceback_']``)."""
        entries = []
        for filename, lineno, function, line in self.frames:
            entry = f'  File "{filename}", line {lineno}, in {function}\n'
            if line:
                entry += f"    {line}\n"
            entries.append(entry)
        return entries

    def format(self):
        """The frames as a traceback: ``File "...", line N, in f`` and the source line."""
        return "".join(self.stack())

    def __repr__(self):
        last = self.frames[-1] if self.frames else None
        where = f"{last[0]}:{last[1]}" if last is not None else "?"
        return f"<ForwardSite {where}>"


def capture_forward_site(running_task):
    import linecache
    import sys

    frames = []
    frame = sys._getframe(0)
    while frame is not None:
        filename = frame.f_code.co_filename
        if not filename.startswith(_PACKAGE_DIRS):
            lineno = frame.f_lineno
            frames.append((filename, lineno, frame.f_code.co_name,
                           linecache.getline(filename, lineno).strip()))
        frame = frame.f_back
    frames.reverse()
    task = running_task
    return ForwardSite(frames, task.current if task is not None else None)


def anomaly_report(node):
    """PyTorch's anomaly-mode text for an error in ``node``: its forward traceback, then the
    traceback of each node whose backward created it (double backward)."""
    site = node._forward_site
    if site is None:
        return (f"Error detected in {node.name()}. No forward pass information available. "
                "Enable detect anomaly during forward pass for more information.")
    text = (f"Error detected in {node.name()}. Traceback of forward call that caused the "
            f"error:\n{site.format()}")
    parent = site.parent
    seen = 0
    while parent is not None and seen < 100:
        parent_site = parent._forward_site
        if parent_site is None:
            break
        text += (f"\nPrevious calculation was induced by {parent.name()}. Traceback of forward "
                 f"call that induced the previous calculation:\n{parent_site.format()}")
        parent = parent_site.parent
        seen += 1
    return text


def report_anomaly(node, exc):
    """Warn with, and note on ``exc``, the forward traceback of the node that failed."""
    import warnings

    text = anomaly_report(node)
    warnings.warn(text, UserWarning, stacklevel=2)
    if hasattr(exc, "add_note"):
        exc.add_note(text)


def check_nan(node, outputs):
    """Anomaly mode: PyTorch's error when a node's backward produced NaN."""
    for index in range(len(outputs)):
        grad = outputs[index]
        if grad is None:
            continue
        data = grad._data
        if data.dtype.kind in "fc" and (data != data).any():
            raise RuntimeError(
                f"Function '{node.name()}' returned nan values in its {index}th output.")
