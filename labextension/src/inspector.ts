// The inspector: what the session knows about the selected node (the `inspection` trait).
//
// The trait is `session.node(id)` made JSON-safe by Python (docs/widget_protocol.md). The
// parsing and formatting below are pure (unit-tested); the Inspector class only builds DOM,
// and sets every piece of text with textContent.

import { factSections, type FactLine, type NodeNamer } from "./inspector_facts.js";
import { isRecord } from "./generated/widget_protocol.js";
import type * as protocol from "./generated/widget_protocol.js";
import { readShape } from "./payload.js";

/** A number from a tensor summary: NaN and infinities arrive as "nan", "inf", "-inf". */
export type SummaryNumber = number | string | null;

/** A tensor summary (docs/events.md, "Common fields"), as far as the inspector shows it. */
export interface Summary {
  readonly shape: readonly number[] | null;
  readonly dtype: string | null;
  readonly numel: number | null;
  readonly min: SummaryNumber;
  readonly max: SummaryNumber;
  readonly mean: SummaryNumber;
  readonly norm: SummaryNumber;
  readonly nan: number;
  readonly inf: number;
  readonly values: readonly SummaryNumber[];
}

/** One table row: a label ("0", "before") and a summary; null is an undefined gradient (None). */
export interface SummaryRow {
  readonly label: string;
  readonly summary: Summary | null;
  /** What a null summary means here (default "None", an undefined gradient). */
  readonly absent?: string;
}

export interface InspectorSection {
  readonly key: string;
  readonly title: string;
  readonly rows: readonly SummaryRow[];
  /** Lines of text (hooks registered, saved tensors, the source line...), after the table. */
  readonly lines?: readonly FactLine[];
  /** Shown instead of the table when there are neither rows nor lines. */
  readonly note: string;
}

