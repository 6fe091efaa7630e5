// The module tree of a graph and the folded view of it: what a big model's drawing shows.
//
// Nodes carry the module path they were recorded in (`module`, outermost first; see
// docs/widget_protocol.md). The tree has the same meaning as Python's
// gradviz.debug.rollup (gradviz/instrument/_rollup.py): a module applied N times (an unrolled
// cell) is one module with `calls` N, shown `(xN)`; distinct instances of one class under one
// parent with index names (`blocks.0` ... `blocks.11`) form an instance group, shown as one box
// `+11 more Block` until the group is expanded.
//
// Note [Folded view]
// ------------------
// The view draws boxes: a visible node, a folded module, a folded instance group, or a
// synthetic segment. A module is open or folded; the model root ("") is always open and never a
// box. A node belongs to the box of the outermost folded module on its path (or its folded
// group); when every module on its path is open it is drawn itself, unless its module holds
// more than SEGMENT_SIZE such nodes: then they are cut, in backward order (a topological order,
// the loss first, that keeps the order Python lists them wherever the edges allow: `rank`),
// into segments "nodes 1–500 of 10,000" that open one at a time. So a flat graph of any size
// (no modules) opens as a few dozen boxes, and every edge between two segments runs from the
// earlier to the later one: a PyTorch graph is listed in the order record_torch's walk met its
// nodes, which is no topological order, and segments cut in that order fed each other both ways. Hidden nodes (AccumulateGrad,
// pure view/shape nodes, when the toolbar hides them) are not boxes: edges pass through them.
// Edges between boxes are aggregated: one drawn edge per pair of boxes, with a count.
//
// Layout keys are synthetic (`n12`, `m3`, `g1`, `s3_2`): module names are user text and never
// reach Graphviz. Folded boxes get a synthetic id above SYNTHETIC_BASE so the drawing code can
// treat every box as a graph node (states, cursor, selection); `module` names the folded module.
//
// Pure (no DOM): widget glue is in view_graph.ts.

import type { Graph, GraphEdge, GraphNode } from "./model.js";

/** About as many boxes as a first view can show legibly (Python's DEFAULT_MAX_BOXES). */
export const DEFAULT_MAX_BOXES = 150;
/** Above this many loose nodes in one open module, they are cut into segments. */
export const SEGMENT_LIMIT = 200;
/** Synthetic ids of folded boxes start here (engine ids stay far below 2**48). */
export const SYNTHETIC_BASE = 2 ** 48;

export interface ModuleInfo {
  /** Position in ModuleTree.modules; layout keys use it, never the name. */
  readonly index: number;
  /** The dotted path (`blocks.3.attn`); "" for the model root. */
  readonly path: string;
  readonly names: readonly string[];
  /** Class name ("" for a scope block or unknown). */
  type: string;
  readonly parent: number | null;
  readonly children: number[];
  /** Every node inside, sub-modules included, in graph order. */
  readonly nodes: number[];
  /** The nodes whose path is exactly this one. */
  readonly own: number[];
  /** How many times it was applied: `(xN)`. */
  calls: number;
}

export interface InstanceGroup {
  readonly index: number;
  readonly parent: number;
  readonly type: string;
  /** Module indices in index order (`blocks.0`, `blocks.1`, ...). */
  readonly members: readonly number[];
  /** `+11 more Block`. */
  readonly label: string;
}

export interface ModuleTree {
  readonly modules: readonly ModuleInfo[];
  readonly byPath: ReadonlyMap<string, ModuleInfo>;
  /** Each node's own module (the root for a node outside every module). */
  readonly ownerOf: ReadonlyMap<number, ModuleInfo>;
  readonly groups: readonly InstanceGroup[];
  /** The group a module is a member of. */
  readonly groupOf: ReadonlyMap<number, InstanceGroup>;
  /** Each node's position in backward order (Note [Folded view]): segments are cut in it. */
  readonly rank: ReadonlyMap<number, number>;
}

