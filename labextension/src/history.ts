// The event history (every event's narration, in order, the current one highlighted) and the
// output panel (what user code printed while a button ran it). The `history`,
// `history_position` and `output` traits: docs/widget_protocol.md.
//
// In a replay a click on an event jumps there (a `seek` command: the first index + 1 events
// shown); in a live session the events are the ones shown so far, and a click selects the
// event's node. The parsing is pure (unit-tested); the panels only build DOM, with textContent.

import type * as protocol from "./generated/widget_protocol.js";
import { ProtocolError } from "./model.js";
import { readShape } from "./payload.js";

export interface HistoryEntry {
  /** The event's index in the session's (or the trace's) event stream. */
  readonly index: number;
  readonly kind: string;
  readonly node: number | null;
  readonly text: string;
}

export interface History {
  /** The index of the first entry: the events before it are left out (too many to send). */
  readonly start: number;
  /** How many events there are in all (a replay: the whole trace). */
  readonly total: number;
  readonly entries: readonly HistoryEntry[];
  /** A replay: a click jumps to the event (else it selects the event's node). */
  readonly seekable: boolean;
  /** How many events are shown: the current event is `position - 1`. */
  readonly position: number;
}

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

/**
 * The `history` and `history_position` traits; null when the session has no event stream. A
 * malformed history is a ProtocolError naming the field (checked against the generated shape).
 */
export function parseHistory(value: unknown, position: unknown): History | null {
  if (value === null || value === undefined) return null;
  const { start, total, events, seekable } = readShape<protocol.History>("History", value, "history");
  // What the shape does not say: the counts are not negative.
  for (const [key, count] of [["start", start], ["total", total]] as const) {
    if (count < 0) throw new ProtocolError(`history.${key} must be a non-negative integer, got ${count}`);
  }
  const entries = events.map(([kind, node, text], offset): HistoryEntry => (
    { index: start + offset, kind, node: isCount(node) ? node : null, text }
  ));
  return { start, total, entries, seekable, position: isCount(position) ? position : 0 };
}

/** What a click on an entry does: jump to it (replay), select its node (live), or nothing. */
export type HistoryAction = { readonly seek: number } | { readonly select: number } | null;

export function historyAction(history: History, entry: HistoryEntry): HistoryAction {
  if (history.seekable) return { seek: entry.index + 1 };
  return entry.node === null ? null : { select: entry.node };
}

/** The panel's heading: how many events, and how many are left out. */
export function historyTitle(history: History): string {
  const shown = history.seekable ? `event ${history.position} of ${history.total}` : `${history.total} events so far`;
  const before = history.start;
  const after = history.total - history.start - history.entries.length;
  const cut = [before > 0 ? `${before} earlier` : "", after > 0 ? `${after} later` : ""].filter((part) => part !== "");
  const tail = cut.length > 0 ? ` (${cut.join(", ")} not listed)` : "";
  const how = history.seekable ? "click an event to jump to it" : "click an event to select its node";
  return `Event history · ${shown}${tail} · ${how}`;
}

/** The scrollable list of events under the narration; opened by the narration's ▸. */
export class HistoryPanel {
  readonly element: HTMLElement;
  private readonly title: HTMLElement;
  private readonly list: HTMLOListElement;
  private history: History | null = null;
  private open = false;
  /** What the list shows now: a refresh that changes none of it does not rebuild the list. */
  private drawn = "";

  constructor(private readonly onAction: (action: NonNullable<HistoryAction>) => void) {
    this.element = document.createElement("section");
    this.element.className = "gv-history";
    this.element.dataset["testid"] = "gv-history";
    this.element.setAttribute("aria-label", "event history");
    this.element.hidden = true;
    this.title = document.createElement("div");
    this.title.className = "gv-history-title";
    this.list = document.createElement("ol");
    this.list.className = "gv-history-list";
    this.element.append(this.title, this.list);
  }

  get isOpen(): boolean {
    return this.open;
  }

  /** Whether there is a history to open (a session without events has none). */
  get available(): boolean {
    return this.history !== null;
  }

  toggle(): void {
    this.open = !this.open;
    this.render();
  }

  update(history: History | null): void {
    this.history = history;
    this.render();
  }

  private render(): void {
    const history = this.history;
    this.element.hidden = !this.open || history === null;
    if (this.element.hidden || history === null) {
      this.drawn = "";
      return;
    }
    // The view refreshes on every trait change; up to 1000 items are rebuilt only when they change.
    const last = history.entries[history.entries.length - 1];
    const drawn = `${history.start}:${history.total}:${history.entries.length}:${history.position}:${history.seekable}:${last?.text ?? ""}`;
    if (drawn === this.drawn) return;
    this.drawn = drawn;
    this.title.textContent = historyTitle(history);
    const items = history.entries.map((entry) => {
      const item = document.createElement("li");
      item.className = "gv-history-item";
      item.value = entry.index + 1;
      item.dataset["testid"] = "gv-history-item";
      item.dataset["index"] = String(entry.index);
      if (entry.node !== null) item.dataset["node"] = String(entry.node);
      item.textContent = entry.text === "" ? entry.kind : entry.text;
      item.title = `event ${entry.index} · ${entry.kind}`;
      if (entry.index === history.position - 1) {
        item.classList.add("gv-history-current");
        item.setAttribute("aria-current", "step");
      } else if (entry.index >= history.position) {
        item.classList.add("gv-history-later");
      }
      const action = historyAction(history, entry);
      if (action !== null) {
        item.tabIndex = 0;
        item.classList.add("gv-history-link");
        item.addEventListener("click", () => this.onAction(action));
        item.addEventListener("keydown", (event) => {
          if (event.key === "Enter" || event.key === " ") {
            event.preventDefault();
            this.onAction(action);
          }
        });
      }
      return item;
    });
    this.list.replaceChildren(...items);
    // Keep the current event in sight, without scrolling the notebook around the widget.
    const current = this.list.querySelector<HTMLElement>(".gv-history-current");
    if (current !== null) this.list.scrollTop = Math.max(0, current.offsetTop - this.list.clientHeight / 2);
    else this.list.scrollTop = this.list.scrollHeight;
  }
}

/** The output panel: what user code printed while a button ran it (the `output` trait). */
export class OutputPanel {
  readonly element: HTMLDetailsElement;
  private readonly summary: HTMLElement;
  private readonly text: HTMLPreElement;
  private shown = "";

  constructor() {
    this.element = document.createElement("details");
    this.element.className = "gv-output";
    this.element.dataset["testid"] = "gv-output";
    this.element.hidden = true;
    this.summary = document.createElement("summary");
    this.text = document.createElement("pre");
    this.text.className = "gv-output-text";
    this.text.dataset["testid"] = "gv-output-text";
    this.element.append(this.summary, this.text);
  }

  update(value: unknown): void {
    const output = typeof value === "string" ? value : "";
    if (output === this.shown) return;
    const grew = output.length > 0 && output !== this.shown;
    this.shown = output;
    this.element.hidden = output === "";
    const lines = output === "" ? 0 : output.replace(/\n$/, "").split("\n").length;
    this.summary.textContent = `Output of your code during commands (${lines} line${lines === 1 ? "" : "s"})`;
    this.text.textContent = output;
    if (grew) {
      this.element.open = true; // new output: show it where the user looks
      this.text.scrollTop = this.text.scrollHeight;
    }
  }
}
