// The gradient doctor's panel: what "Check gradients" found (the `doctor` trait).
//
// Python runs the doctor on the session's live graph and publishes its report in the `doctor`
// trait, with `progress` messages while it runs (docs/widget_protocol.md). Parsing, and
// turning a report into the panel's rows and lines, is pure and unit-tested; the DoctorPanel
// class only builds DOM from that, setting every piece of text with textContent.
//
// Note [A lenient report in a checked envelope]
// ---------------------------------------------
// The `doctor` trait's envelope (run, state, report, error) is checked against the generated
// shapes like every other trait: a wrong one is a protocol bug and the error box names its
// field. The report inside is `DoctorReport.to_dict()`, and it is also a stored document: a
// trace keeps it (`trace.doctor`, record_torch(doctor=True)) and a saved page replays it, so
// the view reads reports written by older versions of gradviz, whose findings lack fields
// added since (`summary`, `fix`, `params`, `related_nodes`...). So the report is read field by
// field: a missing or damaged field shows as an empty cell (and a finding of an unknown kind
// keeps its words), rather than one old field hiding the whole report. Its Python definition
// (gradviz/debug/_report.py) and docs/doctor.md list the fields the panel reads.

import { formatNumber, type SummaryNumber } from "./inspector.js";
import { ProtocolError } from "./model.js";
import { isRecord, type ProgressMessage } from "./generated/widget_protocol.js";
import type * as protocol from "./generated/widget_protocol.js";
import { describe, readShape } from "./payload.js";

export const DOCTOR_STATES = ["checking", "done", "error"] as const;
export type Severity = "error" | "warning";

/** One entry of a finding: backward's value against the finite difference (or saved against now). */
export interface WorstEntry {
  readonly index: readonly number[];
  readonly analytic: SummaryNumber;
  readonly numeric: SummaryNumber;
}

/** A finding of gradviz.debug.doctor (Finding.to_dict in gradviz/debug/_doctor.py). */
export interface Finding {
  readonly kind: string;
  readonly severity: Severity;
  /** The custom Function's class name; null for a built-in node. */
  readonly function: string | null;
  readonly node: number | null;
  readonly nodeName: string;
  readonly inputIndex: number | null;
  readonly message: string;
  readonly hint: string | null;
  readonly maxAbsError: SummaryNumber;
  readonly maxRelError: SummaryNumber;
  readonly worst: readonly WorstEntry[];
  /** The model-level kinds (docs/doctor.md): the parameters concerned ("fc1.weight"), their module. */
  readonly params: readonly string[];
  readonly module: string | null;
  /** One sentence (every finding has one), and the fix (model-level kinds). */
  readonly summary: string;
  readonly fix: string | null;
  /** Other nodes it concerns (the op that overwrote a saved tensor). */
  readonly relatedNodes: readonly number[];
  /** The parameters' AccumulateGrad nodes in the graph. */
  readonly paramNodes: readonly number[];
}

/** A node the doctor could not check, and why. */
export interface Skipped {
  readonly node: number | null;
  readonly name: string;
  readonly reason: string;
}

export interface DoctorReport {
  readonly ok: boolean;
  /** The report's first line, e.g. "gradient doctor: 1 custom Function node checked ...". */
  readonly summary: string;
  readonly findings: readonly Finding[];
  readonly checked: readonly number[];
  readonly skipped: readonly Skipped[];
  readonly notes: readonly string[];
}

/** The `doctor` trait. `run` counts the checks of this widget (1, 2, ...). */
export type DoctorState =
  | { readonly state: "checking"; readonly run: number }
  | { readonly state: "done"; readonly run: number; readonly report: DoctorReport }
  | { readonly state: "error"; readonly run: number; readonly error: string };

/** What the panel shows of a `progress` message from Python while the doctor runs. */
export type Progress = Readonly<Pick<ProgressMessage, "done" | "total" | "label">>;