/**
 * A topological order of the graph's nodes (every edge from an earlier node to a later one, the
 * loss first) that is the order of `graph.nodes` wherever the edges allow: Kahn's algorithm
 * taking, of the nodes whose consumers have all been placed, the one listed first. As
 * `{id: position}`; a node on a cycle (never in autograd) goes last, in listing order.
 */
export function backwardRank(graph: Graph): Map<number, number> {
  const index = new Map(graph.nodes.map((node, position) => [node.id, position]));
  const waiting = new Array<number>(graph.nodes.length).fill(0);
  const outgoing = graph.nodes.map((): number[] => []);
  for (const edge of graph.edges) {
    const from = index.get(edge.source);
    const to = index.get(edge.target);
    if (from === undefined || to === undefined) continue;
    outgoing[from]!.push(to);
    waiting[to]! += 1;
  }
  const heap = new MinHeap();
  waiting.forEach((count, position) => {
    if (count === 0) heap.push(position);
  });
  const rank = new Map<number, number>();
  for (let position = heap.pop(); position !== undefined; position = heap.pop()) {
    rank.set(graph.nodes[position]!.id, rank.size);
    for (const next of outgoing[position]!) {
      waiting[next]! -= 1;
      if (waiting[next] === 0) heap.push(next);
    }
  }
  for (const node of graph.nodes) if (!rank.has(node.id)) rank.set(node.id, rank.size);
  return rank;
}

/** A binary min-heap of numbers. */
class MinHeap {
  private readonly items: number[] = [];

  push(value: number): void {
    const items = this.items;
    let at = items.push(value) - 1;
    while (at > 0) {
      const parent = (at - 1) >> 1;
      if (items[parent]! <= value) break;
      items[at] = items[parent]!;
      at = parent;
    }
    items[at] = value;
  }

  pop(): number | undefined {
    const items = this.items;
    const top = items[0];
    const last = items.pop();
    if (top === undefined || last === undefined || items.length === 0) return top;
    let at = 0;
    for (;;) {
      let child = 2 * at + 1;
      if (child >= items.length) break;
      if (child + 1 < items.length && items[child + 1]! < items[child]!) child += 1;
      if (items[child]! >= last) break;
      items[at] = items[child]!;
      at = child;
    }
    items[at] = last;
    return top;
  }
}

/** Build the module tree of a graph (the root exists even when no node has a module). */
export function buildTree(graph: Graph): ModuleTree {
  const modules: ModuleInfo[] = [];
  const byPath = new Map<string, ModuleInfo>();
  const callsOf = new Map<number, Set<number>>();
  const make = (names: readonly string[], type: string, parent: number | null): ModuleInfo => {
    const info: ModuleInfo = { index: modules.length, path: names.join("."), names, type, parent, children: [], nodes: [], own: [], calls: 1 };
    modules.push(info);
    byPath.set(info.path, info);
    if (parent !== null) modules[parent]?.children.push(info.index);
    return info;
  };
  const root = make([], "", null);
  const ownerOf = new Map<number, ModuleInfo>();
  for (const node of graph.nodes) {
    const names = node.module ?? [];
    let entry = root;
    root.nodes.push(node.id);
    for (let depth = 1; depth <= names.length; depth++) {
      const path = names.slice(0, depth).join(".");
      const type = node.module_types?.[depth - 1] ?? "";
      let next = byPath.get(path);
      if (next === undefined || next.names.length !== depth) next = make(names.slice(0, depth), type, entry.index);
      else if (next.type === "" && type !== "") next.type = type;
      next.nodes.push(node.id);
      entry = next;
    }
    entry.own.push(node.id);
    ownerOf.set(node.id, entry);
    if (node.module_call !== undefined) {
      const calls = callsOf.get(entry.index) ?? new Set<number>();
      calls.add(node.module_call);
      callsOf.set(entry.index, calls);
    }
  }
  // A module's applications: those of its own nodes, else its busiest child's (as _rollup.py).
  for (const info of [...modules].sort((a, b) => b.names.length - a.names.length)) {
    const own = callsOf.get(info.index);
    info.calls = own !== undefined && own.size > 0 ? own.size : Math.max(1, ...info.children.map((child) => modules[child]?.calls ?? 1));
  }
  const groups: InstanceGroup[] = [];
  const groupOf = new Map<number, InstanceGroup>();
  for (const parent of modules) {
    const byType = new Map<string, ModuleInfo[]>();
    for (const childIndex of parent.children) {
      const child = modules[childIndex];
      const last = child?.names[child.names.length - 1] ?? "";
      if (child === undefined || child.type === "" || !/^\d+$/.test(last)) continue;
      const list = byType.get(child.type);
      if (list === undefined) byType.set(child.type, [child]);
      else list.push(child);
    }
    for (const [type, members] of byType) {
      if (members.length < 2) continue;
      members.sort((a, b) => Number(a.names[a.names.length - 1]) - Number(b.names[b.names.length - 1]));
      const group: InstanceGroup = { index: groups.length, parent: parent.index, type, members: members.map((m) => m.index), label: `+${members.length - 1} more ${type}` };
      groups.push(group);
      for (const member of members) groupOf.set(member.index, group);
    }
  }
  return { modules, byPath, ownerOf, groups, groupOf, rank: backwardRank(graph) };
}

