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
