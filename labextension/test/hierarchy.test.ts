import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  boxText,
  buildTree,
  defaultFold,
  expandBox,
  foldModule,
  NOTHING_OPEN,
  openAncestors,
  revealNode,
  SEGMENT_LIMIT,
  visibleGraph,
  type FoldState,
} from "../src/hierarchy.js";
import { parseGraph, type Graph } from "../src/model.js";

interface RawNode {
  id: number;
  name: string;
  kind: string;
  label: string;
  module?: string[];
  module_types?: string[];
  module_call?: number;
  leaf_name?: string;
}

/**
 * A chain through `blocks` Blocks (blocks.i.attn, blocks.i.mlp.0 with a weight), then a head;
 * the loss (id 0) first, as Python lists nodes.
 */
function modelGraph(blocks: number): Graph {
  const nodes: RawNode[] = [{ id: 0, name: "SumBackward0", kind: "builtin", label: "" }];
  const edges: { source: number; target: number; input_nr: number }[] = [];
  let id = 1;
  let previous = 0;
  const chain = (name: string, module: string[], types: string[]): number => {
    const node: RawNode = { id, name, kind: "builtin", label: "", module, module_types: types };
    nodes.push(node);
    edges.push({ source: previous, target: id, input_nr: 0 });
    previous = id;
    return id++;
  };
  chain("AddmmBackward0", ["head"], ["Linear"]);
  for (let block = blocks - 1; block >= 0; block--) {
    const path = ["blocks", String(block)];
    const types = ["ModuleList", "Block"];
    chain("AddBackward0", path, types);
    const mm = chain("AddmmBackward0", [...path, "mlp", "0"], [...types, "Sequential", "Linear"]);
    nodes.push({ id, name: "AccumulateGrad", kind: "accumulate_grad", label: "", module: [...path, "mlp", "0"], module_types: [...types, "Sequential", "Linear"], leaf_name: `blocks.${block}.mlp.0.weight` });
    edges.push({ source: mm, target: id, input_nr: 1 });
    id++;
    chain("ViewBackward0", [...path, "attn"], [...types, "Attention"]);
    chain("BmmBackward0", [...path, "attn"], [...types, "Attention"]);
  }
  return parseGraph({ nodes, edges, roots: [0] });
}

/** An RNN cell applied `steps` times: one module path, module_call 0..steps-1. */
function rnnGraph(steps: number): Graph {
  const nodes: RawNode[] = [{ id: 0, name: "SumBackward0", kind: "builtin", label: "" }];
  const edges: { source: number; target: number; input_nr: number }[] = [];
  for (let step = 0; step < steps; step++) {
    for (const name of ["AddmmBackward0", "TanhBackward0"]) {
      const id = nodes.length;
      nodes.push({ id, name, kind: "builtin", label: "", module: ["cell"], module_types: ["RNNCell"], module_call: step });
      edges.push({ source: id - 1, target: id, input_nr: 0 });
    }
  }
  return parseGraph({ nodes, edges, roots: [0] });
}

function chainGraph(count: number): Graph {
  const nodes = Array.from({ length: count }, (_, id) => ({ id, name: "MulBackward0", kind: "builtin", label: "" }));
  const edges = Array.from({ length: count - 1 }, (_, id) => ({ source: id, target: id + 1, input_nr: 0 }));
  return parseGraph({ nodes, edges, roots: [0] });
}

const keys = (graph: Graph, fold: FoldState): string[] => visibleGraph(graph, buildTree(graph), fold).boxes.map((box) => box.key).sort();

describe("buildTree", () => {
  it("groups nodes by module path with types, like gradviz.debug.rollup", () => {
    const graph = modelGraph(3);
    const tree = buildTree(graph);
    assert.deepEqual(tree.modules.map((m) => m.path).sort(), ["", "blocks", "blocks.0", "blocks.0.attn", "blocks.0.mlp", "blocks.0.mlp.0", "blocks.1", "blocks.1.attn", "blocks.1.mlp", "blocks.1.mlp.0", "blocks.2", "blocks.2.attn", "blocks.2.mlp", "blocks.2.mlp.0", "head"].sort());
    const block = tree.byPath.get("blocks.1")!;
    assert.equal(block.type, "Block");
    assert.equal(block.nodes.length, 5);
    assert.equal(block.own.length, 1);
    assert.equal(tree.byPath.get("")!.nodes.length, graph.nodes.length);
    assert.deepEqual(tree.groups.map((g) => [tree.modules[g.parent]!.path, g.type, g.label, g.members.map((m) => tree.modules[m]!.path)]), [
      ["blocks", "Block", "+2 more Block", ["blocks.0", "blocks.1", "blocks.2"]],
    ]);
  });

  it("counts the applications of an unrolled cell", () => {
    const tree = buildTree(rnnGraph(12));
    assert.equal(tree.byPath.get("cell")!.calls, 12);
    assert.equal(tree.byPath.get("")!.calls, 12, "the root takes its busiest child's count");
  });
});