/** What is open and what is hidden (Note [Folded view]). Sets hold indices, never names. */
export interface FoldState {
  /** Open modules (by index); the root (0) is always open. */
  readonly open: ReadonlySet<number>;
  /** Expanded instance groups (by index): their members are drawn one box each. */
  readonly openGroups: ReadonlySet<number>;
  /** Open segments, as `${moduleIndex}:${segment}` (a namespace of their own). */
  readonly openSegments: ReadonlySet<string>;
  readonly hideAccumulateGrad: boolean;
  readonly hideViews: boolean;
}

export const NOTHING_OPEN: FoldState = { open: new Set([0]), openGroups: new Set(), openSegments: new Set(), hideAccumulateGrad: false, hideViews: false };

export type BoxKind = "node" | "module" | "group" | "segment";

export interface VisibleBox {
  /** The layout key (synthetic). */
  readonly key: string;
  readonly kind: BoxKind;
  /** The node's id, or the folded box's synthetic id (SYNTHETIC_BASE + k). */
  readonly id: number;
  /** The module a module or group box stands for (a group: its first member); a segment's module. */
  readonly module: ModuleInfo | null;
  readonly group: InstanceGroup | null;
  /** A segment: `${moduleIndex}:${segment}`, and its 1-based first/last position and the total. */
  readonly segment: { readonly key: string; readonly first: number; readonly last: number; readonly total: number } | null;
  /** The graph nodes it stands for (a node box: itself). */
  readonly members: number[];
}

export interface VisibleEdge {
  readonly tail: VisibleBox;
  readonly head: VisibleBox;
  /** How many graph edges (through hidden nodes too) it stands for. */
  count: number;
  /** The graph edges (indices) it stands for. */
  readonly edgeIndices: number[];
}

export interface VisibleGraph {
  readonly boxes: readonly VisibleBox[];
  readonly edges: readonly VisibleEdge[];
  /** The box each graph node is drawn in (absent: the node is hidden). */
  readonly boxOf: ReadonlyMap<number, VisibleBox>;
  readonly byId: ReadonlyMap<number, VisibleBox>;
}

const VIEW_NAMES = /^(View|Reshape|Alias|Unsqueeze|Squeeze|Expand|Permute|Transpose|T|Select|Slice|AsStrided|Unsafe(View|Split)|Split|Clone|Contiguous|Flatten|Unflatten|Narrow)(Backward\d*)?$/;

/** A pure view or shape node (its gradient only changes shape): hidden with "hide views". */
export function isViewNode(node: GraphNode): boolean {
  return node.kind === "builtin" && VIEW_NAMES.test(node.name);
}

