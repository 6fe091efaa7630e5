import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { NODE_STATES, parseGraph, parseStates, type SessionStatus } from "../src/model.js";
import { STYLES } from "../src/styles.js";
import { commandTitle, LEGEND, NEXT_TITLE } from "../src/toolbar.js";
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

  it("says why the commands are off once the pass is over", () => {
    assert.match(commandTitle("step", view("finished"), null) ?? "", /\(not now: the backward pass is finished\)$/);
    assert.match(commandTitle("continue", view("aborted"), null) ?? "", /not now: the backward pass is aborted/);
    assert.match(commandTitle("abort", view("error"), null) ?? "", /stopped by an error/);
    assert.equal(commandTitle("check_gradients", view("finished"), null), null, "its own title: it still works");
  });
});
