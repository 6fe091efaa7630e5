// The inspector of a module (protocol 5): what Python sends in `inspection` after a
// `{"type": "select", "module": "blocks.3"}` message (a click on a folded module's box):
// the module's name, class, node counts and its parameters with their gradient summaries.
// A click on a parameter selects its AccumulateGrad node. All text is set with textContent.

import { formatNumber, parseInspection, parseSummary, type Inspection, type Summary } from "./inspector.js";
import { nodeTitle, type Graph } from "./model.js";
import type * as protocol from "./generated/widget_protocol.js";
import { isRecord, type ModuleSelect, type OverlayRequest } from "./generated/widget_protocol.js";
import { readShape } from "./payload.js";

/** Ask Python to show a module in the inspector (its dotted path; null: nothing). */
export type ModuleSelectMessage = Readonly<ModuleSelect>;

/** The message the fold view sends when a folded module's box is clicked. */
export function selectModuleMessage(path: string | null): ModuleSelectMessage {
  return { type: "select", module: path };
}

/** A view's picker asks Python for a built-in overlay's values (overlays.ts). */
export type OverlayRequestMessage = Readonly<OverlayRequest>;

export function overlayRequestMessage(name: string | null): OverlayRequestMessage {
  return { type: "overlay", name };
}

export interface ModuleParameter {
  readonly id: number;
  readonly name: string;
  readonly grad: Summary | null;
}

export interface ModuleInspection {
  readonly module: string;
  readonly type: string;
  readonly count: number;
  readonly calls: number;
  /** How many of its nodes are in each state, in a fixed order. */
  readonly states: readonly (readonly [string, number])[];
  readonly parameters: readonly ModuleParameter[];
}

/** The `inspection` trait read for the two inspectors: a module's, or a node's; null in the other. */
export interface InspectionTrait {
  readonly module: ModuleInspection | null;
  /** The node's inspection, only while it is the node `selected` (a stale one shows nothing). */
  readonly node: Inspection | null;
}

/**
 * Read the `inspection` trait: a module inspection (parseModuleInspection) or else a node's
 * (parseInspection, naming nodes by their titles in `graph`); a malformed one throws the
 * parser's ProtocolError.
 */
export function readInspectionTrait(value: unknown, graph: Graph, selected: number | null): InspectionTrait {
  const module = parseModuleInspection(value);
  if (module !== null) return { module, node: null };
  const node = parseInspection(value, (id) => {
    const found = graph.byId.get(id);
    return found === undefined ? `#${id}` : nodeTitle(found);
  });
  return { module: null, node: node !== null && node.id === selected ? node : null };
}

const STATE_ORDER = ["done", "released", "running", "ready", "pending", "error"];

/**
 * A module inspection (it has a string `module`), checked against the generated shape: a
 * ProtocolError naming the field when it is malformed; null for anything else (a node's
 * inspection). The view orders the states and reads each gradient leniently (parseSummary).
 */
export function parseModuleInspection(value: unknown): ModuleInspection | null {
  if (!isRecord(value) || typeof value["module"] !== "string") return null;
  const checked = readShape<protocol.ModuleInspection>("ModuleInspection", value, "inspection");
  const counted = Object.keys(checked.states).sort((a, b) => {
    const [x, y] = [STATE_ORDER.indexOf(a), STATE_ORDER.indexOf(b)];
    return (x < 0 ? 99 : x) - (y < 0 ? 99 : y) || a.localeCompare(b);
  });
  return {
    module: checked.module,
    type: checked.type,
    count: Math.max(0, checked.count),
    calls: Math.max(1, checked.calls),
    states: counted.map((state) => [state, Math.max(0, checked.states[state]!)] as const),
    parameters: checked.parameters.map((item) => ({ id: item.id, name: item.name, grad: parseSummary(item.grad) })),
  };
}

/** The header line: "blocks.3 · Block · 61 nodes · applied 12 times". */
export function moduleHeadline(inspection: ModuleInspection): string {
  const parts = [inspection.module === "" ? "(the model)" : inspection.module];
  if (inspection.type !== "") parts.push(inspection.type);
  parts.push(`${inspection.count} node${inspection.count === 1 ? "" : "s"}`);
  if (inspection.calls > 1) parts.push(`applied ${inspection.calls} times`);
  return parts.join(" · ");
}

