// The folded view as the drawing code sees it: a small Graph of the visible boxes.
//
// hierarchy.ts decides which boxes show (Note [Folded view]); this module turns them into a
// Graph for plan.ts, draw.ts and keys.ts, which then work unchanged: a folded box is a node
// with a synthetic id (SYNTHETIC_BASE and up), its title as name and its facts as label. The
// per-node traits (states, current, delivered, doctor findings, selection) are mapped onto
// the boxes here, in time linear in the graph, so a Step restyles only the boxes that changed
// and never lays out again unless "follow" has to open a module.
//
// Pure (no DOM).

import type { Severity } from "./doctor.js";
import type { FoldDecor } from "./draw.js";
import { edgeKeys } from "./overlays.js";
import {
  boxText,
  buildTree,
  DEFAULT_MAX_BOXES,
  defaultFold,
  expandBox,
  foldModule,
  NOTHING_OPEN,
  openAncestors,
  revealNode,
  visibleGraph,
  type FoldState,
  type ModuleInfo,
  type ModuleTree,
  type VisibleBox,
  type VisibleGraph,
} from "./hierarchy.js";
import type { Deliveries, Graph, GraphEdge, GraphNode, NodeState, StateMap } from "./model.js";
import type { ClusterSpec } from "./plan.js";

/** The text the progress line of a folded box can grow to, so its width is planned for. */
function progressPlaceholder(total: number): string {
  return `${total}/${total} done · ▶ running · ✖ error · ! finding`;
}

/** A frame around the boxes of an open module (drawn behind them, with its name and ⊖). */
export interface Frame {
  readonly module: ModuleInfo;
  readonly title: string;
  /** Ids (scene graph) of the boxes inside. */
  readonly members: readonly number[];
}

/** What a folded box shows besides its title and facts. */
export interface BoxProgress {
  readonly text: string;
  readonly running: boolean;
  readonly error: boolean;
  readonly finding: boolean;
}

export class FoldedView {
  readonly tree: ModuleTree;
  fold: FoldState;
  view!: VisibleGraph;
  /** The graph the drawing code draws: one node per visible box. */
  scene!: Graph;

  /**
   * Whether open modules get frames: not when the whole graph fits unfolded (a small graph is
   * drawn as before, and may be cut into columns to fit: fold.ts).
   */
  readonly framed: boolean;
  private graphEdgeKeys: string[] | null = null;

  constructor(readonly graph: Graph, maxBoxes = DEFAULT_MAX_BOXES) {
    this.tree = buildTree(graph);
    this.fold = defaultFold(graph, this.tree, maxBoxes);
    this.framed = graph.nodes.length > maxBoxes;
    this.rebuild();
  }

  private rebuild(): void {
    this.view = visibleGraph(this.graph, this.tree, this.fold);
    const nodes: GraphNode[] = this.view.boxes.map((box) => {
      if (box.kind === "node") return this.graph.byId.get(box.id)!;
      const { title, facts } = boxText(box);
      return { id: box.id, name: title, kind: "builtin", label: `${facts}\n${progressPlaceholder(box.members.length)}` };
    });
    const edges: GraphEdge[] = this.view.edges.map((edge, index) => ({ source: edge.tail.id, target: edge.head.id, input_nr: index }));
    const roots = [...new Set(this.graph.roots.map((id) => this.view.boxOf.get(id)?.id).filter((id): id is number => id !== undefined))];
    this.scene = { nodes, edges, roots, byId: new Map(nodes.map((node) => [node.id, node])) };
  }

  /** Change the fold; true when the visible boxes changed (a new layout is needed). */
  private set(fold: FoldState): boolean {
    const before = this.view.boxes.map((box) => box.key).join(" ");
    this.fold = fold;
    this.rebuild();
    return this.view.boxes.map((box) => box.key).join(" ") !== before;
  }

  box(id: number): VisibleBox | undefined {
    return this.view.byId.get(id);
  }

  /** The folded module's path for a box of the scene graph (null: a node, or a segment). */
  modulePath(id: number): string | null {
    const box = this.box(id);
    return box === undefined || box.kind === "node" || box.kind === "segment" ? null : (box.module?.path ?? null);
  }

