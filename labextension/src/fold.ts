// Tall drawings folded into side-by-side columns, so that Fit shows all of them readably.
//
// `dot` draws a backward graph top to bottom, one rank per node of a chain: a chain of 60
// operations is ~4,000 px tall and ~150 px wide. Fitted into the canvas (at most MAX_HEIGHT
// tall) its text shrinks to a tenth of its size. Like text set in newspaper columns, the
// drawing is cut between ranks into bands of about equal height, placed left to right.
// An edge inside a band keeps the path `dot` gave it (moved with its band). An edge from one
// band to a later one is drawn as a connector: down from its tail to a lane under all columns,
// along it to the gutter left of the head's column, up the gutter to a lane above all columns,
// and down into its head. `dot` ranks every edge downwards, so no edge goes to an earlier band.
//
// Pure (no DOM): widget.ts folds a layout once, before drawing it, for the canvas's width.

import type { Layout, PlacedBox, PlacedEdge } from "./dot.js";
import { fitTransform, READABLE_SCALE } from "./draw.js";

/** Space between two columns; connectors run up the middle of it. */
export const COLUMN_GAP = 32;
/** Space above and below the columns for the connectors' lanes. */
export const LANE = 16;
export const MAX_COLUMNS = 16;
/** Fold only when it makes the fitted drawing at least this much larger. */
export const MIN_GAIN = 1.25;

/** The boxes and edges of a layout as its plan names them (plan.edges: key, tail box, head box). */
export interface EdgeEnds {
  readonly key: string;
  readonly tail: string;
  readonly head: string;
}

export interface FoldedLayout extends Layout {
  /** How many columns the drawing was folded into (1: not folded). */
  readonly columns: number;
}

/** The scale at which a drawing of this size fits a view (Fit: draw.ts fitTransform). */
export function fitScale(width: number, height: number, viewWidth: number, viewHeight: number): number {
  return fitTransform(width, height, viewWidth, viewHeight).k;
}

/**
 * Where the drawing may be cut: the middle of each vertical gap between boxes (no box spans
 * it), in increasing order.
 */
export function cutPoints(boxes: readonly PlacedBox[]): number[] {
  const spans = boxes.map((box) => [box.y - box.height / 2, box.y + box.height / 2] as const).sort((a, b) => a[0] - b[0]);
  const cuts: number[] = [];
  let bottom = -Infinity;
  for (const [top, end] of spans) {
    if (bottom !== -Infinity && top > bottom) cuts.push((bottom + top) / 2);
    bottom = Math.max(bottom, end);
  }
  return cuts;
}

/** `columns - 1` cuts that split [0, height] into bands as equal as the gaps allow. */
export function chooseCuts(cuts: readonly number[], height: number, columns: number): number[] {
  const chosen: number[] = [];
  let from = 0;
  for (let index = 1; index < columns; index++) {
    const target = (index * height) / columns;
    let best: number | null = null;
    for (let at = from; at < cuts.length; at++) {
      const cut = cuts[at] ?? 0;
      if (best === null || Math.abs(cut - target) < Math.abs(best - target)) {
        best = cut;
        from = at + 1;
      } else if (cut > target) {
        break;
      }
    }
    if (best === null) break;
    chosen.push(best);
  }
  return chosen;
}

interface Band {
  readonly top: number;
  readonly bottom: number;
  /** Horizontal extent of its boxes. */
  readonly left: number;
  readonly right: number;
  /** Where the band's left edge goes in the folded drawing. */
  readonly x: number;
}

function bandIndex(cuts: readonly number[], y: number): number {
  let index = 0;
  while (index < cuts.length && y > (cuts[index] ?? Infinity)) index++;
  return index;
}

/** Bands for the given cuts, placed left to right; null when a band would be empty. */
function placeBands(layout: Layout, cuts: readonly number[]): Band[] | null {
  const extents = cuts.map(() => [Infinity, -Infinity]).concat([[Infinity, -Infinity]]);
  for (const box of layout.boxes) {
    const extent = extents[bandIndex(cuts, box.y)];
    if (extent === undefined) continue;
    extent[0] = Math.min(extent[0] ?? Infinity, box.x - box.width / 2);
    extent[1] = Math.max(extent[1] ?? -Infinity, box.x + box.width / 2);
  }
  const bands: Band[] = [];
  let x = 0;
  for (const [index, [left = Infinity, right = -Infinity]] of extents.entries()) {
    if (!(left <= right)) return null;
    bands.push({ top: index === 0 ? 0 : (cuts[index - 1] ?? 0), bottom: cuts[index] ?? layout.height, left, right, x });
    x += right - left + COLUMN_GAP;
  }
  return bands;
}

