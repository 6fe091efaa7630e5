// The anywidget entry point: wires the synced traits to the view.
//
// Python owns all state (docs/widget_protocol.md). This module reads the traits, draws
// them, and sends commands; it never changes a trait (a click on a node sends `select`,
// and the selection shows when Python sets `selected`). A new `graph` is laid out once;
// every other trait only restyles what is already drawn.

import { canvasHeight, GraphScene } from "./draw.js";
import { Inspector, parseInspection } from "./inspector.js";
import { computeLayout } from "./layout.js";
import {
  commandEnabled,
  commandMessage,
  EMPTY_GRAPH,
  parseAck,
  parseCommands,
  parseCurrent,
  parseErrorText,
  parseGraph,
  parseLastEvent,
  parseSelected,
  parseStates,
  parseStatus,
  protocolMismatch,
  selectMessage,
  statusText,
  type CommandMessage,
  type CommandName,
  type Graph,
} from "./model.js";
import { estimateText, FONT_FAMILY, FONT_SIZE, planLayout, type MeasureText } from "./plan.js";
import { STYLES } from "./styles.js";
import { Narration, Toolbar } from "./toolbar.js";

/** The part of anywidget's model interface this view uses. */
export interface WidgetModel {
  get(name: string): unknown;
  on(event: string, callback: (...args: unknown[]) => void): void;
  off(event?: string | null, callback?: ((...args: unknown[]) => void) | null): void;
  send(content: unknown, callbacks?: unknown, buffers?: unknown[]): void;
  /** The ipywidgets widget manager (anywidget passes it through); absent in other hosts. */
  widget_manager?: { callbacks?: (view?: unknown) => unknown };
}

export interface RenderContext {
  model: WidgetModel;
  el: HTMLElement;
}

/** What a host other than anywidget adds to the view (the self-contained page: standalone.ts). */
export interface ViewExtras {
  /** Controls placed after the command buttons, e.g. Restart. */
  readonly toolbar?: readonly HTMLElement[];
  /** A row placed under the toolbar, e.g. the event scrubber. */
  readonly belowToolbar?: HTMLElement;
}

/** How long to show "…" after a command when Python does not answer. */
const BUSY_TIMEOUT_MS = 10_000;

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

function messageOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/** Draw the view into `el`; returns the cleanup function (anywidget's render contract). */
export function renderView({ model, el }: RenderContext, extras: ViewExtras = {}): () => void {
  const root = document.createElement("div");
  root.className = "gv-root";
  const style = document.createElement("style");
  style.textContent = STYLES;

  let scene: GraphScene | null = null;
  let graph: Graph = EMPTY_GRAPH;
  /** Incremented for every graph; a layout that finishes for an older graph is dropped. */
  let generation = 0;
  let viewError: string | null = null;
  /** How many layouts this view has asked for (exposed for tests: a step must not add one). */
  let layouts = 0;
  let notice: string | null = null;
  let busyTimer: ReturnType<typeof setTimeout> | null = null;

  const setBusy = (busy: boolean): void => {
    root.classList.toggle("gv-busy", busy);
    if (busyTimer !== null) clearTimeout(busyTimer);
    busyTimer = busy ? setTimeout(() => setBusy(false), BUSY_TIMEOUT_MS) : null;
  };

  /** The node Python last reported as selected (the `selected` trait). */
  let selected: number | null = null;
  /** The commands the session offers (the `commands` trait). */
  let offered: ReadonlySet<CommandName> = new Set<CommandName>(["step", "continue"]);

  const send = (message: CommandMessage): void => {
    // ipywidgets' own views send with the manager's callbacks, which route the kernel's
    // output during the handler (prints, warnings, tracebacks) to JupyterLab's Log Console.
    // Without them that output is silently dropped.
    const manager = model.widget_manager;
    const callbacks = typeof manager?.callbacks === "function" ? manager.callbacks() : undefined;
    model.send(message, callbacks);
  };
  const select = (id: number | null): void => {
    if (id !== selected) send(selectMessage(id));
  };

  const toolbar = new Toolbar({
    command: (name: CommandName) => {
      const message = commandMessage(name, selected);
      if (message === null) return;
      notice = null;
      setBusy(true);
      send(message);
    },
    zoomIn: () => scene?.zoomBy(1.25),
    zoomOut: () => scene?.zoomBy(0.8),
    fit: () => scene?.resetView(),
  }, extras.toolbar ?? []);

  const errorBox = document.createElement("pre");
  errorBox.className = "gv-error";
  errorBox.dataset["testid"] = "gv-error";
  errorBox.setAttribute("role", "alert");
  errorBox.hidden = true;

  const canvas = document.createElement("div");
  canvas.className = "gv-canvas";
  canvas.style.height = "160px";
  const message = document.createElement("div");
  message.className = "gv-message";
  canvas.append(message);

  const narration = new Narration();
  const inspector = new Inspector(() => select(null));

  root.append(style, toolbar.element);
  if (extras.belowToolbar !== undefined) root.append(extras.belowToolbar);
  root.append(narration.element, errorBox, canvas, inspector.element);
  el.append(root);

  const showMessage = (text: string | null): void => {
    message.hidden = text === null;
    message.textContent = text ?? "";
  };

  /** Restyle from states/current/status/error. Never lays out. */
  const refresh = (): void => {
    const problems: string[] = [];
    const pythonError = parseErrorText(model.get("error"));
    if (pythonError !== null) problems.push(pythonError);
    if (viewError !== null) problems.push(`gradviz view: ${viewError}`);
    const mismatch = protocolMismatch(model.get("protocol_version"));
    if (mismatch !== null) problems.push(`gradviz view: ${mismatch}`);
    try {
      const states = parseStates(model.get("states"), graph);
      const current = parseCurrent(model.get("current"), graph);
      const status = parseStatus(model.get("status"));
      offered = parseCommands(model.get("commands") ?? ["step", "continue"]);
      selected = parseSelected(model.get("selected"), graph);
      const inspection = parseInspection(model.get("inspection"));
      narration.update(parseLastEvent(model.get("last_event")));
      scene?.update(states, current);
      scene?.setSelected(selected);
      inspector.update(inspection !== null && inspection.id === selected ? inspection : null);
      const view = { graph, states, current, status };
      const line = statusText(view);
      toolbar.update(offered, (name) => commandEnabled(name, view, selected), notice === null ? line : `${line} · ${notice}`);
    } catch (error) {
      problems.push(`gradviz view: ${messageOf(error)}`);
      toolbar.update(offered, () => false, "Cannot show this state");
    }
    errorBox.hidden = problems.length === 0;
    errorBox.textContent = problems.join("\n\n");
  };

  /** Lay out a new graph (once), draw it, then restyle. */
  const loadGraph = (): void => {
    const mine = ++generation;
    scene?.destroy();
    scene = null;
    viewError = null;
    try {
      graph = parseGraph(model.get("graph"));
    } catch (error) {
      graph = EMPTY_GRAPH;
      viewError = messageOf(error);
      showMessage("Cannot show this graph");
      refresh();
      return;
    }
    if (graph.nodes.length === 0) {
      showMessage("No graph yet");
      refresh();
      return;
    }
    const plan = planLayout(graph, canvasMeasure());
    showMessage(`Laying out ${graph.nodes.length} nodes…`);
    refresh();
    root.dataset["layoutCount"] = String(++layouts);
    computeLayout(plan).then(
      (outcome) => {
        if (mine !== generation) return;
        canvas.style.height = `${canvasHeight(outcome.layout)}px`;
        showMessage(null);
        scene = new GraphScene(canvas, graph, plan, outcome.layout, select);
        root.dataset["layoutSite"] = outcome.site;
        root.dataset["layoutMillis"] = outcome.millis.toFixed(0);
        refresh();
      },
      (error: unknown) => {
        if (mine !== generation) return;
        viewError = messageOf(error);
        showMessage("Layout failed");
        refresh();
      },
    );
  };

  const onCustomMessage = (content: unknown): void => {
    const ack = parseAck(content);
    if (ack === null) return;
    if (ack.name !== "select") setBusy(false); // a click on a node does not end a running command
    notice = ack.ok ? null : `${ack.name} ignored: ${ack.reason ?? "no reason given"}`;
    refresh();
  };
  const onStateChange = (): void => {
    setBusy(false);
    refresh();
  };

  const subscriptions: [string, (...args: unknown[]) => void][] = [
    ["change:graph", loadGraph],
    ["change:states", onStateChange],
    ["change:current", onStateChange],
    ["change:status", onStateChange],
    ["change:error", onStateChange],
    ["change:protocol_version", onStateChange],
    ["change:commands", onStateChange],
    ["change:selected", refresh],
    ["change:inspection", refresh],
    ["change:last_event", onStateChange],
    ["msg:custom", onCustomMessage],
  ];
  for (const [event, callback] of subscriptions) model.on(event, callback);
  loadGraph();

  return () => {
    generation++;
    for (const [event, callback] of subscriptions) model.off(event, callback);
    if (busyTimer !== null) clearTimeout(busyTimer);
    scene?.destroy();
    root.remove();
  };
}

function render(context: RenderContext): () => void {
  return renderView(context);
}

export default { render };
