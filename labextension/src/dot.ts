// The DOT text we give Graphviz and the positions we read back (its `json0` output).
//
// No user text ever reaches DOT: boxes are named by us (`n12`, `n12c3`) and sized by us
// (fixedsize), so labels need no escaping and Graphviz only computes positions. We ask
// once per graph; a step never lays out again.

import type { ClusterSpec, LayoutPlan } from "./plan.js";

const POINTS_PER_INCH = 72;

export interface PlacedBox {
  readonly key: string;
  /** Centre, in SVG user units (y grows downwards), origin at the top-left of the drawing. */
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

export interface PlacedEdge {
  readonly key: string;
  /** SVG path data: the cubic B-spline from the tail, then a line to the arrow tip. */
  readonly path: string;
}

/** A cluster's rectangle: top-left corner and size, in SVG user units. */
export interface PlacedCluster {
  readonly key: string;
  readonly x: number;
  readonly y: number;
  readonly width: number;
  readonly height: number;
}

export interface Layout {
  readonly width: number;
  readonly height: number;
  readonly boxes: readonly PlacedBox[];
  readonly edges: readonly PlacedEdge[];
  /** The plan's clusters (absent or empty: it had none). */
  readonly clusters?: readonly PlacedCluster[];
}

function inches(points: number): string {
  return (points / POINTS_PER_INCH).toFixed(4);
}

/** The DOT source for a plan: top-to-bottom, loss at the top, inputs in next_functions order. */
export function planToDot(plan: LayoutPlan): string {
  const lines = [
    "digraph gradviz {",
    '  graph [rankdir=TB, ordering=out, nodesep=0.25, ranksep=0.35];',
    '  node [shape=box, fixedsize=true, label=""];',
    "  edge [arrowsize=0.7];",
  ];
  const cluster = (spec: ClusterSpec, indent: string): void => {
    // The label only reserves room for the frame's title (drawn by us): its length, never its text.
    lines.push(`${indent}subgraph "cluster_${spec.key}" {`, `${indent}  label="${"x".repeat(Math.max(1, spec.titleChars + 4))}"; labeljust=l; labelloc=t; fontsize=11; margin=10;`);
    for (const key of spec.boxes) {
      lines.push(`${indent}  "${key}";`);
    }
    for (const child of spec.children) cluster(child, `${indent}  `);
    lines.push(`${indent}}`);
  };
  for (const spec of plan.clusters ?? []) cluster(spec, "  ");
  for (const box of plan.boxes) {
    lines.push(`  "${box.key}" [width=${inches(box.width)}, height=${inches(box.height)}];`);
  }
  for (const edge of plan.edges) {
    lines.push(`  "${edge.tail}" -> "${edge.head}" [id="${edge.key}"];`);
  }
  lines.push("}");
  return lines.join("\n");
}

/** A Graphviz answer that is not what we asked for. */
export class LayoutParseError extends Error {
  override name = "LayoutParseError";
}

function numbers(text: string, count: number, what: string): number[] {
  const values = text.split(",").map(Number);
  if (values.length !== count || values.some((value) => !Number.isFinite(value))) {
    throw new LayoutParseError(`cannot read ${what} from ${JSON.stringify(text)}`);
  }
  return values;
}

interface JsonObject {
  name?: unknown;
  pos?: unknown;
  width?: unknown;
  height?: unknown;
}

interface JsonEdge {
  id?: unknown;
  pos?: unknown;
}

type Point = [number, number];

/**
 * Convert a Graphviz edge `pos` ("e,x,y x0,y0 x1,y1 ...", optionally with "s,x,y") into
 * SVG path data. `toSvg` maps a Graphviz point (y upwards) to SVG user units (y downwards).
 */
export function edgePosToPath(pos: string, toSvg: (x: number, y: number) => Point): string {
  let end: Point | null = null;
  let start: Point | null = null;
  const points: Point[] = [];
  for (const token of pos.trim().split(/\s+/)) {
    if (token.startsWith("e,")) {
      const [x = 0, y = 0] = numbers(token.slice(2), 2, "an edge end point");
      end = toSvg(x, y);
    } else if (token.startsWith("s,")) {
      const [x = 0, y = 0] = numbers(token.slice(2), 2, "an edge start point");
      start = toSvg(x, y);
    } else {
      const [x = 0, y = 0] = numbers(token, 2, "an edge control point");
      points.push(toSvg(x, y));
    }
  }
  if (points.length < 4 || (points.length - 1) % 3 !== 0) {
    throw new LayoutParseError(`an edge spline needs 3k+1 points, got ${points.length} in ${JSON.stringify(pos)}`);
  }
  const fmt = (point: Point | undefined): string => (point === undefined ? "" : `${point[0].toFixed(2)},${point[1].toFixed(2)}`);
  const parts: string[] = [];
  if (start !== null) parts.push(`M${fmt(start)}`, `L${fmt(points[0])}`);
  else parts.push(`M${fmt(points[0])}`);
  for (let index = 1; index + 2 < points.length; index += 3) {
    parts.push(`C${fmt(points[index])} ${fmt(points[index + 1])} ${fmt(points[index + 2])}`);
  }
  if (end !== null) parts.push(`L${fmt(end)}`);
  return parts.join(" ");
}

/** Read the positions out of Graphviz's `json0` output. */
export function parseJson0(text: string): Layout {
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new LayoutParseError(`Graphviz did not return JSON: ${String(error)}`);
  }
  if (typeof data !== "object" || data === null) throw new LayoutParseError("Graphviz returned no graph");
  const graph = data as { bb?: unknown; objects?: unknown; edges?: unknown };
  if (typeof graph.bb !== "string") throw new LayoutParseError("Graphviz output has no bounding box");
  const [left = 0, bottom = 0, right = 0, top = 0] = numbers(graph.bb, 4, "the bounding box");
  const toSvg = (x: number, y: number): Point => [x - left, top - y];

