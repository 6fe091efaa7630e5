// The anywidget entry point: wires the synced traits to the view.
//
// Python owns all state (docs/widget_protocol.md). This module reads the traits, draws
// them, and sends commands; it never changes a trait (a click on a node sends `select`,
// and the selection shows when Python sets `selected`). A new `graph` is laid out once;
// every other trait only restyles what is already drawn. "Check gradients" shows the
// `doctor` trait in a panel and marks the nodes it names (doctor.ts).
//
// renderView composes; each concern lives in its own module: the kernel link (sending, the
// busy mark, a gone kernel: view_link.ts), the canvas and error box (view_canvas.ts), the
// folded view and what the drawing asks of it (view_graph.ts), layout runs (view_layout.ts),
// trait wiring (view_traits.ts), custom messages (view_messages.ts), the toolbar's state
// (toolbar.ts), the inspection trait (module_inspector.ts), overlays and the diff panel
// (view_overlays.ts), the doctor (view_doctor.ts) and the find key (view_keys.ts).

import { disconnectedText, watchConnection } from "./connection.js";
import { GraphScene } from "./draw.js";
import { HistoryPanel, OutputPanel, parseHistory } from "./history.js";
import { Inspector } from "./inspector.js";
import {
  ackNotice,
  commandMessage,
  EMPTY_GRAPH,
  narrationLine,
  parseCommands,
  parseCurrent,
  parseErrorText,
  parseGraph,
  nodeNumber,
  parseLastEvent,
  parseSelected,
  parseStatus,
  parseStoppedAt,
  protocolMismatch,
  seekMessage,
  selectMessage,
  type CommandName,
  type Graph,
} from "./model.js";
import { STYLES } from "./styles.js";
import { RESYNC_MESSAGE, StatesCopy } from "./states_sync.js";
import { BoxDeliveries, BoxTally } from "./box_tally.js";
import {
  MODULE_INSPECTOR_STYLES,
  ModuleInspector,
  readInspectionTrait,
  selectModuleMessage,
  type ModuleSelectMessage,
} from "./module_inspector.js";
import { DIFF_STYLES } from "./diff_panel.js";
import { OVERLAY_STYLES } from "./overlays.js";
import { legend, Narration, Toolbar, toolbarState } from "./toolbar.js";
import { FOLD_STYLES, FoldControls } from "./fold_controls.js";
import { FoldedView, foldDecor } from "./view_graph.js";
import { createCanvas, createErrorBox, showProblems, viewProblems } from "./view_canvas.js";
import { DoctorWatch } from "./view_doctor.js";
import { watchFindKey } from "./view_keys.js";
import { LayoutRunner } from "./view_layout.js";
import { KernelLink, messageOf, type ViewMessage } from "./view_link.js";
import { dispatchMessage } from "./view_messages.js";
import { OverlayWatch } from "./view_overlays.js";
import { watchTraits, type WidgetModel } from "./view_traits.js";

export type { WidgetModel } from "./view_traits.js";

/**
 * Select a folded module (a click on its box): protocol 5's `{"type": "select", "module":
 * path}`, which puts the module in the inspector. A segment of a flat graph has no path: null,
 * nothing to send.
 */