function hidden(node: GraphNode, fold: FoldState): boolean {
  return (fold.hideAccumulateGrad && node.kind === "accumulate_grad") || (fold.hideViews && isViewNode(node));
}

/** The size of one segment of `count` loose nodes (at most ~100 segments, at least SEGMENT_LIMIT nodes each). */
export function segmentSize(count: number): number {
  return Math.max(SEGMENT_LIMIT, Math.ceil(count / 100));
}

/** The boxes and edges drawn for `fold` (Note [Folded view]). */
export function visibleGraph(graph: Graph, tree: ModuleTree, fold: FoldState): VisibleGraph {
  const boxes: VisibleBox[] = [];
  const byKey = new Map<string, VisibleBox>();
  let synthetic = 0;
  const folded = (key: string, kind: BoxKind, module: ModuleInfo | null, group: InstanceGroup | null, segment: VisibleBox["segment"]): VisibleBox => {
    let box = byKey.get(key);
    if (box === undefined) {
      box = { key, kind, id: SYNTHETIC_BASE + synthetic++, module, group, segment, members: [] };
      byKey.set(key, box);
      boxes.push(box);
    }
    return box;
  };
  // The folded box a module's nodes go to (null: the module and its ancestors are open).
  const moduleBox = new Map<number, VisibleBox | null>();
  const boxOfModule = (info: ModuleInfo): VisibleBox | null => {
    const known = moduleBox.get(info.index);
    if (known !== undefined) return known;
    let result: VisibleBox | null = null;
    if (info.parent !== null) {
      const parent = tree.modules[info.parent];
      result = parent === undefined ? null : boxOfModule(parent);
      if (result === null) {
        const group = tree.groupOf.get(info.index);
        if (group !== undefined && !fold.openGroups.has(group.index)) {
          result = folded(`g${group.index}`, "group", tree.modules[group.members[0] ?? info.index] ?? info, group, null);
        } else if (!fold.open.has(info.index)) {
          result = folded(`m${info.index}`, "module", info, null, null);
        }
      }
    }
    moduleBox.set(info.index, result);
    return result;
  };
  const boxOf = new Map<number, VisibleBox>();
  const loose = new Map<number, GraphNode[]>();
  for (const node of graph.nodes) {
    const owner = tree.ownerOf.get(node.id) ?? tree.modules[0]!;
    const box = boxOfModule(owner);
    if (box !== null) {
      box.members.push(node.id);
      boxOf.set(node.id, box);
    } else if (!hidden(node, fold)) {
      const list = loose.get(owner.index);
      if (list === undefined) loose.set(owner.index, [node]);
      else list.push(node);
    }
  }
  for (const [moduleIndex, nodes] of loose) {
    const size = nodes.length > SEGMENT_LIMIT ? segmentSize(nodes.length) : nodes.length;
    if (nodes.length > SEGMENT_LIMIT) nodes.sort((a, b) => (tree.rank.get(a.id) ?? 0) - (tree.rank.get(b.id) ?? 0));
    nodes.forEach((node, position) => {
      const segmentIndex = Math.floor(position / size);
      const segmentKey = `${moduleIndex}:${segmentIndex}`;
      if (nodes.length > SEGMENT_LIMIT && !fold.openSegments.has(segmentKey)) {
        const first = segmentIndex * size + 1;
        const segment = { key: segmentKey, first, last: Math.min(nodes.length, first + size - 1), total: nodes.length };
        const box = folded(`s${moduleIndex}_${segmentIndex}`, "segment", tree.modules[moduleIndex] ?? null, null, segment);
        box.members.push(node.id);
        boxOf.set(node.id, box);
        return;
      }
      const box: VisibleBox = { key: `n${node.id}`, kind: "node", id: node.id, module: null, group: null, segment: null, members: [node.id] };
      boxes.push(box);
      byKey.set(box.key, box);
      boxOf.set(node.id, box);
    });
  }
  // In graph order (the loss first) of their first member: Graphviz keeps input order in a rank.
  const position = new Map(graph.nodes.map((node, index) => [node.id, index]));
  boxes.sort((a, b) => (position.get(a.members[0] ?? -1) ?? 0) - (position.get(b.members[0] ?? -1) ?? 0));
  return { boxes, edges: aggregateEdges(graph, boxOf), boxOf, byId: new Map(boxes.map((box) => [box.id, box])) };
}

