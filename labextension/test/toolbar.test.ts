import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { NODE_STATES, parseGraph, parseStates, type SessionStatus } from "../src/model.js";
import { STYLES } from "../src/styles.js";
import { COMMAND_KEYS } from "../src/keys.js";
import { commandTitle, LEGEND, NEXT_TITLE, toolbarState, withKey } from "../src/toolbar.js";
import { TINY_GRAPH } from "./fixtures.js";

describe("the colour key under the graph", () => {
  it("explains every node state, in the order a node goes through them", () => {
    assert.deepEqual(
      LEGEND.map((entry) => entry.state),
      [...NODE_STATES],
    );
  });

  it("has a swatch style and a tooltip for each entry", () => {
    for (const { state, title } of LEGEND) {
      if (state !== "pending") assert.ok(STYLES.includes(`.gv-swatch-${state} `), `no style for the ${state} swatch`);
      assert.ok(title.length > 10, `no tooltip for ${state}`);
    }
  });

  it("explains the blue halo apart from the blue running state", () => {
    assert.ok(STYLES.includes(".gv-swatch-next "), "no style for the runs-next swatch");
    assert.match(NEXT_TITLE, /next Step/);
    assert.doesNotMatch(LEGEND.find((entry) => entry.state === "running")?.title ?? "", /halo/);
  });
});

describe("commandTitle: what a button will do, or why it is off", () => {
  const graph = parseGraph(TINY_GRAPH);
  const states = parseStates({ "4": "released", "3": "ready" }, graph);
  const view = (status: SessionStatus = "paused") => ({ graph, states, current: 3, status });

  it("names the node Step and Step event act on", () => {
    assert.equal(commandTitle("step", view(), null), "Run the backward of AddBackward0 #3, the node with the blue halo");
    assert.match(commandTitle("step_event", view(), null) ?? "", /of AddBackward0 #3/);
  });

  it("tells how to use Run to selected, and why a selection does not do", () => {
    assert.match(commandTitle("run_to", view(), null) ?? "", /^Select a node that has not run \(click it, or Tab to the graph and press Enter\)/);
    assert.equal(commandTitle("run_to", view(), 1), "Continue until AccumulateGrad #1 is the next to run");
    assert.match(commandTitle("run_to", view(), 3) ?? "", /already the next to run: press Step/);
    assert.match(commandTitle("run_to", view(), 4) ?? "", /has already run/);
  });

  it("says what Step does while the next node's gradient is still on the way", () => {
    const inFlight = { graph, states: parseStates({ "4": "done" }, graph), current: 3, status: "paused" as const };
    // the session's step() then ends the step Step event began: it delivers, and does not run AddBackward0
    assert.match(commandTitle("step", inFlight, null) ?? "", /^Deliver the gradients still on the way .*AddBackward0 #3 then turns ready, and the next Step runs it$/);
    assert.match(commandTitle("step_event", inFlight, null) ?? "", /delivery of a gradient/);
    assert.match(NEXT_TITLE, /dashed halo on a grey \(pending\) node/i);
    assert.ok(STYLES.includes(".gv-node.gv-current.gv-waiting rect.gv-halo { stroke-dasharray"));
  });

  it("names each command's key in its tooltip", () => {
    assert.deepEqual(COMMAND_KEYS, { step: "s", step_event: "e", run_to: "r", continue: "c" });
    assert.equal(withKey("step", "Run it"), "Run it (key: s, with the graph focused)");
    assert.equal(withKey("run_to", "x"), "x (key: r, with the graph focused)");
    assert.equal(withKey("abort", "Stop"), "Stop", "no key: no note");
  });

  it("says why the commands are off once the pass is over", () => {
    assert.match(commandTitle("step", view("finished"), null) ?? "", /\(not now: the backward pass is finished\)$/);
    assert.match(commandTitle("continue", view("aborted"), null) ?? "", /not now: the backward pass is aborted/);
    assert.match(commandTitle("abort", view("error"), null) ?? "", /stopped by an error/);
    assert.equal(commandTitle("check_gradients", view("finished"), null), null, "its own title: it still works");
  });
});

describe("toolbarState: the buttons and line the view shows", () => {
  const graph = parseGraph(TINY_GRAPH);
  const view = { graph, states: parseStates({ "4": "released", "3": "ready" }, graph), current: 3, status: "paused" as const };
  const free = { disconnected: null, notice: null, checking: false };

  it("follows the session's state, with a notice after the line", () => {
    const shows = toolbarState(view, null, free);
    assert.ok(shows.enabled("step") && shows.enabled("check_gradients"));
    assert.equal(shows.title("step"), commandTitle("step", view, null));
    const noticed = toolbarState(view, null, { ...free, notice: "the session is aborted" });
    assert.equal(noticed.line, `${shows.line} · the session is aborted`);
  });

  it("turns Check gradients off while a check runs, and everything off once the kernel is gone", () => {
    const checking = toolbarState(view, null, { ...free, checking: true });
    assert.ok(checking.enabled("step") && !checking.enabled("check_gradients"));
    const gone = toolbarState(view, null, { ...free, disconnected: "restarted", notice: "ignored" });
    assert.ok(!gone.enabled("step") && !gone.enabled("continue"));
    assert.match(gone.line, /^Disconnected · /);
    assert.doesNotMatch(gone.line, /ignored/);
    assert.equal(gone.title("step"), null);
  });
});