function isId(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function text(value: unknown): string {
  return typeof value === "string" ? value : "";
}

function optionalText(value: unknown): string | null {
  return typeof value === "string" ? value : null;
}

function summaryNumber(value: unknown): SummaryNumber {
  return typeof value === "number" || typeof value === "string" ? value : null;
}

function records(value: unknown): Record<string, unknown>[] {
  return Array.isArray(value) ? value.filter(isRecord) : [];
}

function parseFinding(raw: Record<string, unknown>): Finding {
  const worst = records(raw["worst"]).map((entry) => ({
    index: Array.isArray(entry["index"]) ? entry["index"].filter((i): i is number => typeof i === "number") : [],
    analytic: summaryNumber(entry["analytic"]),
    numeric: summaryNumber(entry["numeric"]),
  }));
  return {
    kind: text(raw["kind"]) || "unknown",
    severity: raw["severity"] === "warning" ? "warning" : "error",
    function: optionalText(raw["function"]),
    node: isId(raw["node"]) ? raw["node"] : null,
    nodeName: text(raw["node_name"]) || "?",
    inputIndex: isId(raw["input_index"]) ? raw["input_index"] : null,
    message: text(raw["message"]),
    hint: optionalText(raw["hint"]),
    maxAbsError: summaryNumber(raw["max_abs_error"]),
    maxRelError: summaryNumber(raw["max_rel_error"]),
    worst,
    params: Array.isArray(raw["params"]) ? raw["params"].filter((name): name is string => typeof name === "string") : [],
    module: optionalText(raw["module"]),
    summary: text(raw["summary"]),
    fix: optionalText(raw["fix"]),
    relatedNodes: Array.isArray(raw["related_nodes"]) ? raw["related_nodes"].filter(isId) : [],
    paramNodes: Array.isArray(raw["param_nodes"]) ? raw["param_nodes"].filter(isId) : [],
  };
}

/**
 * The node a click on the finding selects: its own; else the first other node it concerns;
 * else its first parameter's AccumulateGrad node (a parameter cut off with no node of its own).
 */
export function findingNode(finding: Finding): number | null {
  return finding.node ?? finding.relatedNodes[0] ?? finding.paramNodes[0] ?? null;
}

/** The nodes a finding marks: its node and the other nodes it concerns; its parameters'
 * AccumulateGrad nodes when it has no node of its own. */
export function findingNodes(finding: Finding): number[] {
  const nodes = finding.node === null ? [...finding.relatedNodes, ...finding.paramNodes] : [finding.node, ...finding.relatedNodes];
  return [...new Set(nodes)];
}

/** Read a report leniently: a missing or damaged field shows as empty, never as an error. */
export function parseReport(value: unknown): DoctorReport {
  if (!isRecord(value)) throw new ProtocolError("doctor.report must be an object");
  return {
    ok: value["ok"] === true,
    summary: text(value["summary"]),
    findings: records(value["findings"]).map(parseFinding),
    checked: Array.isArray(value["checked"]) ? value["checked"].filter(isId) : [],
    skipped: records(value["skipped"]).map((entry) => ({
      node: isId(entry["node"]) ? entry["node"] : null,
      name: text(entry["name"]) || "?",
      reason: text(entry["reason"]),
    })),
    notes: Array.isArray(value["notes"]) ? value["notes"].filter((note): note is string => typeof note === "string") : [],
  };
}

/**
 * Check and convert the `doctor` trait (null: no check yet): its envelope against the generated
 * shapes (a ProtocolError names the field), its report leniently (Note [A lenient report in a
 * checked envelope]).
 */
export function parseDoctor(value: unknown): DoctorState | null {
  if (value === null || value === undefined) return null;
  if (isRecord(value) && Object.keys(value).length === 0) return null; // a Dict trait's empty default
  const state = isRecord(value) ? value["state"] : undefined;
  switch (state) {
    case "checking":
      return { state, run: readShape<protocol.DoctorChecking>("DoctorChecking", value, "doctor").run };
    case "done": {
      const { run, report } = readShape<protocol.DoctorDone>("DoctorDone", value, "doctor");
      return { state, run, report: parseReport(report) };
    }
    case "error": {
      const { run, error } = readShape<protocol.DoctorFailed>("DoctorFailed", value, "doctor");
      return { state, run, error: error || "the gradient doctor failed" };
    }
    default:
      if (!isRecord(value)) throw new ProtocolError(`doctor must be an object or null, got ${describe(value)}`);
      throw new ProtocolError(`doctor.state must be one of ${DOCTOR_STATES.join(", ")}, got ${JSON.stringify(state)}`);
  }
}

/** Recognise a progress message: null for any other message; a ProtocolError naming the field when it is one but malformed. */
export function parseProgress(value: unknown): Progress | null {
  if (!isRecord(value) || value["type"] !== "progress") return null;
  const { done, total, label } = readShape<ProgressMessage>("ProgressMessage", value, "progress");
  if (done < 0 || total < 0) throw new ProtocolError(`progress must count from 0, got ${done} of ${total}`);
  return { done, total, label };
}

/** The nodes to mark in the graph, each with its worst severity; none unless a report is shown. */
export function findingMarks(doctor: DoctorState | null): Map<number, Severity> {
  const marks = new Map<number, Severity>();
  if (doctor?.state !== "done") return marks;
  for (const finding of doctor.report.findings) {
    for (const node of findingNodes(finding)) {
      if (finding.severity === "error" || !marks.has(node)) marks.set(node, finding.severity);
    }
  }
  return marks;
}

// ---- the panel's content ---------------------------------------------------------------------

export const FINDING_COLUMNS = ["kind", "Function", "node", "input", "max abs error", "max rel error", "worst entries (analytic vs numeric)"] as const;

export interface FindingRow {
  readonly node: number | null;
  readonly kind: string;
  readonly severity: Severity;
  /** In FINDING_COLUMNS order. */
  readonly cells: readonly string[];
  /** The doctor's diagnosis, in words (it names the likely fix when one fits). */
  readonly message: string;
  /** "parameters: fc1.weight, fc1.bias" (model-level kinds); "" when none. */
  readonly params: string;
  /** "fix: ..." (model-level kinds); "" when none. */
  readonly fix: string;
}

export type PanelTone = "checking" | "ok" | "warnings" | "problems" | "error";

export interface PanelContent {
  readonly tone: PanelTone;
  /**
   * One line: "Checking gradients…", "No problems found", "1 problem found", "Nothing checked: 1 node
   * could not be checked (below)", "The gradient doctor failed: …".
   */
  readonly status: string;
  /** The doctor's own summary line (how many nodes were checked and skipped). */
  readonly summary: string;
  readonly progress: { readonly done: number; readonly total: number } | null;
  readonly rows: readonly FindingRow[];
  /** "Could not check 2 nodes", and one line per node with the reason; null when none. */
  readonly skipped: { readonly title: string; readonly lines: readonly string[] } | null;
  readonly notes: readonly string[];
}

function plural(count: number, word: string): string {
  return `${count} ${word}${count === 1 ? "" : "s"}`;
}

/**
 * "[1, 0]: -4 vs 4" (backward vs finite differences), "[0]: saved 1, now 5" (a saved tensor
 * modified in place) or "[0]: given 1, then 2" (a grad_output the backward modified).
 */
export function worstText(finding: Finding): string {
  const words = finding.kind === "mutated_saved" ? ["saved", "now"]
    : finding.kind === "mutated_grad_output" ? ["given", "then"] : null;
  return finding.worst
    .map((entry) => {
      const where = `[${entry.index.join(", ")}]`;
      const [a, b] = [formatNumber(entry.analytic), formatNumber(entry.numeric)];
      return words !== null ? `${where}: ${words[0]} ${a}, ${words[1]} ${b}` : `${where}: ${a} vs ${b}`;
    })
    .join("; ");
}

/** How a person reads a node id: its graph's small display number (the id when unknown). */
export type NumberOf = (id: number) => number;

export function findingRow(finding: Finding, numberOf: NumberOf = (id) => id): FindingRow {
  const node = finding.node === null ? finding.nodeName : `${finding.nodeName} #${numberOf(finding.node)}`;
  return {
    node: findingNode(finding),
    kind: finding.kind,
    severity: finding.severity,
    cells: [
      finding.kind.replace(/_/g, " "),
      finding.function ?? "—",
      node,
      finding.inputIndex === null ? "—" : String(finding.inputIndex),
      formatNumber(finding.maxAbsError),
      formatNumber(finding.maxRelError),
      finding.worst.length === 0 ? "—" : worstText(finding),
    ],
    message: finding.message,
    params: finding.params.length === 0 ? "" : `parameters: ${finding.params.join(", ")}`,
    fix: finding.fix === null || finding.fix === "" ? "" : `fix: ${finding.fix}`,
  };
}

/**
 * What the panel shows: `doctor` is the trait, `progress` the latest progress message of the
 * running check, `pending` true between a click and Python's first answer. Null: no panel.
 */
export function panelContent(
  doctor: DoctorState | null,
  progress: Progress | null,
  pending: boolean,
  numberOf: NumberOf = (id) => id,
): PanelContent | null {
  const empty = { summary: "", progress: null, rows: [], skipped: null, notes: [] };
  if (pending || doctor?.state === "checking") {
    const step = progress === null ? "" : ` ${progress.done} of ${progress.total}${progress.label === "" ? "" : ` · ${progress.label}`}`;
    return {
      ...empty,
      tone: "checking",
      status: `Checking gradients against finite differences…${step}`,
      progress: progress === null ? null : { done: progress.done, total: progress.total },
    };
  }
  if (doctor === null) return null;
  if (doctor.state === "error") return { ...empty, tone: "error", status: `The gradient doctor failed: ${doctor.error}` };
  const report = doctor.report;
  const errors = report.findings.filter((finding) => finding.severity === "error").length;
  const warnings = report.findings.length - errors;
  let status: string;
  let tone: PanelTone;
  if (report.findings.length === 0 && report.skipped.length > 0) {
    // Not a clean bill: "No problems found" in green read as "your backward is right" when the
    // doctor could not re-run the Function at all (a graph built outside capture(), freed).
    tone = "warnings";
    const skipped = plural(report.skipped.length, "node");
    status = report.checked.length === 0
      ? `Nothing checked: ${skipped} could not be checked (below)`
      : `No problems in ${plural(report.checked.length, "checked node")}; ${skipped} could not be checked (below)`;
  } else if (report.findings.length === 0) {
    tone = "ok";
    status = "No problems found";
  } else {
    tone = errors > 0 ? "problems" : "warnings";
    const parts = [errors > 0 ? `${plural(errors, "problem")}` : "", warnings > 0 ? `${plural(warnings, "warning")}` : ""];
    status = `${parts.filter((part) => part !== "").join(", ")} found`;
  }
  const skipped =
    report.skipped.length === 0
      ? null
      : {
          title: `Could not check ${plural(report.skipped.length, "node")}:`,
          lines: report.skipped.map((entry) => `${entry.name}${entry.node === null ? "" : ` #${numberOf(entry.node)}`}: ${entry.reason}`),
        };
  const rows = report.findings.map((finding) => findingRow(finding, numberOf));
  return { tone, status, summary: report.summary, progress: null, rows, skipped, notes: report.notes };
}

// ---- DOM ----------------------------------------------------------------------------------------

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, content = ""): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className !== "") node.className = className;
  if (content !== "") node.textContent = content;
  return node;
}

