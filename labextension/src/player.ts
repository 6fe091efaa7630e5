// The kernel's part on the self-contained HTML page: a ReplayPlayer answers the view's command
// messages (docs/widget_protocol.md) as the Python widget would over a ReplaySession, by
// moving a position through the precomputed replay (replay.ts), and publishes the traits
// through a LocalModel. No DOM here.

import { buildTree, type ModuleTree } from "./hierarchy.js";
import { LocalModel } from "./local_model.js";
import { EMPTY_GRAPH, parseGraph, PROTOCOL_VERSION, type CommandName, type Graph } from "./model.js";
import { Timeline, type StandaloneData } from "./replay.js";

/** The commands a replay offers (the `commands` trait), in toolbar order. */
export const REPLAY_COMMANDS: readonly CommandName[] = ["step", "step_event", "continue", "run_to", "step_back"];

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** Said in the inspector of a saved page without snapshots, where a user looks for a node's gradients. */
export const REPLAY_INSPECTION_NOTE =
  "This saved page keeps no gradient values. To inspect them, replay the saved trace in a notebook: " +
  "gradviz.debug.ReplaySession(gradviz.load_trace(path)), then select the node.";

/** Said when the page's size budget left this node's snapshot at this position out. */
export const BUDGET_INSPECTION_NOTE =
  "This node's gradients at this event were left out to keep the page small (trace_to_html's inspection_budget). " +
  "Replay the saved trace in a notebook to see them: gradviz.debug.ReplaySession(gradviz.load_trace(path)).";

/** Moves through the replay; owns the position and the selection, publishes them as traits. */
export class ReplayPlayer {
  readonly model: LocalModel;
  private position: number;
  private selected: number | null = null;
  /** The module shown in the inspector (protocol 5's module select), as `selected_module`. */
  private selectedModule: string | null = null;
  private tree: ModuleTree | null = null;
  private doctorRuns = 0;
  private readonly graph: Graph;
  private readonly listeners: ((position: number) => void)[] = [];

  constructor(private readonly data: StandaloneData, readonly timeline = new Timeline(data)) {
    let graph = EMPTY_GRAPH;
    try {
      graph = parseGraph(data.graph);
    } catch {
      // The view parses the same value and shows the error; here it only means no inspector.
    }
    this.graph = graph;
    this.position = timeline.start;
    this.model = new LocalModel(
      {
        protocol_version: PROTOCOL_VERSION, graph: data.graph, error: null, doctor: null,
        // a page that carries a doctor's report offers Check gradients, which shows it
        commands: data.doctor === null ? [...REPLAY_COMMANDS] : [...REPLAY_COMMANDS, "check_gradients"],
        history: timeline.history(), output: "", overlays: data.overlays, diff: data.diff, ...this.traits(),
      },
      (content) => this.onCommand(content),
    );
  }

  get at(): number {
    return this.position;
  }

  /** Called with the new position after every move. */
  onMove(listener: (position: number) => void): void {
    this.listeners.push(listener);
  }

  seek(position: number): void {
    this.position = Math.max(0, Math.min(this.timeline.length, Math.trunc(position)));
    this.model.set(this.traits());
    for (const listener of this.listeners) listener(this.position);
  }

  restart(): void {
    this.seek(this.timeline.start);
  }

  private traits(): Record<string, unknown> {
    const p = this.position;
    const states = this.timeline.statesAt(p);
    return {
      states,
      current: this.timeline.currentAt(p),
      delivered: this.timeline.deliveredAt(p),
      status: this.timeline.statusAt(p),
      last_event: this.timeline.lastEventAt(p),
      history_position: p,
      selected: this.selected,
      selected_module: this.selectedModule,
      inspection: this.selectedModule === null ? this.inspection(states) : this.moduleInspection(this.selectedModule, states),
    };
  }

  /**
   * The module's inspection at this position, as Python's `module_inspection` gives it: its
   * type, node count, calls, how many nodes are in each state, and the named parameters of it
   * and its sub-modules with the gradient their AccumulateGrad node received (from the page's
   * snapshots; null before it ran or when the page keeps none).
   */
  private moduleInspection(path: string, states: Record<string, string>): Record<string, unknown> | null {
    const module = this.modules().byPath.get(path);
    if (module === undefined) return null;
    const counts: Record<string, number> = {};
    for (const id of module.nodes) {
      const state = states[String(id)] ?? "pending";
      counts[state] = (counts[state] ?? 0) + 1;
    }
    const parameters = [];
    for (const id of module.nodes) {
      const node = this.graph.byId.get(id);
      if (node === undefined || node.kind !== "accumulate_grad" || node.leaf_name === undefined) continue;
      const received = this.timeline.inspectionAt(this.position, id)?.["grads_in"];
      const grad = Array.isArray(received) && received.length > 0 ? received[0] : null;
      parameters.push({ id, name: node.leaf_name, grad });
    }
    parameters.sort((a, b) => (a.name < b.name ? -1 : a.name > b.name ? 1 : 0));
    return { module: path, type: module.type, count: module.nodes.length, calls: module.calls, states: counts, parameters };
  }

