import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { BoxDeliveries, BoxTally } from "../src/box_tally.js";
import { countStates, NODE_STATES, parseGraph, type NodeState } from "../src/model.js";
import { parseStatesDelta, StatesCopy } from "../src/states_sync.js";
import { FoldedView } from "../src/view_graph.js";

/** A chain of 40 nodes, the middle ones in four modules (two instances of two types). */
function graph() {
  const nodes: Record<string, unknown>[] = [];
  const edges: { source: number; target: number; input_nr: number }[] = [];
  for (let id = 0; id < 40; id++) {
    const block = Math.floor(id / 10);
    const module = id < 5 || id >= 35 ? {} : { module: ["blocks", String(block)], module_types: ["ModuleList", block % 2 ? "B" : "A"] };
    nodes.push({ id, name: id === 39 ? "AccumulateGrad" : "MulBackward0", kind: id === 39 ? "accumulate_grad" : "builtin", label: "", ...module });
    if (id > 0) edges.push({ source: id - 1, target: id, input_nr: 0 });
  }
  return parseGraph({ nodes, edges, roots: [0] });
}

/** A deterministic sequence of states deltas: each step finishes a node and readies the next. */
function deltas(count: number): unknown[] {
  const messages = [];
  let random = 7;
  for (let seq = 1; seq <= count; seq++) {
    const states: Record<string, string> = {};
    for (let k = 0; k < 3; k++) {
      random = (random * 1103515245 + 12345) % 2147483648;
      states[String(random % 40)] = NODE_STATES[random % NODE_STATES.length]!;
    }
    messages.push({ type: "states_delta", seq, states, delivered: [[seq % 40, (seq + 1) % 40]] });
  }
  return messages;
}

describe("BoxTally", () => {
  it("equals FoldedView's states, progress and counts after every delta, across a fold change", () => {
    const view = new FoldedView(graph(), 8);
    const copy = new StatesCopy();
    copy.sync((name) => ({ states: {}, delivered: [], states_base: 0 } as Record<string, unknown>)[name], view.graph);
    const tally = new BoxTally();
    const boxDeliveries = new BoxDeliveries();
    const findings = new Map<number, "error" | "warning">([[12, "warning"]]);
    deltas(60).forEach((message, index) => {
      assert.equal(copy.apply(parseStatesDelta(message)!, view.graph), "applied");
      if (index === 30) assert.ok(view.reveal(22)); // follow opens a module: new boxes, counted again
      tally.update(view, copy.states, copy.takeChanged());
      const current = index % 40;
      assert.deepEqual(tally.boxStates(view), view.states(copy.states), `states after delta ${index + 1}`);
      assert.deepEqual(tally.progress(view, current, findings), view.progress(copy.states, current, findings));
      assert.deepEqual(tally.counts(), countStates(copy.states));
      assert.ok(view.progress(copy.states, current, findings).size > 0, "some boxes are folded");
      assert.deepEqual(boxDeliveries.update(view, copy.deliveries), view.deliveries(copy.deliveries));
    });
  });

  it("counts again when the copy is taken whole", () => {
    const view = new FoldedView(graph(), 8);
    const tally = new BoxTally();
    const first = new Map<number, NodeState>(view.graph.nodes.map((node) => [node.id, "pending"]));
    tally.update(view, first, null);
    const second = new Map<number, NodeState>(view.graph.nodes.map((node) => [node.id, "done"]));
    tally.update(view, second, new Set()); // another map: everything is counted again
    assert.deepEqual(tally.boxStates(view), view.states(second));
    assert.equal(tally.counts().done, 40);
  });
});