  isFolded(id: number): boolean {
    const box = this.box(id);
    return box !== undefined && box.kind !== "node";
  }

  expand(id: number): boolean {
    const box = this.box(id);
    return box !== undefined && box.kind !== "node" && this.set(expandBox(this.fold, box));
  }

  /** Fold the innermost open module holding box `id` (the `-` key). */
  foldAround(id: number): boolean {
    const box = this.box(id);
    if (box === undefined) return false;
    const chain = openAncestors(this.tree, box);
    const innermost = chain[chain.length - 1];
    return innermost !== undefined && this.set(foldModule(this.fold, this.tree, innermost));
  }

  foldModuleAt(index: number): boolean {
    const module = this.tree.modules[index];
    return module !== undefined && this.set(foldModule(this.fold, this.tree, module));
  }

  /** Open what hides node `id` (search, follow); true when the boxes changed. */
  reveal(id: number): boolean {
    if (this.view.boxOf.get(id)?.kind === "node") return false;
    return this.set(revealNode(this.graph, this.tree, this.fold, id));
  }

  setHidden(hideAccumulateGrad: boolean, hideViews: boolean): boolean {
    return this.set({ ...this.fold, hideAccumulateGrad, hideViews });
  }

  /** The box a graph node is drawn in (null: hidden). */
  shownAs(id: number | null): number | null {
    return id === null ? null : (this.view.boxOf.get(id)?.id ?? null);
  }

  /** The open modules with frames (the root has none). */
  frames(): Frame[] {
    if (!this.framed) return [];
    const members = new Map<number, number[]>();
    for (const box of this.view.boxes) {
      for (const module of openAncestors(this.tree, box)) {
        const list = members.get(module.index);
        if (list === undefined) members.set(module.index, [box.id]);
        else list.push(box.id);
      }
    }
    return [...members].map(([index, ids]) => {
      const module = this.tree.modules[index]!;
      const calls = module.calls > 1 ? ` (x${module.calls})` : "";
      return { module, title: `${module.type === "" ? "" : `${module.type} `}${module.path}${calls}`, members: ids };
    });
  }

  /** The frames as Graphviz clusters (nested like the modules), so a module's boxes are laid out together. */
  clusters(): ClusterSpec[] {
    const frames = new Map(this.frames().map((frame) => [frame.module.index, frame]));
    const direct = new Map<number, string[]>();
    for (const box of this.view.boxes) {
      const innermost = openAncestors(this.tree, box).pop();
      if (innermost === undefined) continue;
      const list = direct.get(innermost.index);
      if (list === undefined) direct.set(innermost.index, [`n${box.id}`]);
      else list.push(`n${box.id}`);
    }
    const build = (frame: Frame): ClusterSpec => ({
      key: `c${frame.module.index}`,
      titleChars: frame.title.length,
      boxes: direct.get(frame.module.index) ?? [],
      children: frame.module.children.map((child) => frames.get(child)).filter((child): child is Frame => child !== undefined).map(build),
    });
    return [...frames.values()].filter((frame) => !frames.has(frame.module.parent ?? -1)).map(build);
  }

  /** The states of the scene graph's boxes: a folded box shows the most telling of its members'. */
  states(states: StateMap): Map<number, NodeState> {
    const shown = new Map<number, NodeState>();
    const tally = new Map<number, { done: number; total: number; any: Set<NodeState> }>();
    for (const [id, state] of states) {
      const box = this.view.boxOf.get(id);
      if (box === undefined) continue;
      if (box.kind === "node") {
        shown.set(id, state);
        continue;
      }
      let entry = tally.get(box.id);
      if (entry === undefined) tally.set(box.id, (entry = { done: 0, total: 0, any: new Set() }));
      entry.total++;
      if (state === "done" || state === "released") entry.done++;
      entry.any.add(state);
    }
    for (const box of this.view.boxes) {
      if (box.kind === "node") continue;
      const entry = tally.get(box.id);
      let state: NodeState = "pending";
      if (entry !== undefined) {
        if (entry.any.has("error")) state = "error";
        else if (entry.any.has("running")) state = "running";
        else if (entry.done === entry.total) state = entry.any.has("done") ? "done" : "released";
        else if (entry.any.has("ready")) state = "ready";
      }
      shown.set(box.id, state);
    }
    return shown;
  }

