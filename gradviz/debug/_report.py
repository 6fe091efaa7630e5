"""What the gradient doctor reports: :class:`DoctorReport`, its :class:`Finding` s and their
:class:`Entry` s, as text (``print(report)``) and as plain data (``report.to_dict()``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import numpy as np

__all__ = ["DoctorReport", "Finding", "Entry", "FINDING_KINDS"]

FINDING_KINDS = ("wrong_gradient", "wrong_double_backward", "nonfinite", "mutated_saved",
                 "mutated_grad_output", "coerced_gradient", "backward_error",
                 # the model-level kinds (``_model_checks``, docs/doctor.md)
                 "no_gradient", "unused_parameter", "unregistered_parameter", "broadcast_suspect",
                 "nonfinite_origin", "vanishing_gradient", "exploding_gradient", "dead_units",
                 "double_softmax", "stale_grad", "inplace_overwrite")

#: At most this many worst entries are kept in a finding.
_WORST = 5
# findings whose worst entries are (backward's value, the finite difference)
_GRADIENT_KINDS = ("wrong_gradient", "coerced_gradient", "nonfinite")


class Entry(NamedTuple):
    """One entry of a finding: its index, and the two values that disagree.

    For gradient findings ``analytic`` is what backward returned and ``numeric`` the finite
    difference; for ``mutated_saved`` they are the value when saved and the value now.
    """

    # Shadows tuple.index on purpose: ``index`` is the public field name (to_dict, reports).
    index: tuple[int, ...]  # type: ignore[assignment]
    analytic: float
    numeric: float


@dataclass
class Finding:
    """One problem found by :func:`doctor`.

    ``kind`` is one of ``FINDING_KINDS``; ``function`` the custom Function class (None for a
    built-in node); ``node`` the graph node; ``input_index`` the forward argument position at
    fault (or None); ``severity`` ``"error"`` or ``"warning"`` (a dtype cast that lost nothing
    but precision). ``message`` reads as a diagnosis; ``hint`` is the likely cause, if one fits.

    The model-level kinds (docs/doctor.md) also fill ``params`` (the names of the parameters
    the finding concerns), ``module`` (their module's name, when known), ``summary`` (one
    sentence; for the other kinds, the message up to its hint) and ``fix``; ``details`` holds
    the evidence (numbers), also as ``evidence``, and ``hint`` the likely cause, also as
    ``cause``. ``node`` is the graph node (or None); ``node_name`` its name;
    ``related_nodes`` the other graph nodes it concerns (the op that overwrote a saved
    tensor), ``param_nodes`` the ``AccumulateGrad`` nodes of its parameters in the graph, for
    a viewer to mark.
    """

    kind: str
    function: Any
    node: Any
    input_index: int | None
    message: str
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    worst: list = field(default_factory=list)
    hint: str | None = None
    severity: str = "error"
    details: dict = field(default_factory=dict)
    params: list = field(default_factory=list)
    summary: str | None = None
    fix: str | None = None
    module: str | None = None
    related_nodes: list = field(default_factory=list, repr=False, compare=False)
    param_nodes: list = field(default_factory=list, repr=False, compare=False)

    def __post_init__(self) -> None:
        if self.summary is None:
            head = self.message.split(" - ", 1)[0]
            self.summary = head if head.endswith(".") else head + "."

    @property
    def node_name(self) -> str | None:
        """The name of the node the finding points at, or None."""
        return None if self.node is None else self.node.name()

    @property
    def evidence(self) -> dict:
        """The numbers behind the finding (``details``)."""
        return self.details

    @property
    def cause(self) -> str | None:
        """The likely cause (``hint``)."""
        return self.hint

    def __str__(self) -> str:
        return self.message

    def to_dict(self, node_id: Callable | None = None) -> dict:
        """The finding as plain data: node ids instead of nodes, the Function's name instead of
        its class (:meth:`DoctorReport.to_dict`). ``details`` is left out (it may hold
        exceptions). Numbers stay Python floats, NaN and infinities included. ``node_id``
        gives a node's id (default: gradviz's ``node.node_id``)."""
        node_id = node_id or _gradviz_node_id
        return {
            "kind": self.kind,
            "severity": self.severity,
            "function": None if self.function is None else self.function.__name__,
            "node": None if self.node is None else node_id(self.node),
            "node_name": "?" if self.node is None else self.node.name(),
            "input_index": self.input_index,
            "message": self.message,
            "hint": self.hint,
            "max_abs_error": self.max_abs_error,
            "max_rel_error": self.max_rel_error,
            "worst": [{"index": list(entry.index), "analytic": entry.analytic,
                       "numeric": entry.numeric} for entry in self.worst],
            "params": list(self.params),
            "module": self.module,
            "summary": self.summary,
            "fix": self.fix,
            "related_nodes": [i for i in (node_id(n) for n in self.related_nodes)
                              if i is not None],
            "param_nodes": [i for i in (node_id(n) for n in self.param_nodes)
                            if i is not None],
        }

    def __repr__(self) -> str:
        name = self.node.name() if self.node is not None else "?"
        return (f"Finding(kind={self.kind!r}, node={name}, input_index={self.input_index}, "
                f"severity={self.severity!r})")


@dataclass
class DoctorReport:
    """What :func:`doctor` found: ``findings``, the nodes it ``checked`` and ``skipped``.

    ``ok`` is True when no finding is an error (warnings do not count). ``print(report)``
    gives the diagnosis as text. For a PyTorch graph the nodes are torch's own (``grad_fn``
    objects), numbered in :meth:`to_dict` as :func:`gradviz.debug.record_torch` numbers them.
    """

    findings: list = field(default_factory=list)
    checked: list = field(default_factory=list)   # custom nodes checked against finite differences
    skipped: list = field(default_factory=list)   # (node, reason)
    notes: list = field(default_factory=list)
    # a node's id in to_dict(): gradviz's node.node_id, or a torch graph's numbering
    node_id: Callable | None = field(default=None, repr=False, compare=False)

    @property
    def ok(self) -> bool:
        return not any(f.severity == "error" for f in self.findings)

    def by_kind(self, kind: str) -> list:
        return [f for f in self.findings if f.kind == kind]

    def to_dict(self) -> dict:
        """The report as plain data (what the widget's Check gradients button shows).

        ``summary`` is the first line of ``str(report)``; ``checked`` the ids of the nodes
        checked; ``skipped`` one ``{node, name, reason}`` per node that could not be checked;
        ``findings`` :meth:`Finding.to_dict` each, in the report's order.

        Examples
        --------
        >>> import gradviz as torch
        >>> class Twice(torch.autograd.Function):
        ...     @staticmethod
        ...     def forward(ctx, x):
        ...         return x * 2
        ...     @staticmethod
        ...     def backward(ctx, grad):
        ...         return grad * 2
        >>> x = torch.tensor([1.0, 2.0], requires_grad=True)
        >>> with torch.debug.keep_forward_inputs(False):  # x * 3 is then not kept
        ...     loss = Twice.apply(x * 3).sum()
        >>> data = torch.debug.doctor(loss).to_dict()
        >>> data["ok"], data["findings"], data["skipped"][0]["name"]
        (True, [], 'TwiceBackward')
        >>> data["skipped"][0]["reason"]  # doctest: +ELLIPSIS
        'its forward arguments were not recorded and it saved no tensors (build the graph with ...)'
        """
        node_id = self.node_id or _gradviz_node_id
        return {
            "ok": self.ok,
            "summary": str(self).split("\n", 1)[0],
            "findings": [finding.to_dict(node_id) for finding in self.findings],
            "checked": [node_id(node) for node in self.checked],
            "skipped": [{"node": node_id(node), "name": node.name(), "reason": reason}
                        for node, reason in self.skipped],
            "notes": list(self.notes),
        }

    def __str__(self) -> str:
        errors = sum(1 for f in self.findings if f.severity == "error")
        warnings = len(self.findings) - errors
        checked = len(self.checked)
        head = (f"gradient doctor: {checked} custom Function node{'s' if checked != 1 else ''} "
                f"checked against finite differences, {len(self.skipped)} skipped; ")
        if not self.findings and self.skipped and not self.checked:
            head += "nothing could be checked"  # not "no problems found": nothing was looked at
        elif not self.findings:
            head += "no problems found"
        else:
            parts = []
            if errors:
                parts.append(f"{errors} problem{'s' if errors != 1 else ''}")
            if warnings:
                parts.append(f"{warnings} warning{'s' if warnings != 1 else ''}")
            head += ", ".join(parts)
        lines = [head]
        for finding in self.findings:
            mark = "problem" if finding.severity == "error" else "warning"
            lines.append(f"  {mark}: {finding.message}")
            if len(finding.worst) > 1 and finding.kind in _GRADIENT_KINDS:
                entries = "; ".join(f"{_format_index(e.index)} {_fmt(e.analytic)} vs "
                                    f"{_fmt(e.numeric)}" for e in finding.worst)
                lines.append(f"    worst entries (backward vs finite differences): {entries}")
        for node, reason in self.skipped:
            lines.append(f"  skipped: {node.name()}: {reason}")
        for note in self.notes:
            lines.append(f"  note: {note}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return (f"<DoctorReport ok={self.ok}: {len(self.findings)} finding(s), "
                f"{len(self.checked)} checked, {len(self.skipped)} skipped>")

    # ---- notebook display: a report as a cell's last expression --------------------------
    def _repr_pretty_(self, printer, cycle: bool) -> None:
        """IPython's plain-text display: the diagnosis ``print(report)`` gives."""
        printer.text(repr(self) if cycle else str(self))

    def _repr_html_(self) -> str:
        """Jupyter's rich display: the summary, then a table of the findings (severity, node,
        diagnosis with its worst entries, likely cause), the skipped nodes and the notes. Every
        text is HTML-escaped (messages quote user class names and values)."""
        from html import escape

        node_id = self.node_id or _gradviz_node_id

        def node_text(node) -> str:
            if node is None:
                return "?"
            try:
                return f"{node.name()} #{node_id(node)}"
            except Exception:  # a node the numbering does not know: its name is enough
                return node.name()

        cell = "padding:2px 8px;text-align:left;vertical-align:top;border-top:1px solid #ccc"
        colour = {"error": "#b91c1c", "warning": "#b45309"}
        summary = str(self).split("\n", 1)[0]
        parts = [f'<div class="gradviz-doctor-report" data-ok="{str(self.ok).lower()}">',
                 f'<p style="font-weight:bold;color:{"#15803d" if self.ok else "#b91c1c"}">'
                 f"{escape(summary)}</p>"]
        if self.findings:
            parts.append('<table class="gradviz-doctor-findings" style="border-collapse:'
                         'collapse"><thead><tr>'
                         + "".join(f'<th style="{cell}">{head}</th>' for head in
                                   ("severity", "node", "finding", "likely cause"))
                         + "</tr></thead><tbody>")
            for finding in self.findings:
                mark = "problem" if finding.severity == "error" else "warning"
                message = finding.message
                if finding.hint and message.endswith(f" - {finding.hint}"):
                    message = message[:-len(finding.hint) - 3]  # the hint has its own column
                text = escape(message)
                if len(finding.worst) > 1 and finding.kind in _GRADIENT_KINDS:
                    entries = "; ".join(f"{_format_index(e.index)} {_fmt(e.analytic)} vs "
                                        f"{_fmt(e.numeric)}" for e in finding.worst)
                    text += ("<br><small>worst entries (backward vs finite differences): "
                             f"{escape(entries)}</small>")
                parts.append(
                    f'<tr class="gradviz-finding" data-kind="{escape(finding.kind)}" '
                    f'data-severity="{escape(finding.severity)}">'
                    f'<td style="{cell};font-weight:bold;color:'
                    f'{colour.get(finding.severity, "inherit")}">{mark}</td>'
                    f'<td style="{cell}"><code>{escape(node_text(finding.node))}</code></td>'
                    f'<td style="{cell}">{text}</td>'
                    f'<td style="{cell}">{escape(finding.hint or "")}</td></tr>')
            parts.append("</tbody></table>")
        if self.skipped:
            parts.append('<p>Skipped:</p><ul class="gradviz-doctor-skipped">')
            parts.extend(f"<li><code>{escape(node_text(node))}</code>: {escape(reason)}</li>"
                         for node, reason in self.skipped)
            parts.append("</ul>")
        if self.notes:
            parts.append('<p>Notes:</p><ul class="gradviz-doctor-notes">')
            parts.extend(f"<li>{escape(note)}</li>" for note in self.notes)
            parts.append("</ul>")
        parts.append("</div>")
        return "".join(parts)


def _gradviz_node_id(node):
    return node.node_id


def _index(flat_index, shape):
    if not shape:
        return ()
    return tuple(int(i) for i in np.unravel_index(int(flat_index), shape))


def _format_index(index):
    return "[" + ", ".join(str(i) for i in index) + "]"


def _fmt(value):
    return f"{value:.6g}"