export function moduleSelectMessage(path: string | null): ModuleSelectMessage | null {
  return path === null ? null : selectModuleMessage(path);
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

export { unreachableKernel } from "./view_link.js";

/** Draw the view into `el`; returns the cleanup function (anywidget's render contract). */
export function renderView({ model, el }: RenderContext, extras: ViewExtras = {}): () => void {
  const root = document.createElement("div");
  root.className = "gv-root";
  const style = document.createElement("style");
  style.textContent = STYLES + OVERLAY_STYLES + MODULE_INSPECTOR_STYLES + DIFF_STYLES + FOLD_STYLES;

  let scene: GraphScene | null = null;
  let graph: Graph = EMPTY_GRAPH;
  /** The folded view of `graph` (hierarchy.ts, view_graph.ts): what is drawn. */
  let folded: FoldedView | null = null;
  /** A node to put the cursor on (and pan to) once the next layout is drawn (search, follow). */
  let pendingFocus: number | null = null;
  /** The running node "follow" last opened the modules for. */
  let followed: number | null = null;
  let viewError: string | null = null;
  let notice: string | null = null;
  /** Python's error reply to a malformed message (a view and kernel out of step); cleared by the next command. */
  let refused: string | null = null;
  /** Sends, shows "…" while a command runs, and knows when the kernel is gone (view_link.ts). */
  const link = new KernelLink(model, root, (message, reason) => {
    if (message.type === "command" && message.name === "check_gradients") doctor.answered();
    viewError = reason;
    refresh();
  });
  const setBusy = (busy: boolean): void => link.setBusy(busy);

  /** The node Python last reported as selected (the `selected` trait). */
  let selected: number | null = null;
  /** The commands the session offers (the `commands` trait). */
  let offered: ReadonlySet<CommandName> = new Set<CommandName>(["step", "continue"]);

  /** The node states and deliveries drawn: the whole traits plus the deltas since (states_sync.ts). */
  const copy = new StatesCopy();
  /** The copy's states and deliveries folded onto the drawn boxes, updated from what changed (box_tally.ts). */
  const tally = new BoxTally();
  const boxDeliveries = new BoxDeliveries();
  const send = (message: ViewMessage): void => link.send(message);
  const select = (id: number | null): void => {
    if (id !== null && folded?.isFolded(id) === true) {
      const message = moduleSelectMessage(folded.modulePath(id));
      if (message !== null) send(message);
      return;
    }
    if (id !== selected) send(selectMessage(id));
  };
  /** Show a module in the inspector (the fold view calls this when a folded box is clicked). */
  const selectModule = (path: string | null): void => send(selectModuleMessage(path));

  // ---- overlays and the diff panel (view_overlays.ts): which overlay shows is this view's own choice ----
  const overlays = new OverlayWatch({ send, select, changed: () => refresh() });
  const showOverlay = (): void =>
    overlays.show({ overlays: model.get("overlays"), diff: model.get("diff"), scene, membersOf: (id) => folded?.box(id)?.members ?? null });
  /** Open what hides a node, select it, and pan to it (a search hit, a doctor finding). */
  const goToNode = (id: number): void => {
    if (folded?.reveal(id) === true) {
      pendingFocus = id;
      layoutView();
    } else {
      scene?.setCursor(folded?.shownAs(id) ?? id);
    }
    select(id);
  };
  const decor = foldDecor(() => folded, () => layoutView());
  const controls = new FoldControls({
    hide: (hideAccumulateGrad, hideViews) => {
      if (folded?.setHidden(hideAccumulateGrad, hideViews) === true) layoutView();
    },
    goTo: goToNode,
    leave: () => canvas.focus(),
  });

  const toolbar = new Toolbar({
    command: (name: CommandName) => {
      const message = commandMessage(name, selected);
      if (message === null) return;
      notice = null;
      refused = null;
      setBusy(true);
      if (name === "check_gradients") {
        doctor.started();
        refresh();
      }
      send(message);
    },
    zoomIn: () => scene?.zoomBy(1.25),
    zoomOut: () => scene?.zoomBy(0.8),
    fit: () => scene?.resetView(),
  }, [...(extras.toolbar ?? []), overlays.picker.element]);

  /** A command key on the graph (keys.ts): presses the button; if it is off, says why. */
  const pressKey = (name: CommandName): void => {
    if (toolbar.press(name)) return;
    notice = toolbar.whyOff(name);
    refresh();
  };

  const errorBox = createErrorBox();
  const { element: canvas, showMessage } = createCanvas();

  const history = new HistoryPanel((action) => {
    if ("seek" in action) send(seekMessage(action.seek));
    else select(action.select);
  });
  const narration = new Narration(() => {
    history.toggle();
    narration.setExpandable(history.available, history.isOpen);
  });
  const output = new OutputPanel();
  const inspector = new Inspector(() => select(null));
  const moduleInspector = new ModuleInspector((id) => select(id), () => selectModule(null));
  const doctor = new DoctorWatch({ goTo: goToNode, changed: () => refresh() });

  root.append(style, toolbar.element, controls.element);
  // `/` or Ctrl+F while the widget has focus: the search box (view_keys.ts).
  watchFindKey(root, controls.search);
  if (extras.belowToolbar !== undefined) root.append(extras.belowToolbar);
  root.append(narration.element, history.element, overlays.diffPanel.element, errorBox, output.element, doctor.panel.element, canvas, legend(), overlays.legend.element, inspector.element, moduleInspector.element);
  el.append(root);

  /** Restyle from states/current/status/error. Never lays out. */
  const refresh = (): void => {
    const started = performance.now();
    const disconnected = link.disconnected;
    const problems = viewProblems({
      python: parseErrorText(model.get("error")),
      disconnected,
      view: viewError,
      refused,
      mismatch: protocolMismatch(model.get("protocol_version")),
    });
    try {
      copy.sync((name) => model.get(name), graph);
      if (copy.behind(model.get("states_seq")) && copy.askResync()) send(RESYNC_MESSAGE);
      const states = copy.states;
      const changed = copy.takeChanged();
      if (folded !== null) tally.update(folded, states, changed);
      const current = parseCurrent(model.get("current"), graph);
      const status = parseStatus(model.get("status"));
      offered = parseCommands(model.get("commands") ?? ["step", "continue"]);
      selected = parseSelected(model.get("selected"), graph);
      const inspection = readInspectionTrait(model.get("inspection"), graph, selected);
      narration.update(narrationLine(parseLastEvent(model.get("last_event")), status, states));
      history.update(parseHistory(model.get("history"), model.get("history_position")));
      narration.setExpandable(history.available, history.isOpen);
      output.update(model.get("output"));
      const check = doctor.read(model.get("doctor"));
      const shown = doctor.shown(check);
      if (folded !== null && controls.following && current !== null && current !== followed) {
        // Follow: open the modules around the running node (a new layout), then pan to it.
        followed = current;
        if (folded.reveal(current)) {
          pendingFocus = null;
          layoutView();
        }
      }
      const marks = doctor.marks(shown);
      if (folded !== null) {
        scene?.update(tally.boxStates(folded), folded.shownAs(current), boxDeliveries.update(folded, copy.deliveries));
        scene?.setSelected(folded.shownAs(selected));
        scene?.setFindings(folded.findings(marks));
        scene?.setProgress(tally.progress(folded, current, marks));
      }
      inspector.update(inspection.node);
      moduleInspector.update(inspection.module);
      showOverlay();
      doctor.update(shown, (id) => {
        const node = graph.byId.get(id);
        return node === undefined ? id : nodeNumber(node);
      });
      const view = { graph, states, current, status, stoppedAt: parseStoppedAt(model.get("stopped_at")) };
      const shows = toolbarState(view, selected, { disconnected, notice, checking: doctor.checking(check) });
      toolbar.update(offered, shows.enabled, shows.line, shows.title);
    } catch (error) {
      problems.push(`gradviz view: ${messageOf(error)}`);
      toolbar.update(offered, () => false, "Cannot show this state");
    }
    showProblems(errorBox, problems);
    root.dataset["refreshMillis"] = (performance.now() - started).toFixed(1);
  };

  const layoutRunner = new LayoutRunner(root, canvas, {
    showMessage,
    draw: (view, plan, layout) => {
      scene?.destroy();
      scene = new GraphScene(canvas, view.scene, plan, layout, select, pressKey, decor);
      refresh();
      if (pendingFocus !== null) {
        scene.setCursor(view.shownAs(pendingFocus));
        pendingFocus = null;
      }
    },
    failed: (message) => {
      viewError = message;
      refresh();
    },
  });
  /** Lay out the visible boxes of the folded view (one small layout), draw them, then restyle. */
  const layoutView = (): void => {
    if (folded !== null) layoutRunner.run(folded, graph.nodes.length, scene === null);
  };

  /** A new graph: fold it (hierarchy.ts), lay out what shows, draw it, then restyle. */
  const loadGraph = (): void => {
    layoutRunner.forget();
    scene?.destroy();
    scene = null;
    viewError = null;
    folded = null;
    followed = null;
    pendingFocus = null;
    try {
      graph = parseGraph(model.get("graph"));
    } catch (error) {
      graph = EMPTY_GRAPH;
      viewError = messageOf(error);
      showMessage("Cannot show this graph");
      refresh();
      return;
    }
    controls.setGraph(graph);
    if (graph.nodes.length === 0) {
      showMessage("No graph yet");
      refresh();
      return;
    }
    folded = new FoldedView(graph);
    // The first view is the folded overview; "follow" opens modules from the next stop on.
    try {
      followed = parseCurrent(model.get("current"), graph);
    } catch {
      followed = null;
    }
    root.dataset["nodeCount"] = String(graph.nodes.length);
    layoutView();
  };

  const onCustomMessage = (content: unknown): void =>
    dispatchMessage(content, {
      delta: (delta) => {
        // Applied at once; drawn with the `update` that follows (its `states_seq`), so the new
        // states never show with the previous current node.
        try {
          copy.sync((name) => model.get(name), graph);
        } catch {
          return; // malformed traits: refresh says so
        }
        if (copy.apply(delta, graph) === "gap" && copy.askResync()) send(RESYNC_MESSAGE);
      },
      progress: (progress) => {
        doctor.setProgress(progress);
        setBusy(true); // the kernel is working: keep the "…" (and its timeout) alive
        refresh();
      },
      refused: (reason) => {
        refused = reason;
        setBusy(false);
        refresh();
      },
      ack: (ack) => {
        if (ack.name === "check_gradients") doctor.answered(); // answered, or refused
        if (ack.name !== "select") setBusy(false); // a click on a node does not end a running command
        notice = ackNotice(ack, parseErrorText(model.get("error")));
        refresh();
      },
      malformed: (error) => {
        viewError = messageOf(error);
        setBusy(false);
        refresh();
      },
    });
  const stopTraits = watchTraits(model, {
    graph: loadGraph,
    moved: () => setBusy(false),
    restyle: refresh,
    message: onCustomMessage,
  });
  const stopWatching = watchConnection(model, (reason) => {
    link.disconnect(disconnectedText(reason));
    doctor.answered();
    refresh();
  });
  loadGraph();

  return () => {
    layoutRunner.dispose();
    stopWatching();
    stopTraits();
    link.dispose();
    scene?.destroy();
    root.remove();
  };
}

function render(context: RenderContext): () => void {
  return renderView(context);
}

export default { render };
