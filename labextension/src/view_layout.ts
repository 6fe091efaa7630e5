// Laying out and drawing the folded view (widget.ts's renderView uses one LayoutRunner).
//
// A layout is asynchronous (Graphviz in a worker, layout.ts) and a newer one makes an older
// one stale: each run takes a generation number, and a result that comes back for an older
// generation is dropped. A tall drawing is folded into columns to fit the canvas's width
// (fold.ts), so that Fit shows all of it readably, except when it has frames around open
// modules, which stay whole. The fold needs the canvas's width: a view that is not on the
// page yet (a cached layout answers before the host attaches it) or is hidden draws once it
// has one. The root's data attributes report each layout for tests and bench/widget_scale.py.

import { canvasHeight, MAX_HEIGHT } from "./draw.js";
import { foldLayout, type FoldedLayout } from "./fold.js";
import { computeLayout } from "./layout.js";
import { estimateText, FONT_FAMILY, FONT_SIZE, planLayout, type LayoutPlan, type MeasureText } from "./plan.js";
import type { FoldedView } from "./view_graph.js";
import { messageOf } from "./view_link.js";

/** What a finished layout is handed to, and how the canvas says what is happening. */
export interface LayoutCallbacks {
  /** Draw `view` with this plan and (column-folded) layout: replace the scene. */
  readonly draw: (view: FoldedView, plan: LayoutPlan, layout: FoldedLayout) => void;
  /** The layout failed: the error's text. */
  readonly failed: (message: string) => void;
  /** A message over the canvas ("Laying out…", "Layout failed"), or null for none. */
  readonly showMessage: (text: string | null) => void;
}

function canvasMeasure(): MeasureText {
  const context = typeof document === "undefined" ? null : document.createElement("canvas").getContext("2d");
  if (context === null) return estimateText;
  const regular = `${FONT_SIZE}px ${FONT_FAMILY}`;
  const bold = `600 ${FONT_SIZE}px ${FONT_FAMILY}`;
  return (text, isBold) => {
    context.font = isBold ? bold : regular;
    return context.measureText(text).width;
  };
}

export class LayoutRunner {
  /** Incremented for every layout and every new graph; an older layout's result is dropped. */
  private generation = 0;
  /** How many layouts this view has asked for (exposed for tests: a step must not add one). */
  private layouts = 0;
  /** Watches a canvas without a width yet, to draw a laid-out graph when it gets one. */
  private waitForWidth: ResizeObserver | null = null;

  constructor(
    private readonly root: HTMLElement,
    private readonly canvas: HTMLElement,
    private readonly callbacks: LayoutCallbacks,
  ) {}

  /** Drop the layouts still running (a new graph, or the view is closed). */
  forget(): void {
    this.generation++;
  }

  /** Lay out the visible boxes of `view` (one small layout), then draw them. */
  run(view: FoldedView, nodeCount: number, firstDrawing: boolean): void {
    const mine = ++this.generation;
    const plan = { ...planLayout(view.scene, canvasMeasure()), clusters: view.clusters() };
    this.callbacks.showMessage(firstDrawing ? `Laying out ${view.scene.nodes.length} boxes (${nodeCount} nodes)…` : null);
    this.root.dataset["boxCount"] = String(view.scene.nodes.length);
    this.root.dataset["layoutCount"] = String(++this.layouts);
    const started = performance.now();
    computeLayout(plan).then(
      (outcome) => {
        if (mine !== this.generation) return;
        const draw = (): void => {
          const layout = plan.clusters.length > 0 ? { ...outcome.layout, columns: 1 } : foldLayout(outcome.layout, plan.edges, this.canvas.clientWidth, MAX_HEIGHT);
          this.canvas.style.height = `${canvasHeight(layout)}px`;
          this.callbacks.showMessage(null);
          const data = this.root.dataset;
          data["columns"] = String(layout.columns);
          data["layoutSite"] = outcome.site;
          data["layoutMillis"] = outcome.millis.toFixed(0);
          data["layoutRuns"] = String(outcome.runs);
          data["drawnLayout"] = String(this.layouts);
          this.callbacks.draw(view, plan, layout);
          data["drawMillis"] = (performance.now() - started).toFixed(0);
        };
        if (this.canvas.clientWidth > 0 || typeof ResizeObserver === "undefined") {
          draw();
          return;
        }
        this.waitForWidth?.disconnect();
        const observer = new ResizeObserver(() => {
          if (this.canvas.clientWidth === 0) return;
          observer.disconnect();
          this.waitForWidth = null;
          if (mine === this.generation) draw();
        });
        this.waitForWidth = observer;
        observer.observe(this.canvas);
      },
      (error: unknown) => {
        if (mine !== this.generation) return;
        this.callbacks.showMessage("Layout failed");
        this.callbacks.failed(messageOf(error));
      },
    );
  }

  /** The view is closed: drop running layouts and stop waiting for a width. */
  dispose(): void {
    this.forget();
    this.waitForWidth?.disconnect();
    this.waitForWidth = null;
  }
}
