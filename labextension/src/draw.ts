// Our own SVG layer: draws a laid-out graph once, then only restyles it.
//
// Every box is a <g class="gv-node gv-state-<state>" data-node-id=".." data-state="..">;
// a state change swaps classes and the tooltip text, nothing else. All user text is set
// with textContent. Pan: drag. Zoom: Ctrl/⌘ + wheel (a plain wheel scrolls the notebook),
// the toolbar's buttons, or double-click to fit. Click: select a node (or, on the
// background, nothing); the selected node's boxes get the class gv-selected. Keys (keys.ts):
// the host is one tab stop; the arrows move a cursor (class gv-focused) along the edges,
// Enter selects the node under it, Escape selects none, s/e/r/c run a command (onCommand).
// When the host gets focus the cursor starts on the selected node, else the one that runs
// next, so the focus ring shows where the keys act. A node the
// gradient doctor found a problem in gets gv-finding and gv-finding-<severity> (and a badge).

import type { Severity } from "./doctor.js";
import type { Layout, PlacedBox } from "./dot.js";
import { keyAction, neighbour, startNode } from "./keys.js";
import {
  ALL_STATE_CLASSES,
  changedNodes,
  deliveredEdges,
  nodeTitle,
  stateClass,
  type CommandName,
  type Deliveries,
  type Graph,
  type GraphNode,
  type NodeState,
  type StateMap,
} from "./model.js";
import { edgeKeys, formatValue, overlayStyle, paintBox, type ColourScale, type Overlay } from "./overlays.js";
import { FONT_FAMILY, LINE_HEIGHT, type LayoutPlan } from "./plan.js";
import type { BoxProgress, Frame } from "./view_graph.js";

/**
 * What a folded view adds to the drawing (view_graph.ts): folded boxes (class gv-folded,
 * data-module, a ⊕ toggle, a progress line), frames around open modules (with a ⊖ toggle),
 * and edge counts. Absent: every box is a node.
 */
export interface FoldDecor {
  isFolded(id: number): boolean;
  /** The folded module's dotted path (data-module), null for a node or a segment. */
  modulePath(id: number): string | null;
  frames(): readonly Frame[];
  edgeCount(index: number): number;
  /** The overlay key (overlays.ts edgeKeys) of the graph edge a scene edge draws; null: it
   * stands for several graph edges (or none), so no single gradient flowed along it. */
  edgeKey(index: number): string | null;
  expand(id: number): void;
  /** Fold the innermost open module around box `id`. */
  foldAround(id: number): void;
  foldModule(index: number): void;
}

/** Padding between a frame and what it holds, per level of frames inside it. */
const FRAME_PAD = 10;

const SVG_NS = "http://www.w3.org/2000/svg";
const MARGIN = 16;
const MIN_SCALE = 0.05;
const MAX_SCALE = 4;
const HALO = 4;
/** The selection ring sits outside the current node's halo, so both can show at once. */
const RING = 8;
/** A pointer that moves less than this (px) between press and release clicked; more, it panned. */
const CLICK_SLOP = 4;
/** Radius of the "!" badge on the top-right corner of a node the gradient doctor flagged. */
const BADGE = 7;
const FINDING_CLASSES = ["gv-finding", "gv-finding-error", "gv-finding-warning"];

/** The canvas's accessible name; the node under the keyboard cursor follows it. */
const GRAPH_LABEL = "autograd graph";

export const MIN_HEIGHT = 160;
export const MAX_HEIGHT = 560;

