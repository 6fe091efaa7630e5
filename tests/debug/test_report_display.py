"""A ``DoctorReport`` as a notebook cell's last expression: IPython's plain text is the
diagnosis ``print(report)`` gives, and Jupyter's HTML shows every finding (severity, node,
diagnosis, likely cause), the skipped nodes and the notes, escaped."""

from __future__ import annotations

from html.parser import HTMLParser

import numpy as np
from IPython.lib.pretty import pretty

import gradviz
from gradviz.autograd import Function

HOSTILE = "Bad<script>alert(1)</script>&Co"


def _forward_cube(ctx, x):
    ctx.save_for_backward(x)
    return x * x * x


def _backward_twice_too_big(ctx, grad):  # d(x^3)/dx is 3x^2: this is 2x too big
    (x,) = ctx.saved_tensors
    return grad * 6 * x * x


class RoundSTE(Function):
    """round(x) forward, the identity backward: a straight-through estimator (a warning)."""

    @staticmethod
    def forward(ctx, x):
        return x.round()

    @staticmethod
    def backward(ctx, grad):
        return grad


class Twice(Function):
    """Not checkable: it saves nothing and its arguments are not recorded (a skipped node)."""

    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, grad):
        return grad * 2


def report_with_everything():
    """A report with a problem (hostile class name, with a hint), a warning, a skipped node
    and a note."""
    cube = type(HOSTILE, (Function,), {"forward": staticmethod(_forward_cube),
                                       "backward": staticmethod(_backward_twice_too_big)})
    rng = np.random.default_rng(0)
    x = gradviz.tensor(rng.standard_normal(3) + 0.3, requires_grad=True)
    w = gradviz.tensor(rng.standard_normal(3))
    with gradviz.debug.capture():
        checked = (cube.apply(x) * w).sum() + (RoundSTE.apply(x * 3) * w).sum()
    with gradviz.debug.keep_forward_inputs(False):  # Twice cannot be checked
        loss = checked + Twice.apply(x * 3).sum()
    loss.backward()  # frees the graph: the doctor notes that it uses the recorded inputs
    report = gradviz.debug.doctor(loss)
    severities = sorted(f.severity for f in report.findings)
    assert severities == ["error", "warning"], str(report)
    assert report.skipped and report.notes and report.findings[0].hint, str(report)
    return report


class Page(HTMLParser):
    """The HTML's text, its tags (checked balanced) and the attributes of its rows."""

    VOID = {"br"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.text, self.stack, self.rows, self.tags = [], [], [], []

    def handle_starttag(self, tag, attrs):
        self.tags.append(tag)
        if tag not in self.VOID:
            self.stack.append(tag)
        if tag == "tr" and dict(attrs).get("class") == "gradviz-finding":
            self.rows.append({"attrs": dict(attrs), "cells": []})
        if tag == "td" and self.rows:
            self.rows[-1]["cells"].append("")

    def handle_endtag(self, tag):
        assert self.stack and self.stack.pop() == tag, f"unbalanced </{tag}>"

    def handle_data(self, data):
        self.text.append(data)
        if self.rows and "td" in self.stack and self.stack[-1] != "tr":
            self.rows[-1]["cells"][-1] += data


def parse(html):
    page = Page()
    page.feed(html)
    page.close()
    assert page.stack == [], f"unclosed tags {page.stack}"
    return page


def test_plain_text_display_is_the_printed_report():
    report = report_with_everything()
    assert pretty(report) == str(report)
    assert "problem:" in pretty(report) and "warning:" in pretty(report)


def test_html_display_shows_findings_skipped_nodes_and_notes_escaped():
    report = report_with_everything()
    html = report._repr_html_()
    assert "<script" not in html and HOSTILE not in html  # the class name stays text
    page = parse(html)
    assert set(page.tags) <= {"div", "p", "table", "thead", "tbody", "tr", "th", "td", "code",
                              "small", "br", "ul", "li"}
    text = "".join(page.text)
    assert str(report).split("\n", 1)[0] in text  # the summary line
    assert len(page.rows) == len(report.findings)
    for row, finding in zip(page.rows, report.findings):
        severity, node, diagnosis, cause = row["cells"]
        assert row["attrs"]["data-kind"] == finding.kind
        assert severity == ("problem" if finding.severity == "error" else "warning")
        assert node == f"{finding.node.name()} #{finding.node.node_id}"
        assert cause == (finding.hint or "")
        # the message without its trailing hint (shown in its own column), then the entries
        shown = diagnosis.split("worst entries")[0]
        assert finding.message in (shown, f"{shown} - {cause}"), (shown, finding.message)
        assert cause not in shown
    assert HOSTILE in text  # readable after unescaping
    for node, reason in report.skipped:
        assert f"{node.name()} #{node.node_id}: {reason}" in text
    for note in report.notes:
        assert note in text
    assert not report.ok and 'data-ok="false"' in html


def test_html_of_a_clean_report_says_so_without_a_table():
    x = gradviz.tensor([0.5, -1.5], requires_grad=True)
    report = gradviz.debug.doctor((x * x).sum())
    assert report.findings == [] and report.ok
    html = report._repr_html_()
    page = parse(html)
    assert "".join(page.text) == str(report).split("\n", 1)[0]
    assert "<table" not in html and 'data-ok="true"' in html


def test_html_of_a_torch_graph_report_numbers_nodes_as_record_torch():
    """For a PyTorch graph the node column uses the report's numbering (record_torch's)."""
    import torch

    class Cube(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x ** 3

        @staticmethod
        def backward(ctx, grad):
            (x,) = ctx.saved_tensors
            return grad * 6 * x * x  # 2x too big

    x = torch.tensor([0.5, -1.2, 2.0], dtype=torch.float64, requires_grad=True)
    report = gradviz.debug.doctor((Cube.apply(x) * 2).sum())
    (finding,) = report.findings
    data = report.to_dict()
    (row,) = parse(report._repr_html_()).rows
    assert row["cells"][1] == f"{finding.node.name()} #{data['findings'][0]['node']}"
    assert pretty(report) == str(report)
