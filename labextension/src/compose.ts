// Lazy layout: one Graphviz run per open module, composed into one drawing.
//
// Note [Composed layout]
// ----------------------
// A folded view with frames (view_graph.ts clusters) is not given to Graphviz whole. Each
// frame's interior (the boxes directly in it, and each open module inside it as one box of the
// size of its own laid-out interior) is laid out on its own, innermost first, and the root
// places its boxes and its top-level frames the same way (Model Explorer's approach: one
// expanded layer at a time). An interior's DOT text is its cache key (layout.ts), and it only
// holds what is inside the frame: expanding a module lays out that module's interior and
// re-places its ancestors (each one a small graph), while every other frame's interior comes
// from the cache. Interiors are laid out under local names (`b0`, `b1`...), so the key holds
// only what is inside (sizes, order, edges): the view's box ids, which shift when a module
// elsewhere opens, do not change it, and the identical interiors of a model's repeated blocks
// share one layout. No run ever sees the whole graph, so no run hits Graphviz's recursion limits
// on a huge drawing.
//
// An edge is laid out in the innermost frame holding both of its ends, between the boxes that
// stand for them there (the end itself, or the open module holding it). Several edges between
// the same pair of boxes share one Graphviz edge. An edge whose end is inside an open module
// leaves its tail (or enters its head) with a straight segment to where the frame-level edge
// meets the frame's border, so every edge of the view is drawn, end to end.
//
// The extra boxes of a high-fan-in node (plan.ts) belong to the frame of the node they copy.
//
// Pure (no DOM, no worker): layout.ts gives it the function that runs Graphviz (with its cache).

import { planToDot, type Layout, type PlacedBox, type PlacedCluster, type PlacedEdge } from "./dot.js";
import type { ClusterSpec, LayoutPlan } from "./plan.js";

/** Space between a frame and what it holds, left, right and below. */
export const FRAME_PAD = 10;
/** The band on top of a frame for its ⊖ and title. */
export const FRAME_TITLE = 22;
/** Width of a frame title's character (11 px font), for the frame's minimum width. */
const TITLE_CHAR = 6.5;

/** A Graphviz run: the layout of one DOT text, and whether it came from the cache. */
export type RunLayout = (dot: string) => Promise<{ readonly layout: Layout; readonly cached: boolean }>;

export interface ComposedLayout {
  readonly layout: Layout;
  /** Interiors laid out by Graphviz (not from the cache). */
  readonly runs: number;
  /** Interiors answered from the cache. */
  readonly cached: number;
}

const ROOT = "";

interface Container {
  readonly key: string;
  /** The enclosing container's key (null: the root). */
  readonly parent: string | null;
  readonly depth: number;
  readonly titleChars: number;
  /** Plan box keys directly inside. */
  readonly boxes: string[];
  /** Child container keys. */
  readonly children: string[];
  /** The graph edges laid out here, by pair of inner boxes: `tail head` -> DOT edge id. */
  readonly pairs: Map<string, { readonly id: string; readonly tail: string; readonly head: string }>;
}

/** The ancestor chain of a container, root first, itself last. */
function chainOf(containers: ReadonlyMap<string, Container>, key: string): string[] {
  const chain: string[] = [];
  for (let at: string | null = key; at !== null; at = containers.get(at)?.parent ?? null) chain.push(at);
  return chain.reverse();
}

function fmt(x: number, y: number): string {
  return `${x.toFixed(2)},${y.toFixed(2)}`;
}

const POINT = /(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)/g;

function movePath(path: string, dx: number, dy: number): string {
  return path.replace(POINT, (_match, x: string, y: string) => fmt(Number(x) + dx, Number(y) + dy));
}

/**
 * Lay out a plan with clusters one interior at a time (Note [Composed layout]); a plan without
 * clusters is one run, as before.
 */