function svg<K extends keyof SVGElementTagNameMap>(tag: K, attributes: Record<string, string | number> = {}): SVGElementTagNameMap[K] {
  const element = document.createElementNS(SVG_NS, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  return element;
}

export interface Transform {
  x: number;
  y: number;
  k: number;
}

let sceneCounter = 0;

/** The transform that fits a drawing of the given size into a viewport, never enlarging. */
export function fitTransform(drawingWidth: number, drawingHeight: number, viewWidth: number, viewHeight: number): Transform {
  const width = drawingWidth + 2 * MARGIN;
  const height = drawingHeight + 2 * MARGIN;
  const k = Math.max(MIN_SCALE, Math.min(1, viewWidth / width, viewHeight / height));
  return { k, x: (viewWidth - width * k) / 2 + MARGIN * k, y: Math.max(0, (viewHeight - height * k) / 2) + MARGIN * k };
}

/** Below this scale text is unreadable: the first view of a big graph zooms in on its focus instead. */
export const READABLE_SCALE = 0.6;

/**
 * The first view of a drawing: all of it when that is readable, else the area around `focus`
 * (the current node, or the top of the drawing) at a readable scale.
 */
export function initialTransform(
  drawingWidth: number,
  drawingHeight: number,
  viewWidth: number,
  viewHeight: number,
  focus: { x: number; y: number } | null,
): Transform {
  const fitted = fitTransform(drawingWidth, drawingHeight, viewWidth, viewHeight);
  if (fitted.k >= READABLE_SCALE) return fitted;
  const k = READABLE_SCALE;
  const target = focus ?? { x: drawingWidth / 2, y: 0 };
  // The graph flows downwards from the loss: leave more room below the focus than above it,
  // but never empty room above the top of the drawing (the loss's node is usually the focus).
  const top = MARGIN * k;
  return { k, x: viewWidth / 2 - target.x * k, y: focus === null ? top : Math.min(top, viewHeight / 3 - target.y * k) };
}

/** The height to give the canvas for a drawing: its natural height, within limits. */
export function canvasHeight(layout: Layout): number {
  return Math.round(Math.min(MAX_HEIGHT, Math.max(MIN_HEIGHT, layout.height + 2 * MARGIN)));
}

export class GraphScene {
  readonly svg: SVGSVGElement;
  private readonly viewport: SVGGElement;
  private readonly boxesByNode = new Map<number, SVGGElement[]>();
  private readonly titlesByNode = new Map<number, SVGTitleElement[]>();
  private readonly placedByNode = new Map<number, PlacedBox>();
  /** The drawn paths of each graph edge (by index into graph.edges). */
  private readonly pathsByEdge = new Map<number, SVGPathElement[]>();
  private deliveredShown = new Set<number>();
  private readonly deliveredMarker: string;
  private readonly plainMarker: string;
  private shown: Map<number, NodeState> = new Map();
  private current: number | null = null;
  private selected: number | null = null;
  /** The keyboard cursor (keys.ts): drawn with a ring while the canvas has keyboard focus. */
  private cursor: number | null = null;
  private findings: ReadonlyMap<number, Severity> = new Map();
  /** The active overlay's paint per node, as "fill|min|label" (overlays.ts), and its title. */
  private readonly painted = new Map<number, string>();
  private readonly overlayLabels = new Map<number, string>();
  private overlayTitle = "";
  /** Each graph edge's key in an overlay's `edges`, and the colour its paths were painted. */
  private readonly edgeKeys: string[];
  private readonly edgePainted = new Map<number, string>();
  private transform: Transform = { x: 0, y: 0, k: 1 };
  /** Until the user pans or zooms, the drawing is refitted whenever the canvas is resized. */
  private userMoved = false;
  /** The canvas size the view was last set for (onResize: a notification without a change is ignored). */
  private viewedSize: [number, number] = [0, 0];
  private readonly resizeObserver: ResizeObserver | null;
  private readonly cleanups: (() => void)[] = [];
  /** The progress line of each folded box, and what it shows. */
  private readonly progressTexts = new Map<number, SVGTextElement[]>();

  constructor(
    private readonly host: HTMLElement,
    private readonly graph: Graph,
    plan: LayoutPlan,
    private readonly layout: Layout,
    private readonly onSelect: (id: number | null) => void = () => undefined,
    private readonly onCommand: (name: CommandName) => void = () => undefined,
    private readonly decor: FoldDecor | null = null,
  ) {
    const id = `gv-scene-${Date.now().toString(36)}-${sceneCounter++}`;
    this.deliveredMarker = `${id}-arrow-delivered`;
    this.plainMarker = `${id}-arrow`;
    this.edgeKeys = decor === null ? edgeKeys(graph.edges) : graph.edges.map((_, index) => decor.edgeKey(index) ?? "");
    this.svg = svg("svg", { role: "img", "aria-label": `autograd graph with ${graph.nodes.length} nodes` });
    this.svg.append(this.markers());
    this.viewport = svg("g", { class: "gv-viewport" });
    this.svg.append(this.viewport);
    this.drawEdges(plan);
    this.drawBoxes(plan);
    this.drawFrames();
    host.append(this.svg);
    this.listen();
    this.resizeObserver = typeof ResizeObserver === "undefined" ? null : new ResizeObserver(() => this.onResize());
    this.resizeObserver?.observe(host);
    this.autoView();
  }

  private markers(): SVGDefsElement {
    const defs = svg("defs");
    for (const [markerId, className] of [
      [this.plainMarker, "gv-arrow"],
      [this.deliveredMarker, "gv-arrow-delivered"],
    ] as const) {
      const marker = svg("marker", {
        id: markerId,
        viewBox: "0 0 10 10",
        refX: 9,
        refY: 5,
        markerWidth: 7,
        markerHeight: 7,
        markerUnits: "userSpaceOnUse",
        orient: "auto",
      });
      marker.append(svg("path", { d: "M0,0 L10,5 L0,10 z", class: className }));
      defs.append(marker);
    }
    return defs;
  }

  private drawEdges(plan: LayoutPlan): void {
    const group = svg("g", { class: "gv-edges" });
    const paths = new Map(this.layout.edges.map((edge) => [edge.key, edge.path]));
    for (const spec of plan.edges) {
      const edge = this.graph.edges[spec.edgeIndex];
      const d = paths.get(spec.key);
      if (edge === undefined || d === undefined) continue;
      const path = svg("path", {
        d,
        class: "gv-edge",
        "marker-end": `url(#${this.plainMarker})`,
        "data-source": edge.source,
        "data-target": edge.target,
        "data-input-nr": edge.input_nr,
      });
      const count = this.decor?.edgeCount(spec.edgeIndex) ?? 1;
      if (count > 1) {
        path.classList.add("gv-edge-multi");
        path.setAttribute("data-count", String(count));
        const title = svg("title");
        title.textContent = `${count} edges`;
        path.append(title);
      }
      group.append(path);
      const drawn = this.pathsByEdge.get(spec.edgeIndex) ?? [];
      drawn.push(path);
      this.pathsByEdge.set(spec.edgeIndex, drawn);
    }
    this.viewport.append(group);
  }

  private drawBoxes(plan: LayoutPlan): void {
    const group = svg("g", { class: "gv-nodes" });
    const placed = new Map(this.layout.boxes.map((box) => [box.key, box]));
    for (const spec of plan.boxes) {
      const node = this.graph.byId.get(spec.nodeId);
      const box = placed.get(spec.key);
      if (node === undefined || box === undefined) continue;
      if (spec.copy === 0) this.placedByNode.set(node.id, box);
      const element = svg("g", {
        class: `gv-node gv-kind-${node.kind} ${stateClass("pending")}${spec.copy > 0 ? " gv-copy" : ""}`,
        "data-node-id": node.id,
        "data-state": "pending",
        transform: `translate(${box.x.toFixed(2)},${box.y.toFixed(2)})`,
      });
      if (spec.copy > 0) element.setAttribute("data-copy", String(spec.copy));
      const title = svg("title");
      element.append(title);
      const rounded = node.kind === "accumulate_grad" ? 10 : 3;
      element.append(
        svg("rect", {
          class: "gv-ring",
          x: -box.width / 2 - RING,
          y: -box.height / 2 - RING,
          width: box.width + 2 * RING,
          height: box.height + 2 * RING,
          rx: rounded + RING,
        }),
        svg("rect", {
          class: "gv-halo",
          x: -box.width / 2 - HALO,
          y: -box.height / 2 - HALO,
          width: box.width + 2 * HALO,
          height: box.height + 2 * HALO,
          rx: rounded + HALO,
        }),
        svg("rect", { class: "gv-box", x: -box.width / 2, y: -box.height / 2, width: box.width, height: box.height, rx: rounded }),
      );
      const badge = svg("g", { class: "gv-badge", transform: `translate(${(box.width / 2).toFixed(2)},${(-box.height / 2).toFixed(2)})` });
      const mark = svg("text", { x: 0, y: 0.5, "font-family": FONT_FAMILY });
      mark.textContent = "!";
      badge.append(svg("circle", { r: BADGE }), mark);
      element.append(badge);
      const top = -((spec.lines.length - 1) * LINE_HEIGHT) / 2;
      const folded = this.decor?.isFolded(node.id) === true;
      spec.lines.forEach((line, index) => {
        const text = svg("text", { x: 0, y: top + index * LINE_HEIGHT, "font-family": FONT_FAMILY });
        if (index === 0) text.setAttribute("class", "gv-name");
        text.textContent = line;
        element.append(text);
        if (folded && index === spec.lines.length - 1) {
          text.setAttribute("class", "gv-progress");
          text.textContent = "";
          this.push(this.progressTexts, node.id, text);
        }
      });
      if (folded) this.decorateFolded(element, node.id, box);
      group.append(element);
      this.push(this.boxesByNode, node.id, element);
      this.push(this.titlesByNode, node.id, title);
      title.textContent = this.tooltip(node, "pending");
      this.shown.set(node.id, "pending");
    }
    this.viewport.append(group);
  }

  /** A folded box: its module path, and the ⊕ that expands it. */
  private decorateFolded(element: SVGGElement, id: number, box: PlacedBox): void {
    element.classList.add("gv-folded");
    const path = this.decor?.modulePath(id) ?? null;
    if (path !== null) element.setAttribute("data-module", path);
    const toggle = svg("text", { class: "gv-toggle", x: -box.width / 2 + 8, y: -box.height / 2 + 8, "font-family": FONT_FAMILY });
    toggle.textContent = "⊕";
    const title = svg("title");
    title.textContent = "Expand (double-click, or + on the focused box)";
    toggle.append(title);
    element.append(toggle);
  }

  /** Frames around open modules, behind everything: a rectangle, the module's name and a ⊖. */
  private drawFrames(): void {
    const frames = this.decor?.frames() ?? [];
    if (frames.length === 0) return;
    const group = svg("g", { class: "gv-frames" });
    const depth = (frame: Frame): number => frame.module.names.length;
    const deepest = Math.max(...frames.map(depth));
    for (const frame of [...frames].sort((a, b) => depth(a) - depth(b))) {
      let left = Infinity;
      let top = Infinity;
      let right = -Infinity;
      let bottom = -Infinity;
      let pad = FRAME_PAD * (1 + deepest - depth(frame));
      const cluster = this.layout.clusters?.find((placed) => placed.key === `c${frame.module.index}`);
      if (cluster !== undefined) {
        // Graphviz laid the module out as a cluster: its rectangle has room for the title.
        [left, top, right, bottom, pad] = [cluster.x, cluster.y, cluster.x + cluster.width, cluster.y + cluster.height, 0];
      }
      for (const id of cluster === undefined ? frame.members : []) {
        const box = this.placedByNode.get(id);
        if (box === undefined) continue;
        left = Math.min(left, box.x - box.width / 2);
        right = Math.max(right, box.x + box.width / 2);
        top = Math.min(top, box.y - box.height / 2);
        bottom = Math.max(bottom, box.y + box.height / 2);
      }
      if (!(left <= right)) continue;
      const element = svg("g", { class: "gv-frame", "data-frame-module": frame.module.path });
      element.append(svg("rect", { x: left - pad, y: top - pad, width: right - left + 2 * pad, height: bottom - top + 2 * pad, rx: 6 }));
      const toggle = svg("text", { class: "gv-frame-toggle", x: left - pad + 8, y: top - pad + 8, "data-module-index": frame.module.index, "font-family": FONT_FAMILY });
      toggle.textContent = "⊖";
      const hint = svg("title");
      hint.textContent = "Fold this module (or - on a focused box inside it)";
      toggle.append(hint);
      const label = svg("text", { class: "gv-frame-label", x: left - pad + 18, y: top - pad + 8, "font-family": FONT_FAMILY });
      label.textContent = frame.title;
      element.append(toggle, label);
      group.append(element);
    }
    this.viewport.insertBefore(group, this.viewport.firstChild);
  }

  /** Show the progress line of each folded box (view_graph.ts progress); touches only what changed. */
  setProgress(progress: ReadonlyMap<number, BoxProgress>): void {
    for (const [id, texts] of this.progressTexts) {
      const entry = progress.get(id);
      const line = entry?.text ?? "";
      for (const text of texts) if (text.textContent !== line) text.textContent = line;
      for (const element of this.boxesByNode.get(id) ?? []) {
        element.classList.toggle("gv-holds-running", entry?.running === true);
        element.classList.toggle("gv-holds-error", entry?.error === true);
        element.classList.toggle("gv-holds-finding", entry?.finding === true);
      }
    }
  }

  /** Pan so that box `id` is in view (search hits, follow). */
  show(id: number): void {
    this.reveal(id);
  }

  private push<T>(map: Map<number, T[]>, id: number, value: T): void {
    const list = map.get(id);
    if (list === undefined) map.set(id, [value]);
    else list.push(value);
  }

  private tooltip(node: GraphNode, state: NodeState): string {
    const lines = [nodeTitle(node), `kind: ${node.kind}`, `state: ${state}`];
    if (node.id === this.current && state === "pending") lines.push("runs next, once its gradient arrives (it is on the way)");
    else if (node.id === this.current && state === "ready") lines.push("runs next (Step)");
    if (node.label !== "" && node.label !== node.name) lines.splice(1, 0, node.label);
    // Where forward built it (user text: the <title> gets it through textContent).
    if (node.source !== undefined) lines.push(`forward: ${node.source}`);
    const finding = this.findings.get(node.id);
    if (finding !== undefined) lines.push(`gradient check: ${finding === "error" ? "a problem" : "a warning"} (see the panel)`);
    const overlay = this.overlayLabels.get(node.id);
    if (overlay !== undefined) lines.push(`${this.overlayTitle}: ${overlay}`);
    return lines.join("\n");
  }

  private retitle(id: number): void {
    const node = this.graph.byId.get(id);
    const state = this.shown.get(id);
    if (node === undefined || state === undefined) return;
    for (const title of this.titlesByNode.get(id) ?? []) title.textContent = this.tooltip(node, state);
  }

  /**
   * Show new states, the current node and the delivered gradients (`delivered`: the
   * `delivered` trait; null: an edge is delivered once its source has run). Touches only
   * the boxes and edges that changed.
   */
  update(states: StateMap, current: number | null, deliveries: Deliveries | null = null): void {
    for (const id of changedNodes(this.shown, states)) {
      const elements = this.boxesByNode.get(id);
      const state = states.get(id);
      if (elements === undefined || state === undefined) continue;
      this.shown.set(id, state);
      for (const element of elements) {
        element.classList.remove(...ALL_STATE_CLASSES);
        element.classList.add(stateClass(state));
        element.setAttribute("data-state", state);
      }
      this.retitle(id);
    }
    const delivered = deliveredEdges(this.graph, states, deliveries);
    for (const index of new Set([...this.deliveredShown, ...delivered])) {
      const on = delivered.has(index);
      if (on === this.deliveredShown.has(index)) continue;
      for (const path of this.pathsByEdge.get(index) ?? []) {
        path.classList.toggle("gv-edge-delivered", on);
        path.setAttribute("marker-end", `url(#${on ? this.deliveredMarker : this.plainMarker})`);
      }
    }
    this.deliveredShown = delivered;
    if (current !== this.current) {
      for (const element of this.boxesByNode.get(this.current ?? -1) ?? []) element.classList.remove("gv-current", "gv-waiting");
      for (const element of this.boxesByNode.get(current ?? -1) ?? []) element.classList.add("gv-current");
      const previous = this.current;
      const first = this.current === null && !this.userMoved;
      // A cursor left on the node that ran follows to the next one (s, s, s... keeps it there).
      const follow = this.cursor !== null && this.cursor === this.current && current !== null;
      this.current = current;
      if (follow) this.setCursor(current);
      if (first) this.autoView();
      else if (current !== null) this.reveal(current);
      if (previous !== null) this.retitle(previous);
    }
    // The halo on a node still pending: it runs next once its gradient arrives (dashed halo).
    const waiting = current !== null && this.shown.get(current) === "pending";
    for (const element of this.boxesByNode.get(current ?? -1) ?? []) element.classList.toggle("gv-waiting", waiting);
    if (current !== null) this.retitle(current);
  }

  /** Mark the nodes the gradient doctor flagged (an empty map: none). */
  setFindings(findings: ReadonlyMap<number, Severity>): void {
    const before = this.findings;
    this.findings = findings;
    for (const id of new Set([...before.keys(), ...findings.keys()])) {
      const severity = findings.get(id);
      if (severity === before.get(id)) continue;
      for (const element of this.boxesByNode.get(id) ?? []) {
        element.classList.remove(...FINDING_CLASSES);
        if (severity === undefined) {
          element.removeAttribute("data-finding");
        } else {
          element.classList.add("gv-finding", `gv-finding-${severity}`);
          element.setAttribute("data-finding", severity);
        }
      }
      this.retitle(id);
    }
  }

  /**
   * Colour the boxes by an overlay (null: by state). Every box goes through overlays.ts's
   * overlayStyle with the node ids it stands for; only boxes whose paint changed are touched.
   * `membersOf`: the node ids a box stands for (the fold view's folded module, group or segment
   * boxes; null: the box is one node), which then shows the min and max of its members.
   */
  setOverlay(overlay: Overlay | null, scale: ColourScale | null, membersOf?: (id: number) => readonly number[] | null): void {
    this.overlayTitle = overlay?.title ?? "";
    // Edges: the gradient that flowed along each (a built-in gradient overlay's `edges`).
    for (const [index, paths] of this.pathsByEdge) {
      const value = overlay?.edges?.get(this.edgeKeys[index] ?? "");
      const colour = value === undefined || scale === null ? "" : scale.colour(value);
      const key = value === undefined ? colour : `${colour}|${formatValue(value)}`;
      if ((this.edgePainted.get(index) ?? "") === key) continue;
      this.edgePainted.set(index, key);
      for (const path of paths) {
        path.classList.toggle("gv-overlay-painted", colour !== "");
        if (colour === "" || value === undefined) {
          path.style.removeProperty("stroke");
          path.removeAttribute("data-overlay");
        } else {
          path.style.stroke = colour;
          path.setAttribute("data-overlay", formatValue(value));
        }
      }
    }
    for (const [id, elements] of this.boxesByNode) {
      const paint = overlayStyle(membersOf?.(id) ?? [id], overlay, scale);
      const key = paint === null ? (overlay === null ? "" : "-") : `${paint.fill}|${paint.minFill ?? ""}|${paint.label}`;
      if ((this.painted.get(id) ?? "") === key) continue;
      this.painted.set(id, key);
      if (paint === null) this.overlayLabels.delete(id);
      else this.overlayLabels.set(id, paint.label);
      for (const element of elements) paintBox(element, paint, overlay !== null);
      this.retitle(id);
    }
  }

  /** Mark the selected node (null: none). */
  /** The node under the keyboard cursor, if any. */
  get cursorNode(): number | null {
    return this.cursor;
  }

  /** Put the keyboard cursor on a node (null: none), and pan it into view. */
  setCursor(id: number | null): void {
    if (id !== null && !this.graph.byId.has(id)) id = null;
    if (id !== this.cursor) {
      for (const element of this.boxesByNode.get(this.cursor ?? -1) ?? []) element.classList.remove("gv-focused");
      for (const element of this.boxesByNode.get(id ?? -1) ?? []) element.classList.add("gv-focused");
      this.cursor = id;
    }
    const node = id === null ? undefined : this.graph.byId.get(id);
    this.host.setAttribute("aria-label", node === undefined ? GRAPH_LABEL : `${GRAPH_LABEL}: ${nodeTitle(node)}`);
    if (id !== null) this.reveal(id);
  }

  setSelected(id: number | null): void {
    if (id === this.selected) return;
    for (const element of this.boxesByNode.get(this.selected ?? -1) ?? []) element.classList.remove("gv-selected");
    for (const element of this.boxesByNode.get(id ?? -1) ?? []) element.classList.add("gv-selected");
    this.selected = id;
  }

  // ---- pan and zoom -------------------------------------------------------------------

  private apply(): void {
    const { x, y, k } = this.transform;
    this.viewport.setAttribute("transform", `translate(${x.toFixed(2)},${y.toFixed(2)}) scale(${k.toFixed(4)})`);
  }

  private viewSize(): [number, number] {
    return [this.host.clientWidth, this.host.clientHeight];
  }

  fit(): void {
    const [width, height] = this.viewSize();
    this.viewedSize = [width, height];
    if (width === 0 || height === 0) return;
    this.transform = fitTransform(this.layout.width, this.layout.height, width, height);
    this.apply();
  }

  /** Zoom by a factor around a point of the canvas (default: its centre). */
  zoomBy(factor: number, at?: [number, number]): void {
    const [width, height] = this.viewSize();
    const [px, py] = at ?? [width / 2, height / 2];
    const { x, y, k } = this.transform;
    const next = Math.min(MAX_SCALE, Math.max(MIN_SCALE, k * factor));
    this.transform = { k: next, x: px - ((px - x) * next) / k, y: py - ((py - y) * next) / k };
    this.userMoved = true;
    this.apply();
  }

  /** Show all of the drawing (the Fit button, double-click). */
  resetView(): void {
    this.userMoved = false;
    this.fit();
  }

  /** The view before the user pans or zooms: see initialTransform. */
  private autoView(): void {
    const [width, height] = this.viewSize();
    this.viewedSize = [width, height];
    if (width === 0 || height === 0) return;
    const focus = this.placedByNode.get(this.current ?? -1) ?? null;
    this.transform = initialTransform(this.layout.width, this.layout.height, width, height, focus);
    this.apply();
  }

  /** Pan so that a node is inside the view, if it is not already. */
  private reveal(id: number): void {
    const box = this.placedByNode.get(id);
    const [width, height] = this.viewSize();
    if (box === undefined || width === 0 || height === 0) return;
    const { x, y, k } = this.transform;
    const sx = x + box.x * k;
    const sy = y + box.y * k;
    const halfWidth = (box.width / 2) * k;
    const halfHeight = (box.height / 2) * k;
    const inside = sx - halfWidth >= 0 && sx + halfWidth <= width && sy - halfHeight >= 0 && sy + halfHeight <= height;
    if (inside) return;
    this.transform = { k, x: width / 2 - box.x * k, y: height / 2 - box.y * k };
    this.apply();
  }

  /**
   * A ResizeObserver also reports the size it first sees, after the constructor's autoView and
   * after whatever the host did since (a search hit panned into view, setCursor): that report
   * changes nothing. A real resize refits the drawing, keeping the cursor's node in view.
   */
  private onResize(): void {
    const [width, height] = this.viewSize();
    if (width === this.viewedSize[0] && height === this.viewedSize[1]) return;
    if (this.userMoved) {
      this.viewedSize = [width, height];
      return;
    }
    this.autoView();
    if (this.cursor !== null) this.reveal(this.cursor);
  }

  private listen(): void {
    const on = <K extends keyof HTMLElementEventMap>(type: K, handler: (event: HTMLElementEventMap[K]) => void, options?: AddEventListenerOptions): void => {
      this.host.addEventListener(type, handler, options);
      this.cleanups.push(() => this.host.removeEventListener(type, handler, options));
    };
    // `node`: the box under the press (read now: pointer capture retargets later events).
    let drag: { pointer: number; x: number; y: number; startX: number; startY: number; node: number | null; toggle: Element | null } | null = null;
    on("pointerdown", (event) => {
      if (event.button !== 0) return;
      const box = event.target instanceof Element ? event.target.closest(".gv-node[data-node-id]") : null;
      const node = box === null ? null : Number(box.getAttribute("data-node-id"));
      const toggle = event.target instanceof Element ? event.target.closest(".gv-toggle, .gv-frame-toggle") : null;
      drag = { pointer: event.pointerId, x: event.clientX, y: event.clientY, startX: event.clientX, startY: event.clientY, node, toggle };
      this.host.setPointerCapture(event.pointerId);
      this.host.classList.add("gv-dragging");
    });
    on("pointermove", (event) => {
      if (drag === null || event.pointerId !== drag.pointer) return;
      const dx = event.clientX - drag.x;
      const dy = event.clientY - drag.y;
      if (dx === 0 && dy === 0) return;
      drag.x = event.clientX;
      drag.y = event.clientY;
      this.transform = { ...this.transform, x: this.transform.x + dx, y: this.transform.y + dy };
      this.userMoved = true;
      this.apply();
    });
    const end = (event: PointerEvent): void => {
      if (drag === null || event.pointerId !== drag.pointer) return;
      const clicked = event.type === "pointerup" && Math.hypot(event.clientX - drag.startX, event.clientY - drag.startY) < CLICK_SLOP;
      const node = drag.node;
      const toggle = drag.toggle;
      drag = null;
      this.host.classList.remove("gv-dragging");
      if (!clicked) return;
      if (toggle !== null && this.decor !== null) {
        if (toggle.classList.contains("gv-frame-toggle")) this.decor.foldModule(Number(toggle.getAttribute("data-module-index")));
        else if (node !== null) this.decor.expand(node);
        return;
      }
      const hit = node !== null && this.graph.byId.has(node) ? node : null;
      if (hit !== null) this.setCursor(hit); // the keys go on from the clicked node
      this.onSelect(hit);
    };
    on("keydown", (event) => {
      const action = keyAction(event.key, { ctrl: event.ctrlKey, meta: event.metaKey, alt: event.altKey });
      if (action === null || event.target !== this.host) return;
      if (action.kind === "close" && this.selected === null) return; // nothing to close: not ours
      // Ours: the arrows must not scroll the page, nor move JupyterLab's cell selection.
      event.preventDefault();
      event.stopPropagation();
      if (action.kind === "command") {
        this.onCommand(action.name);
        return;
      }
      const cursor = this.cursor ?? startNode(this.graph, this.selected, this.current);
      if (cursor === null) return;
      if (action.kind === "expand" || action.kind === "fold") {
        if (action.kind === "expand" && this.decor?.isFolded(cursor) === true) this.decor.expand(cursor);
        else if (action.kind === "fold") this.decor?.foldAround(cursor);
        return;
      }
      if (action.kind === "move") {
        // The first key shows where the cursor starts; the next ones move it.
        const positions = new Map([...this.placedByNode].map(([id, box]) => [id, { x: box.x, y: box.y }]));
        this.setCursor(this.cursor === null ? cursor : (neighbour(this.graph, positions, cursor, action.direction) ?? cursor));
      } else if (action.kind === "select") {
        this.setCursor(cursor);
        this.onSelect(cursor);
      } else {
        this.onSelect(null);
      }
    });
    // Focus shows the cursor at once (on the selected node, else the one that runs next):
    // the keys act there, and a keyboard user sees where they are before pressing a key.
    // Not on a click's focus: the click puts the cursor on the clicked node, and panning to
    // another node first would move the drawing under the pointer.
    on("focus", () => {
      if (this.cursor === null && this.host.matches(":focus-visible")) this.setCursor(startNode(this.graph, this.selected, this.current));
    });
    on("pointerup", end);
    on("pointercancel", end);
    on(
      "wheel",
      (event) => {
        if (!event.ctrlKey && !event.metaKey) return;
        event.preventDefault();
        const rect = this.host.getBoundingClientRect();
        this.zoomBy(Math.exp(-event.deltaY * 0.002), [event.clientX - rect.left, event.clientY - rect.top]);
      },
      { passive: false },
    );
    on("dblclick", (event) => {
      // Pointer capture (the drag) makes the host the event's target: find the box under the pointer.
      const under = this.host.ownerDocument.elementFromPoint(event.clientX, event.clientY);
      const box = under === null ? null : under.closest(".gv-node.gv-folded[data-node-id]");
      if (box !== null && this.decor !== null) this.decor.expand(Number(box.getAttribute("data-node-id")));
      else this.resetView();
    });
  }

  destroy(): void {
    for (const cleanup of this.cleanups) cleanup();
    this.resizeObserver?.disconnect();
    this.host.setAttribute("aria-label", GRAPH_LABEL);
    this.svg.remove();
  }
}
