"""A long chain's live debug session in JupyterLab: how long it takes to open, Step round trips,
and the states the view shows against the kernel's. Shared by ``test_model_scale_live.py`` and
``bench/widget_scale.py --live``; nothing here asserts a time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gradviz_browser_harness import run_all

MODELS = Path(__file__).resolve().parent / "scale_models.py"

# Click Step `count` times; each round trip ends when the status line shows the new state, the
# ack has arrived (no "…" any more) and a frame was painted. Also what the view's last refresh
# took (data-refresh-millis: applying the states to the drawing).
STEP_JS = """
async ([root, count]) => {
  const status = root.querySelector('[data-testid=gv-status]');
  const step = root.querySelector('[data-testid=gv-step]');
  const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
  const idle = () => new Promise((resolve) => setTimeout(resolve, 0));
  const times = [], refresh = [];
  for (let index = 0; index < count && !step.disabled; index++) {
    const before = status.textContent;
    const started = performance.now();
    step.click();
    while (status.textContent === before || root.classList.contains('gv-busy')) await idle();
    await frame();
    times.push(performance.now() - started);
    refresh.push(Number(root.dataset.refreshMillis));
  }
  return { times, refresh };
}
"""

# The drawn boxes of single nodes (not folded modules or segments): node id -> state.
DRAWN_STATES_JS = """
root => Object.fromEntries(
  [...root.querySelectorAll('.gv-node[data-node-id]:not([data-copy]):not(.gv-folded)')].map(node => [node.dataset.nodeId, node.dataset.state ?? null]))
"""

# The kernel's view of the session: how many nodes are in each state, and each node's state.
KERNEL_STATES = """\
import json, collections
_states = {str(k): v for k, v in session.node_states().items()}
print("GVSTATES " + json.dumps({"counts": collections.Counter(_states.values()), "states": _states}))
"""

# Python's share of a Step with the widget attached (session.step() notifies the widget).
KERNEL_STEP_TIME = """\
import time, statistics
_times = []
for _ in range({steps}):
    _started = time.perf_counter(); session.step(); _times.append(1000 * (time.perf_counter() - _started))
print("GVPYSTEP " + str(statistics.median(_times)))
"""


def chain_notebook(folder: Path, nodes: int) -> Path:
    """A notebook whose one cell shows a debug session of a `nodes`-long chain."""
    source = ("import gradviz as torch\n"
              "from scale_models import chain_loss\n"
              f"session = torch.debug.backward(chain_loss({nodes}))\n"
              "session")
    cell = {"cell_type": "code", "execution_count": None, "id": "chain", "metadata": {}, "outputs": [], "source": source}
    notebook = {"cells": [cell], "metadata": {"kernelspec": {"name": "python3", "display_name": "Python 3 (ipykernel)",
                                                             "language": "python"}}, "nbformat": 4, "nbformat_minor": 5}
    path = folder / f"chain_{nodes}.ipynb"
    path.write_text(json.dumps(notebook))
    return path


def open_session(session: Any) -> float:
    """Run the notebook; seconds until the widget drew its first box."""
    started = time.perf_counter()
    run_all(session)
    return time.perf_counter() - started


def step_times(session: Any, count: int) -> dict[str, list[float]]:
    """Click Step `count` times: ``{"times": round trips ms, "refresh": view refresh ms}``."""
    return session.page.evaluate(STEP_JS, [session.widget().element_handle(), count])


def kernel_states(session: Any) -> dict[str, Any]:
    return json.loads(session.run_cell_at_end(KERNEL_STATES, "GVSTATES "))


def kernel_step_ms(session: Any, steps: int) -> float:
    return float(session.run_cell_at_end(KERNEL_STEP_TIME.format(steps=steps), "GVPYSTEP "))


def shown_states(session: Any) -> tuple[dict[str, str], str]:
    """The drawn single-node boxes' states and the status line."""
    widget = session.widget()
    return widget.evaluate(DRAWN_STATES_JS), widget.locator('[data-testid="gv-status"]').text_content() or ""
