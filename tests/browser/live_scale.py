"""A long chain's live debug session in JupyterLab: how long it takes to open, Step round trips,
and the states the view shows against the kernel's. Shared by ``test_model_scale_live.py`` and
``bench/widget_scale.py --live``; nothing here asserts a time."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from gradviz_browser_harness import run_all, write_notebook

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
    return write_notebook(folder / f"chain_{nodes}.ipynb", [source])


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


# A select's round trip (click a node box until Python's `selected` marks it): the same trip
# through the server and the kernel as a Step, with almost no work on either side.
ARM_SELECT_JS = """
([root, id]) => {
  const node = root.querySelector(`.gv-node[data-node-id="${id}"]`);
  window.__gvSelect = new Promise((resolve) => {
    let started = null;
    window.addEventListener('pointerdown', () => { started = performance.now(); }, { capture: true, once: true });
    const observer = new MutationObserver(() => {
      if (started !== null && node.classList.contains('gv-selected')) {
        observer.disconnect();
        resolve(performance.now() - started);
      }
    });
    observer.observe(node, { attributes: true });
  });
}
"""

VISIBLE_NODES_JS = """
root => {
  const canvas = root.querySelector('[data-testid=gv-canvas]').getBoundingClientRect();
  const found = [];
  for (const node of root.querySelectorAll('.gv-node[data-node-id]:not(.gv-folded):not([data-copy])')) {
    const r = node.querySelector('rect.gv-box').getBoundingClientRect();
    const x = r.left + r.width / 2, y = r.top + r.height / 2;
    if (x > canvas.left + 5 && x < canvas.right - 5 && y > canvas.top + 5 && y < canvas.bottom - 5) found.push([node.dataset.nodeId, x, y]);
  }
  return found;
}
"""


def select_times(session: Any, count: int) -> list[float]:
    """Click `count` different drawn node boxes (found again before each click: a select may
    pan the view); each select's round trip in ms (a click that selected nothing within 5 s
    is left out)."""
    widget = session.widget()
    widget.scroll_into_view_if_needed()
    times: list[float] = []
    clicked: set[str] = set()
    for _ in range(count):
        found = [entry for entry in widget.evaluate(VISIBLE_NODES_JS) if entry[0] not in clicked]
        if not found:
            break
        node, x, y = found[0]
        clicked.add(node)
        session.page.evaluate(ARM_SELECT_JS, [widget.element_handle(), node])
        session.page.mouse.click(x, y)
        took = session.page.evaluate(
            "Promise.race([window.__gvSelect, new Promise((resolve) => setTimeout(() => resolve(null), 5000))])")
        if took is not None:
            times.append(took)
    return times