  /** The progress line of each folded box: done/total, and markers for running, error, doctor finding. */
  progress(states: StateMap, current: number | null, findings: ReadonlyMap<number, Severity>): Map<number, BoxProgress> {
    const result = new Map<number, BoxProgress>();
    const counts = new Map<number, { done: number; error: boolean; finding: boolean }>();
    for (const box of this.view.boxes) if (box.kind !== "node") counts.set(box.id, { done: 0, error: false, finding: false });
    for (const [id, state] of states) {
      const entry = counts.get(this.view.boxOf.get(id)?.id ?? -1);
      if (entry === undefined) continue;
      if (state === "done" || state === "released") entry.done++;
      if (state === "error") entry.error = true;
    }
    for (const id of findings.keys()) {
      const entry = counts.get(this.view.boxOf.get(id)?.id ?? -1);
      if (entry !== undefined) entry.finding = true;
    }
    const runningBox = this.shownAs(current);
    for (const box of this.view.boxes) {
      const entry = counts.get(box.id);
      if (entry === undefined) continue;
      const running = runningBox === box.id;
      const parts = [`${entry.done}/${box.members.length} done`];
      if (running) parts.push("▶ running");
      if (entry.error) parts.push("✖ error");
      if (entry.finding) parts.push("! finding");
      result.set(box.id, { text: parts.join(" · "), running, error: entry.error, finding: entry.finding });
    }
    return result;
  }

  /** Doctor findings on the boxes (a folded box: the worst of its members'). */
  findings(findings: ReadonlyMap<number, Severity>): Map<number, Severity> {
    const shown = new Map<number, Severity>();
    for (const [id, severity] of findings) {
      const box = this.shownAs(id);
      if (box === null) continue;
      if (severity === "error" || !shown.has(box)) shown.set(box, severity);
    }
    return shown;
  }

  /** Deliveries between boxes (within one box they do not show). */
  deliveries(deliveries: Deliveries | null): Deliveries | null {
    if (deliveries === null) return null;
    const pairs: (readonly [number, number])[] = [];
    for (const [producer, receiver] of deliveries) {
      const tail = this.shownAs(producer);
      const head = this.shownAs(receiver);
      if (tail !== null && head !== null && tail !== head) pairs.push([tail, head]);
    }
    return pairs;
  }

  /** How many graph edges a scene edge stands for. */
  edgeCount(index: number): number {
    return this.view.edges[index]?.count ?? 1;
  }

  /** The overlay key of the one graph edge a scene edge draws (null: it stands for several). */
  edgeKey(index: number): string | null {
    const indices = this.view.edges[index]?.edgeIndices;
    if (indices === undefined || indices.length !== 1) return null;
    this.graphEdgeKeys ??= edgeKeys(this.graph.edges);
    return this.graphEdgeKeys[indices[0]!] ?? null;
  }
}

export { NOTHING_OPEN };

/**
 * What the drawing asks of the folded view (draw.ts's FoldDecor), read from the view shown now
 * (`folded`: null before a graph is drawn); a box opened or folded calls `relayout`.
 */
export function foldDecor(folded: () => FoldedView | null, relayout: () => void): FoldDecor {
  return {
    isFolded: (id) => folded()?.isFolded(id) ?? false,
    modulePath: (id) => folded()?.modulePath(id) ?? null,
    frames: () => folded()?.frames() ?? [],
    edgeCount: (index) => folded()?.edgeCount(index) ?? 1,
    edgeKey: (index) => folded()?.edgeKey(index) ?? null,
    expand: (id) => {
      if (folded()?.expand(id) === true) relayout();
    },
    foldAround: (id) => {
      if (folded()?.foldAround(id) === true) relayout();
    },
    foldModule: (index) => {
      if (folded()?.foldModuleAt(index) === true) relayout();
    },
  };
}
