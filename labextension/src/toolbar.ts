// The toolbar: the session's commands (sent to Python), zoom controls (local), status text;
// and the narration line under it (the latest event, in words).

import { awaitingDelivery, commandEnabled, hasRun, nodeTitle, statusText, type CommandName, type EventLine, type ViewState } from "./model.js";
import { COMMAND_KEYS, KEYS_HELP, KEYS_LEGEND } from "./keys.js";

export interface ToolbarActions {
  command(name: CommandName): void;
  zoomIn(): void;
  zoomOut(): void;
  fit(): void;
}

/** Button text and tooltip per command, in toolbar order (model.COMMANDS). */
const COMMAND_BUTTONS: Record<CommandName, { text: string; title: string }> = {
  step: { text: "Step", title: "Run the backward of the next node" },
  step_event: { text: "Step event", title: "Show the next engine event (one decision at a time)" },
  continue: { text: "Continue", title: "Run the rest of the backward pass (stops at breakpoints)" },
  run_to: { text: "Run to selected", title: "Continue until the selected node is the next to run" },
  step_back: { text: "Step back", title: "Go back to just before the previous node ran" },
  abort: { text: "Abort", title: "Stop the backward pass here; nodes that have not run never will" },
  check_gradients: {
    text: "Check gradients",
    title: "Check every custom Function's backward against finite differences, and find NaN/Inf and mutated saved tensors",
  },
};

/**
 * Commands shown (disabled, with the reason as tooltip) even when the session does not offer
 * them: the user should learn that the check exists and why it cannot run here.
 */
const SHOWN_WHEN_NOT_OFFERED: Partial<Record<CommandName, string>> = {
  check_gradients:
    "Not available for this session: the gradient doctor re-runs the custom Functions of a live graph " +
    "(a replayed trace has none). Check the live graph: gradviz.debug.backward(loss), or gradviz.debug.doctor(loss)",
};

/**
 * A command button's tooltip for the state shown: what it will do now (Step names the node it
 * runs), or why it is off (Run to selected says how to pick a node). Null: the fixed title.
 */
export function commandTitle(name: CommandName, view: ViewState, selected: number | null): string | null {
  if (name === "check_gradients" || name === "step_back") return null;
  if (view.status !== "paused") {
    const why = view.status === "running" ? "the pass is running" : `the backward pass is ${view.status === "error" ? "stopped by an error" : view.status}`;
    return `${COMMAND_BUTTONS[name].title} (not now: ${why})`;
  }
  const next = view.current === null ? undefined : view.graph.byId.get(view.current);
  if (next !== undefined && awaitingDelivery(view)) {
    // The step that Step event began is not over: its gradients are still to be delivered.
    if (name === "step") return `Deliver the gradients still on the way (the end of the last node's step): ${nodeTitle(next)} then turns ready, and the next Step runs it`;
    if (name === "step_event") return `Show the next engine event: the delivery of a gradient still on the way (${nodeTitle(next)} turns ready when its gradient arrives)`;
  }
  switch (name) {
    case "step":
      return next === undefined ? null : `Run the backward of ${nodeTitle(next)}, the node with the blue halo`;
    case "step_event":
      return next === undefined ? null : `Show the next engine event of ${nodeTitle(next)} (one decision at a time)`;
    case "run_to": {
      const target = selected === null ? undefined : view.graph.byId.get(selected);
      if (target === undefined) return "Select a node that has not run (click it, or Tab to the graph and press Enter), then run until it is the next";
      if (target.id === view.current) return `${nodeTitle(target)} is already the next to run: press Step`;
      const state = view.states.get(target.id);
      if (state !== undefined && (hasRun(state) || state === "error")) return `${nodeTitle(target)} has already run: select one that has not`;
      return `Continue until ${nodeTitle(target)} is the next to run`;
    }
    default:
      return null;
  }
}

/** Test ids keep the protocol's names: gv-step, gv-step-event, gv-run-to, ... */
function testId(name: CommandName): string {
  return `gv-${name.replace(/_/g, "-")}`;
}

/** A tooltip with the command's key, if it has one: "Run ... (key: s, with the graph focused)". */
export function withKey(name: CommandName, title: string): string {
  const key = COMMAND_KEYS[name];
  return key === undefined ? title : `${title} (key: ${key}, with the graph focused)`;
}

/**
 * A button whose accessible name is its visible text (what a sighted user reads and a speech
 * user says), and whose tooltip is its description (`title`: the accessible description).
 * `label`: a name for a button whose text is a symbol ("−", "+").
 */
export function button(text: string, title: string, testIdValue: string, onClick: () => void, label?: string): HTMLButtonElement {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = text;
  element.title = title;
  if (label !== undefined) element.setAttribute("aria-label", label);
  element.dataset["testid"] = testIdValue;
  element.addEventListener("click", onClick);
  return element;
}

