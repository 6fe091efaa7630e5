// A saved trace view: the `.gvtrace.json` file and the `application/vnd.gradviz.trace+json`
// output (gradviz/widget/_trace_view.py writes both; docs/traces.md describes them).
//
// Note [One replay, computed in Python]: the document carries the raw trace *and* the view
// data of the offline HTML page (replay.ts's "gradviz-standalone" object), which Python
// computes once with ReplaySession. The front end never replays a trace itself: node states,
// the current node and the inspector's snapshots at each position come from the same Python
// code as the notebook replay and the HTML page, so the three cannot disagree. The raw trace
// is kept for Python (gradviz.load_trace reads a .gvtrace.json), not read here.
//
//   { format: "gradviz-trace-view", version: 1, gradviz_version: string,
//     trace: { format: "gradviz-trace", ... },   // Trace.to_dict(): for Python only
//     view: { format: "gradviz-standalone", ... } }  // parseStandalone (replay.ts)
//
// Pure: no DOM.

import { ProtocolError } from "./model.js";
import { parseStandalone, type StandaloneData } from "./replay.js";

export const TRACE_VIEW_FORMAT = "gradviz-trace-view";
export const TRACE_VIEW_VERSION = 1;
export const TRACE_VIEW_MIME = "application/vnd.gradviz.trace+json";
export const TRACE_VIEW_EXTENSION = ".gvtrace.json";

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  if (typeof value === "string") return `the string ${JSON.stringify(value.slice(0, 40))}`;
  return typeof value === "object" ? "an object" : `${typeof value} ${String(value)}`;
}

/**
 * Check a trace view document (the parsed file, or the output's JSON) and decode its view.
 * Throws ProtocolError naming what is wrong and how to get a good file.
 */
export function parseTraceView(value: unknown): StandaloneData {
  const fix = "save it again with trace.save_view(path) (gradviz)";
  if (!isRecord(value)) throw new ProtocolError(`a gradviz trace view must be a JSON object, got ${describe(value)}; ${fix}`);
  if (value["format"] !== TRACE_VIEW_FORMAT) {
    const hint = value["format"] === "gradviz-trace"
      ? "this is a raw trace (Trace.save); write a viewable file with trace.save_view(\"run.gvtrace.json\")"
      : fix;
    throw new ProtocolError(`a gradviz trace view must have format "${TRACE_VIEW_FORMAT}", got ${describe(value["format"])}; ${hint}`);
  }
  if (value["version"] !== TRACE_VIEW_VERSION) {
    throw new ProtocolError(
      `this trace view has version ${JSON.stringify(value["version"]) ?? "undefined"} (written by gradviz ` +
      `${JSON.stringify(value["gradviz_version"]) ?? "undefined"}), but this extension reads version ${TRACE_VIEW_VERSION}; ` +
      "save it again with the installed gradviz, or install the gradviz that wrote it",
    );
  }
  if (!isRecord(value["view"])) throw new ProtocolError(`a gradviz trace view needs a "view" object, got ${describe(value["view"])}; ${fix}`);
  return parseStandalone(value["view"]);
}