export interface Inspection {
  readonly id: number;
  /** The node's small display number (graph node `number`); its id when the graph has none. */
  readonly number: number;
  readonly name: string;
  readonly kind: string;
  readonly label: string;
  /** The leaf's name (`w`, `fc.weight`) of an AccumulateGrad node; "" when unknown. */
  readonly leafName: string;
  readonly state: string;
  readonly error: string | null;
  readonly sections: readonly InspectorSection[];
  /** Why there is nothing more to show (a saved page keeps no gradients); "" when none. */
  readonly note: string;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function summaryNumber(value: unknown): SummaryNumber {
  return typeof value === "number" || typeof value === "string" ? value : null;
}

function count(value: unknown): number {
  return typeof value === "number" && Number.isFinite(value) ? value : 0;
}

/** Read a summary leniently: a missing field shows as a dash, never as an error. */
export function parseSummary(value: unknown): Summary | null {
  if (!isRecord(value)) return null;
  const shape = Array.isArray(value["shape"]) && value["shape"].every((n) => typeof n === "number") ? (value["shape"] as number[]) : null;
  return {
    shape,
    dtype: typeof value["dtype"] === "string" ? value["dtype"] : null,
    numel: typeof value["numel"] === "number" ? value["numel"] : null,
    min: summaryNumber(value["min"]),
    max: summaryNumber(value["max"]),
    mean: summaryNumber(value["mean"]),
    norm: summaryNumber(value["norm"]),
    nan: count(value["nan"]),
    inf: count(value["inf"]),
    values: Array.isArray(value["values"]) ? value["values"].map(summaryNumber) : [],
  };
}

/**
 * Why a node has no gradients in yet. A ready node's have all arrived (its buffer, shown
 * above as "collected so far"); they are handed to its backward when it runs.
 */
function notReceived(state: string, buffer: readonly SummaryRow[] | null): string {
  // "above" only when the buffer is shown above (a saved page or an old trace may have none).
  const shown = buffer !== null && buffer.length > 0;
  if (state === "ready") return shown ? "handed to its backward when it runs: the gradients collected so far, above" : "handed to its backward when it runs";
  if (state === "pending" && shown) return "not all received yet (collected so far: above)";
  return "not received yet";
}

function summaryList(value: unknown): SummaryRow[] | null {
  if (!Array.isArray(value)) return null;
  return value.map((item, index) => ({ label: String(index), summary: parseSummary(item) }));
}

/**
 * Check and convert the `inspection` trait (null: nothing selected). The graph's fields of the
 * node must have the generated `Inspection` shape, or a ProtocolError names the field; the
 * other keys are open (a session adds its own, older traces lack some), so each is read
 * leniently: a missing or malformed one shows nothing.
 */
export function parseInspection(value: unknown, nameOf: NodeNamer = (id) => `#${id}`): Inspection | null {
  if (value === null || value === undefined) return null;
  const checked = readShape<protocol.Inspection>("Inspection", value, "inspection");
  const { id, name } = checked;
  const state: string = checked.state;
  const sections: InspectorSection[] = [];
  const gradsIn = summaryList(checked.grads_in);
  const gradsOut = summaryList(checked.grads_out);
  // A buffer slot with nothing in it yet (null) has not received its gradient: not "None".
  const buffer = summaryList(checked.pending_buffer)?.map((row) => (row.summary === null ? { ...row, absent: "nothing yet" } : row)) ?? null;
  if (buffer !== null && (state === "pending" || state === "ready")) {
    sections.push({ key: "buffer", title: "Gradients collected so far", rows: buffer, note: "none yet" });
  }
  if (gradsIn !== null || "grads_in" in checked) {
    sections.push({ key: "in", title: "Gradients in", rows: gradsIn ?? [], note: gradsIn === null ? notReceived(state, buffer) : "none" });
  }
  const facts = factSections(checked, parseSummary, nameOf);
  sections.push(...facts.afterIn);
  if (gradsOut !== null || "grads_out" in checked) {
    const leaf = checked.kind === "accumulate_grad";
    const note = gradsOut === null ? "not computed yet" : leaf ? "none: a leaf's gradient goes to its .grad" : "none";
    sections.push({ key: "out", title: "Gradients out", rows: gradsOut ?? [], note });
  }
  const accumulated = checked["accumulated"];
  if (isRecord(accumulated)) {
    const rows = ["before", "after"].map((label) => ({ label, summary: parseSummary(accumulated[label]) }));
    sections.push({ key: "accumulated", title: ".grad of the leaf", rows, note: "" });
  }
  sections.push(...facts.afterOut);
  const failure = checked["error"];
  const error = isRecord(failure) ? `${text(failure["exception"])}: ${text(failure["message"])}` : null;
  const number = checked["number"];
  return {
    id,
    number: typeof number === "number" && Number.isSafeInteger(number) && number >= 0 ? number : id,
    name,
    kind: checked.kind,
    label: checked.label,
    leafName: checked.leaf_name ?? "",
    state,
    error,
    sections,
    note: text(checked["note"]),
  };
}

/** Four significant digits; exponent notation for very large and very small magnitudes. */
export function formatNumber(value: SummaryNumber): string {
  if (value === null) return "—";
  if (typeof value === "string") return value;
  if (Number.isInteger(value) && Math.abs(value) < 1e6) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 1e5 || (magnitude !== 0 && magnitude < 1e-3)) return value.toExponential(3);
  return String(Number(value.toPrecision(4)));
}

/**
 * One column of the gradient tables. Every table of the inspector uses these widths (in
 * characters of the monospace font), so the columns line up from one section to the next;
 * numbers are right-aligned. A cell longer than its column ends in "…" and shows the whole
 * text in its tooltip, except the last column (the first values), whose text wraps.
 */
export interface SummaryColumn {
  readonly name: string;
  /** The header's tooltip. */
  readonly title: string;
  readonly numeric: boolean;
  /** Width in characters (`ch`); for the last column, its least width (it takes the rest). */
  readonly width: number;
}

