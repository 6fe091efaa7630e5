"""The committed TypeScript types of the widget protocol are exactly what the Python
definitions generate, and the widget sends what those definitions describe.

Regenerate after changing ``gradviz/widget/_protocol.py``::

    python -m gradviz.widget.protocol > labextension/src/generated/widget_protocol.ts
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import typing

import ipywidgets as ipywidgets_base

from gradviz.widget import _protocol, _widget
from gradviz.widget._diff_view import DiffWidget
from gradviz.widget._protocol import typescript

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
TS_FILE = os.path.join(ROOT, "labextension", "src", "generated", "widget_protocol.ts")
REGENERATE = "regenerate with `python -m gradviz.widget.protocol > labextension/src/generated/widget_protocol.ts`"


def test_committed_typescript_equals_the_generated_one():
    with open(TS_FILE, encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == typescript(), REGENERATE


def test_the_literals_are_the_values_the_widget_checks():
    # normalize_graph / normalize_states / the commands trait use these sets: one definition
    assert set(typing.get_args(_protocol.NodeState)) == _widget.NODE_STATES
    assert set(typing.get_args(_protocol.NodeKind)) == _widget.NODE_KINDS
    assert set(typing.get_args(_protocol.SessionStatus)) == _widget.SESSION_STATUSES
    assert list(typing.get_args(_protocol.CommandName)) == list(_widget.COMMANDS)
    plain = set(typing.get_args(typing.get_type_hints(_protocol.PlainCommand)["name"]))
    assert plain == set(_widget.COMMANDS) - _widget.NODE_COMMANDS


def test_the_command_messages_have_the_fields_the_widget_accepts():
    messages = typing.get_args(_protocol.CommandMessage)
    fields = {}
    for message in messages:
        hints = typing.get_type_hints(message)
        for name in typing.get_args(hints["name"]):
            fields[name] = frozenset(hints)
    assert fields == _widget.COMMAND_FIELDS


def test_the_generated_file_names_every_shape():
    ts = typescript()
    for name in ("Graph", "GraphNode", "Inspection", "ModuleInspection", "History", "EventLine", "Overlay",
                 "AckMessage", "ErrorReply", "ProgressMessage", "CommandMessage", "PanelMessage", "DoctorState"):
        assert f"export interface {name} {{" in ts or f"export type {name} = " in ts, name
    assert 'import type { Summary } from "./events.js";' in ts
    assert "[more: string]: unknown;" in ts  # the inspection is open to a session's own keys
    assert "export function isRecord(value: unknown)" in ts  # the one copy the parsers import
    assert "PROTOCOL_VERSION" not in ts  # kept in _widget.py and model.ts: a bump leaves this file current


def test_the_module_prints_the_types():
    result = subprocess.run([sys.executable, "-m", "gradviz.widget.protocol"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=True)
    assert result.stdout == typescript()
    bad = subprocess.run([sys.executable, "-m", "gradviz.widget.protocol", "--yaml"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "usage" in bad.stderr


def _ts_list(source: str, name: str) -> set[str]:
    start = source.index(f"export const {name} = [")
    body = source[start:source.index("] as const", start)]
    return set(re.findall(r'"([a-z_]+)"', body))


def test_the_view_watches_every_synced_trait_of_the_widgets():
    # labextension/src/view_traits.ts: a trait the view does not watch would never be shown
    with open(os.path.join(ROOT, "labextension", "src", "view_traits.ts"), encoding="utf-8") as handle:
        source = handle.read()
    state, view = _ts_list(source, "STATE_TRAITS"), _ts_list(source, "VIEW_TRAITS")
    assert not state & view
    ipywidgets = set(ipywidgets_base.DOMWidget.class_trait_names(sync=True))
    synced = set(DiffWidget.class_trait_names(sync=True)) - ipywidgets - {"_esm", "_css", "graph"}
    assert state | view == synced
