// What the inspector shows besides the gradient tables: the hooks that ran (with their effect),
// zero-filled slots, casts, contributions, saved tensors, needs_input_grad, dirty and
// non-differentiable outputs, and the forward source line (`session.node(id)`'s other keys).
//
// Every key is optional: a replay of an older trace, a test double or the saved page may lack
// any of them, and a key that is missing or malformed shows nothing rather than an error.
// Pure: no DOM (inspector.ts draws the sections).

import type { SummaryRow } from "./inspector.js";
import { isRecord } from "./generated/widget_protocol.js";

/** A summary parser, passed in by inspector.ts (which owns it) to keep the imports one-way. */
export type ParseSummary = (value: unknown) => SummaryRow["summary"];

/** One line of a fact section; `alarm` lines are shown in the alert colour. */
export interface FactLine {
  readonly text: string;
  readonly alarm?: boolean;
}

/** A section of the inspector: a gradient table (`rows`), lines of text (`lines`), or both. */
export interface FactSection {
  readonly key: string;
  readonly title: string;
  readonly rows: readonly SummaryRow[];
  readonly lines: readonly FactLine[];
  /** Shown when there are neither rows nor lines. */
  readonly note: string;
}

/** Names a node id in the text ("MulBackward0 #3"); the id alone when the graph lacks it. */
export type NodeNamer = (id: number) => string;