export const SUMMARY_COLUMNS: readonly SummaryColumn[] = [
  { name: "", title: "input or output slot (before / after: the leaf's .grad)", numeric: false, width: 6 },
  { name: "shape", title: "shape", numeric: false, width: 13 },
  { name: "dtype", title: "dtype", numeric: false, width: 8 },
  // formatNumber's longest text is 11 characters ("-1.000e+300")
  { name: "min", title: "smallest finite entry", numeric: true, width: 11 },
  { name: "max", title: "largest finite entry", numeric: true, width: 11 },
  { name: "mean", title: "mean of the finite entries", numeric: true, width: 11 },
  { name: "norm", title: "L2 norm of the finite entries", numeric: true, width: 11 },
  { name: "NaN", title: "how many entries are NaN", numeric: true, width: 5 },
  { name: "Inf", title: "how many entries are +inf or -inf", numeric: true, width: 5 },
  // The least width of the last column: it takes whatever the panel has left, and wraps.
  { name: "values", title: "the entries in row-major order, as flatten() lists them (all of them up to 32, else the first six)", numeric: false, width: 14 },
];

/** The column whose text wraps instead of ending in "…". */
export const WRAPPING_COLUMN = SUMMARY_COLUMNS.length - 1;

export interface Cell {
  readonly text: string;
  /** A NaN or Inf count above zero: shown in red. */
  readonly alarm: boolean;
  /** The tooltip: the whole text when it is longer than its column (else ""). */
  readonly title: string;
}

/** The cells of one row, in SUMMARY_COLUMNS order. */
export function summaryCells(row: SummaryRow): Cell[] {
  const summary = row.summary;
  const texts: [string, boolean][] = summary === null
    ? [[row.label, false], [row.absent ?? "None", false], ...SUMMARY_COLUMNS.slice(2).map((): [string, boolean] => ["", false])]
    : [
        [row.label, false],
        [summary.shape === null ? "?" : `[${summary.shape.join(", ")}]`, false],
        [summary.dtype ?? "?", false],
        [formatNumber(summary.min), false],
        [formatNumber(summary.max), false],
        [formatNumber(summary.mean), false],
        [formatNumber(summary.norm), false],
        [String(summary.nan), summary.nan > 0],
        [String(summary.inf), summary.inf > 0],
        [`[${summary.values.map(formatNumber).join(", ")}${summary.numel !== null && summary.numel > summary.values.length ? ", …" : ""}]`, false],
      ];
  return texts.map(([text, alarm], index) => {
    const width = SUMMARY_COLUMNS[index]?.width ?? Infinity;
    return { text, alarm, title: index !== WRAPPING_COLUMN && text.length > width ? text : "" };
  });
}

/** Left and right padding of a table cell, in px (styles.ts, .gv-grads th/td). */
const CELL_PADDING = 6;

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, content = ""): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className !== "") node.className = className;
  if (content !== "") node.textContent = content;
  return node;
}

/** The inspector panel under the graph; hidden while nothing is selected. */
export class Inspector {
  readonly element: HTMLElement;

  constructor(private readonly onClose: () => void) {
    this.element = element("section", "gv-inspector");
    this.element.dataset["testid"] = "gv-inspector";
    this.element.setAttribute("aria-label", "selected node");
    this.element.hidden = true;
  }

