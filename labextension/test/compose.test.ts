// The lazy layout (src/compose.ts) with the real Graphviz: one run per open module's interior,
// composed; every edge drawn, no overlaps, boxes inside their frames, interiors reused from the cache.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { SHARED_KEY } from "../src/build_info.js";
import { composeLayout, type RunLayout } from "../src/compose.js";
import type { Layout, PlacedBox } from "../src/dot.js";
import { parseGraph } from "../src/model.js";
import { planLayout, type LayoutPlan } from "../src/plan.js";
import { FoldedView } from "../src/view_graph.js";
import { IN_PAGE_SUFFIX, type InPageLayout } from "../src/worker_protocol.js";
import "../src/layout_worker.js";

const entry = (globalThis as Record<string, unknown>)[SHARED_KEY + IN_PAGE_SUFFIX] as InPageLayout;

/**
 * loss ← head (Linear) ← `blocks` Block modules (blocks.k.attn and blocks.k.mlp inside, 4 nodes
 * each), every block reading one shared `scale` parameter (a fan-in of `blocks` uses, drawn once
 * per use inside the frame of the module it belongs to).
 */
function modelGraph(blocks: number) {
  const nodes: Record<string, unknown>[] = [{ id: 0, name: "SumBackward0", kind: "builtin", label: "" }];
  const edges: { source: number; target: number; input_nr: number }[] = [];
  const add = (source: number, name: string, module: string[], types: string[], kind = "builtin"): number => {
    const id = nodes.length;
    nodes.push({ id, name, kind, label: "", module, module_types: types });
    edges.push({ source, target: id, input_nr: 0 });
    return id;
  };
  let previous = add(0, "AddmmBackward0", ["head"], ["Linear"]);
  const scale = nodes.length;
  nodes.push({ id: scale, name: "AccumulateGrad", kind: "accumulate_grad", label: "", module: ["norm"], module_types: ["Scale"], leaf_name: "norm.scale" });
  for (let block = blocks - 1; block >= 0; block--) {
    for (const [part, type] of [["mlp", "Sequential"], ["attn", "MultiheadAttention"]] as const) {
      const path = ["blocks", String(block), part];
      const types = ["ModuleList", "Block", type];
      const add0 = add(previous, "AddBackward0", path, types);
      const mm = add(add0, "MmBackward0", path, types);
      add(mm, "AccumulateGrad", path, types, "accumulate_grad");
      const mul = add(add0, "MulBackward0", path, types);
      edges.push({ source: mul, target: scale, input_nr: 1 });
      previous = mm;
    }
  }
  return parseGraph({ nodes, edges, roots: [0] });
}

/** A Graphviz run with a cache of its own (as layout.ts's engine), counting what it laid out. */
function cachedRun(): { run: RunLayout; dots: string[] } {
  const cache = new Map<string, Layout>();
  const dots: string[] = [];
  const run: RunLayout = async (dot) => {
    const known = cache.get(dot);
    if (known !== undefined) return { layout: known, cached: true };
    dots.push(dot);
    const layout = await entry.layout(dot);
    cache.set(dot, layout);
    return { layout, cached: false };
  };
  return { run, dots };
}

const POINT = /(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)/g;

function ends(path: string): [[number, number], [number, number]] {
  const points = [...path.matchAll(POINT)].map((match) => [Number(match[1]), Number(match[2])] as [number, number]);
  return [points[0]!, points[points.length - 1]!];
}

function overlap(a: { x0: number; y0: number; x1: number; y1: number }, b: { x0: number; y0: number; x1: number; y1: number }): boolean {
  const slack = 0.5;
  return a.x0 < b.x1 - slack && b.x0 < a.x1 - slack && a.y0 < b.y1 - slack && b.y0 < a.y1 - slack;
}

const rect = (box: PlacedBox) => ({ x0: box.x - box.width / 2, y0: box.y - box.height / 2, x1: box.x + box.width / 2, y1: box.y + box.height / 2 });

