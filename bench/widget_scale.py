"""The debugger view at model scale, measured in the browser: open time and Step round trip.

Writes each workload's offline page (``trace_to_html``: the same view code as the notebook
widget) and opens it from ``file://`` in Debian's Chromium (the browser tests' harness), then
reports:

* ``open s``: from navigation to the first box on screen (page parse, replay data, folding,
  one Graphviz layout of the folded view, drawing);
* ``layout ms`` / ``boxes``: the first layout's time and how many boxes the folded view drew;
* ``expand ms``: a click on a folded box's ⊕ until the new view is drawn (in the page's clock,
  polled each animation frame), for each box of the
  workload's expand sequence (the first folded segment of a chain; ``blocks``, then the
  ``+N more Block`` group, then Blocks 0 to 5 one after the other with their attention and MLP, of
  a transformer: the view grows to several hundred boxes in a dozen open modules), with the
  layout's share (``layout ms``: Graphviz, in the worker, with its messages), and how many
  Graphviz runs each took (``runs``: layouts not answered from the cache; with the lazy layout
  of labextension/src/compose.ts only the expanded module and its ancestors are laid out);
* ``step ms (median, p90)``: Step clicked until the view has restyled and a frame was painted,
  over ``--steps`` steps (with "follow" on, a step that enters a folded module opens it and
  lays out again: those steps are in the numbers too).

Nothing here is asserted. Run from the repository root::

    .venv/bin/python bench/widget_scale.py                   # chains of 1,000 and 10,000, models
    .venv/bin/python bench/widget_scale.py --chains 100000   # a 100,000-node recording
    .venv/bin/python bench/widget_scale.py --json scale.json
    .venv/bin/python bench/widget_scale.py --chains --blocks 140   # a ~10,000-node transformer
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests" / "browser"))
import playwright.sync_api as sync_api  # noqa: E402
from gradviz_browser_harness import launch_chromium  # noqa: E402
from scale_models import chain_loss, lstm_loss, transformer_loss  # noqa: E402

import gradviz as torch  # noqa: E402
from gradviz.widget import trace_to_html  # noqa: E402

STEP_JS = """
async (count) => {
  const scrubber = document.querySelector('[data-testid=gv-scrubber]');
  const step = document.querySelector('[data-testid=gv-step]');
  const frame = () => new Promise((resolve) => requestAnimationFrame(() => resolve()));
  const times = [];
  for (let index = 0; index < count && !step.disabled; index++) {
    const before = scrubber.value;
    const started = performance.now();
    step.click();
    while (scrubber.value === before) await new Promise((resolve) => setTimeout(resolve, 0));
    await frame();
    times.push(performance.now() - started);
  }
  return times;
}
"""

#: Notes the time of the next click (pointerup) in the page.
CLICK_CLOCK_JS = """
() => { window.__gvClicked = null;
        document.addEventListener('pointerup', () => { window.__gvClicked = performance.now(); },
                                  { capture: true, once: true }); }
"""

#: False until the new view is drawn; then the milliseconds since the click (measured in the page).
DRAWN_JS = """
([before]) => {
  const root = document.querySelector('.gv-root');
  const drawn = Number(root.dataset.layoutCount) > before && root.querySelector('.gv-message').hidden
    && Number(root.dataset.boxCount) === root.querySelectorAll('.gv-node:not([data-copy])').length
    && (root.dataset.drawnLayout === undefined || root.dataset.drawnLayout === root.dataset.layoutCount);
  return drawn && window.__gvClicked !== null ? performance.now() - window.__gvClicked : false;
}
"""

#: What to expand, in order, per workload kind (selectors of folded boxes; absent ones are skipped).
CHAIN_EXPANDS = [".gv-node.gv-folded"]
MODEL_EXPANDS = ['.gv-node.gv-folded[data-module="blocks"]', '.gv-node.gv-folded[data-module="blocks.0"]',
                 *(f'.gv-node.gv-folded[data-module="blocks.{index}{part}"]'
                   for index in range(6) for part in ("", ".attn", ".mlp"))]


def pan_into_view(page: Any, element: Any) -> None:
    """Drag the drawing so that `element` is in the middle of the canvas (as a user pans)."""
    canvas = page.locator('.gv-root [data-testid="gv-canvas"]').bounding_box()
    target = element.bounding_box()
    x, y = canvas["x"] + canvas["width"] / 2, canvas["y"] + canvas["height"] / 2
    page.mouse.move(x, y)
    page.mouse.down()
    page.mouse.move(2 * x - target["x"] - target["width"] / 2, 2 * y - target["y"] - target["height"] / 2, steps=5)
    page.mouse.up()


def record_page(make_loss: Callable[[], Any], path: Path) -> tuple[Path, int, float]:
    """The offline page of `make_loss()`'s backward pass; (path, nodes, seconds to write it)."""
    with torch.record() as trace:
        loss = make_loss()
        (loss[0] if isinstance(loss, tuple) else loss).backward()
    started = time.perf_counter()
    trace_to_html(trace, path, inspection_budget=1 << 20)
    return path, len(trace.graph["nodes"]), time.perf_counter() - started