/** What else the toolbar shows besides the session's state (toolbarState). */
export interface ToolbarContext {
  /** Why the kernel is gone, or null: then every command is off and the line says so. */
  readonly disconnected: string | null;
  /** A note after the status line (a refused command's reason, why a key did nothing), or null. */
  readonly notice: string | null;
  /** A gradient check is running: Check gradients is off until it answers. */
  readonly checking: boolean;
}

/** What the toolbar shows for a state: which commands are on, the status line, and each tooltip. */
export interface ToolbarState {
  readonly enabled: (name: CommandName) => boolean;
  readonly line: string;
  readonly title: (name: CommandName) => string | null;
}

/** The toolbar's buttons and line for `view` with `selected` selected (Toolbar.update takes them). */
export function toolbarState(view: ViewState, selected: number | null, context: ToolbarContext): ToolbarState {
  const { disconnected, notice, checking } = context;
  const line = statusText(view);
  return {
    enabled: (name) => disconnected === null && commandEnabled(name, view, selected) && !(name === "check_gradients" && checking),
    line: disconnected !== null ? `Disconnected · ${line}` : notice === null ? line : `${line} · ${notice}`,
    title: (name) => (disconnected !== null ? null : commandTitle(name, view, selected)),
  };
}

export class Toolbar {
  readonly element: HTMLDivElement;
  private readonly buttons = new Map<CommandName, HTMLButtonElement>();
  private readonly status: HTMLSpanElement;

  /** `extras`: host-specific controls shown after the command buttons (the HTML page's Restart). */
  constructor(actions: ToolbarActions, extras: readonly HTMLElement[] = []) {
    this.element = document.createElement("div");
    this.element.className = "gv-toolbar";
    this.element.setAttribute("role", "toolbar");
    this.element.setAttribute("aria-label", "backward debugger");
    for (const [name, { text, title }] of Object.entries(COMMAND_BUTTONS) as [CommandName, { text: string; title: string }][]) {
      const element = button(text, withKey(name, title), testId(name), () => actions.command(name));
      const key = COMMAND_KEYS[name];
      if (key !== undefined) element.setAttribute("aria-keyshortcuts", key);
      // Until Python says which commands the session offers, show only Step and Continue.
      element.hidden = name !== "step" && name !== "continue";
      if (name === "step") element.classList.add("gv-primary");
      if (name === "abort") element.classList.add("gv-danger");
      this.buttons.set(name, element);
    }
    this.status = document.createElement("span");
    this.status.className = "gv-status";
    this.status.dataset["testid"] = "gv-status";
    this.status.setAttribute("role", "status");
    this.status.setAttribute("aria-live", "polite");
    // The zoom buttons wrap as one group: split over two lines they read as unrelated buttons.
    const zoom = document.createElement("span");
    zoom.className = "gv-zoom";
    zoom.dataset["testid"] = "gv-zoom";
    zoom.setAttribute("role", "group");
    zoom.setAttribute("aria-label", "zoom");
    zoom.append(
      button("−", "Zoom out (or Ctrl + wheel)", "gv-zoom-out", actions.zoomOut, "Zoom out"),
      button("+", "Zoom in (or Ctrl + wheel)", "gv-zoom-in", actions.zoomIn, "Zoom in"),
      button("Fit", "Fit the graph into the view (or double-click it)", "gv-fit", actions.fit),
    );
    // The status and the zoom group share the end of the toolbar (.gv-toolbar-end): beside the
    // buttons while the status gets a readable width there, else together on a line of their own.
    const end = document.createElement("div");
    end.className = "gv-toolbar-end";
    end.append(this.status, zoom);
    this.element.append(...this.buttons.values(), ...extras, end);
  }

  /**
   * Show the offered commands, enable those that can run now, and show a line of status.
   * `title`: a button's tooltip for the state shown (commandTitle), null for its fixed one.
   */
  update(
    offered: ReadonlySet<CommandName>,
    enabled: (name: CommandName) => boolean,
    status: string,
    title: (name: CommandName) => string | null = () => null,
  ): void {
    for (const [name, element] of this.buttons) {
      const isOffered = offered.has(name);
      const unavailable = SHOWN_WHEN_NOT_OFFERED[name];
      element.hidden = !isOffered && unavailable === undefined;
      element.disabled = !isOffered || !enabled(name);
      const fixed = !isOffered && unavailable !== undefined ? unavailable : COMMAND_BUTTONS[name].title;
      element.title = withKey(name, (isOffered ? title(name) : null) ?? fixed);
    }
    this.status.textContent = status;
    this.status.title = status; // the whole line, when it is cut to fit
  }

  /** Press a command's button (its key): true if it was on and clicked, false if it is off. */
  press(name: CommandName): boolean {
    const element = this.buttons.get(name);
    if (element === undefined || element.hidden || element.disabled) return false;
    element.click();
    return true;
  }