describe("visibleGraph", () => {
  it("draws a folded module as one box, and its edges aggregated", () => {
    const graph = modelGraph(2);
    const tree = buildTree(graph);
    const view = visibleGraph(graph, tree, NOTHING_OPEN);
    assert.deepEqual(view.boxes.map((box) => box.kind).sort(), ["module", "module", "node"]);
    const blocks = view.boxes.find((box) => box.module?.path === "blocks")!;
    assert.equal(blocks.members.length, 10);
    assert.deepEqual(view.edges.map((edge) => [edge.tail.key, edge.head.key, edge.count]).sort(), [
      [`m${tree.byPath.get("head")!.index}`, blocks.key, 1],
      ["n0", `m${tree.byPath.get("head")!.index}`, 1],
    ].sort());
    assert.equal(view.boxOf.get(5), blocks, "a node inside is drawn in its folded module's box");
  });

  it("rolls distinct instances up into one group box until the group is expanded", () => {
    const graph = modelGraph(12);
    const tree = buildTree(graph);
    const blocks = tree.byPath.get("blocks")!;
    const open: FoldState = { ...NOTHING_OPEN, open: new Set([0, blocks.index]) };
    const view = visibleGraph(graph, tree, open);
    const group = view.boxes.filter((box) => box.kind === "group");
    assert.equal(group.length, 1);
    assert.equal(group[0]!.members.length, 60);
    assert.deepEqual(boxText(group[0]!), { title: "Block blocks.0", facts: "+11 more Block · 60 nodes" });
    const expanded = visibleGraph(graph, tree, expandBox(open, group[0]!));
    assert.equal(expanded.boxes.filter((box) => box.kind === "module" && box.module?.type === "Block").length, 12);
  });

  it("labels an unrolled cell (xN)", () => {
    const graph = rnnGraph(150);
    const view = visibleGraph(graph, buildTree(graph), NOTHING_OPEN);
    const cell = view.boxes.find((box) => box.kind === "module")!;
    assert.deepEqual(boxText(cell), { title: "RNNCell cell", facts: "(x150) · 300 nodes" });
  });

  it("hides AccumulateGrad and view nodes, passing their edges through", () => {
    const graph = modelGraph(1);
    const tree = buildTree(graph);
    const all = defaultFold(graph, tree);
    assert.equal(visibleGraph(graph, tree, all).boxOf.get(4)?.kind, "node", "fits: all open");
    const view = visibleGraph(graph, tree, { ...all, hideAccumulateGrad: true, hideViews: true });
    assert.equal(view.boxOf.get(4), undefined, "the AccumulateGrad is hidden");
    assert.equal(view.boxOf.get(5), undefined, "the ViewBackward0 is hidden");
    const pairs = view.edges.map((edge) => [edge.tail.id, edge.head.id]);
    assert.deepEqual(pairs, [[0, 1], [1, 2], [2, 3], [3, 6]], "3 → View → Bmm becomes 3 → 6, the weight dropped");
  });

  it("cuts a flat graph into segments that open one at a time", () => {
    const graph = chainGraph(10_000);
    const tree = buildTree(graph);
    const fold = defaultFold(graph, tree);
    const view = visibleGraph(graph, tree, fold);
    assert.ok(view.boxes.length <= 100, `${view.boxes.length} boxes`);
    assert.ok(view.boxes.every((box) => box.kind === "segment"));
    assert.deepEqual(boxText(view.boxes[0]!), { title: "nodes 1–200 of 10000", facts: "200 nodes" });
    assert.deepEqual(view.edges.slice(0, 2).map((edge) => [edge.tail.key, edge.head.key]), [["s0_0", "s0_1"], ["s0_1", "s0_2"]]);
    const opened = visibleGraph(graph, tree, expandBox(fold, view.boxes[1]!));
    assert.equal(opened.boxes.length, view.boxes.length - 1 + SEGMENT_LIMIT);
    assert.equal(opened.boxOf.get(250)!.kind, "node");
    const revealed = visibleGraph(graph, tree, revealNode(graph, tree, fold, 9_999));
    assert.equal(revealed.boxOf.get(9_999)!.kind, "node");
    assert.equal(revealed.boxOf.get(0)!.kind, "segment");
  });

  it("cuts segments along the backward's order, not the listing's: no edge runs back between them", () => {
    // The loss 0 feeds 399, which feeds 398, ... down to 1: listed 0..399 (as record_torch lists
    // a PyTorch graph, in the order its walk met the nodes), which is no topological order.
    const count = 400;
    const nodes = Array.from({ length: count }, (_, id) => ({ id, name: "MulBackward0", kind: "builtin", label: "" }));
    const edges = [{ source: 0, target: count - 1, input_nr: 0 }];
    for (let id = count - 1; id > 1; id--) edges.push({ source: id, target: id - 1, input_nr: 0 });
    const graph = parseGraph({ nodes, edges, roots: [0] });
    const tree = buildTree(graph);
    const view = visibleGraph(graph, tree, defaultFold(graph, tree));
    assert.deepEqual(view.boxes.map((box) => box.kind), ["segment", "segment"]);
    assert.deepEqual(view.edges.map((edge) => [edge.tail.segment?.first, edge.head.segment?.first]), [[1, 201]]);
    assert.deepEqual([...view.boxes[0]!.members.slice(0, 3)], [0, count - 1, count - 2], "the loss, then what it feeds");
  });

  it("a 100,000-node chain opens as at most ~100 boxes", () => {
    const graph = chainGraph(100_000);
    const tree = buildTree(graph);
    assert.ok(visibleGraph(graph, tree, defaultFold(graph, tree)).boxes.length <= 101);
  });
});

