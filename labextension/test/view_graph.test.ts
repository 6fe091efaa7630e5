import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { parseJson0, planToDot } from "../src/dot.js";
import { SYNTHETIC_BASE } from "../src/hierarchy.js";
import { keyAction } from "../src/keys.js";
import { parseGraph, type NodeState } from "../src/model.js";
import { planLayout } from "../src/plan.js";
import { nextHit, parseQuery, searchGraph } from "../src/search.js";
import { FoldedView } from "../src/view_graph.js";

/** loss ← head (Linear) ← 3 nodes in blocks.0 (Block) and 3 in blocks.1; one parameter each. */
function graph() {
  const nodes: Record<string, unknown>[] = [{ id: 0, name: "SumBackward0", kind: "builtin", label: "" }];
  const edges: { source: number; target: number; input_nr: number }[] = [];
  let previous = 0;
  const add = (name: string, kind: string, module: string[], types: string[], extra: Record<string, unknown> = {}): number => {
    const id = nodes.length;
    nodes.push({ id, name, kind, label: "", module, module_types: types, ...extra });
    edges.push({ source: previous, target: id, input_nr: 0 });
    return id;
  };
  previous = add("AddmmBackward0", "builtin", ["head"], ["Linear"]);
  for (const block of ["1", "0"]) {
    const path = ["blocks", block];
    const types = ["ModuleList", "Block"];
    previous = add("AddBackward0", "builtin", path, types);
    const mm = add("MmBackward0", "builtin", path, types);
    add("AccumulateGrad", "accumulate_grad", path, types, { leaf_name: `blocks.${block}.weight` });
    previous = mm;
  }
  return parseGraph({ nodes, edges, roots: [0] });
}

describe("FoldedView", () => {
  it("maps states, the running node, findings and deliveries onto folded boxes", () => {
    const view = new FoldedView(graph(), 3);
    const boxes = view.scene.nodes.map((node) => node.id >= SYNTHETIC_BASE ? view.box(node.id)!.kind : node.name);
    assert.deepEqual(boxes, ["SumBackward0", "AddmmBackward0", "group"], "the two blocks roll up into one box");
    const group = view.scene.nodes[2]!.id;
    assert.equal(view.modulePath(group), "blocks.0");
    const states = new Map<number, NodeState>(view.graph.nodes.map((node) => [node.id, "pending"]));
    states.set(0, "done");
    states.set(1, "done");
    states.set(2, "done");
    states.set(3, "running");
    const shown = view.states(states);
    assert.equal(shown.get(group), "running");
    assert.equal(shown.get(1), "done");
    const progress = view.progress(states, 3, new Map([[7, "error"]]));
    assert.deepEqual(progress.get(group), { text: "1/6 done · ▶ running · ! finding", running: true, error: false, finding: true });
    assert.deepEqual([...view.findings(new Map([[7, "warning"], [4, "error"]]))], [[group, "error"]]);
    assert.deepEqual(view.deliveries([[0, 1], [1, 2], [2, 3]]), [[0, 1], [1, group]], "inside one box a delivery does not show");
    assert.match(view.scene.byId.get(group)!.label, /\+1 more Block · 6 nodes/);
  });

  it("expands, follows a node into its module and folds back, with frames as clusters", () => {
    const view = new FoldedView(graph(), 3);
    const group = view.scene.nodes[2]!.id;
    assert.equal(view.expand(group), true);
    assert.equal(view.scene.nodes.filter((node) => view.box(node.id)?.kind === "module").length, 2);
    assert.equal(view.reveal(5), true);
    assert.equal(view.shownAs(5), 5);
    assert.deepEqual(view.frames().map((frame) => frame.title).sort(), ["Block blocks.0", "Linear head", "ModuleList blocks"]);
    const clusters = view.clusters();
    assert.deepEqual(clusters.map((cluster) => cluster.children.length), [0, 1], "head, then blocks holding blocks.0");
    assert.deepEqual(clusters[1]!.children[0]!.boxes, ["n5", "n6", "n7"]);
    assert.equal(view.foldAround(5), true);
    assert.notEqual(view.shownAs(5), 5);
  });

  it("hides AccumulateGrad nodes on demand", () => {
    const view = new FoldedView(graph(), 100);
    assert.equal(view.shownAs(7), 7);
    assert.equal(view.setHidden(true, false), true);
    assert.equal(view.shownAs(7), null);
  });
});

describe("cluster DOT", () => {
  it("nests clusters with synthetic names and reads their boxes back", () => {
    const small = new FoldedView(graph(), 100);
    assert.deepEqual(small.clusters(), [], "a graph that fits unfolded gets no frames (it may be cut into columns)");
    const view = new FoldedView(graph(), 3);
    view.reveal(5);
    const plan = { ...planLayout(view.scene), clusters: view.clusters() };
    const dot = planToDot(plan);
    assert.match(dot, /subgraph "cluster_c\d+" \{/);
    assert.doesNotMatch(dot, /blocks|Block|head/, "no module name reaches Graphviz");
    const layout = parseJson0(JSON.stringify({
      bb: "0,0,100,200",
      objects: [{ name: "cluster_c1", bb: "10,20,90,180", nodes: [0] }, { name: "n0", pos: "50,100", width: "1", height: "0.5" }],
      edges: [],
    }));
    assert.deepEqual(layout.clusters, [{ key: "c1", x: 10, y: 20, width: 80, height: 160 }]);
    assert.equal(layout.boxes.length, 1);
  });
});

describe("search", () => {
  const g = graph();
  it("finds by node name, module path, class and parameter name, case-insensitively", () => {
    const find = (text: string): number[] => {
      const query = parseQuery(text);
      assert.ok(query !== null && query.ok);
      return searchGraph(g, query);
    };
    assert.deepEqual(find("addmm"), [1]);
    assert.deepEqual(find("blocks.0.weight"), [7]);
    assert.deepEqual(find("blocks.1"), [2, 3, 4]);
    assert.deepEqual(find("linear"), [1]);
    assert.deepEqual(find("/^Mm/"), [3, 6]);
    assert.deepEqual(find("/mmback/i"), [1, 3, 6]);
  });
  it("says why a regex is bad, and ignores an empty query", () => {
    const bad = parseQuery("/(/");
    assert.ok(bad !== null && !bad.ok && /not a regular expression/.test(bad.error));
    assert.equal(parseQuery("   "), null);
  });
  it("steps through hits, wrapping around", () => {
    assert.deepEqual([nextHit(3, -1, 1), nextHit(3, 2, 1), nextHit(3, 0, -1), nextHit(3, -1, -1), nextHit(0, -1, 1)], [0, 0, 2, 2, -1]);
  });
});

describe("fold keys", () => {
  it("+ expands and - folds", () => {
    assert.deepEqual([keyAction("+"), keyAction("="), keyAction("-")], [{ kind: "expand" }, { kind: "expand" }, { kind: "fold" }]);
  });
});