  const all = Array.isArray(graph.objects) ? (graph.objects as (JsonObject & { bb?: unknown })[]) : [];
  // Clusters come as objects with a bounding box and no position.
  const clusters = all
    .filter((object) => object.pos === undefined && typeof object.bb === "string" && typeof object.name === "string" && object.name.startsWith("cluster_"))
    .map((object) => {
      const [x0 = 0, y0 = 0, x1 = 0, y1 = 0] = numbers(object.bb as string, 4, `the box of ${String(object.name)}`);
      const [left, top] = toSvg(x0, y1);
      return { key: (object.name as string).slice("cluster_".length), x: left, y: top, width: x1 - x0, height: y1 - y0 };
    });
  const objects = all.filter((object) => !(object.pos === undefined && typeof object.bb === "string"));
  const boxes = objects.map((object): PlacedBox => {
    if (typeof object.name !== "string" || typeof object.pos !== "string") {
      throw new LayoutParseError("a Graphviz node has no name or position");
    }
    const [gx = 0, gy = 0] = numbers(object.pos, 2, `the position of ${object.name}`);
    const [x, y] = toSvg(gx, gy);
    return {
      key: object.name,
      x,
      y,
      width: Number(object.width) * POINTS_PER_INCH,
      height: Number(object.height) * POINTS_PER_INCH,
    };
  });
  const edgeList = Array.isArray(graph.edges) ? (graph.edges as JsonEdge[]) : [];
  const edges = edgeList.map((edge): PlacedEdge => {
    if (typeof edge.id !== "string" || typeof edge.pos !== "string") {
      throw new LayoutParseError("a Graphviz edge has no id or position");
    }
    return { key: edge.id, path: edgePosToPath(edge.pos, toSvg) };
  });
  return { width: right - left, height: top - bottom, boxes, edges, ...(clusters.length > 0 ? { clusters } : {}) };
}