function foldedSize(bands: readonly Band[]): [number, number] {
  const last = bands[bands.length - 1];
  const width = last === undefined ? 0 : last.x + last.right - last.left;
  const height = Math.max(...bands.map((band) => band.bottom - band.top)) + 2 * LANE;
  return [width, height];
}

const POINT = /(-?\d+(?:\.\d+)?),(-?\d+(?:\.\d+)?)/g;

/** An SVG path (numbers as "x,y" pairs, as dot.ts writes them) moved by (dx, dy). */
export function movePath(path: string, dx: number, dy: number): string {
  return path.replace(POINT, (_match, x: string, y: string) => `${(Number(x) + dx).toFixed(2)},${(Number(y) + dy).toFixed(2)}`);
}

/**
 * Fold `layout` into the number of columns (1 to MAX_COLUMNS) at which it fits a view of
 * `viewWidth` x `viewHeight` at the largest scale. Unchanged (columns 1) when it already fits
 * readably, when the view has no size yet, or when folding gains less than MIN_GAIN.
 */
export function foldLayout(layout: Layout, edges: readonly EdgeEnds[], viewWidth: number, viewHeight: number): FoldedLayout {
  const unfolded: FoldedLayout = { ...layout, columns: 1 };
  if (viewWidth <= 0 || viewHeight <= 0) return unfolded;
  const flat = fitScale(layout.width, layout.height, viewWidth, viewHeight);
  if (flat >= READABLE_SCALE) return unfolded;
  const cuts = cutPoints(layout.boxes);
  let best: { scale: number; bands: Band[]; cuts: number[] } | null = null;
  for (let columns = 2; columns <= Math.min(MAX_COLUMNS, cuts.length + 1); columns++) {
    const chosen = chooseCuts(cuts, layout.height, columns);
    if (chosen.length !== columns - 1) break;
    const bands = placeBands(layout, chosen);
    if (bands === null) continue;
    const scale = fitScale(...foldedSize(bands), viewWidth, viewHeight);
    if (best === null || scale > best.scale) best = { scale, bands, cuts: chosen };
  }
  if (best === null || best.scale < flat * MIN_GAIN) return unfolded;
  return fold(layout, edges, best.bands, best.cuts);
}

function fold(layout: Layout, ends: readonly EdgeEnds[], bands: readonly Band[], cuts: readonly number[]): FoldedLayout {
  const shift = (band: Band): [number, number] => [band.x - band.left, LANE - band.top];
  const bandOf = new Map<string, Band>();
  const boxes = layout.boxes.map((box): PlacedBox => {
    const band = bands[bandIndex(cuts, box.y)] ?? bands[0]!;
    bandOf.set(box.key, band);
    const [dx, dy] = shift(band);
    return { ...box, x: box.x + dx, y: box.y + dy };
  });
  const placed = new Map(boxes.map((box) => [box.key, box]));
  const [width, height] = foldedSize(bands);
  const endsByKey = new Map(ends.map((end) => [end.key, end]));
  const fmt = (x: number, y: number): string => `${x.toFixed(2)},${y.toFixed(2)}`;
  const edges = layout.edges.map((edge): PlacedEdge => {
    const end = endsByKey.get(edge.key);
    const tailBand = end === undefined ? undefined : bandOf.get(end.tail);
    const headBand = end === undefined ? undefined : bandOf.get(end.head);
    const tail = end === undefined ? undefined : placed.get(end.tail);
    const head = end === undefined ? undefined : placed.get(end.head);
    if (tailBand === undefined || tailBand === headBand || headBand === undefined || tail === undefined || head === undefined) {
      const [dx, dy] = shift(tailBand ?? headBand ?? bands[0]!);
      return { key: edge.key, path: movePath(edge.path, dx, dy) };
    }
    // A connector between bands: down, along the bottom lane, up the gutter before the
    // head's column, along the top lane, down into the head.
    const gutter = headBand.x - COLUMN_GAP / 2;
    const below = height - LANE / 2;
    const above = LANE / 2;
    const path = [
      `M${fmt(tail.x, tail.y + tail.height / 2)}`,
      `L${fmt(tail.x, below)}`,
      `L${fmt(gutter, below)}`,
      `L${fmt(gutter, above)}`,
      `L${fmt(head.x, above)}`,
      `L${fmt(head.x, head.y - head.height / 2)}`,
    ].join(" ");
    return { key: edge.key, path };
  });
  return { width, height, boxes, edges, columns: bands.length };
}