function isCount(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function str(value: unknown): string {
  return typeof value === "string" ? value : value === null || value === undefined ? "" : String(value);
}

/** "24 B", "1.5 KiB", "3.0 MiB". */
export function formatBytes(bytes: number): string {
  if (bytes < 1024) return `${bytes} B`;
  const units = ["KiB", "MiB", "GiB", "TiB"];
  let value = bytes / 1024;
  let unit = 0;
  while (value >= 1024 && unit < units.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${value.toFixed(1)} ${units[unit]}`;
}

/** Slot numbers from a list of ints, or of booleans (true at the slot), else null. */
export function slotList(value: unknown): number[] | null {
  if (!Array.isArray(value)) return null;
  if (value.every((item) => typeof item === "boolean")) {
    return value.flatMap((item, index) => (item === true ? [index] : []));
  }
  return value.every(isCount) ? [...(value as number[])] : null;
}

function slots(numbers: readonly number[]): string {
  return numbers.length === 1 ? `slot ${numbers[0]}` : `slots ${numbers.join(", ")}`;
}

/** Rows of a hook's before or after: one summary, or one per slot. */
function hookRows(label: string, value: unknown, parse: ParseSummary): SummaryRow[] {
  if (Array.isArray(value) && value.length === 1) return [{ label, summary: parse(value[0]) }];
  if (Array.isArray(value)) return value.map((item, index) => ({ label: `${label} ${index}`, summary: parse(item) }));
  return [{ label, summary: parse(value) }];
}

/** One section per hook run, in the order they ran, each with its gradient before and after. */
export function hookSections(value: Record<string, unknown>, parse: ParseSummary): FactSection[] {
  const runs = value["hook_runs"];
  if (!Array.isArray(runs)) return [];
  return runs.filter(isRecord).map((run, index): FactSection => {
    const kind = str(run["kind"]);
    const hook = str(run["hook"]) || "a hook";
    const slot = run["slot"];
    const where = kind === "posthook"
      ? "post-hook"
      : typeof slot === "number" && slot >= 0 ? `tensor pre-hook on input ${slot}` : "pre-hook";
    const effect = run["replaced"] === true ? "replaced the gradient" : "returned None: gradient unchanged";
    const rows: SummaryRow[] = [];
    if ("before" in run || "after" in run) {
      rows.push(...hookRows("before", run["before"], parse), ...hookRows("after", run["after"], parse));
    } else if (Array.isArray(run["grad_inputs"])) {
      // Older traces: a post-hook's event carries only what it was given.
      rows.push(...hookRows("given", run["grad_inputs"], parse));
    }
    return {
      key: `hook-${index}`,
      title: `Hook ${index + 1}: ${where} ${hook} · ${effect}`,
      rows,
      lines: [],
      note: "its gradients were not recorded",
    };
  });
}

/** Hooks registered on the node that have not run (yet): `hooks` = {pre, post, tensor_pre}. */
function registeredHooks(value: Record<string, unknown>): FactLine[] {
  const hooks = value["hooks"];
  if (!isRecord(hooks)) return [];
  const names = (list: unknown): string[] => (Array.isArray(list) ? list.map(str).filter((name) => name !== "") : []);
  const lines: FactLine[] = [];
  const pre = names(hooks["pre"]);
  const post = names(hooks["post"]);
  if (pre.length > 0) lines.push({ text: `pre-hooks: ${pre.join(", ")}` });
  const tensorPre = hooks["tensor_pre"];
  if (isRecord(tensorPre)) {
    for (const [slot, list] of Object.entries(tensorPre)) {
      const found = names(list);
      if (found.length > 0) lines.push({ text: `tensor pre-hooks on input ${slot}: ${found.join(", ")}` });
    }
  }
  if (post.length > 0) lines.push({ text: `post-hooks: ${post.join(", ")}` });
  return lines;
}

/** The saved tensors: label, version, bytes, and whether still held (or released when). */
export function savedLines(value: Record<string, unknown>): FactLine[] {
  const saved = value["saved"];
  if (!Array.isArray(saved)) return [];
  const released = value["released"];
  return saved.filter(isRecord).map((entry): FactLine => {
    const parts = [str(entry["label"]) || `slot ${str(entry["slot"])}`];
    if (isCount(entry["version"])) parts.push(`version ${entry["version"]}`);
    if (isCount(entry["bytes"])) parts.push(formatBytes(entry["bytes"]));
    if (entry["hooked"] === true) parts.push("through pack/unpack hooks");
    const at = entry["released_at"];
    if (entry["held"] === false) {
      parts.push(isCount(at) ? `released at event ${at}` : "released");
    } else if (entry["held"] === true) {
      parts.push("held");
    } else if (isRecord(released)) {
      parts.push("released");
    }
    return { text: parts.join(" · ") };
  });
}

/** needs_input_grad, dirty and non-differentiable outputs, zero-filled slots. */
function nodeFacts(value: Record<string, unknown>): FactLine[] {
  const lines: FactLine[] = [];
  const needs = value["needs_input_grad"];
  if (Array.isArray(needs) && needs.every((item) => typeof item === "boolean")) {
    lines.push({ text: `needs_input_grad: (${needs.map((item) => (item ? "True" : "False")).join(", ")})` });
  }
  const dirty = slotList(value["dirty"] ?? value["dirty_outputs"]);
  if (dirty !== null && dirty.length > 0) lines.push({ text: `dirty (modified in place by forward): output ${dirty.join(", ")}` });
  const nonDiff = slotList(value["non_differentiable"] ?? value["non_differentiable_outputs"]);
  if (nonDiff !== null && nonDiff.length > 0) lines.push({ text: `non-differentiable: output ${nonDiff.join(", ")}` });
  const materialized = slotList(value["materialized"]);
  if (materialized !== null && materialized.length > 0) {
    lines.push({ text: `${slots(materialized)} had no gradient (None) and got zeros before backward ran`, alarm: false });
  }
  const released = value["released"];
  if (isRecord(released)) {
    const count = isCount(released["count"]) ? `${released["count"]} saved tensor${released["count"] === 1 ? "" : "s"}` : "saved tensors";
    const bytes = isCount(released["bytes"]) ? ` (${formatBytes(released["bytes"])})` : "";
    lines.push({ text: `${count}${bytes} freed after it ran` });
  }
  return lines;
}

const HOW: Readonly<Record<string, string>> = {
  stored: "stored (first to arrive)",
  accumulated_in_place: "summed into the buffer in place",
  accumulated_out_of_place: "summed into the buffer out of place",
};

/** Each gradient that reached the node's inputs (`contributions`), and its results' dtype casts (`casts`). */
function flowLines(value: Record<string, unknown>, nameOf: NodeNamer): FactLine[] {
  const lines: FactLine[] = [];
  const contributions = value["contributions"];
  if (Array.isArray(contributions)) {
    for (const entry of contributions.filter(isRecord)) {
      const producer = isCount(entry["producer"]) ? ` from ${nameOf(entry["producer"])}` : "";
      const how = HOW[str(entry["how"])] ?? str(entry["how"]);
      lines.push({ text: `input ${str(entry["slot"])}${producer}: ${how}` });
    }
  }
  const casts = value["casts"];
  if (Array.isArray(casts)) {
    for (const entry of casts.filter(isRecord)) {
      lines.push({ text: `result ${str(entry["slot"])} cast from ${str(entry["from"])} to ${str(entry["to"])}` });
    }
  }
  return lines;
}

/** The forward line that created the node: `source` = {file, line, function, code}. */
export function sourceLines(value: Record<string, unknown>): FactLine[] {
  const source = value["source"];
  if (typeof source === "string" && source !== "") return [{ text: source }];
  if (!isRecord(source)) return [];
  const where = `${str(source["file"])}:${str(source["line"])}${source["function"] ? ` in ${str(source["function"])}` : ""}`;
  const code = str(source["code"]).trim();
  return code === "" ? [{ text: where }] : [{ text: where }, { text: code }];
}

function lineSection(key: string, title: string, lines: FactLine[]): FactSection[] {
  return lines.length === 0 ? [] : [{ key, title, rows: [], lines, note: "" }];
}

/**
 * The sections after "Gradients in" (hooks first: they ran on those gradients), and the ones
 * after "Gradients out" (where the results went, the saved tensors, the node's own facts).
 */
export function factSections(value: Record<string, unknown>, parse: ParseSummary, nameOf: NodeNamer): {
  afterIn: FactSection[];
  afterOut: FactSection[];
} {
  return {
    afterIn: [...hookSections(value, parse), ...lineSection("hooks", "Hooks registered", registeredHooks(value))],
    afterOut: [
      ...lineSection("flow", "Contributions received, casts", flowLines(value, nameOf)),
      ...lineSection("saved", "Saved for backward", savedLines(value)),
      ...lineSection("facts", "Node", nodeFacts(value)),
      ...lineSection("source", "Created by (forward)", sourceLines(value)),
    ],
  };
}
