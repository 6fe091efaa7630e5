"""The self-contained HTML page of a trace (``Trace.to_html``), opened from ``file://``.

Debian's Chromium through playwright (the harness's flags). The page must draw the graph, step
and scrub exactly as a ReplaySession does in Python, make no request that is not ``file:``,
``data:`` or ``blob:``, log no console error, and show a hostile Function name as plain text.
Needs the built bundle (``npm --prefix labextension run build``). Marked ``browser``.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import playwright.sync_api as sync_api  # a test dependency: a missing one must fail, not skip
from gradviz_browser_harness import (  # noqa: E402
    ARTIFACTS,
    READ_CURRENT_JS,
    READ_STATES_JS,
    PageProblems,
    browser,  # noqa: F401  (the module-scoped fixture)
    )

import gradviz as torch
from gradviz.autograd import Function
from gradviz.debug import ReplaySession

pytestmark = pytest.mark.browser

HOSTILE = "</script><script>window.__pwned = 1</script><!--"
# Records any alert() or injected script, without blocking the page.
TRAP = "window.__alerts = []; window.alert = (text) => window.__alerts.push(String(text));"


def _hostile_trace() -> Any:
    def forward(ctx: Any, x: Any) -> Any:
        return x * 2

    def backward(ctx: Any, grad: Any) -> Any:
        return grad * 2

    evil = type(HOSTILE, (Function,), {"forward": staticmethod(forward), "backward": staticmethod(backward)})
    x = torch.tensor([1.0, -2.0], requires_grad=True)
    w = torch.tensor([0.5, 3.0], requires_grad=True)
    with torch.record() as trace:
        ((evil.apply(x) * w).exp() + w).sum().backward()
    return trace


@pytest.fixture(scope="module")
def trace() -> Any:
    return _hostile_trace()


@pytest.fixture(scope="module")
def page_path(trace: Any, tmp_path_factory: pytest.TempPathFactory) -> Path:
    return trace.to_html(tmp_path_factory.mktemp("standalone") / "trace.html", title=HOSTILE)


def _expected(trace: Any, position: int) -> tuple[dict[str, str], list[str]]:
    """What a ReplaySession shows after `position` events: every node's state, the current node."""
    session = ReplaySession(trace)
    session.seek(position)
    states = {str(node_id): state for node_id, state in session.node_states().items()}
    return states, ([] if session.current is None else [str(session.current)])


class Page:
    def __init__(self, browser: Any, path: Path) -> None:
        self.context = browser.new_context(viewport={"width": 1200, "height": 900})
        self.context.add_init_script(TRAP)
        self.requests: list[str] = []
        self.context.on("request", lambda request: self.requests.append(request.url))
        self.page = self.context.new_page()
        self.page.set_default_timeout(30_000)
        self.problems = PageProblems()
        self.problems.attach(self.page)
        self.page.goto(path.as_uri())
        self.root = self.page.locator(".gv-root")
        self.page.wait_for_selector(".gv-root .gv-node[data-node-id]", state="visible")

    def states(self) -> dict[str, str]:
        return self.root.evaluate(READ_STATES_JS)

    def current(self) -> list[str]:
        return self.root.evaluate(READ_CURRENT_JS)

    def position(self) -> int:
        return int(self.page.locator('[data-testid="gv-scrubber"]').input_value())

    def click(self, testid: str) -> None:
        before = self.position()
        self.page.locator(f'[data-testid="{testid}"]').click()
        if testid != "gv-restart":
            self.page.wait_for_function(
                "before => Number(document.querySelector('[data-testid=gv-scrubber]').value) !== before", arg=before
            )

    def check_shows(self, trace: Any, position: int) -> None:
        assert self.position() == position
        states, current = _expected(trace, position)
        assert self.states() == states, f"at position {position}"
        assert self.current() == current, f"at position {position}"