/** The panel under the toolbar; hidden until the first check, and after its × is clicked. */
export class DoctorPanel {
  readonly element: HTMLElement;

  /** `onSelect`: a click on a finding selects its node; `onClose`: the × button. */
  constructor(
    private readonly onSelect: (node: number) => void,
    private readonly onClose: () => void,
  ) {
    this.element = element("section", "gv-doctor");
    this.element.dataset["testid"] = "gv-doctor";
    this.element.setAttribute("aria-label", "gradient check");
    this.element.hidden = true;
  }

  /** Rebuilt on each change: it is small. */
  update(content: PanelContent | null): void {
    this.element.hidden = content === null;
    this.element.replaceChildren();
    if (content === null) {
      delete this.element.dataset["tone"];
      return;
    }
    this.element.dataset["tone"] = content.tone;
    const header = element("div", "gv-doctor-header");
    header.append(element("span", "gv-doctor-title", "Check gradients"));
    const status = element("span", "gv-doctor-status", content.status);
    status.dataset["testid"] = "gv-doctor-status";
    status.setAttribute("role", content.tone === "problems" || content.tone === "error" ? "alert" : "status");
    header.append(status);
    const close = element("button", "gv-doctor-close", "×");
    close.type = "button";
    close.title = "Hide the gradient check";
    close.setAttribute("aria-label", "Hide the gradient check");
    close.dataset["testid"] = "gv-doctor-close";
    close.addEventListener("click", this.onClose);
    header.append(close);
    this.element.append(header);
    if (content.progress !== null) {
      const bar = element("progress", "gv-doctor-progress");
      bar.max = Math.max(1, content.progress.total);
      bar.value = content.progress.done;
      this.element.append(bar);
    }
    if (content.summary !== "") this.element.append(element("div", "gv-doctor-summary", content.summary));
    if (content.rows.length > 0) this.element.append(this.table(content.rows));
    if (content.skipped !== null) {
      const skipped = element("div", "gv-doctor-skipped");
      skipped.dataset["testid"] = "gv-doctor-skipped";
      skipped.append(element("div", "gv-doctor-subtitle", content.skipped.title));
      const list = element("ul", "");
      for (const line of content.skipped.lines) list.append(element("li", "", line));
      skipped.append(list);
      this.element.append(skipped);
    }
    if (content.notes.length > 0) {
      const list = element("ul", "gv-doctor-notes");
      for (const note of content.notes) list.append(element("li", "", note));
      this.element.append(list);
    }
  }

