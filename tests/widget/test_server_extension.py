"""The gradviz_jupyter server extension (Note [Kernel websockets without delay]): kernel
websocket connections set TCP_NODELAY before connecting, whatever class the server is
configured with, and the extension is enabled in the environment gradviz is installed in."""

from __future__ import annotations

import json
import subprocess
import sys
import types
from pathlib import Path

from jupyter_server.services.kernels.connection.channels import ZMQChannelsWebsocketConnection

import gradviz_jupyter

REPO = Path(__file__).resolve().parents[2]


class FakeHandler:
    def __init__(self):
        self.ws_connection = object()
        self.nodelay = []

    def set_nodelay(self, value):
        self.nodelay.append(value)


class FakeConnection:
    def __init__(self, handler):
        self.websocket_handler = handler
        self.connected = False

    def connect(self):
        assert self.websocket_handler.nodelay == [True], "TCP_NODELAY must be set before connecting"
        self.connected = True
        return "future"


def test_the_connection_sets_nodelay_then_connects_as_its_base():
    handler = FakeHandler()
    connection = gradviz_jupyter.without_nagle(FakeConnection)(handler)
    assert connection.connect() == "future" and connection.connected
    assert isinstance(connection, FakeConnection)
    assert gradviz_jupyter.without_nagle(type(connection)) is type(connection)   # never wrapped twice


def test_a_handler_without_an_open_websocket_is_left_alone():
    handler = FakeHandler()
    handler.ws_connection = None
    connection = gradviz_jupyter.without_nagle(FakeConnection)(handler)
    handler.nodelay.append(True)  # what FakeConnection.connect checks
    connection.connect()
    assert handler.nodelay == [True]


def _server(setting):
    return types.SimpleNamespace(web_app=types.SimpleNamespace(settings={"kernel_websocket_connection_class": setting}),
                                 log=types.SimpleNamespace(debug=lambda *args: None))


def test_loading_wraps_the_configured_class_given_as_a_class_or_a_name():
    for setting in (ZMQChannelsWebsocketConnection,
                    "jupyter_server.services.kernels.connection.channels.ZMQChannelsWebsocketConnection"):
        server = _server(setting)
        gradviz_jupyter._load_jupyter_server_extension(server)
        wrapped = server.web_app.settings["kernel_websocket_connection_class"]
        assert issubclass(wrapped, ZMQChannelsWebsocketConnection) and wrapped is not ZMQChannelsWebsocketConnection
    server = _server(None)   # nothing configured: nothing to wrap
    gradviz_jupyter._load_jupyter_server_extension(server)
    assert server.web_app.settings["kernel_websocket_connection_class"] is None
    assert gradviz_jupyter._jupyter_server_extension_points() == [{"module": "gradviz_jupyter"}]


def test_the_extension_is_enabled_where_gradviz_is_installed():
    config = json.loads((REPO / "jupyter-config" / "jupyter_server_config.d" / "gradviz_jupyter.json").read_text())
    assert config == {"ServerApp": {"jpserver_extensions": {"gradviz_jupyter": True}}}
    listed = subprocess.run([sys.executable, "-m", "jupyter", "server", "extension", "list"],
                            capture_output=True, text=True, timeout=120)
    text = listed.stdout + listed.stderr
    assert "gradviz_jupyter" in text and "enabled" in text.split("gradviz_jupyter", 1)[1].splitlines()[0], text
