// The layout script end to end with the real Graphviz: run outside a worker, it installs its
// in-page entry point (the fallback path of src/layout.ts), which we call directly.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { SHARED_KEY } from "../src/build_info.js";
import { planToDot } from "../src/dot.js";
import { parseGraph } from "../src/model.js";
import { planLayout } from "../src/plan.js";
import { IN_PAGE_SUFFIX, type InPageLayout } from "../src/worker_protocol.js";
import "../src/layout_worker.js";
import { TINY_GRAPH } from "./fixtures.js";

const entry = (globalThis as Record<string, unknown>)[SHARED_KEY + IN_PAGE_SUFFIX] as InPageLayout;

describe("layout script", () => {
  it("installs its in-page entry point outside a worker", () => {
    assert.equal(typeof entry?.layout, "function");
  });

  it("places every box and routes every edge, loss on top", async () => {
    const plan = planLayout(parseGraph(TINY_GRAPH));
    const layout = await entry.layout(planToDot(plan));
    assert.deepEqual(new Set(layout.boxes.map((box) => box.key)), new Set(plan.boxes.map((box) => box.key)));
    assert.deepEqual(new Set(layout.edges.map((edge) => edge.key)), new Set(plan.edges.map((edge) => edge.key)));
    const y = new Map(layout.boxes.map((box) => [box.key, box.y]));
    for (const edge of plan.edges) assert.ok(y.get(edge.tail)! < y.get(edge.head)!, `${edge.tail} above ${edge.head}`);
    for (const box of layout.boxes) {
      const spec = plan.boxes.find((candidate) => candidate.key === box.key)!;
      assert.ok(Math.abs(box.width - spec.width) < 0.5, "dot keeps our box sizes");
      assert.ok(box.x - box.width / 2 >= -0.5 && box.x + box.width / 2 <= layout.width + 0.5);
    }
    for (const edge of layout.edges) assert.match(edge.path, /^M[0-9.]+,[0-9.]+ C/);
  });

  it("keeps a parameter used 300 times fast by drawing it once per use", async () => {
    const uses = 300;
    const nodes = [
      { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "weight" },
      ...Array.from({ length: uses }, (_, index) => ({ id: index + 1, name: "MulBackward0", kind: "builtin", label: "" })),
    ];
    const edges = [
      ...Array.from({ length: uses - 1 }, (_, index) => ({ source: index + 1, target: index + 2, input_nr: 0 })),
      ...Array.from({ length: uses }, (_, index) => ({ source: index + 1, target: 0, input_nr: 1 })),
    ];
    const started = Date.now();
    const layout = await entry.layout(planToDot(planLayout(parseGraph({ nodes, edges, roots: [1] }))));
    assert.equal(layout.boxes.length, 2 * uses);
    assert.ok(Date.now() - started < 30_000, "a hub node would take minutes");
  });

  it("reports a Graphviz failure as an error, not a crash", async () => {
    await assert.rejects(entry.layout("digraph { a -> }"), /syntax error/);
    // ... and works again afterwards.
    const layout = await entry.layout(planToDot(planLayout(parseGraph(TINY_GRAPH))));
    assert.equal(layout.boxes.length, TINY_GRAPH.nodes.length);
  });
});