def measure(browser: Any, path: Path, steps: int, expands: list[str]) -> dict[str, Any]:
    context = browser.new_context(viewport={"width": 1200, "height": 900})
    page = context.new_page()
    page.set_default_timeout(300_000)
    started = time.perf_counter()
    page.goto(path.as_uri())
    page.wait_for_selector(".gv-root .gv-node[data-node-id]", state="visible")
    opened = time.perf_counter() - started
    root = page.locator(".gv-root")
    result = {
        "open_s": opened,
        "layout_ms": float(root.get_attribute("data-layout-millis") or "nan"),
        "boxes": int(root.get_attribute("data-box-count") or 0),
        "error": page.locator('[data-testid="gv-error"]').is_visible(),
    }
    result["expand"] = []
    for selector in expands:
        before = int(root.get_attribute("data-layout-count") or 0)
        box = page.locator(f".gv-root {selector}")
        if box.count() == 0:
            continue
        toggle = box.first.locator(".gv-toggle")
        pan_into_view(page, toggle)
        page.evaluate(CLICK_CLOCK_JS)
        toggle.click()
        millis = page.wait_for_function(DRAWN_JS, arg=[before], polling="raf").json_value()
        result["expand"].append({"millis": millis,
                                 "layout_ms": float(root.get_attribute("data-layout-millis") or "nan"),
                                 "runs": root.get_attribute("data-layout-runs") or "?",
                                 "boxes": int(root.get_attribute("data-box-count") or 0)})
    times = page.evaluate(STEP_JS, steps)
    result["step_ms"] = times
    result["layouts_after_steps"] = int(root.get_attribute("data-layout-count") or 0)
    context.close()
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--chains", type=int, nargs="*", default=[1_000, 10_000], help="chain lengths (nodes)")
    parser.add_argument("--no-models", action="store_true", help="skip the transformer and the LSTM")
    parser.add_argument("--no-lstm", action="store_true", help="skip the LSTM")
    parser.add_argument("--blocks", type=int, nargs="*", default=[12],
                        help="transformer sizes (blocks; 140: ~10,000 nodes)")
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    workloads: list[tuple[str, Callable[[], Any], list[str]]] = [
        (f"chain {n:,}", (lambda n=n: chain_loss(n)), CHAIN_EXPANDS) for n in args.chains]
    if not args.no_models:
        workloads += [(f"transformer {n} blocks", (lambda n=n: transformer_loss(n)), MODEL_EXPANDS)
                      for n in args.blocks]
        if not args.no_lstm:
            workloads += [("LSTMCell x150", lambda: lstm_loss(150), CHAIN_EXPANDS)]
    rows = []
    with tempfile.TemporaryDirectory() as folder, sync_api.sync_playwright() as playwright:
        browser = launch_chromium(playwright)
        print(f"{'workload':24} {'nodes':>7} {'html s':>7} {'open s':>7} {'layout ms':>9} {'boxes':>5} "
              f"{'step ms median':>14} {'p90':>7}  expand ms/layout ms (runs, boxes)")
        for index, (name, make, expands) in enumerate(workloads):
            path, nodes, written = record_page(make, Path(folder) / f"page{index}.html")
            result = measure(browser, path, args.steps, expands)
            steps = sorted(result["step_ms"])
            median = statistics.median(steps) if steps else float("nan")
            p90 = steps[int(0.9 * (len(steps) - 1))] if steps else float("nan")
            print(f"{name:24} {nodes:7,} {written:7.1f} {result['open_s']:7.2f} {result['layout_ms']:9.0f} "
                  f"{result['boxes']:5} {median:14.1f} {p90:7.1f}  "
                  + " ".join(f"{e['millis']:.0f}/{e['layout_ms']:.0f} ({e['runs']}, {e['boxes']})"
                             for e in result["expand"])
                  + ("  (error shown)" if result["error"] else ""))
            rows.append({"workload": name, "nodes": nodes, "html_s": written, **result})
        browser.close()
    if args.json is not None:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