describe("defaultFold and expand/fold", () => {
  it("opens whole levels while at most maxBoxes boxes show", () => {
    const graph = modelGraph(12);
    const tree = buildTree(graph);
    assert.deepEqual(keys(graph, NOTHING_OPEN), ["n0", `m${tree.byPath.get("blocks")!.index}`, `m${tree.byPath.get("head")!.index}`].sort());
    assert.deepEqual(keys(graph, defaultFold(graph, tree, 4)), ["g0", "n0", "n1"], "the 12 blocks would not fit: one group box");
    const wide = defaultFold(graph, tree, 1000);
    assert.equal(visibleGraph(graph, tree, wide).boxes.length, graph.nodes.length, "fits: every node drawn");
  });

  it("reveals a node deep in a folded group, and folds it back", () => {
    const graph = modelGraph(12);
    const tree = buildTree(graph);
    const fold = defaultFold(graph, tree, 4);
    const weight = graph.nodes.find((node) => node.leaf_name === "blocks.7.mlp.0.weight")!;
    const shown = revealNode(graph, tree, fold, weight.id);
    const view = visibleGraph(graph, tree, shown);
    const box = view.boxOf.get(weight.id)!;
    assert.equal(box.kind, "node");
    assert.deepEqual(openAncestors(tree, box).map((m) => m.path), ["blocks", "blocks.7", "blocks.7.mlp", "blocks.7.mlp.0"]);
    const back = foldModule(shown, tree, tree.byPath.get("blocks.7")!);
    assert.equal(visibleGraph(graph, tree, back).boxOf.get(weight.id)!.module?.path, "blocks.7");
    const all = foldModule(shown, tree, tree.byPath.get("blocks")!);
    assert.equal(visibleGraph(graph, tree, all).boxOf.get(weight.id)!.module?.path, "blocks");
  });

  it("never uses a module name as a layout key", () => {
    const hostile = parseGraph({
      nodes: [
        { id: 0, name: "SumBackward0", kind: "builtin", label: "" },
        { id: 1, name: "<img src=x onerror=alert(1)>", kind: "custom", label: "", module: ['"];evil'], module_types: ["<b>X</b>"] },
      ],
      edges: [{ source: 0, target: 1, input_nr: 0 }],
      roots: [0],
    });
    const view = visibleGraph(hostile, buildTree(hostile), NOTHING_OPEN);
    assert.ok(view.boxes.every((box) => /^[nmgs][0-9_]+$/.test(box.key)));
  });
});

describe("parseGraph module fields", () => {
  const node = { id: 1, name: "AddBackward0", kind: "builtin", label: "", module: ["blocks", "0"], module_types: ["ModuleList", "Block"], module_call: 2 };
  it("keeps module, module_types and module_call", () => {
    const parsed = parseGraph({ nodes: [node], edges: [], roots: [1] }).byId.get(1)!;
    assert.deepEqual([parsed.module, parsed.module_types, parsed.module_call], [["blocks", "0"], ["ModuleList", "Block"], 2]);
  });
  it("refuses malformed ones naming the field", () => {
    assert.throws(() => parseGraph({ nodes: [{ ...node, module: "blocks.0" }], edges: [], roots: [] }), /graph\.nodes\[0\]\.module must be a list, got the string "blocks\.0"/);
    assert.throws(() => parseGraph({ nodes: [{ ...node, module_types: ["Block"] }], edges: [], roots: [] }), /module_types must be a list of 2 strings/);
    assert.throws(() => parseGraph({ nodes: [{ ...node, module_call: -1 }], edges: [], roots: [] }), /module_call must be a non-negative integer/);
  });
});