  private modules(): ModuleTree {
    this.tree ??= buildTree(this.graph);
    return this.tree;
  }

  /** The node's snapshot at this position (Note [Page inspector] in _html.py), over its graph entry. */
  private inspection(states: Record<string, string>): Record<string, unknown> | null {
    const node = this.selected === null ? undefined : this.graph.byId.get(this.selected);
    if (node === undefined) return null;
    const base = {
      id: node.id, name: node.name, kind: node.kind, label: node.label, state: states[String(node.id)] ?? "pending",
      ...(node.leaf_name === undefined ? {} : { leaf_name: node.leaf_name }),
    };
    const snapshot = this.timeline.inspectionAt(this.position, node.id);
    // a marker where the node may have changed after the budget's cut: an earlier snapshot
    // would be a wrong value from here on (Note [Page inspector] in _html.py)
    if (snapshot !== null && snapshot["left_out"] === true) return { ...base, note: BUDGET_INSPECTION_NOTE };
    if (snapshot !== null) return { ...snapshot, ...base };
    if (this.data.inspections === null) return { ...base, note: REPLAY_INSPECTION_NOTE };
    return (this.data.inspectionBudget?.leftOut ?? 0) > 0 ? { ...base, note: BUDGET_INSPECTION_NOTE } : base;
  }

  private ack(name: string, ok: boolean, reason: string | null = null): void {
    this.model.sendToView({ type: "ack", name, ok, reason });
  }

  /** The view's command messages (docs/widget_protocol.md), answered as Python would. */
  private onCommand(content: unknown): void {
    if (isRecord(content) && content["type"] === "overlay") {
      this.ack("overlay", true); // the page carries every overlay's values it has
      return;
    }
    if (isRecord(content) && content["type"] === "select") {
      const path = content["module"];
      if (path !== null && (typeof path !== "string" || !this.modules().byPath.has(path))) {
        this.model.sendToView({ type: "error", reason: `no module ${JSON.stringify(path)} in this graph` });
        return;
      }
      this.selectedModule = path;
      if (path !== null) this.selected = null;
      this.model.set(this.traits());
      return;
    }
    if (!isRecord(content) || content["type"] !== "command" || typeof content["name"] !== "string") return;
    const name = content["name"];
    const node = content["node"];
    if (name === "seek") {
      const position = content["position"];
      if (typeof position !== "number" || !Number.isSafeInteger(position) || position < 0) {
        this.model.sendToView({ type: "error", reason: `a seek command's position must be an integer >= 0, got ${String(position)}` });
        return;
      }
      this.seek(position);
      this.ack(name, true);
      return;
    }
    if (name === "select") {
      this.selected = typeof node === "number" && this.graph.byId.has(node) ? node : null;
      this.selectedModule = null;
      this.model.set(this.traits());
      this.ack(name, true);
      return;
    }
    if (name === "check_gradients" && this.data.doctor !== null) {
      // the report the page carries, as the `doctor` trait of a finished check
      this.doctorRuns += 1;
      this.model.set({ doctor: { run: this.doctorRuns, state: "done", report: this.data.doctor, error: null } });
      this.ack(name, true);
      return;
    }
    const status = this.timeline.statusAt(this.position);
    if (name !== "step_back" && status !== "paused") {
      this.ack(name, false, `the session is ${status}`);
      return;
    }
    const t = this.timeline;
    const p = this.position;
    switch (name) {
      case "step":
        this.seek(t.stepTarget(p));
        break;
      case "step_event":
        this.seek(t.stepEventTarget(p));
        break;
      case "continue":
        this.seek(t.continueTarget());
        break;
      case "step_back":
        this.seek(t.stepBackTarget(p));
        break;
      case "run_to":
        if (typeof node !== "number" || !this.graph.byId.has(node)) {
          this.ack(name, false, `no node with id ${String(node)} in the graph`);
          return;
        }
        this.seek(t.runToTarget(p, node));
        break;
      case "check_gradients":
        // The button is disabled here (the command is not offered); answer as Python would.
        this.ack(name, false, "this replay page cannot check gradients: it carries no doctor report (trace_to_html(doctor=...))");
        return;
      default:
        this.ack(name, false, `this replay page has no ${name}`);
        return;
    }
    this.ack(name, true);
  }
}

