"""What an active overlay adds to a Step (issue 15: a Step round trip of at most 50 ms).

Two measurements, each against the same Step without an overlay in the same run (the ratio is
the number to track; nothing here is a test):

* ``python``: a 10,000-node chain's ``session.step()`` with the widget following it (snapshot,
  the ``overlays`` trait), with no built-in requested, with ``grad_norm`` requested (what a view
  showing it costs) and with all five; median milliseconds. The built-ins are kept up to date
  from the nodes the shown events touched (Note [Incremental overlays]), so the cost is the
  conversion of the one requested value dict to JSON.
* ``browser``: in JupyterLab (headless Chromium), a 1,000-node chain's Step round trip (click →
  the node that ran drawn as run, and painted when an overlay is shown), with the picker on
  "nothing" and on "gradient norm"; median milliseconds. Needs the test extras.

Run from the repository root: ``.venv/bin/python bench/overlays.py [python|browser]``.
"""

from __future__ import annotations

import gc
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

import gradviz
from gradviz.widget import DebuggerWidget

REPO = Path(__file__).resolve().parents[1]
STEPS = 25


def chain_session(links: int):
    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    h = x
    for _ in range(links):
        h = h * 1.0001
    return gradviz.debug.backward(h.sum())


def python_side(nodes: int = 10_000) -> dict:
    session = chain_session(nodes - 2)
    widget = DebuggerWidget(session)

    def median_step() -> float:
        times = []
        for _ in range(STEPS):
            start = time.perf_counter()
            session.step()
            times.append(time.perf_counter() - start)
        return statistics.median(times) * 1000

    found = {"nodes": len(session.graph()["nodes"]), "none": median_step()}
    widget._overlay_publisher.requested.add("grad_norm")
    widget._refresh()
    found["grad_norm"] = median_step()
    widget._overlay_publisher.requested.update(["max_abs_grad", "nonfinite", "dtype", "saved_bytes"])
    widget._refresh()
    found["all_five"] = median_step()
    widget.close()
    return found


STEP_JS = """
async (root) => {
  const current = root.querySelector('.gv-node.gv-current');
  const id = current.dataset.nodeId;
  const overlay = root.querySelector('[data-testid=gv-overlay-picker]').value !== '';
  const done = () => {
    const box = root.querySelector(`.gv-node[data-node-id="${id}"]`);
    const state = box.dataset.state;
    return (state === 'done' || state === 'released') && (!overlay || box.hasAttribute('data-overlay'));
  };
  const start = performance.now();
  root.querySelector('[data-testid=gv-step]').click();
  await new Promise((resolve) => {
    const observer = new MutationObserver(() => { if (done()) { observer.disconnect(); resolve(); } });
    observer.observe(root.querySelector('svg'), { attributes: true, subtree: true });
  });
  return performance.now() - start;
}
"""


def browser_side(nodes: int = 1_000) -> dict:
    sys.path.insert(0, str(REPO / "tests" / "browser"))
    import playwright.sync_api as sync_api
    from gradviz_browser_harness import launch_chromium, notebook_session, run_all, start_lab, stop_lab

    cell = ("import gradviz\nfrom gradviz.widget import DebuggerWidget\n"
            "x = gradviz.tensor([1.0, 2.0], requires_grad=True)\n"
            f"h = x\nfor _ in range({nodes - 2}):\n    h = h * 1.0001\nsession = gradviz.debug.backward(h.sum())\n"
            "DebuggerWidget(session)")
    notebook = {"cells": [{"cell_type": "code", "execution_count": None, "id": "c0", "metadata": {}, "outputs": [],
                           "source": cell}],
                "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                            "name": "python3"}},
                "nbformat": 4, "nbformat_minor": 5}
    work = Path(tempfile.mkdtemp())
    source = work / "chain.ipynb"
    source.write_text(json.dumps(notebook))
    (work / "lab").mkdir()
    lab = start_lab(work / "lab", [source])
    try:
        with sync_api.sync_playwright() as playwright:
            browser = launch_chromium(playwright)
            with notebook_session(browser, lab, "chain.ipynb", "bench_overlays") as session:
                run_all(session)
                root = session.widget().element_handle()
                found = {"nodes": nodes}
                for choice, label in (("", "none"), ("grad_norm", "grad_norm")):
                    session.widget().locator("[data-testid=gv-overlay-picker]").select_option(choice)
                    session.page.wait_for_timeout(500)
                    times = [session.page.evaluate(STEP_JS, root) for _ in range(STEPS)]
                    found[label] = statistics.median(times)
            browser.close()
    finally:
        stop_lab(lab)
    return found


def main() -> None:
    which = sys.argv[1:] or ["python", "browser"]
    assert gc.isenabled()
    for name in which:
        result = python_side() if name == "python" else browser_side()
        base = result["none"]
        parts = ", ".join(f"{key} {value:.1f} ms ({value / base:.2f}x)"
                          for key, value in result.items() if key != "nodes")
        print(f"{name}: {result['nodes']} nodes, median Step: {parts}")


if __name__ == "__main__":
    main()
