// Folding tall drawings into columns (src/fold.ts), on layouts from the real Graphviz.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { SHARED_KEY } from "../src/build_info.js";
import { planToDot, type Layout } from "../src/dot.js";
import { fitTransform, MAX_HEIGHT, READABLE_SCALE } from "../src/draw.js";
import { chooseCuts, cutPoints, foldLayout, LANE, movePath } from "../src/fold.js";
import { parseGraph } from "../src/model.js";
import { planLayout, type LayoutPlan } from "../src/plan.js";
import { IN_PAGE_SUFFIX, type InPageLayout } from "../src/worker_protocol.js";
import "../src/layout_worker.js";
import { TINY_GRAPH } from "./fixtures.js";

const entry = (globalThis as Record<string, unknown>)[SHARED_KEY + IN_PAGE_SUFFIX] as InPageLayout;

/** loss = f60(...f1(x)), each f a MulBackward0 or SinBackward0, ending in x's AccumulateGrad. */
function chainGraph(length: number) {
  const nodes = [{ id: length + 1, name: "SumBackward0", kind: "builtin", label: "" }];
  const edges = [{ source: length + 1, target: length, input_nr: 0 }];
  for (let id = length; id >= 1; id--) {
    nodes.push({ id, name: id % 2 ? "MulBackward0" : "SinBackward0", kind: "builtin", label: "[3] float32" });
    edges.push({ source: id, target: id - 1, input_nr: 0 });
  }
  nodes.push({ id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "[3] float32" });
  return parseGraph({ nodes, edges, roots: [length + 1] });
}

/** An MLP's graph: per layer an AddmmBackward0 with its bias, a TBackward0 with its weight, a ReLU. */
function mlpGraph(layers: number) {
  const nodes: { id: number; name: string; kind: string; label: string }[] = [];
  const edges: { source: number; target: number; input_nr: number }[] = [];
  let next = 0;
  const node = (name: string, kind = "builtin", label = ""): number => {
    nodes.push({ id: next, name, kind, label });
    return next++;
  };
  let top = node("SumBackward0");
  for (let layer = 0; layer < layers; layer++) {
    const addmm = node("AddmmBackward0");
    edges.push({ source: top, target: addmm, input_nr: 0 });
    const bias = node("AccumulateGrad", "accumulate_grad", "[16] float32");
    const transpose = node("TBackward0");
    const weight = node("AccumulateGrad", "accumulate_grad", "[16, 16] float32");
    edges.push({ source: transpose, target: weight, input_nr: 0 });
    if (layer === layers - 1) {
      edges.push({ source: addmm, target: bias, input_nr: 0 }, { source: addmm, target: transpose, input_nr: 2 });
      break;
    }
    const relu = node("ReluBackward0");
    edges.push({ source: addmm, target: bias, input_nr: 0 }, { source: addmm, target: relu, input_nr: 1 }, { source: addmm, target: transpose, input_nr: 2 });
    top = relu;
  }
  return parseGraph({ nodes, edges, roots: [0] });
}

async function laidOut(graph: ReturnType<typeof parseGraph>): Promise<{ plan: LayoutPlan; layout: Layout }> {
  const plan = planLayout(graph);
  return { plan, layout: await entry.layout(planToDot(plan)) };
}

function points(path: string): [number, number][] {
  return [...path.matchAll(/(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)/g)].map((match) => [Number(match[1]), Number(match[2])]);
}

/** Every box keeps its size, no two boxes overlap, and everything lies inside the drawing. */
function checkDrawing(before: Layout, after: Layout): void {
  const sizes = new Map(before.boxes.map((box) => [box.key, [box.width, box.height]]));
  assert.equal(after.boxes.length, before.boxes.length);
  for (const box of after.boxes) {
    assert.deepEqual([box.width, box.height], sizes.get(box.key), box.key);
    assert.ok(box.x - box.width / 2 >= -0.01 && box.x + box.width / 2 <= after.width + 0.01, `${box.key} inside horizontally`);
    assert.ok(box.y - box.height / 2 >= -0.01 && box.y + box.height / 2 <= after.height + 0.01, `${box.key} inside vertically`);
  }
  for (const [index, a] of after.boxes.entries()) {
    for (const b of after.boxes.slice(index + 1)) {
      const apart = Math.abs(a.x - b.x) >= (a.width + b.width) / 2 || Math.abs(a.y - b.y) >= (a.height + b.height) / 2;
      assert.ok(apart, `${a.key} and ${b.key} overlap`);
    }
  }
  assert.deepEqual(after.edges.map((edge) => edge.key).sort(), before.edges.map((edge) => edge.key).sort());
  for (const edge of after.edges) {
    for (const [x, y] of points(edge.path)) {
      assert.ok(x >= -8 && x <= after.width + 8 && y >= -8 && y <= after.height + 8, `${edge.key} leaves the drawing at ${x},${y}`);
    }
  }
}