  private table(rows: readonly FindingRow[]): HTMLTableElement {
    const table = element("table", "gv-findings");
    const head = element("tr", "");
    for (const column of FINDING_COLUMNS) head.append(element("th", "", column));
    table.append(element("thead", ""), element("tbody", ""));
    table.tHead?.append(head);
    for (const row of rows) {
      const line = element("tr", `gv-finding-row gv-finding-${row.severity}`);
      line.dataset["testid"] = "gv-finding-row";
      line.dataset["kind"] = row.kind;
      line.dataset["severity"] = row.severity;
      if (row.node !== null) {
        const node = row.node;
        line.dataset["nodeId"] = String(node);
        line.title = "Select this node";
        line.addEventListener("click", () => this.onSelect(node));
        // Reachable without a mouse: Tab to the finding, Enter (or Space) selects its node.
        line.tabIndex = 0;
        line.setAttribute("data-lm-suppress-shortcuts", "true"); // JupyterLab: Enter is ours here, not "edit the cell"
        line.addEventListener("keydown", (event) => {
          if (event.key !== "Enter" && event.key !== " ") return;
          event.preventDefault();
          this.onSelect(node);
        });
      }
      row.cells.forEach((text, index) => {
        // The column's name, shown before the value where a narrow panel stacks the cells.
        const cell = element("td", "", text);
        cell.dataset["label"] = FINDING_COLUMNS[index] ?? "";
        line.append(cell);
      });
      const message = element("tr", "gv-finding-message");
      const cell = element("td", "");
      if (row.params !== "") {
        const params = element("div", "gv-finding-params", row.params);
        params.dataset["testid"] = "gv-finding-params";
        cell.append(params);
      }
      cell.append(document.createTextNode(row.message));
      if (row.fix !== "") cell.append(element("div", "gv-finding-fix", row.fix));
      cell.colSpan = FINDING_COLUMNS.length;
      message.append(cell);
      table.tBodies[0]?.append(line, message);
    }
    return table;
  }
}