/** The cells of one parameter row: name, shape, dtype, min, max, norm, NaN, Inf. */
export function parameterCells(parameter: ModuleParameter): string[] {
  const grad = parameter.grad;
  if (grad === null) return [parameter.name, "no gradient yet", "", "", "", "", "", ""];
  return [
    parameter.name,
    grad.shape === null ? "?" : `[${grad.shape.join(", ")}]`,
    grad.dtype ?? "?",
    formatNumber(grad.min),
    formatNumber(grad.max),
    formatNumber(grad.norm),
    String(grad.nan),
    String(grad.inf),
  ];
}

const COLUMNS = ["parameter", "shape", "dtype", "min", "max", "norm", "NaN", "Inf"];

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, content = ""): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className !== "") node.className = className;
  if (content !== "") node.textContent = content;
  return node;
}

/** The module inspector panel; hidden unless a module is selected. */
export class ModuleInspector {
  readonly element: HTMLElement;

  constructor(
    private readonly onSelectNode: (id: number) => void,
    private readonly onClose: () => void,
  ) {
    this.element = element("section", "gv-inspector gv-module-inspector");
    this.element.dataset["testid"] = "gv-module-inspector";
    this.element.setAttribute("aria-label", "selected module");
    this.element.hidden = true;
  }

  update(inspection: ModuleInspection | null): void {
    this.element.hidden = inspection === null;
    this.element.replaceChildren();
    if (inspection === null) return;
    this.element.dataset["module"] = inspection.module;
    const header = element("div", "gv-inspector-header");
    const name = element("span", "gv-inspector-name", moduleHeadline(inspection));
    name.dataset["testid"] = "gv-module-name";
    header.append(name);
    for (const [state, count] of inspection.states) {
      const chip = element("span", "gv-chip gv-chip-state", `${count} ${state}`);
      chip.dataset["state"] = state;
      header.append(chip);
    }
    const close = element("button", "gv-inspector-close", "×");
    close.type = "button";
    close.title = "Close the inspector";
    close.setAttribute("aria-label", "Close the inspector");
    close.dataset["testid"] = "gv-module-close";
    close.addEventListener("click", this.onClose);
    header.append(close);
    this.element.append(header);
    const section = element("div", "gv-inspector-section");
    section.dataset["section"] = "parameters";
    section.append(element("div", "gv-inspector-title", `Parameters (${inspection.parameters.length})`));
    if (inspection.parameters.length === 0) {
      section.append(element("div", "gv-inspector-note", "none: no named parameter is used inside this module"));
      this.element.append(section);
      return;
    }
    const table = element("table", "gv-grads gv-module-params");
    const head = element("tr", "");
    for (const column of COLUMNS) head.append(element("th", "", column));
    table.append(element("thead", ""), element("tbody", ""));
    table.tHead?.append(head);
    for (const parameter of inspection.parameters) {
      const row = element("tr", "");
      row.dataset["testid"] = "gv-module-param";
      row.dataset["nodeId"] = String(parameter.id);
      parameterCells(parameter).forEach((text, index) => {
        const cell = element("td", index >= 3 ? "gv-num" : "gv-text");
        cell.dataset["label"] = COLUMNS[index] ?? "";
        if (index === 0) {
          const link = element("button", "gv-link", text);
          link.type = "button";
          link.title = "Select this parameter's AccumulateGrad node";
          link.addEventListener("click", () => this.onSelectNode(parameter.id));
          cell.append(link);
        } else {
          cell.textContent = text;
          if ((index === 6 || index === 7) && text !== "" && text !== "0") cell.classList.add("gv-alarm");
        }
        row.append(cell);
      });
      table.tBodies[0]?.append(row);
    }
    const scroller = element("div", "gv-grads-scroll");
    scroller.append(table);
    section.append(scroller);
    this.element.append(section);
  }
}

export const MODULE_INSPECTOR_STYLES = `
.gv-root .gv-module-params { table-layout: auto; }
.gv-root .gv-link { font: inherit; color: var(--jp-content-link-color, #0969da); background: none; border: none; padding: 0; cursor: pointer; text-align: left; }
.gv-root .gv-link:hover { text-decoration: underline; }
`;