  /** Show a node's details, or hide the panel (null). Rebuilt on each change: it is small. */
  update(inspection: Inspection | null): void {
    this.element.hidden = inspection === null;
    this.element.replaceChildren();
    if (inspection === null) return;
    const header = element("div", "gv-inspector-header");
    if (inspection.leafName !== "") {
      // Which leaf this is ("w", "fc.weight"): the class name alone does not tell them apart.
      const leaf = element("span", "gv-inspector-leaf", inspection.leafName);
      leaf.dataset["testid"] = "gv-inspector-leaf";
      leaf.title = "the leaf tensor's name";
      header.append(leaf, element("span", "gv-inspector-sep", "·"));
    }
    const name = element("span", "gv-inspector-name", inspection.name);
    name.dataset["testid"] = "gv-inspector-name";
    const number = element("span", "gv-inspector-id", `#${inspection.number}`);
    number.dataset["nodeId"] = String(inspection.id); // the engine's id, as on the graph's nodes
    number.title = `node ${inspection.number} of this graph`;
    header.append(name, number);
    for (const [key, value] of [["kind", inspection.kind], ["state", inspection.state]] as const) {
      if (value === "") continue;
      const chip = element("span", `gv-chip gv-chip-${key}`, value);
      chip.dataset[key] = value;
      header.append(chip);
    }
    if (inspection.label !== "" && inspection.label !== inspection.name) {
      header.append(element("span", "gv-inspector-label", inspection.label));
    }
    const close = element("button", "gv-inspector-close", "×");
    close.type = "button";
    close.title = "Close the inspector";
    close.setAttribute("aria-label", "Close the inspector");
    close.dataset["testid"] = "gv-inspector-close";
    close.addEventListener("click", this.onClose);
    header.append(close);
    this.element.append(header);
    if (inspection.error !== null) {
      const error = element("div", "gv-inspector-error", inspection.error);
      error.setAttribute("role", "alert");
      this.element.append(error);
    }
    for (const section of inspection.sections) this.element.append(this.section(section));
    if (inspection.note !== "") {
      const note = element("div", "gv-inspector-note", inspection.note);
      note.dataset["testid"] = "gv-inspector-note";
      this.element.append(note);
    }
  }

  private section(section: InspectorSection): HTMLElement {
    const wrapper = element("div", "gv-inspector-section");
    wrapper.dataset["section"] = section.key;
    const title = element("div", "gv-inspector-title", section.title);
    wrapper.append(title);
    const lines = section.lines ?? [];
    if (section.rows.length === 0 && lines.length === 0) {
      wrapper.append(element("div", "gv-inspector-note", section.note));
      return wrapper;
    }
    if (section.rows.length > 0) wrapper.append(this.table(section));
    if (lines.length > 0) {
      const list = element("ul", "gv-facts");
      for (const line of lines) {
        const item = element("li", line.alarm === true ? "gv-alarm" : "", line.text);
        item.dataset["testid"] = "gv-fact";
        list.append(item);
      }
      wrapper.append(list);
    }
    return wrapper;
  }

  private table(section: InspectorSection): HTMLElement {
    const table = element("table", "gv-grads");
    const columns = element("colgroup", "");
    const head = element("tr", "");
    const align = (column: SummaryColumn | undefined): string => (column?.numeric === true ? "gv-num" : "gv-text");
    SUMMARY_COLUMNS.forEach((column, index) => {
      // Fixed widths (table-layout: fixed): every section's table has the same columns; the
      // last one (no width) takes what is left of the panel's width.
      const col = element("col", "");
      if (index !== WRAPPING_COLUMN) col.style.width = `calc(${column.width}ch + ${2 * CELL_PADDING}px)`;
      columns.append(col);
      const th = element("th", align(column), column.name);
      th.title = column.title;
      head.append(th);
    });
    // As wide as the panel, but never narrower than the columns' widths: a narrow panel
    // scrolls the table sideways (its scroll bar right under it) instead of cutting it.
    const characters = SUMMARY_COLUMNS.reduce((sum, column) => sum + column.width, 0);
    table.style.minWidth = `calc(${characters}ch + ${2 * CELL_PADDING * SUMMARY_COLUMNS.length}px)`;
    table.append(columns, element("thead", ""), element("tbody", ""));
    table.tHead?.append(head);
    for (const row of section.rows) {
      const line = element("tr", "");
      line.dataset["testid"] = "gv-grad-row";
      summaryCells(row).forEach((cell, index) => {
        const td = element("td", `${align(SUMMARY_COLUMNS[index])}${cell.alarm ? " gv-alarm" : ""}`, cell.text);
        if (cell.title !== "") td.title = cell.title;
        // The stacked layout of a narrow panel shows each cell as "name: value" (styles.ts).
        const column = SUMMARY_COLUMNS[index]?.name ?? "";
        if (column !== "") td.dataset["label"] = column;
        line.append(td);
      });
      table.tBodies[0]?.append(line);
    }
    const scroller = element("div", "gv-grads-scroll");
    scroller.append(table);
    return scroller;
  }
}