/** One edge per pair of boxes; an edge into a hidden node continues to that node's inputs. */
function aggregateEdges(graph: Graph, boxOf: ReadonlyMap<number, VisibleBox>): VisibleEdge[] {
  const outgoing = new Map<number, number[]>();
  graph.edges.forEach((edge: GraphEdge, index) => {
    const list = outgoing.get(edge.source);
    if (list === undefined) outgoing.set(edge.source, [index]);
    else list.push(index);
  });
  // The boxes a hidden node's gradient flows on to (through more hidden nodes), memoised.
  const through = new Map<number, Set<VisibleBox>>();
  const reach = (id: number): Set<VisibleBox> => {
    const known = through.get(id);
    if (known !== undefined) return known;
    const found = new Set<VisibleBox>();
    through.set(id, found); // a cycle (never in autograd) ends here
    const stack = [id];
    const seen = new Set<number>([id]);
    while (stack.length > 0) {
      const at = stack.pop()!;
      for (const index of outgoing.get(at) ?? []) {
        const target = graph.edges[index]!.target;
        const box = boxOf.get(target);
        if (box !== undefined) found.add(box);
        else if (!seen.has(target)) {
          seen.add(target);
          stack.push(target);
        }
      }
    }
    return found;
  };
  const edges = new Map<string, VisibleEdge>();
  graph.edges.forEach((edge, index) => {
    const tail = boxOf.get(edge.source);
    if (tail === undefined) return; // from a hidden node: counted from its visible producer
    const direct = boxOf.get(edge.target);
    for (const head of direct !== undefined ? [direct] : reach(edge.target)) {
      if (head === tail) continue;
      const key = `${tail.key} ${head.key}`;
      const known = edges.get(key);
      if (known === undefined) edges.set(key, { tail, head, count: 1, edgeIndices: [index] });
      else {
        known.count++;
        known.edgeIndices.push(index);
      }
    }
  });
  return [...edges.values()];
}

/** The default fold: open whole levels of modules while the view stays within `maxBoxes` boxes. */
export function defaultFold(graph: Graph, tree: ModuleTree, maxBoxes = DEFAULT_MAX_BOXES, base: FoldState = NOTHING_OPEN): FoldState {
  let fold: FoldState = { ...base, open: new Set([0]), openGroups: new Set(), openSegments: new Set() };
  if (graph.nodes.length <= maxBoxes) {
    // It all fits: everything open.
    return { ...fold, open: new Set(tree.modules.map((m) => m.index)), openGroups: new Set(tree.groups.map((g) => g.index)) };
  }
  for (;;) {
    const view = visibleGraph(graph, tree, fold);
    const folded = view.boxes.filter((box) => box.kind === "module" || box.kind === "group");
    if (folded.length === 0) return fold;
    const next = openBoxes(fold, folded);
    if (visibleGraph(graph, tree, next).boxes.length > maxBoxes) return fold;
    fold = next;
  }
}

function openBoxes(fold: FoldState, boxes: readonly VisibleBox[]): FoldState {
  const open = new Set(fold.open);
  const openGroups = new Set(fold.openGroups);
  for (const box of boxes) {
    if (box.kind === "group" && box.group !== null) openGroups.add(box.group.index);
    else if (box.kind === "module" && box.module !== null) open.add(box.module.index);
  }
  return { ...fold, open, openGroups };
}