  /** Why a command's key did nothing: its button is off (its tooltip says why) or not offered. */
  whyOff(name: CommandName): string {
    const element = this.buttons.get(name);
    if (element === undefined || element.hidden) return `${COMMAND_BUTTONS[name].text} is not offered here`;
    return `${element.textContent ?? name} is off: ${element.title}`;
  }
}

/** One line under the toolbar: the latest event's plain-English text. */
export class Narration {
  readonly element: HTMLDivElement;
  /** Opens and closes the event history; hidden when the session has none. */
  readonly toggle: HTMLButtonElement;
  private readonly text: HTMLSpanElement;

  constructor(onToggle: () => void = () => undefined) {
    this.element = document.createElement("div");
    this.element.className = "gv-narration";
    this.element.dataset["testid"] = "gv-narration";
    this.element.hidden = true;
    this.toggle = document.createElement("button");
    this.toggle.type = "button";
    this.toggle.className = "gv-narration-toggle";
    this.toggle.dataset["testid"] = "gv-history-toggle";
    this.toggle.addEventListener("click", onToggle);
    this.text = document.createElement("span");
    this.text.className = "gv-narration-text";
    this.text.dataset["testid"] = "gv-narration-text";
    this.text.setAttribute("aria-live", "polite");
    this.element.append(this.toggle, this.text);
    this.setExpandable(false, false);
  }

  /** Whether the ▸ opens a history (and whether it is open: ▾). */
  setExpandable(available: boolean, open: boolean): void {
    this.toggle.hidden = !available;
    this.toggle.textContent = open ? "▾" : "▸";
    this.toggle.setAttribute("aria-expanded", String(open));
    const what = open ? "Hide the event history" : "Show the event history (every event so far, in order)";
    this.toggle.title = what;
    this.toggle.setAttribute("aria-label", what);
  }

  update(event: EventLine | null): void {
    this.element.hidden = event === null;
    this.text.textContent = event?.text ?? "";
    this.element.title = event === null ? "" : `event ${event.seq ?? "?"} · ${event.kind}`;
    if (event === null) delete this.element.dataset["seq"];
    else this.element.dataset["seq"] = String(event.seq ?? "");
  }
}

/** What the colours of the graph mean, in the order a node goes through them. */
export const LEGEND: readonly { readonly state: string; readonly text: string; readonly title: string }[] = [
  { state: "pending", text: "pending", title: "Waiting for gradients from the nodes above it" },
  { state: "ready", text: "ready", title: "Every gradient it waits for has arrived; it can run (the one with the blue halo runs next)" },
  { state: "running", text: "running", title: "Part-way through its backward (after Step event)" },
  { state: "done", text: "done", title: "Its backward has run; its outgoing edges turn green as gradients are delivered" },
  { state: "released", text: "done, saved tensors freed", title: "Its backward has run and its saved tensors were freed (retain_graph=False)" },
  { state: "error", text: "error", title: "Its backward raised; select it to see the exception" },
];

/** The tooltip of the key's "runs next" entry. */
export const NEXT_TITLE =
  "The blue halo marks the node the next Step runs (the status line names it). " +
  "A dashed halo on a grey (pending) node: it runs next, but its gradient is still on the way from the node that just finished; " +
  "Step event shows it arrive, and the node turns ready";

/** A one-line key under the graph: a swatch per node state, styled like the nodes themselves. */
export function legend(): HTMLDivElement {
  const element = document.createElement("div");
  element.className = "gv-legend";
  element.dataset["testid"] = "gv-legend";
  element.setAttribute("aria-label", "colour key");
  for (const { state, text, title } of LEGEND) {
    const item = document.createElement("span");
    item.className = "gv-legend-item";
    item.title = title;
    const swatch = document.createElement("span");
    swatch.className = `gv-swatch gv-swatch-${state}`;
    item.append(swatch, document.createTextNode(text));
    element.append(item);
  }
  const custom = document.createElement("span");
  custom.className = "gv-legend-item";
  custom.title = "A thick border marks the node of a custom autograd.Function";
  const swatch = document.createElement("span");
  swatch.className = "gv-swatch gv-swatch-custom";
  custom.append(swatch, document.createTextNode("custom Function"));
  // The blue halo is not a state (a ready node has it when it is the one that runs next), and
  // without its own entry it reads as "running", the blue state.
  const next = document.createElement("span");
  next.className = "gv-legend-item";
  next.dataset["testid"] = "gv-legend-next";
  next.title = NEXT_TITLE;
  const halo = document.createElement("span");
  halo.className = "gv-swatch gv-swatch-next";
  next.append(halo, document.createTextNode("runs next (Step)"));
  const keys = document.createElement("span");
  keys.className = "gv-legend-item gv-legend-keys";
  keys.dataset["testid"] = "gv-legend-keys";
  keys.title = KEYS_HELP;
  keys.textContent = KEYS_LEGEND;
  element.append(next, custom, keys);
  return element;
}