export async function composeLayout(plan: LayoutPlan, run: RunLayout): Promise<ComposedLayout> {
  const containers = new Map<string, Container>();
  const make = (key: string, parent: string | null, depth: number, titleChars: number): Container => {
    const container: Container = { key, parent, depth, titleChars, boxes: [], children: [], pairs: new Map() };
    containers.set(key, container);
    return container;
  };
  make(ROOT, null, 0, 0);
  const home = new Map<string, string>();
  // Clusters nest as deep as modules do: walk them with a stack, never by recursion.
  const stack: [ClusterSpec, string, number][] = (plan.clusters ?? []).map((spec) => [spec, ROOT, 1]);
  while (stack.length > 0) {
    const [spec, parent, depth] = stack.pop()!;
    make(spec.key, parent, depth, spec.titleChars);
    containers.get(parent)!.children.push(spec.key);
    for (const key of spec.boxes) home.set(key, spec.key);
    for (const child of spec.children) stack.push([child, spec.key, depth + 1]);
  }
  const nodeKey = new Map(plan.boxes.map((box) => [box.key, `n${box.nodeId}`]));
  for (const box of plan.boxes) {
    // A copy (fan-in) lives with its node.
    const where = home.get(box.key) ?? home.get(nodeKey.get(box.key) ?? "") ?? ROOT;
    home.set(box.key, where);
    containers.get(where)!.boxes.push(box.key);
  }
  // Each edge: the innermost container holding both ends, and the boxes standing for them there.
  const edgeAt = new Map<string, { readonly container: string; readonly pair: string }>();
  const chains = new Map<string, string[]>();
  const chainCached = (key: string): string[] => {
    let chain = chains.get(key);
    if (chain === undefined) chains.set(key, (chain = chainOf(containers, key)));
    return chain;
  };
  for (const edge of plan.edges) {
    const tailChain = chainCached(home.get(edge.tail) ?? ROOT);
    const headChain = chainCached(home.get(edge.head) ?? ROOT);
    let common = 0;
    while (common + 1 < tailChain.length && common + 1 < headChain.length && tailChain[common + 1] === headChain[common + 1]) common++;
    const container = containers.get(tailChain[common]!)!;
    const tail = tailChain[common + 1] ?? edge.tail;
    const head = headChain[common + 1] ?? edge.head;
    const pair = `${tail} ${head}`;
    if (!container.pairs.has(pair)) container.pairs.set(pair, { id: `p${container.pairs.size}`, tail, head });
    edgeAt.set(edge.key, { container: container.key, pair });
  }

  // Lay out the interiors, deepest first (a frame's size is its interior's); one depth at a time.
  const sizes = new Map(plan.boxes.map((box) => [box.key, box]));
  // Graphviz keeps input order within a rank: an interior lists its boxes and frames in graph
  // order (a frame at the place of its first box), as one whole-graph layout would.
  const rank = new Map(plan.boxes.map((box, index) => [box.key, index]));
  const inner = new Map<string, Layout>();
  const frameSize = new Map<string, { width: number; height: number }>();
  let runs = 0;
  let cached = 0;
  const byDepth = [...containers.values()].sort((a, b) => b.depth - a.depth);
  for (let index = 0; index < byDepth.length; ) {
    const depth = byDepth[index]!.depth;
    const level: Container[] = [];
    while (index < byDepth.length && byDepth[index]!.depth === depth) level.push(byDepth[index++]!);
    const answers = await Promise.all(
      level.map((container) => {
        const boxes = [
          ...container.boxes.map((key) => ({ key, width: sizes.get(key)!.width, height: sizes.get(key)!.height })),
          ...container.children.map((key) => ({ key, ...frameSize.get(key)! })),
        ].sort((a, b) => rank.get(a.key)! - rank.get(b.key)!);
        rank.set(container.key, boxes.length === 0 ? Infinity : rank.get(boxes[0]!.key)!);
        const edges = [...container.pairs.values()].map((pair) => ({ key: pair.id, tail: pair.tail, head: pair.head }));
        if (boxes.length === 0) return Promise.resolve({ layout: { width: 0, height: 0, boxes: [], edges: [] } as Layout, cached: true });
        return runInterior(run, boxes, edges);
      }),
    );
    level.forEach((container, at) => {
      const answer = answers[at]!;
      if (answer.cached) cached++;
      else runs++;
      inner.set(container.key, answer.layout);
      const titleWidth = (container.titleChars + 4) * TITLE_CHAR;
      frameSize.set(container.key, {
        width: Math.max(answer.layout.width, titleWidth) + 2 * FRAME_PAD,
        height: answer.layout.height + FRAME_TITLE + FRAME_PAD,
      });
    });
  }

  // Place the interiors, the root first: each frame's interior goes inside the box its parent gave it.
  const boxes: PlacedBox[] = [];
  const clusters: PlacedCluster[] = [];
  const placed = new Map<string, PlacedBox>();
  const offsets = new Map<string, [number, number]>([[ROOT, [0, 0]]]);
  const order: string[] = [ROOT];
  for (let at = 0; at < order.length; at++) {
    const key = order[at]!;
    const container = containers.get(key)!;
    const layout = inner.get(key)!;
    const [dx, dy] = offsets.get(key)!;
    const children = new Set(container.children);
    for (const box of layout.boxes) {
      const moved: PlacedBox = { ...box, x: box.x + dx, y: box.y + dy };
      if (!children.has(box.key)) {
        boxes.push(moved);
        placed.set(box.key, moved);
        continue;
      }
      const left = moved.x - moved.width / 2;
      const top = moved.y - moved.height / 2;
      clusters.push({ key: box.key, x: left, y: top, width: moved.width, height: moved.height });
      const child = inner.get(box.key)!;
      offsets.set(box.key, [left + (moved.width - child.width) / 2, top + FRAME_TITLE]);
      order.push(box.key);
    }
  }

  // Edge paths: the frame-level path, with straight segments to ends inside open modules.
  const pairPaths = new Map<string, string>();
  for (const key of order) {
    const [dx, dy] = offsets.get(key)!;
    for (const edge of inner.get(key)!.edges) pairPaths.set(`${key}|${edge.key}`, dx === 0 && dy === 0 ? edge.path : movePath(edge.path, dx, dy));
  }
  const edges: PlacedEdge[] = [];
  for (const edge of plan.edges) {
    const at = edgeAt.get(edge.key)!;
    const container = containers.get(at.container)!;
    const pair = container.pairs.get(at.pair)!;
    const path = pairPaths.get(`${at.container}|${pair.id}`);
    if (path === undefined) continue;
    const tailBox = placed.get(edge.tail);
    const headBox = placed.get(edge.head);
    let d = path;
    if (pair.tail !== edge.tail && tailBox !== undefined) {
      d = `M${fmt(tailBox.x, tailBox.y + tailBox.height / 2)} L${d.slice(1)}`;
    }
    if (pair.head !== edge.head && headBox !== undefined) {
      d = `${d} L${fmt(headBox.x, headBox.y - headBox.height / 2)}`;
    }
    edges.push({ key: edge.key, path: d });
  }
  const top = inner.get(ROOT)!;
  return { layout: { width: top.width, height: top.height, boxes, edges, ...(clusters.length > 0 ? { clusters } : {}) }, runs, cached };
}

