import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { KEYS_HELP, KEYS_LEGEND, keyAction, neighbour, startNode, type Point } from "../src/keys.js";
import { parseGraph } from "../src/model.js";
import { STYLES } from "../src/styles.js";
import { TINY_GRAPH } from "./fixtures.js";

// TINY_GRAPH: Sum(4) -> Add(3) -> {Mul(2) -> w(1), b(0)}, drawn from the loss down:
//        4
//        3
//     2     0
//     1
const graph = parseGraph(TINY_GRAPH);
const positions = new Map<number, Point>([
  [4, { x: 100, y: 20 }],
  [3, { x: 100, y: 80 }],
  [2, { x: 60, y: 140 }],
  [0, { x: 160, y: 140 }],
  [1, { x: 60, y: 200 }],
]);

describe("keyAction", () => {
  it("maps the arrows, Enter, Space and Escape", () => {
    assert.deepEqual(keyAction("ArrowDown"), { kind: "move", direction: "down" });
    assert.deepEqual(keyAction("ArrowUp"), { kind: "move", direction: "up" });
    assert.deepEqual(keyAction("ArrowLeft"), { kind: "move", direction: "left" });
    assert.deepEqual(keyAction("ArrowRight"), { kind: "move", direction: "right" });
    assert.deepEqual(keyAction("Enter"), { kind: "select" });
    assert.deepEqual(keyAction(" "), { kind: "select" });
    assert.deepEqual(keyAction("Escape"), { kind: "close" });
    assert.deepEqual(keyAction("s"), { kind: "command", name: "step" });
    assert.deepEqual(keyAction("e"), { kind: "command", name: "step_event" });
    assert.deepEqual(keyAction("r"), { kind: "command", name: "run_to" });
    assert.deepEqual(keyAction("c"), { kind: "command", name: "continue" });
  });

  it("leaves other keys and shortcuts with modifiers to the browser and the notebook", () => {
    assert.equal(keyAction("Tab"), null);
    assert.equal(keyAction("S"), null, "Shift+S is not s");
    assert.equal(keyAction("s", { ctrl: true }), null, "Ctrl+S saves the notebook");
    assert.equal(keyAction("c", { meta: true }), null, "⌘C copies");
    assert.equal(keyAction("a"), null);
    assert.equal(keyAction("ArrowDown", { ctrl: true }), null);
    assert.equal(keyAction("Enter", { meta: true }), null);
    assert.equal(keyAction("ArrowLeft", { alt: true }), null);
  });
});

describe("startNode", () => {
  it("starts at the selected node, else the current one, else the first root", () => {
    assert.equal(startNode(graph, 2, 3), 2);
    assert.equal(startNode(graph, null, 3), 3);
    assert.equal(startNode(graph, null, null), 4);
    assert.equal(startNode(graph, 99, null), 4, "an id the graph lacks is skipped");
    assert.equal(startNode(parseGraph({}), null, null), null);
  });
});

describe("neighbour", () => {
  it("goes down along edges to the next functions, and back up", () => {
    assert.equal(neighbour(graph, positions, 4, "down"), 3);
    assert.equal(neighbour(graph, positions, 2, "down"), 1);
    assert.equal(neighbour(graph, positions, 1, "up"), 2);
    assert.equal(neighbour(graph, positions, 0, "up"), 3);
    assert.equal(neighbour(graph, positions, 4, "up"), null, "the loss has no consumer");
    assert.equal(neighbour(graph, positions, 1, "down"), null, "a leaf has no next function");
  });

  it("takes the next function drawn closest horizontally", () => {
    assert.equal(neighbour(graph, positions, 3, "down"), 2);
    const moved = new Map(positions).set(0, { x: 100, y: 140 });
    assert.equal(neighbour(graph, moved, 3, "down"), 0);
  });

  it("moves left and right among the nodes of the same row only", () => {
    assert.equal(neighbour(graph, positions, 2, "right"), 0);
    assert.equal(neighbour(graph, positions, 0, "left"), 2);
    assert.equal(neighbour(graph, positions, 0, "right"), null);
    assert.equal(neighbour(graph, positions, 3, "left"), null, "nothing else on its row");
  });

  it("still follows edges for a node without a position, in edge order", () => {
    assert.equal(neighbour(graph, new Map(), 3, "down"), 2);
    assert.equal(neighbour(graph, new Map(), 3, "left"), null);
  });

  it("visits each node of x * x once, and never itself", () => {
    const square = parseGraph({
      nodes: [
        { id: 1, name: "MulBackward0", kind: "builtin", label: "" },
        { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "" },
      ],
      edges: [
        { source: 1, target: 0, input_nr: 0 },
        { source: 1, target: 0, input_nr: 0 },
      ],
      roots: [1],
    });
    assert.equal(neighbour(square, new Map(), 1, "down"), 0);
    assert.equal(neighbour(square, new Map(), 0, "up"), 1);
  });
});

describe("keyboard help and focus ring", () => {
  it("names every key, and styles a visible focus ring", () => {
    for (const key of ["Tab", "↑", "↓", "←", "→", "Enter", "Esc", "s step", "e step event", "r run to selected", "c continue"]) {
      assert.ok(KEYS_HELP.toLowerCase().includes(key.toLowerCase()), `help lacks ${key}`);
      assert.ok(KEYS_LEGEND.includes(key), `legend lacks ${key}`);
    }
    assert.ok(STYLES.includes(".gv-canvas:focus-visible {"), "no focus ring on the canvas");
    assert.ok(STYLES.includes(".gv-canvas:focus-visible .gv-node.gv-focused rect.gv-ring"), "no cursor ring on the node");
  });
});