@pytest.fixture
def page(browser: Any, page_path: Path, request: pytest.FixtureRequest) -> Iterator[Page]:
    """The page, with its screenshot and console kept in tests/browser/artifacts/ (git-ignored)."""
    opened = Page(browser, page_path)
    try:
        yield opened
    finally:
        directory = ARTIFACTS / f"standalone-{request.node.name}"
        directory.mkdir(parents=True, exist_ok=True)
        try:
            opened.page.screenshot(path=str(directory / "page.png"), full_page=True)
        finally:
            (directory / "console.txt").write_text("\n".join(opened.problems.console + opened.requests))
            opened.context.close()


def _check_clean(page: Page) -> None:
    foreign = [url for url in page.requests if not url.startswith(("file:", "data:", "blob:"))]
    assert foreign == [], f"the page made network requests: {foreign}"
    assert page.problems.report() == "", page.problems.report()
    assert page.page.evaluate("window.__alerts") == []
    assert page.page.evaluate("window.__pwned") is None
    assert page.root.locator('[data-testid="gv-error"]').is_hidden()


def test_renders_the_graph_offline_in_a_worker(page: Page, trace: Any) -> None:
    node_ids = {str(node["id"]) for node in trace.graph["nodes"]}
    assert set(page.states()) == node_ids
    assert page.root.get_attribute("data-layout-site") == "worker"
    start = ReplaySession(trace).position
    page.check_shows(trace, start)
    assert page.page.locator('[data-testid="gv-position"]').inner_text() == f"{start} of {len(trace.events)} events"
    # The hostile class name is drawn as text, and the page holds exactly its own two scripts.
    assert page.page.locator("script").count() == 2
    names = page.root.locator(".gv-node text.gv-name").all_text_contents()
    assert any(name.startswith(HOSTILE[:40]) for name in names), names  # long names end in "…"
    assert page.page.title() == HOSTILE
    assert page.page.locator(".gv-page-header h1").inner_text() == HOSTILE
    _check_clean(page)


def test_step_buttons_follow_the_replay_session(page: Page, trace: Any) -> None:
    session = ReplaySession(trace)
    layouts = page.root.get_attribute("data-layout-count")
    for _ in range(3):
        before = page.states()
        page.click("gv-step")
        session.step()
        page.check_shows(trace, session.position)
        assert page.states() != before, "Step changed no node state"
    page.click("gv-step-event")
    session.step_event()
    page.check_shows(trace, session.position)
    page.click("gv-step-back")
    session.step_back()
    page.check_shows(trace, session.position)
    page.click("gv-continue")
    session.continue_()
    page.check_shows(trace, session.position)
    assert page.root.locator('[data-testid="gv-status"]').inner_text().startswith("Finished")
    assert page.root.locator('[data-testid="gv-step"]').is_disabled()
    page.click("gv-restart")
    session.restart()
    page.check_shows(trace, session.position)
    assert page.root.get_attribute("data-layout-count") == layouts, "a step laid the graph out again"
    _check_clean(page)