/**
 * Lay out one interior under local names (`b0`, `b1`... in the given order): the DOT text, the
 * cache key, then depends only on what is inside (sizes, order, edges), never on the view's
 * box ids, which shift when a module elsewhere opens (folded boxes are numbered in view order).
 */
async function runInterior(
  run: RunLayout,
  boxes: readonly { readonly key: string; readonly width: number; readonly height: number }[],
  edges: readonly { readonly key: string; readonly tail: string; readonly head: string }[],
): Promise<{ layout: Layout; cached: boolean }> {
  const local = new Map(boxes.map((box, index) => [box.key, `b${index}`]));
  const answer = await run(
    interiorDot(
      boxes.map((box) => ({ ...box, key: local.get(box.key)! })),
      edges.map((edge) => ({ ...edge, tail: local.get(edge.tail)!, head: local.get(edge.head)! })),
    ),
  );
  const layout: Layout = { ...answer.layout, boxes: answer.layout.boxes.map((box) => ({ ...box, key: boxes[Number(box.key.slice(1))]!.key })) };
  return { layout, cached: answer.cached };
}

/** The DOT text of one interior: fixed-size boxes and the edges between them (planToDot's style). */
export function interiorDot(
  boxes: readonly { readonly key: string; readonly width: number; readonly height: number }[],
  edges: readonly { readonly key: string; readonly tail: string; readonly head: string }[],
): string {
  return planToDot({
    boxes: boxes.map((box) => ({ key: box.key, nodeId: 0, copy: 0, lines: [], width: box.width, height: box.height })),
    edges: edges.map((edge) => ({ key: edge.key, edgeIndex: 0, tail: edge.tail, head: edge.head })),
  });
}
