// What to lay out: the boxes (with their sizes) and the edges between them.
//
// A graph node is normally one box. A node with many consumers (a parameter used by many
// operations) becomes one box per use: `dot` takes minutes on a single hub with hundreds
// of in-edges, and one proxy per use keeps it well under a second (docs/frontend_notes.md).
// Every box of a node carries the node's id, so a state change restyles all of them.

import { displayName, type Graph, type GraphNode } from "./model.js";

/** Above this many incoming edges a node is drawn once per use. */
export const FAN_IN_LIMIT = 8;

export const FONT_SIZE = 12;
export const FONT_FAMILY = "system-ui, -apple-system, 'Segoe UI', Roboto, 'DejaVu Sans', sans-serif";
export const LINE_HEIGHT = 15;
export const PADDING_X = 10;
export const PADDING_Y = 6;
export const MIN_WIDTH = 48;
export const MAX_LINE_CHARS = 48;
export const MAX_LABEL_LINES = 2;

/** Width in pixels of a line of text in the node font, bold or not. */
export type MeasureText = (text: string, bold: boolean) => number;

/** A rough width estimate for when no canvas is available (tests, workers). */
export const estimateText: MeasureText = (text, bold) => text.length * FONT_SIZE * (bold ? 0.62 : 0.58);

export interface BoxSpec {
  /** Name of the box in the layout; unique, and never derived from user text. */
  readonly key: string;
  readonly nodeId: number;
  /** 0 for the primary box of a node, 1, 2, ... for the extra boxes of a high-fan-in node. */
  readonly copy: number;
  /** Lines of text: the first is the node's name (drawn bold), the rest its label. */
  readonly lines: readonly string[];
  readonly width: number;
  readonly height: number;
}

export interface EdgeSpec {
  readonly key: string;
  /** Index into graph.edges. */
  readonly edgeIndex: number;
  readonly tail: string;
  readonly head: string;
}

/** A Graphviz cluster: an open module's frame (view_graph.ts); its key is synthetic (`c3`). */
export interface ClusterSpec {
  readonly key: string;
  /** Characters to reserve for its title (the title itself never reaches Graphviz). */
  readonly titleChars: number;
  /** Keys of the boxes directly inside. */
  readonly boxes: readonly string[];
  readonly children: readonly ClusterSpec[];
}

export interface LayoutPlan {
  readonly boxes: readonly BoxSpec[];
  readonly edges: readonly EdgeSpec[];
  /** Frames around open modules, outermost first (absent: none). */
  readonly clusters?: readonly ClusterSpec[];
}

function clip(line: string): string {
  return line.length <= MAX_LINE_CHARS ? line : `${line.slice(0, MAX_LINE_CHARS - 1)}…`;
}

/** The text drawn in a node's box: its name (after the leaf's name), then its label, without repeating the name. */
export function nodeLines(node: GraphNode): string[] {
  const labelLines = node.label.trim() === "" ? [] : node.label.trim().split(/\r?\n/);
  if (labelLines[0]?.trim() === node.name) labelLines.shift();
  const lines = [clip(displayName(node)), ...labelLines.slice(0, MAX_LABEL_LINES).map(clip)];
  if (labelLines.length > MAX_LABEL_LINES) lines[lines.length - 1] += " …";
  return lines;
}

export function planLayout(graph: Graph, measure: MeasureText = estimateText, fanInLimit = FAN_IN_LIMIT): LayoutPlan {
  const inDegree = new Map<number, number>();
  for (const edge of graph.edges) inDegree.set(edge.target, (inDegree.get(edge.target) ?? 0) + 1);

  const boxes: BoxSpec[] = [];
  const box = (node: GraphNode, copy: number): BoxSpec => {
    const lines = nodeLines(node);
    const textWidth = Math.max(...lines.map((line, index) => measure(line, index === 0)));
    const spec: BoxSpec = {
      key: copy === 0 ? `n${node.id}` : `n${node.id}c${copy}`,
      nodeId: node.id,
      copy,
      lines,
      width: Math.max(MIN_WIDTH, Math.ceil(textWidth + 2 * PADDING_X)),
      height: lines.length * LINE_HEIGHT + 2 * PADDING_Y,
    };
    boxes.push(spec);
    return spec;
  };
  for (const node of graph.nodes) box(node, 0);

  const usesSoFar = new Map<number, number>();
  const edges = graph.edges.map((edge, edgeIndex): EdgeSpec => {
    let head = `n${edge.target}`;
    if ((inDegree.get(edge.target) ?? 0) > fanInLimit) {
      // The first use keeps the primary box (which also keeps the node's own out-edges);
      // every later use gets a box of its own.
      const use = usesSoFar.get(edge.target) ?? 0;
      usesSoFar.set(edge.target, use + 1);
      const target = graph.byId.get(edge.target);
      if (use > 0 && target !== undefined) head = box(target, use).key;
    }
    return { key: `e${edgeIndex}`, edgeIndex, tail: `n${edge.source}`, head };
  });
  return { boxes, edges };
}
