// The elements of the view that are not a panel of their own (widget.ts's renderView): the
// graph's canvas with its message line ("Laying out…", "No graph yet") and the error box.

import { KEYS_HELP } from "./keys.js";

/** The graph's canvas and the message shown in it instead of (or while waiting for) a drawing. */
export interface Canvas {
  readonly element: HTMLDivElement;
  /** Show `text` over the canvas; null hides the message. */
  readonly showMessage: (text: string | null) => void;
}

/** A canvas: one tab stop for the whole graph; the keys move a cursor inside it (keys.ts, draw.ts). */
export function createCanvas(): Canvas {
  const element = document.createElement("div");
  element.className = "gv-canvas";
  element.style.height = "160px";
  element.tabIndex = 0;
  element.title = KEYS_HELP;
  element.setAttribute("aria-label", "autograd graph");
  element.dataset["testid"] = "gv-canvas";
  element.setAttribute("data-lm-suppress-shortcuts", "true"); // JupyterLab: the arrows are ours here
  const message = document.createElement("div");
  message.className = "gv-message";
  element.append(message);
  const showMessage = (text: string | null): void => {
    message.hidden = text === null;
    message.textContent = text ?? "";
  };
  return { element, showMessage };
}

/** The error box: Python's error, the view's own problems, one per paragraph; hidden when none. */
export function createErrorBox(): HTMLPreElement {
  const box = document.createElement("pre");
  box.className = "gv-error";
  box.dataset["testid"] = "gv-error";
  box.setAttribute("role", "alert");
  box.hidden = true;
  return box;
}

/** Show `problems` in the error box (textContent: text from user code is never HTML). */
export function showProblems(box: HTMLPreElement, problems: readonly string[]): void {
  box.hidden = problems.length === 0;
  box.textContent = problems.join("\n\n");
}

/** What can be wrong with a view, each null when it is not. */
export interface ViewTroubles {
  /** Python's `error` trait: a command raised. */
  readonly python: string | null;
  /** The kernel is gone (connection.ts's text). */
  readonly disconnected: string | null;
  /** The view's own: a malformed trait or message, a failed layout, an unreachable kernel. */
  readonly view: string | null;
  /** Python's error reply to a malformed message from this view. */
  readonly refused: string | null;
  /** The kernel speaks another protocol version. */
  readonly mismatch: string | null;
}

/** The error box's paragraphs, in this order: Python's error first, then the view's own. */
export function viewProblems(troubles: ViewTroubles): string[] {
  const problems: string[] = [];
  if (troubles.python !== null) problems.push(troubles.python);
  if (troubles.disconnected !== null) problems.push(`gradviz view: ${troubles.disconnected}`);
  if (troubles.view !== null) problems.push(`gradviz view: ${troubles.view}`);
  if (troubles.refused !== null) problems.push(`gradviz widget refused a message from this view: ${troubles.refused}`);
  if (troubles.mismatch !== null) problems.push(`gradviz view: ${troubles.mismatch}`);
  return problems;
}