describe("cut points", () => {
  it("are the middles of the gaps between boxes, never inside a box", () => {
    const box = (key: string, y: number, height = 20) => ({ key, x: 0, y, width: 10, height });
    // Two boxes side by side on one rank (y 10), one tall box overlapping the next rank.
    assert.deepEqual(cutPoints([box("a", 10), box("b", 10), box("c", 50), box("d", 60, 30), box("e", 100)]), [30, 82.5]);
    assert.deepEqual(chooseCuts([30, 82.5], 110, 2), [30]);
    assert.deepEqual(chooseCuts([10, 20, 30, 40, 50, 60, 70, 80, 90], 100, 4), [20, 50, 70]);
  });

  it("moves a path's points and nothing else", () => {
    assert.equal(movePath("M1.00,2.00 C3,4 5.5,-6 7,8 L9,10", 10, -1), "M11.00,1.00 C13.00,3.00 15.50,-7.00 17.00,7.00 L19.00,9.00");
  });
});

describe("foldLayout", () => {
  it("folds a chain of 60 operations into columns that Fit shows readably", async () => {
    const { plan, layout } = await laidOut(chainGraph(60));
    const flat = fitTransform(layout.width, layout.height, 900, MAX_HEIGHT).k;
    assert.ok(flat < 0.2, `the unfolded chain is tiny when fitted (${flat})`);
    const folded = foldLayout(layout, plan.edges, 900, MAX_HEIGHT);
    assert.ok(folded.columns > 2, `columns: ${folded.columns}`);
    assert.ok(fitTransform(folded.width, folded.height, 900, MAX_HEIGHT).k >= READABLE_SCALE);
    checkDrawing(layout, folded);
  });

  it("folds an MLP graph with many leaves, and keeps edges inside a column as dot drew them", async () => {
    const { plan, layout } = await laidOut(mlpGraph(8));
    const folded = foldLayout(layout, plan.edges, 900, MAX_HEIGHT);
    assert.ok(folded.columns > 1, `columns: ${folded.columns}`);
    const [flat, fitted] = [fitTransform(layout.width, layout.height, 900, MAX_HEIGHT).k, fitTransform(folded.width, folded.height, 900, MAX_HEIGHT).k];
    assert.ok(flat < READABLE_SCALE && fitted >= READABLE_SCALE, `fitted at ${flat} unfolded, ${fitted} folded`);
    checkDrawing(layout, folded);
    const boxes = new Map(folded.boxes.map((box) => [box.key, box]));
    const original = new Map(layout.boxes.map((box) => [box.key, box]));
    const paths = new Map(layout.edges.map((edge) => [edge.key, edge.path]));
    let connectors = 0;
    for (const spec of plan.edges) {
      const path = folded.edges.find((edge) => edge.key === spec.key)!.path;
      const tail = boxes.get(spec.tail)!;
      const head = boxes.get(spec.head)!;
      const moved = [tail.x - original.get(spec.tail)!.x, tail.y - original.get(spec.tail)!.y];
      const near = (a: number, b: number | undefined): boolean => Math.abs(a - (b ?? NaN)) < 1e-6;
      const sameColumn = near(head.x - original.get(spec.head)!.x, moved[0]) && near(head.y - original.get(spec.head)!.y, moved[1]);
      if (sameColumn) {
        assert.equal(path, movePath(paths.get(spec.key)!, moved[0]!, moved[1]!), spec.key);
      } else {
        connectors++;
        const ends = points(path);
        assert.deepEqual(ends[0], [Number(tail.x.toFixed(2)), Number((tail.y + tail.height / 2).toFixed(2))], "starts under its tail");
        assert.deepEqual(ends.at(-1), [Number(head.x.toFixed(2)), Number((head.y - head.height / 2).toFixed(2))], "ends on top of its head");
        assert.ok(ends.some(([, y]) => y <= LANE), "runs along the top lane");
      }
    }
    assert.ok(connectors >= folded.columns - 1, "each fold is crossed by an edge");
  });

  it("leaves a drawing that already fits readably, or a view without a size, alone", async () => {
    const { plan, layout } = await laidOut(parseGraph(TINY_GRAPH));
    assert.deepEqual(foldLayout(layout, plan.edges, 900, MAX_HEIGHT), { ...layout, columns: 1 });
    const chain = await laidOut(chainGraph(60));
    assert.equal(foldLayout(chain.layout, chain.plan.edges, 0, MAX_HEIGHT).columns, 1);
  });
});
