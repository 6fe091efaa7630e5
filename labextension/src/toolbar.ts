// The toolbar: Step and Continue (commands for Python), zoom controls (local), status text.

import type { CommandName } from "./model.js";

export interface ToolbarActions {
  command(name: CommandName): void;
  zoomIn(): void;
  zoomOut(): void;
  fit(): void;
}

function button(text: string, title: string, testId: string, onClick: () => void): HTMLButtonElement {
  const element = document.createElement("button");
  element.type = "button";
  element.textContent = text;
  element.title = title;
  element.setAttribute("aria-label", title);
  element.dataset["testid"] = testId;
  element.addEventListener("click", onClick);
  return element;
}

export class Toolbar {
  readonly element: HTMLDivElement;
  private readonly step: HTMLButtonElement;
  private readonly continueButton: HTMLButtonElement;
  private readonly status: HTMLSpanElement;

  constructor(actions: ToolbarActions) {
    this.element = document.createElement("div");
    this.element.className = "gv-toolbar";
    this.element.setAttribute("role", "toolbar");
    this.element.setAttribute("aria-label", "backward debugger");
    this.step = button("Step", "Run the backward of the next node", "gv-step", () => actions.command("step"));
    this.step.classList.add("gv-primary");
    this.continueButton = button("Continue", "Run the rest of the backward pass", "gv-continue", () =>
      actions.command("continue"),
    );
    this.status = document.createElement("span");
    this.status.className = "gv-status";
    this.status.dataset["testid"] = "gv-status";
    this.status.setAttribute("role", "status");
    this.status.setAttribute("aria-live", "polite");
    const spacer = document.createElement("span");
    spacer.className = "gv-spacer";
    this.element.append(
      this.step,
      this.continueButton,
      this.status,
      spacer,
      button("−", "Zoom out", "gv-zoom-out", actions.zoomOut),
      button("+", "Zoom in", "gv-zoom-in", actions.zoomIn),
      button("Fit", "Fit the graph into the view (or double-click it)", "gv-fit", actions.fit),
    );
  }

  /** Enable the commands (only while the session is paused) and show a line of status. */
  update(commandsEnabled: boolean, status: string): void {
    this.step.disabled = !commandsEnabled;
    this.continueButton.disabled = !commandsEnabled;
    this.status.textContent = status;
    this.status.title = status;
  }
}