/** Every check of a composed layout against its plan. */
function checkComposed(plan: LayoutPlan, layout: Layout): void {
  const placed = new Map(layout.boxes.map((box) => [box.key, box]));
  assert.deepEqual(new Set(placed.keys()), new Set(plan.boxes.map((box) => box.key)), "every box placed, frames are not boxes");
  // Every edge drawn, from its tail box to its head box.
  assert.deepEqual(new Set(layout.edges.map((edge) => edge.key)), new Set(plan.edges.map((edge) => edge.key)), "no edge lost");
  const paths = new Map(layout.edges.map((edge) => [edge.key, edge.path]));
  for (const edge of plan.edges) {
    const [start, end] = ends(paths.get(edge.key)!);
    const tail = rect(placed.get(edge.tail)!);
    const head = rect(placed.get(edge.head)!);
    const near = (point: [number, number], box: typeof tail): boolean =>
      point[0] >= box.x0 - 2 && point[0] <= box.x1 + 2 && point[1] >= box.y0 - 2 && point[1] <= box.y1 + 2;
    assert.ok(near(start, tail), `${edge.key} starts at its tail ${edge.tail}`);
    assert.ok(near(end, head), `${edge.key} ends at its head ${edge.head}`);
  }
  // No two boxes overlap; no two frames overlap unless one holds the other.
  const boxes = layout.boxes.map(rect);
  for (let a = 0; a < boxes.length; a++) for (let b = a + 1; b < boxes.length; b++) assert.ok(!overlap(boxes[a]!, boxes[b]!), `${layout.boxes[a]!.key} and ${layout.boxes[b]!.key} overlap`);
  const frames = new Map((layout.clusters ?? []).map((cluster) => [cluster.key, { x0: cluster.x, y0: cluster.y, x1: cluster.x + cluster.width, y1: cluster.y + cluster.height }]));
  const inside = (a: { x0: number; y0: number; x1: number; y1: number }, b: typeof a): boolean => a.x0 >= b.x0 - 0.5 && a.x1 <= b.x1 + 0.5 && a.y0 >= b.y0 - 0.5 && a.y1 <= b.y1 + 0.5;
  const keys = [...frames.keys()];
  for (let a = 0; a < keys.length; a++) {
    for (let b = a + 1; b < keys.length; b++) {
      const [one, two] = [frames.get(keys[a]!)!, frames.get(keys[b]!)!];
      assert.ok(!overlap(one, two) || inside(one, two) || inside(two, one), `frames ${keys[a]} and ${keys[b]} overlap`);
    }
  }
  // Each box (a fan-in copy too) is inside the frames of its module and outside the others.
  const holders = new Map<string, string[]>();
  const walk = (specs: LayoutPlan["clusters"], chain: string[]): void => {
    for (const spec of specs ?? []) {
      for (const key of spec.boxes) holders.set(key, [...chain, spec.key]);
      walk(spec.children, [...chain, spec.key]);
    }
  };
  walk(plan.clusters, []);
  for (const spec of plan.boxes) {
    const chain = holders.get(`n${spec.nodeId}`) ?? [];
    const box = rect(placed.get(spec.key)!);
    for (const [key, frame] of frames) {
      if (chain.includes(key)) assert.ok(inside(box, frame), `${spec.key} inside its frame ${key}`);
      else assert.ok(!overlap(box, frame), `${spec.key} outside frame ${key}`);
    }
  }
}

describe("composeLayout", () => {
  it("lays out each open module on its own and composes a drawing with every edge, no overlaps", async () => {
    const view = new FoldedView(modelGraph(6), 12);
    assert.ok(view.framed);
    for (const node of view.graph.nodes) if (node.module?.[1] !== "5") view.reveal(node.id);
    const plan = { ...planLayout(view.scene), clusters: view.clusters() };
    assert.ok(plan.boxes.some((box) => box.copy > 0), "the shared parameter is drawn once per use");
    assert.ok((plan.clusters ?? []).length > 0);
    const { run, dots } = cachedRun();
    const composed = await composeLayout(plan, run);
    checkComposed(plan, composed.layout);
    assert.equal(composed.runs, dots.length);
    assert.ok(dots.every((dot) => !dot.includes("subgraph")), "no interior is laid out with clusters");
  });

  it("expanding a module lays out only it and its ancestors; other interiors come from the cache", async () => {
    const view = new FoldedView(modelGraph(6), 12);
    const { run, dots } = cachedRun();
    const open = (block: string, part: string): void => {
      const node = view.graph.nodes.find((candidate) => candidate.module?.[1] === block && candidate.module?.[2] === part)!;
      view.reveal(node.id);
    };
    open("2", "attn");
    const first = await composeLayout({ ...planLayout(view.scene), clusters: view.clusters() }, run);
    assert.ok(first.runs > 0);
    const before = dots.length;
    open("4", "mlp");
    const plan = { ...planLayout(view.scene), clusters: view.clusters() };
    const second = await composeLayout(plan, run);
    checkComposed(plan, second.layout);
    // New: blocks.4's interior (it was folded), and the ancestors blocks and the root. blocks.4.mlp's
    // interior has the same content as blocks.2.attn's (same boxes, sizes and edges, under local
    // names): the cache answers it, as it does for every repeated block of a model.
    assert.equal(second.runs, dots.length - before);
    assert.equal(second.runs, 3);
    assert.ok(second.cached >= 2, "blocks.2 and blocks.2.attn come from the cache");
    // The same view again: all from the cache.
    const third = await composeLayout(plan, run);
    assert.equal(third.runs, 0);
    assert.deepEqual(third.layout, second.layout);
    // Opening an earlier block renumbers the folded boxes after it (their ids are in view
    // order): the open interiors still come from the cache (they are laid out under local names).
    open("0", "mlp");
    const earlier = { ...planLayout(view.scene), clusters: view.clusters() };
    const fourth = await composeLayout(earlier, run);
    checkComposed(earlier, fourth.layout);
    assert.ok(fourth.runs <= 4, `${fourth.runs} runs`);
    assert.ok(fourth.cached >= 4, "blocks.2, blocks.2.attn, blocks.4 and blocks.4.mlp come from the cache");
  });

  it("composes deeply nested frames without recursion", async () => {
    const depth = 60;
    const names = Array.from({ length: depth }, (_, index) => `m${index}`);
    const nodes = [{ id: 0, name: "SumBackward0", kind: "builtin", label: "" }];
    const edges: { source: number; target: number; input_nr: number }[] = [];
    for (let level = 1; level <= depth; level++) {
      nodes.push({ id: level, name: "MulBackward0", kind: "builtin", label: "", module: names.slice(0, level), module_types: names.slice(0, level).map(() => "Wrap") } as never);
      edges.push({ source: level - 1, target: level, input_nr: 0 });
    }
    const view = new FoldedView(parseGraph({ nodes, edges, roots: [0] }), 1);
    view.reveal(depth);
    const plan = { ...planLayout(view.scene), clusters: view.clusters() };
    const composed = await composeLayout(plan, cachedRun().run);
    checkComposed(plan, composed.layout);
    assert.equal(composed.layout.clusters?.length, depth);
  });
});
