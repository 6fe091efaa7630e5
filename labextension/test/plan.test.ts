import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { planToDot, edgePosToPath, parseJson0 } from "../src/dot.js";
import { parseGraph } from "../src/model.js";
import { MAX_LINE_CHARS, nodeLines, planLayout } from "../src/plan.js";
import { TINY_GRAPH } from "./fixtures.js";

const graph = parseGraph(TINY_GRAPH);

describe("planLayout", () => {
  it("makes one box per node and one edge per graph edge", () => {
    const plan = planLayout(graph);
    assert.deepEqual(plan.boxes.map((box) => box.key), ["n4", "n3", "n2", "n1", "n0"]);
    assert.deepEqual(plan.edges.map((edge) => [edge.tail, edge.head]), [["n4", "n3"], ["n3", "n2"], ["n3", "n0"], ["n2", "n1"]]);
  });

  it("shows the label under the name unless it repeats it", () => {
    assert.deepEqual(nodeLines(graph.byId.get(2)!), ["MulBackward0", "x * w"]);
    assert.deepEqual(nodeLines(graph.byId.get(4)!), ["SumBackward0"]);
    const leaf = { id: 7, name: "AccumulateGrad", kind: "accumulate_grad", label: "[3] float32", leaf_name: "w" } as const;
    assert.deepEqual(nodeLines(leaf), ["w · AccumulateGrad", "[3] float32"], "the leaf's name tells w from b");
    assert.deepEqual(nodeLines(graph.byId.get(3)!), ["AddBackward0"]);
    assert.deepEqual(nodeLines({ id: 5, name: "SumBackward0", kind: "builtin", label: "SumBackward0\n[]" }), ["SumBackward0", "[]"]);
    const long = nodeLines({ id: 9, name: "N".repeat(100), kind: "custom", label: "a\nb\nc" });
    assert.equal(long[0]?.length, MAX_LINE_CHARS);
    assert.deepEqual(long.slice(1), ["a", "b …"]);
  });

  it("draws a high-fan-in node once per use", () => {
    const uses = 12;
    const nodes = [
      { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "weight" },
      ...Array.from({ length: uses }, (_, index) => ({ id: index + 1, name: "MulBackward0", kind: "builtin", label: "" })),
    ];
    const edges = Array.from({ length: uses }, (_, index) => ({ source: index + 1, target: 0, input_nr: 1 }));
    const plan = planLayout(parseGraph({ nodes, edges, roots: [1] }), undefined, 8);
    const copies = plan.boxes.filter((box) => box.nodeId === 0);
    assert.equal(copies.length, uses);
    assert.deepEqual(copies.map((box) => box.copy), Array.from({ length: uses }, (_, index) => index));
    assert.equal(new Set(plan.edges.map((edge) => edge.head)).size, uses);
    // Below the limit nothing is copied.
    assert.equal(planLayout(parseGraph({ nodes, edges, roots: [1] }), undefined, uses).boxes.length, uses + 1);
  });

  it("never puts user text into the DOT source", () => {
    const evil = parseGraph({
      nodes: [{ id: 1, name: 'Evil"]; x -> y; //', kind: "custom", label: "<b>\\N</b>" }],
      edges: [],
      roots: [1],
    });
    const dot = planToDot(planLayout(evil));
    assert.equal(dot.includes("Evil"), false);
    assert.equal(dot.includes("<b>"), false);
    assert.match(dot, /"n1" \[width=[0-9.]+, height=[0-9.]+\];/);
  });
});

describe("Graphviz output", () => {
  const json0 = JSON.stringify({
    bb: "0,0,108,100.8",
    objects: [
      { _gvid: 0, name: "n1", pos: "54,82.8", width: "1.5", height: "0.5" },
      { _gvid: 1, name: "n2", pos: "54,14.4", width: "1", height: "0.4" },
    ],
    edges: [{ _gvid: 0, tail: 0, head: 1, id: "e0", pos: "e,48.435,28.957 47.977,64.354 47.244,57.006 47.065,48.316 47.44,40.313" }],
  });

  it("reads positions and flips y downwards", () => {
    const layout = parseJson0(json0);
    assert.equal(layout.width, 108);
    assert.equal(layout.height, 100.8);
    assert.deepEqual(layout.boxes[0], { key: "n1", x: 54, y: 100.8 - 82.8, width: 108, height: 36 });
    assert.equal(layout.edges[0]?.key, "e0");
    assert.equal(layout.edges[0]?.path, "M47.98,36.45 C47.24,43.79 47.06,52.48 47.44,60.49 L48.44,71.84");
  });

  it("handles a start point and longer splines", () => {
    const path = edgePosToPath("s,0,0 e,9,9 1,1 2,2 3,3 4,4 5,5 6,6 7,7", (x, y) => [x, y]);
    assert.equal(path, "M0.00,0.00 L1.00,1.00 C2.00,2.00 3.00,3.00 4.00,4.00 C5.00,5.00 6.00,6.00 7.00,7.00 L9.00,9.00");
  });

  it("rejects malformed answers", () => {
    assert.throws(() => parseJson0("not json"), /did not return JSON/);
    assert.throws(() => parseJson0("{}"), /no bounding box/);
    assert.throws(() => edgePosToPath("e,1,1 1,1 2,2", (x, y) => [x, y]), /3k\+1 points/);
  });
});