/** Open (expand) a folded box; a node box is unchanged. */
export function expandBox(fold: FoldState, box: VisibleBox): FoldState {
  if (box.kind === "segment" && box.segment !== null) return { ...fold, openSegments: new Set([...fold.openSegments, box.segment.key]) };
  return openBoxes(fold, [box]);
}

/** Fold an open module (and what is open inside it); the root cannot be folded. */
export function foldModule(fold: FoldState, tree: ModuleTree, module: ModuleInfo): FoldState {
  if (module.parent === null) return fold;
  const inside = (info: ModuleInfo): boolean => {
    for (let at: ModuleInfo | undefined = info; at !== undefined; at = at.parent === null ? undefined : tree.modules[at.parent]) {
      if (at.index === module.index) return true;
    }
    return false;
  };
  const open = new Set([...fold.open].filter((index) => !inside(tree.modules[index]!)));
  const openGroups = new Set([...fold.openGroups].filter((index) => !inside(tree.modules[tree.groups[index]!.parent]!)));
  const openSegments = new Set([...fold.openSegments].filter((key) => !inside(tree.modules[Number(key.split(":")[0])]!)));
  return { ...fold, open, openGroups, openSegments };
}

/** Open every module, group and segment needed to draw node `id` as itself (search, follow). */
export function revealNode(graph: Graph, tree: ModuleTree, fold: FoldState, id: number): FoldState {
  const owner = tree.ownerOf.get(id);
  if (owner === undefined) return fold;
  const open = new Set(fold.open);
  const openGroups = new Set(fold.openGroups);
  for (let at: ModuleInfo | undefined = owner; at !== undefined; at = at.parent === null ? undefined : tree.modules[at.parent]) {
    open.add(at.index);
    const group = tree.groupOf.get(at.index);
    if (group !== undefined) openGroups.add(group.index);
  }
  let next: FoldState = { ...fold, open, openGroups, hideAccumulateGrad: fold.hideAccumulateGrad, hideViews: fold.hideViews };
  const node = graph.byId.get(id);
  if (node !== undefined && hidden(node, next)) {
    next = { ...next, hideAccumulateGrad: next.hideAccumulateGrad && node.kind !== "accumulate_grad", hideViews: next.hideViews && !isViewNode(node) };
  }
  const box = visibleGraph(graph, tree, next).boxOf.get(id);
  if (box?.kind === "segment" && box.segment !== null) next = { ...next, openSegments: new Set([...next.openSegments, box.segment.key]) };
  return next;
}

/** The open modules that hold a box (outermost first, the root left out): their frames. */
export function openAncestors(tree: ModuleTree, box: VisibleBox): ModuleInfo[] {
  let start: ModuleInfo | undefined;
  if (box.kind === "node") start = tree.ownerOf.get(box.id);
  else if (box.kind === "segment") start = box.module ?? undefined;
  else start = box.module?.parent === null || box.module === null ? undefined : tree.modules[box.module.parent];
  const chain: ModuleInfo[] = [];
  for (let at = start; at !== undefined && at.parent !== null; at = tree.modules[at.parent]) chain.unshift(at);
  return chain;
}

/** The words of a folded box: its title line and its facts line (roll-up, node count). */
export function boxText(box: VisibleBox): { title: string; facts: string } {
  const count = `${box.members.length} node${box.members.length === 1 ? "" : "s"}`;
  if (box.kind === "segment" && box.segment !== null) {
    const { first, last, total } = box.segment;
    const where = box.module === null || box.module.path === "" ? "" : ` in ${box.module.path}`;
    return { title: `nodes ${first}–${last} of ${total}${where}`, facts: count };
  }
  const module = box.module;
  if (module === null) return { title: "", facts: count };
  const title = module.type === "" ? module.path : `${module.type} ${module.path}`;
  const rollup: string[] = [];
  if (module.calls > 1) rollup.push(`(x${module.calls})`);
  if (box.kind === "group" && box.group !== null) rollup.push(box.group.label);
  return { title, facts: [...rollup, count].join(" · ") };
}
