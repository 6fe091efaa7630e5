"""A Jupyter Server extension that sends kernel messages to the browser without delay.

gradviz's widget answers a click (Step, Continue, a selection) with a few small messages in a
row: the states that changed, the new traits, the acknowledgement. Jupyter Server writes them to
the browser's kernel websocket, a TCP connection on which Nagle's algorithm is left on, so every
small write after the first waits until the browser acknowledges the previous one, and browsers
delay acknowledgements by up to 40 ms: each Step took 40 ms longer than its work (Note [Kernel
websockets without delay]). Installed with gradviz (``etc/jupyter/jupyter_server_config.d/
gradviz_jupyter.json``), this extension turns Nagle's algorithm off on kernel websockets
(``TCP_NODELAY``), as Tornado's documentation advises for interactive websockets. It does not
import gradviz, and changes nothing else.

Note [Kernel websockets without delay]
--------------------------------------
The websocket connection class (``ServerApp.kernel_websocket_connection_class``) is whatever
the server is configured with (the ZMQ channels, or a gateway's); the extension replaces the
class in the web application's settings with a subclass whose ``connect`` first sets
``TCP_NODELAY`` on its handler's stream, so any configured class keeps its behaviour. Measured
in JupyterLab with a 1,000-node debug session (bench/widget_scale.py --live): Step round trip
median 69 ms with Nagle, 34 ms without; a selection 38 ms and 24 ms.
"""

from __future__ import annotations

from typing import Any

from traitlets.utils.importstring import import_item

__all__ = ["without_nagle"]

SETTING = "kernel_websocket_connection_class"


def _jupyter_server_extension_points() -> list[dict[str, str]]:
    return [{"module": "gradviz_jupyter"}]


def without_nagle(connection_class: type) -> type:
    """A subclass of ``connection_class`` whose ``connect`` sets ``TCP_NODELAY`` on the
    websocket first (Note [Kernel websockets without delay])."""
    if getattr(connection_class, "_gradviz_nodelay", False):
        return connection_class

    class NoDelayConnection(connection_class):  # type: ignore[valid-type, misc]
        _gradviz_nodelay = True

        def connect(self, *args: Any, **kwargs: Any) -> Any:
            handler = getattr(self, "websocket_handler", None)
            if handler is not None and getattr(handler, "ws_connection", None) is not None:
                handler.set_nodelay(True)
            return super().connect(*args, **kwargs)

    NoDelayConnection.__name__ = NoDelayConnection.__qualname__ = f"NoDelay{connection_class.__name__}"
    return NoDelayConnection


def _load_jupyter_server_extension(serverapp: Any) -> None:
    settings = serverapp.web_app.settings
    current = settings.get(SETTING)
    if isinstance(current, str):  # a class given by its dotted name
        current = import_item(current)
    if isinstance(current, type):
        settings[SETTING] = without_nagle(current)
        serverapp.log.debug("gradviz_jupyter: kernel websockets without Nagle's delay (%s)", current.__name__)