def test_scrubber_seeks_any_position(page: Page, trace: Any) -> None:
    scrubber = page.page.locator('[data-testid="gv-scrubber"]')
    for position in (0, len(trace.events), len(trace.events) // 2, 7):
        scrubber.fill(str(position))
        page.check_shows(trace, position)
        narration = page.root.locator('[data-testid="gv-narration"]')
        if position == 0:
            assert narration.is_hidden()
        else:
            assert narration.get_attribute("data-seq") == str(position - 1)
            assert narration.locator('[data-testid="gv-narration-text"]').inner_text() == trace.events[position - 1]["text"]
    _check_clean(page)


def test_select_and_run_to(page: Page, trace: Any) -> None:
    session = ReplaySession(trace)
    leaf = next(node["id"] for node in trace.graph["nodes"] if node["kind"] == "accumulate_grad")
    page.root.locator(f'.gv-node[data-node-id="{leaf}"]:not([data-copy])').click()
    inspector = page.root.locator('[data-testid="gv-inspector"]')
    inspector.wait_for(state="visible")
    assert inspector.locator('[data-testid="gv-inspector-name"]').inner_text() == "AccumulateGrad"
    # The page keeps the replay's node() at each event: not yet run, the leaf says so.
    assert inspector.locator('[data-section="in"]').inner_text().endswith("not received yet")
    assert inspector.locator('[data-testid="gv-inspector-note"]').count() == 0
    page.click("gv-run-to")
    session.run_to(leaf)
    page.check_shows(trace, session.position)
    assert page.current() == [str(leaf)]
    _check_clean(page)


def test_keyboard_only_select_run_to_and_close(page: Page, trace: Any) -> None:
    """Tab to the graph, walk down its edges to a leaf with the arrows, Enter opens the
    inspector, Tab to Run to and press it, Escape on the graph closes the inspector."""
    session = ReplaySession(trace)
    canvas = page.root.locator('[data-testid="gv-canvas"]')
    assert canvas.get_attribute("tabindex") == "0"
    assert "Enter" in canvas.get_attribute("title")
    assert "Enter" in page.root.locator('[data-testid="gv-legend-keys"]').inner_text()
    # Tab from the toolbar's last control until the canvas has the focus: one tab stop.
    page.page.locator('[data-testid="gv-scrubber"]').focus()
    for _ in range(10):
        if canvas.evaluate("element => element === document.activeElement"):
            break
        page.page.keyboard.press("Tab")
    assert canvas.evaluate("element => element === document.activeElement"), "the graph is not a tab stop"
    focused = page.root.locator(".gv-node.gv-focused:not([data-copy])")
    # Focus alone shows the cursor, on the node that runs next (here the loss's node).
    root = str(trace.graph["roots"][0])
    assert page.current() == [root]
    assert focused.get_attribute("data-node-id") == root
    ring = focused.locator("rect.gv-ring")
    assert ring.evaluate("element => getComputedStyle(element).visibility") == "visible", "no focus ring"
    kinds = {str(node["id"]): node["kind"] for node in trace.graph["nodes"]}
    pairs = {(str(edge["source"]), str(edge["target"])) for edge in trace.graph["edges"]}

    def walk_down(start: str) -> str:
        seen = [start]
        for _ in range(len(kinds)):
            page.page.keyboard.press("ArrowDown")
            here = focused.get_attribute("data-node-id")
            if here == seen[-1]:
                break
            seen.append(here)
        assert kinds[seen[-1]] == "accumulate_grad", f"ArrowDown stopped at {seen}"
        # Every step went along an edge, from a node to one of its next functions.
        assert all((a, b) in pairs for a, b in zip(seen, seen[1:])), seen
        return seen[-1]

    leaf = walk_down(root)
    page.page.keyboard.press("ArrowUp")  # to a node that uses the leaf (w is used twice)
    user = focused.get_attribute("data-node-id")
    assert (user, leaf) in pairs
    leaf = walk_down(user)
    page.page.keyboard.press("Enter")
    inspector = page.root.locator('[data-testid="gv-inspector"]')
    inspector.wait_for(state="visible")
    assert inspector.locator(".gv-inspector-id").get_attribute("data-node-id") == leaf
    # Run to, by keyboard: focus the button, press Enter.
    run_to = page.page.locator('[data-testid="gv-run-to"]')
    assert run_to.is_enabled()
    run_to.focus()
    before = page.position()
    page.page.keyboard.press("Enter")
    page.page.wait_for_function(
        "before => Number(document.querySelector('[data-testid=gv-scrubber]').value) !== before", arg=before
    )
    session.run_to(int(leaf))
    page.check_shows(trace, session.position)
    canvas.focus()
    page.page.keyboard.press("Escape")
    inspector.wait_for(state="hidden")
    _check_clean(page)


def test_lays_out_on_the_page_when_workers_are_unavailable(browser: Any, page_path: Path, trace: Any) -> None:
    # docs/frontend_notes.md: keep a main-thread fallback for when a security policy blocks workers.
    context = browser.new_context()
    context.add_init_script("delete window.Worker;")
    try:
        page = context.new_page()
        problems = PageProblems()
        problems.attach(page)
        requests: list[str] = []
        context.on("request", lambda request: requests.append(request.url))
        page.goto(page_path.as_uri())
        page.wait_for_selector(".gv-root .gv-node[data-node-id]", state="visible", timeout=30_000)
        assert page.locator(".gv-root").get_attribute("data-layout-site") == "page"
        assert page.locator(".gv-root .gv-node[data-node-id]:not([data-copy])").count() == len(trace.graph["nodes"])
        assert [url for url in requests if not url.startswith(("file:", "data:", "blob:"))] == []
        assert problems.report() == "", problems.report()
    finally:
        context.close()


def _named_trace() -> tuple[Any, dict[str, str]]:
    """A debug session's trace whose graph names its leaves (the optional ``leaf_name``), as
    ``gradviz.debug.backward(..., params=)`` named them: one plain name, one that looks like HTML."""
    weight = torch.tensor([1.5, -0.5], requires_grad=True)
    bias = torch.tensor([0.25, 2.0], requires_grad=True)
    session = torch.debug.backward((torch.tanh(torch.tensor([1.0, 2.0]) * weight) + bias).sum(),
                                   params={"fc.weight": weight, "<i>b</i>": bias})
    names = {str(node["id"]): node["leaf_name"] for node in session.graph()["nodes"] if "leaf_name" in node}
    trace = session.trace()
    for node in trace.graph["nodes"]:
        if str(node["id"]) in names:
            node.setdefault("leaf_name", names[str(node["id"])])
    return trace, names


def test_leaf_names_are_drawn_on_the_page(browser: Any, tmp_path: Path) -> None:
    """The page shows 'fc.weight · AccumulateGrad' on the leaf's box and its name in the
    inspector's header, as the notebook widget does; a name that looks like HTML stays text."""
    trace, names = _named_trace()
    assert sorted(names.values()) == ["<i>b</i>", "fc.weight"]
    opened = Page(browser, trace.to_html(tmp_path / "named.html", title="named leaves"))
    try:
        for node_id, name in names.items():
            box = opened.root.locator(f'.gv-node[data-node-id="{node_id}"]:not([data-copy])')
            assert box.locator("text.gv-name").text_content() == f"{name} · AccumulateGrad"
        assert opened.root.locator("i").count() == 0, "a leaf's name was parsed as HTML"
        weight = next(node_id for node_id, name in names.items() if name == "fc.weight")
        opened.root.locator(f'.gv-node[data-node-id="{weight}"]:not([data-copy])').click()
        inspector = opened.root.locator('[data-testid="gv-inspector"]')
        inspector.wait_for(state="visible")
        assert inspector.locator('[data-testid="gv-inspector-leaf"]').inner_text() == "fc.weight"
        assert inspector.locator('[data-testid="gv-inspector-name"]').inner_text() == "AccumulateGrad"
        _check_clean(opened)
    finally:
        opened.context.close()


def test_without_scripts_the_page_says_how_to_see_it(browser: Any, page_path: Path) -> None:
    """JupyterLab's HTML viewer shows an untrusted page with scripts off: the page was blank.
    It must say why and what to do (Trust HTML, or a browser); with scripts on, the hint is gone."""
    context = browser.new_context(viewport={"width": 900, "height": 600}, java_script_enabled=False)
    try:
        page = context.new_page()
        page.goto(page_path.as_uri())
        text = page.locator("body").inner_text()
        assert "scripts are off" in text and "Trust HTML" in text and "web browser" in text, text
    finally:
        context.close()
    with_scripts = Page(browser, page_path)
    try:
        assert "Trust HTML" not in with_scripts.page.locator("body").inner_text()
        _check_clean(with_scripts)
    finally:
        with_scripts.context.close()


def _focus_canvas_by_tab(page: Page) -> Any:
    canvas = page.root.locator('[data-testid="gv-canvas"]')
    page.page.locator('[data-testid="gv-scrubber"]').focus()
    for _ in range(10):
        if canvas.evaluate("element => element === document.activeElement"):
            break
        page.page.keyboard.press("Tab")
    assert canvas.evaluate("element => element === document.activeElement"), "the graph is not a tab stop"
    return canvas


def test_command_keys_on_the_focused_graph_and_buttons_named_by_their_text(page: Page, trace: Any) -> None:
    """s, e, r, c press Step, Step event, Run to selected and Continue while the graph has the
    focus (and only then); the cursor follows the node that runs next; each button's
    accessible name is its visible text, its description the tooltip, which names the key."""
    session = ReplaySession(trace)
    for testid, text, key in (("gv-step", "Step", "s"), ("gv-step-event", "Step event", "e"),
                              ("gv-run-to", "Run to selected", "r"), ("gv-continue", "Continue", "c")):
        element = page.root.locator(f'[data-testid="{testid}"]')
        sync_api.expect(element).to_have_accessible_name(text)
        sync_api.expect(element).to_have_accessible_description(re.compile(rf"\(key: {key}, with the graph focused\)$"))
        assert element.get_attribute("aria-keyshortcuts") == key
        assert page.page.get_by_role("button", name=text, exact=True).count() == 1
    sync_api.expect(page.root.locator('[data-testid="gv-zoom-in"]')).to_have_accessible_name("Zoom in")
    assert "s step" in page.root.locator('[data-testid="gv-legend-keys"]').inner_text()

    # Outside the graph the letters are not ours (in JupyterLab: command-mode shortcuts).
    page.page.locator('[data-testid="gv-scrubber"]').focus()
    page.page.keyboard.press("s")
    page.page.locator('[data-testid="gv-narration"]').press("s")
    page.page.keyboard.press("c")
    page.check_shows(trace, session.position)

    _focus_canvas_by_tab(page)
    focused = page.root.locator(".gv-node.gv-focused:not([data-copy])")
    ring = focused.locator("rect.gv-ring")
    assert ring.evaluate("element => getComputedStyle(element).visibility") == "visible", "no focus cursor"

    def press(key: str) -> None:
        before = page.position()
        page.page.keyboard.press(key)
        page.page.wait_for_function(
            "before => Number(document.querySelector('[data-testid=gv-scrubber]').value) !== before", arg=before
        )

    press("s")
    session.step()
    page.check_shows(trace, session.position)
    assert [focused.get_attribute("data-node-id")] == page.current(), "the cursor did not follow the next node"
    press("e")
    session.step_event()
    page.check_shows(trace, session.position)
    leaf = next(str(node["id"]) for node in trace.graph["nodes"] if node["kind"] == "accumulate_grad")
    page.root.locator(f'.gv-node[data-node-id="{leaf}"]:not([data-copy])').click()  # select (and focus)
    page.root.locator('[data-testid="gv-inspector"]').wait_for(state="visible")
    press("r")
    session.run_to(int(leaf))
    page.check_shows(trace, session.position)
    press("c")
    session.continue_()
    page.check_shows(trace, session.position)
    # A key whose button is off does nothing, and the status says why.
    page.page.keyboard.press("s")
    page.check_shows(trace, session.position)
    assert "Step is off" in page.root.locator('[data-testid="gv-status"]').inner_text()
    _check_clean(page)


def test_the_next_node_waiting_for_its_gradient_has_a_dashed_halo_and_says_so(page: Page, trace: Any) -> None:
    """After Step event shows a node_finished, the engine's next node is still pending until
    the buffer_added and node_ready events are shown: the halo is dashed and the status,
    tooltip and Step's title say that its gradient is on the way."""
    session = ReplaySession(trace)
    status = page.root.locator('[data-testid="gv-status"]')
    while True:
        page.click("gv-step-event")
        event = session.step_event()
        page.check_shows(trace, session.position)
        if event["kind"] == "node_finished":
            break
    [current] = page.current()
    assert session.node_states()[int(current)] == "pending"
    node = page.root.locator(f'.gv-node.gv-current[data-node-id="{current}"]:not([data-copy])')
    assert "gv-waiting" in node.get_attribute("class")
    assert node.locator("rect.gv-halo").evaluate("e => getComputedStyle(e).strokeDasharray") not in ("none", "")
    assert "its gradient is on the way" in status.inner_text()
    assert "once its gradient arrives" in node.locator("title").text_content()
    assert page.root.locator('[data-testid="gv-step"]').get_attribute("title").startswith("Deliver the gradients still on the way")
    # Step event shows the delivery; the node turns ready and the halo is solid again.
    while session.node_states()[int(current)] == "pending":
        page.click("gv-step-event")
        session.step_event()
        page.check_shows(trace, session.position)
    assert page.current() == [current]
    assert "gv-waiting" not in node.get_attribute("class")
    assert node.locator("rect.gv-halo").evaluate("e => getComputedStyle(e).strokeDasharray") in ("none", "")
    assert "on the way" not in status.inner_text()
    _check_clean(page)


READ_NODE_COLOURS_JS = """
root => Object.fromEntries([...root.querySelectorAll('.gv-node:not([data-copy])')].map(node => [
  node.getAttribute('data-state'),
  [getComputedStyle(node.querySelector('rect.gv-box')).fill, getComputedStyle(node.querySelector('text')).fill,
   getComputedStyle(node).opacity],
]))
"""


def _rgb(css: str) -> tuple[float, float, float]:
    parts = [float(v) for v in re.findall(r"[\d.]+", css)[:3]]
    return parts[0], parts[1], parts[2]


def _contrast(a: str, b: str) -> float:
    def luminance(css: str) -> float:
        def channel(v: float) -> float:
            c = v / 255
            return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4
        r, g, b_ = (channel(v) for v in _rgb(css))
        return 0.2126 * r + 0.7152 * g + 0.0722 * b_
    high, low = sorted((luminance(a), luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


def test_jupyterlab_dark_theme_switches_the_graph_to_a_dark_readable_palette(page: Page, trace: Any) -> None:
    """Under body[data-jp-theme-light="false"] (JupyterLab's dark themes) the node fills turn
    dark, node text keeps WCAG AA contrast (4.5:1) on its fill, and released nodes are not
    made translucent."""
    scrubber = page.page.locator('[data-testid="gv-scrubber"]')
    seen: dict[str, dict[str, list[str]]] = {"light": {}, "dark": {}}
    # Positions that between them show every state the trace reaches (the first of each).
    session = ReplaySession(trace)
    first: dict[str, int] = {}
    for position in range(len(trace.events) + 1):
        session.seek(position)
        for state in session.node_states().values():
            first.setdefault(state, position)
    for position in sorted(set(first.values())):
        scrubber.fill(str(position))
        for theme in ("light", "dark"):
            page.page.evaluate("light => document.body.setAttribute('data-jp-theme-light', light)",
                               "true" if theme == "light" else "false")
            for state, colours in page.root.evaluate(READ_NODE_COLOURS_JS).items():
                seen[theme][state] = colours
    assert {"pending", "ready", "done", "released"} <= set(seen["dark"]), seen["dark"]
    for theme, states in seen.items():
        for state, (fill, text, opacity) in states.items():
            assert _contrast(fill, text) >= 4.5, f"{theme} {state}: text {text} on {fill}"
            assert float(opacity) == 1.0, f"{theme} {state} is translucent"
    for state in seen["dark"]:
        if state == "running":
            continue
        assert seen["dark"][state][0] != seen["light"][state][0], f"{state} keeps its light fill"
        assert sum(_rgb(seen["dark"][state][0])) < sum(_rgb(seen["light"][state][0])) / 3, f"{state} fill is not dark"
    directory = ARTIFACTS / "standalone-dark"
    directory.mkdir(parents=True, exist_ok=True)
    page.page.evaluate("() => { document.body.style.background = '#111111'; }")
    page.root.screenshot(path=str(directory / "dark.png"))
    _check_clean(page)


# Where the toolbar's parts are: each visible button's text and top, the status line's box.
READ_TOOLBAR_JS = """
root => {
  const toolbar = root.querySelector('.gv-toolbar');
  const box = (element) => element.getBoundingClientRect();
  const status = root.querySelector('[data-testid=gv-status]');
  const style = getComputedStyle(status);
  const visible = [...toolbar.querySelectorAll('button')].filter((button) => button.offsetParent !== null);
  return {
    width: box(toolbar).width,
    commands: visible.filter((button) => !button.closest('[data-testid=gv-zoom]'))
      .map((button) => [button.textContent, Math.round(box(button).top)]),
    zoomTops: [...toolbar.querySelectorAll('[data-testid=gv-zoom] button')].map((button) => Math.round(box(button).top)),
    cut: visible.concat([status]).filter((element) => box(element).right > box(toolbar).right + 0.5)
      .map((element) => element.textContent),
    statusTop: Math.round(box(status).top),
    statusLines: status.clientHeight / parseFloat(style.lineHeight),
    statusWidth: status.clientWidth,
    statusCut: status.scrollWidth > status.clientWidth + 1,
    ellipsis: style.textOverflow,
    text: status.textContent,
    title: status.title,
  };
}
"""


def test_the_toolbar_keeps_its_buttons_on_one_row_and_cuts_the_status_with_a_tooltip(page: Page) -> None:
    """With Step back and Restart shown: at every width the status is one line whose tooltip
    holds it whole, nothing is cut at the right and the zoom buttons stay one group. Where
    the buttons fit on one line they stay there: beside a status cut with an ellipsis when at
    least 22em are left for it and the zoom group, else with the status and the zoom group on
    the line below. (At about 970 px the status wrapped to three lines and pushed the zoom
    buttons onto a second row.)"""
    page.click("gv-step")  # a status with a next node and the progress
    assert page.root.locator('[data-testid="gv-step-back"]').is_visible()
    seen_at = {}
    for viewport in (1400, 1060, 1000, 900, 600):
        page.page.set_viewport_size({"width": viewport, "height": 900})
        page.page.wait_for_timeout(200)
        seen = page.root.evaluate(READ_TOOLBAR_JS)
        seen_at[viewport] = seen
        page.root.locator(".gv-toolbar").screenshot(path=str(ARTIFACTS / f"standalone-toolbar-{viewport}.png"))
        assert seen["cut"] == [], seen
        assert len(set(seen["zoomTops"])) == 1, f"the zoom buttons are split over lines: {seen}"
        assert seen["statusLines"] < 1.5, f"the status wraps: {seen}"
        assert seen["title"] == seen["text"] and "nodes run" in seen["text"], seen
        assert seen["ellipsis"] == "ellipsis" and seen["statusWidth"] >= 120, seen
        if viewport >= 900:  # the seven command buttons fit on one line: they stay there
            assert len({top for _, top in seen["commands"]}) == 1, f"the buttons wrap: {seen}"
            row = seen["commands"][0][1]
            beside = seen["statusTop"] < row + 20
            assert beside == (seen["zoomTops"][0] == row), seen  # status and zoom go together
            assert beside or not seen["statusCut"], f"a line of its own and still cut: {seen}"
    # the two layouts were both seen: one row with the status cut, and the end on its own line
    assert seen_at[1060]["statusCut"] and seen_at[1060]["zoomTops"][0] == seen_at[1060]["commands"][0][1]
    assert seen_at[1000]["zoomTops"][0] > seen_at[1000]["commands"][0][1] and not seen_at[1000]["statusCut"]
