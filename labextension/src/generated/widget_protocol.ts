// Generated from gradviz/widget/_protocol.py by
// `python -m gradviz.widget.protocol`. Do not edit.

import type { Summary } from "./events.js";

export type NodeState = "pending" | "ready" | "running" | "done" | "released" | "error";
export type NodeKind = "builtin" | "custom" | "accumulate_grad";
export type SessionStatus = "paused" | "running" | "finished" | "aborted" | "error";
export type CommandName = "step" | "step_event" | "continue" | "run_to" | "step_back" | "abort" | "check_gradients";
export type Number = number | "nan" | "inf" | "-inf";

export const NODE_STATES = ["pending", "ready", "running", "done", "released", "error"] as const;
export const NODE_KINDS = ["builtin", "custom", "accumulate_grad"] as const;
export const SESSION_STATUSES = ["paused", "running", "finished", "aborted", "error"] as const;
export const COMMAND_NAMES = ["step", "step_event", "continue", "run_to", "step_back", "abort", "check_gradients"] as const;

/** Where a graph node was recorded: its module path (outermost first), the class name at each level, and which application of that path built it. */
export interface ModuleFields {
  module?: string[];
  module_types?: string[];
  module_call?: number;
}

/** One node of the ``graph`` trait; the optional fields are absent when unknown. */
export interface GraphNode {
  id: number;
  name: string;
  kind: NodeKind;
  label: string;
  leaf_name?: string;
  number?: number;
  module?: string[];
  module_types?: string[];
  module_call?: number;
  source?: string;
}

/** One entry of a node's ``next_functions``: the gradient flows from source to target. */
export interface GraphEdge {
  source: number;
  target: number;
  input_nr: number;
}

/** The ``graph`` trait (``{}`` until the session's graph is known). */
export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  roots: number[];
}

/** The ``last_event`` trait: the narration line's view of the latest event. */
export interface EventLine {
  seq: number | null;
  kind: string;
  node: number | null;
  text: string;
}

/** The ``history`` trait: at most ``HISTORY_LIMIT`` events, ``events[i]`` is event ``start + i``. */
export interface History {
  start: number;
  total: number;
  events: ([string, number | null, string])[];
  seekable: boolean;
}

/** The ``inspection`` trait for a node: ``session.node(selected)`` made JSON-safe over the graph's fields; a session without ``node()`` gives only those. Open: a session may add keys (see ``DebugSession.node``), so the view reads each key it knows and checks it. */
export interface Inspection {
  id: number;
  name: string;
  kind: NodeKind;
  label: string;
  state: NodeState;
  leaf_name?: string;
  grads_in?: (Summary | null)[] | null;
  grads_out?: (Summary | null)[] | null;
  pending_buffer?: (Summary | null)[] | null;
  [more: string]: unknown;
}

/** A named leaf of a module inspection; ``grad``: what its AccumulateGrad received. */
export interface ModuleParameter {
  id: number;
  name: string;
  grad: Summary | null;
}

/** The ``inspection`` trait while ``selected_module`` is set. */
export interface ModuleInspection {
  module: string;
  type: string;
  count: number;
  calls: number;
  states: { [key: string]: number };
  parameters: ModuleParameter[];
}

/** One entry of the ``overlays`` trait; values keyed by decimal node id, edges by ``"source:target:input_nr:k"``; null until some view asked for a built-in's values. */
export interface Overlay {
  kind: "continuous" | "categorical" | "boolean";
  scale: "linear" | "log";
  builtin: boolean;
  title: string;
  description: string;
  values: { [key: string]: number | string | boolean } | null;
  edges: { [key: string]: number | string | boolean } | null;
}

/** How many nodes the two passes matched, how many of those differ, how many are one side's only. */
export interface DiffCounts {
  pairs: number;
  differ: number;
  only_a: number;
  only_b: number;
}

/** A matched node whose gradients differ (``node``: its id in trace a, whose graph is drawn); ``max_relative``: the largest relative gap of its statistics; at most three ``reasons``. */
export interface DiffDifference {
  node: number;
  key: string;
  max_relative: Number;
  reasons: string[];
}

/** A node of one pass without a partner in the other (``node``: its id in its own trace). */
export interface DiffOnly {
  node: number;
  key: string;
}

/** The ``diff`` trait of a diff view (null otherwise): what its panel lists (``gradviz/widget/_diff_view.py``, ``diff_trait``); the lists are cut at ``DIFF_LIST_LIMIT``. */
export interface DiffData {
  a: string;
  b: string;
  overlay: string | null;
  summary: string;
  counts: DiffCounts;
  differences: DiffDifference[];
  only_a: DiffOnly[];
  only_b: DiffOnly[];
}

/** The ``doctor`` trait while a check runs. */
export interface DoctorChecking {
  run: number;
  state: "checking";
  report: null;
  error: null;
}

/** The ``doctor`` trait after a check: ``report`` is ``json_safe(DoctorReport.to_dict())`` (``docs/widget_protocol.md``, ``DoctorReport``). */
export interface DoctorDone {
  run: number;
  state: "done";
  report: { [key: string]: unknown };
  error: null;
}

/** The ``doctor`` trait after a check that raised: ``error`` is ``"Type: message"``. */
export interface DoctorFailed {
  run: number;
  state: "error";
  report: null;
  error: string;
}

/** The answer to every well-formed command (and module select or overlay request). */
export interface AckMessage {
  type: "ack";
  name: string;
  ok: boolean;
  reason: string | null;
}

/** The reply to a malformed message: no command ran. */
export interface ErrorReply {
  type: "error";
  reason: string;
}

/** Check gradients' progress, at most ten a second (the last one always). */
export interface ProgressMessage {
  type: "progress";
  name: "check_gradients";
  done: number;
  total: number;
  label: string;
}

/** A Step's node states (protocol 6): the states that changed and the gradient deliveries (``[source, target]`` pairs) added since delta ``seq - 1`` (Note [States on the wire]). */
export interface StatesDelta {
  type: "states_delta";
  seq: number;
  states: { [key: string]: NodeState };
  delivered: number[][];
}

/** A toolbar command without an argument. */
export interface PlainCommand {
  type: "command";
  name: "step" | "step_event" | "continue" | "step_back" | "abort" | "check_gradients";
}

/** Run to the node (the view sends the selected one). */
export interface RunToCommand {
  type: "command";
  name: "run_to";
  node: number;
}

/** Show a node in the inspector (null: none). */
export interface SelectCommand {
  type: "command";
  name: "select";
  node: number | null;
}

/** Show the first ``position`` events of a replay. */
export interface SeekCommand {
  type: "command";
  name: "seek";
  position: number;
}

/** Show a module in the inspector (a folded box's click; null: none). */
export interface ModuleSelect {
  type: "select";
  module: string | null;
}

/** This view's picker shows this overlay: send its values. */
export interface OverlayRequest {
  type: "overlay";
  name: string | null;
}

/** This view's copy of the states missed a delta: send them whole. */
export interface ResyncRequest {
  type: "resync";
}

export type DoctorState = DoctorChecking | DoctorDone | DoctorFailed;
export type CommandMessage = PlainCommand | RunToCommand | SelectCommand | SeekCommand;
export type PanelMessage = ModuleSelect | OverlayRequest;

/** Each shape's JSON Schema (its fields' types, which are required), for payload.ts's checks. */
export const SHAPES: { readonly [name: string]: unknown } = {
  NodeState: {"enum": ["pending", "ready", "running", "done", "released", "error"]},
  NodeKind: {"enum": ["builtin", "custom", "accumulate_grad"]},
  SessionStatus: {"enum": ["paused", "running", "finished", "aborted", "error"]},
  CommandName: {"enum": ["step", "step_event", "continue", "run_to", "step_back", "abort", "check_gradients"]},
  Number: {"anyOf": [{"type": "number"}, {"enum": ["nan", "inf", "-inf"]}]},
  ModuleFields: {"type": "object", "properties": {"module": {"type": "array", "items": {"type": "string"}}, "module_types": {"type": "array", "items": {"type": "string"}}, "module_call": {"type": "integer"}}, "required": [], "additionalProperties": false},
  GraphNode: {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "kind": {"$ref": "#/$defs/NodeKind"}, "label": {"type": "string"}, "leaf_name": {"type": "string"}, "number": {"type": "integer"}, "module": {"type": "array", "items": {"type": "string"}}, "module_types": {"type": "array", "items": {"type": "string"}}, "module_call": {"type": "integer"}, "source": {"type": "string"}}, "required": ["id", "name", "kind", "label"], "additionalProperties": false},
  GraphEdge: {"type": "object", "properties": {"source": {"type": "integer"}, "target": {"type": "integer"}, "input_nr": {"type": "integer"}}, "required": ["source", "target", "input_nr"], "additionalProperties": false},
  Graph: {"type": "object", "properties": {"nodes": {"type": "array", "items": {"$ref": "#/$defs/GraphNode"}}, "edges": {"type": "array", "items": {"$ref": "#/$defs/GraphEdge"}}, "roots": {"type": "array", "items": {"type": "integer"}}}, "required": ["nodes", "edges", "roots"], "additionalProperties": false},
  EventLine: {"type": "object", "properties": {"seq": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "kind": {"type": "string"}, "node": {"anyOf": [{"type": "integer"}, {"type": "null"}]}, "text": {"type": "string"}}, "required": ["seq", "kind", "node", "text"], "additionalProperties": false},
  History: {"type": "object", "properties": {"start": {"type": "integer"}, "total": {"type": "integer"}, "events": {"type": "array", "items": {"type": "array", "prefixItems": [{"type": "string"}, {"anyOf": [{"type": "integer"}, {"type": "null"}]}, {"type": "string"}], "items": false}}, "seekable": {"type": "boolean"}}, "required": ["start", "total", "events", "seekable"], "additionalProperties": false},
  Inspection: {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "kind": {"$ref": "#/$defs/NodeKind"}, "label": {"type": "string"}, "state": {"$ref": "#/$defs/NodeState"}, "leaf_name": {"type": "string"}, "grads_in": {"anyOf": [{"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/Summary"}, {"type": "null"}]}}, {"type": "null"}]}, "grads_out": {"anyOf": [{"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/Summary"}, {"type": "null"}]}}, {"type": "null"}]}, "pending_buffer": {"anyOf": [{"type": "array", "items": {"anyOf": [{"$ref": "#/$defs/Summary"}, {"type": "null"}]}}, {"type": "null"}]}}, "required": ["id", "name", "kind", "label", "state"], "additionalProperties": true},
  ModuleParameter: {"type": "object", "properties": {"id": {"type": "integer"}, "name": {"type": "string"}, "grad": {"anyOf": [{"$ref": "#/$defs/Summary"}, {"type": "null"}]}}, "required": ["id", "name", "grad"], "additionalProperties": false},
  ModuleInspection: {"type": "object", "properties": {"module": {"type": "string"}, "type": {"type": "string"}, "count": {"type": "integer"}, "calls": {"type": "integer"}, "states": {"type": "object", "additionalProperties": {"type": "integer"}}, "parameters": {"type": "array", "items": {"$ref": "#/$defs/ModuleParameter"}}}, "required": ["module", "type", "count", "calls", "states", "parameters"], "additionalProperties": false},
  Overlay: {"type": "object", "properties": {"kind": {"enum": ["continuous", "categorical", "boolean"]}, "scale": {"enum": ["linear", "log"]}, "builtin": {"type": "boolean"}, "title": {"type": "string"}, "description": {"type": "string"}, "values": {"anyOf": [{"type": "object", "additionalProperties": {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "boolean"}]}}, {"type": "null"}]}, "edges": {"anyOf": [{"type": "object", "additionalProperties": {"anyOf": [{"type": "number"}, {"type": "string"}, {"type": "boolean"}]}}, {"type": "null"}]}}, "required": ["kind", "scale", "builtin", "title", "description", "values", "edges"], "additionalProperties": false},
  DiffCounts: {"type": "object", "properties": {"pairs": {"type": "integer"}, "differ": {"type": "integer"}, "only_a": {"type": "integer"}, "only_b": {"type": "integer"}}, "required": ["pairs", "differ", "only_a", "only_b"], "additionalProperties": false},
  DiffDifference: {"type": "object", "properties": {"node": {"type": "integer"}, "key": {"type": "string"}, "max_relative": {"$ref": "#/$defs/Number"}, "reasons": {"type": "array", "items": {"type": "string"}}}, "required": ["node", "key", "max_relative", "reasons"], "additionalProperties": false},
  DiffOnly: {"type": "object", "properties": {"node": {"type": "integer"}, "key": {"type": "string"}}, "required": ["node", "key"], "additionalProperties": false},
  DiffData: {"type": "object", "properties": {"a": {"type": "string"}, "b": {"type": "string"}, "overlay": {"anyOf": [{"type": "string"}, {"type": "null"}]}, "summary": {"type": "string"}, "counts": {"$ref": "#/$defs/DiffCounts"}, "differences": {"type": "array", "items": {"$ref": "#/$defs/DiffDifference"}}, "only_a": {"type": "array", "items": {"$ref": "#/$defs/DiffOnly"}}, "only_b": {"type": "array", "items": {"$ref": "#/$defs/DiffOnly"}}}, "required": ["a", "b", "overlay", "summary", "counts", "differences", "only_a", "only_b"], "additionalProperties": false},
  DoctorChecking: {"type": "object", "properties": {"run": {"type": "integer"}, "state": {"const": "checking"}, "report": {"type": "null"}, "error": {"type": "null"}}, "required": ["run", "state", "report", "error"], "additionalProperties": false},
  DoctorDone: {"type": "object", "properties": {"run": {"type": "integer"}, "state": {"const": "done"}, "report": {"type": "object", "additionalProperties": {}}, "error": {"type": "null"}}, "required": ["run", "state", "report", "error"], "additionalProperties": false},
  DoctorFailed: {"type": "object", "properties": {"run": {"type": "integer"}, "state": {"const": "error"}, "report": {"type": "null"}, "error": {"type": "string"}}, "required": ["run", "state", "report", "error"], "additionalProperties": false},
  AckMessage: {"type": "object", "properties": {"type": {"const": "ack"}, "name": {"type": "string"}, "ok": {"type": "boolean"}, "reason": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["type", "name", "ok", "reason"], "additionalProperties": false},
  ErrorReply: {"type": "object", "properties": {"type": {"const": "error"}, "reason": {"type": "string"}}, "required": ["type", "reason"], "additionalProperties": false},
  ProgressMessage: {"type": "object", "properties": {"type": {"const": "progress"}, "name": {"const": "check_gradients"}, "done": {"type": "integer"}, "total": {"type": "integer"}, "label": {"type": "string"}}, "required": ["type", "name", "done", "total", "label"], "additionalProperties": false},
  StatesDelta: {"type": "object", "properties": {"type": {"const": "states_delta"}, "seq": {"type": "integer"}, "states": {"type": "object", "additionalProperties": {"$ref": "#/$defs/NodeState"}}, "delivered": {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}}, "required": ["type", "seq", "states", "delivered"], "additionalProperties": false},
  PlainCommand: {"type": "object", "properties": {"type": {"const": "command"}, "name": {"enum": ["step", "step_event", "continue", "step_back", "abort", "check_gradients"]}}, "required": ["type", "name"], "additionalProperties": false},
  RunToCommand: {"type": "object", "properties": {"type": {"const": "command"}, "name": {"const": "run_to"}, "node": {"type": "integer"}}, "required": ["type", "name", "node"], "additionalProperties": false},
  SelectCommand: {"type": "object", "properties": {"type": {"const": "command"}, "name": {"const": "select"}, "node": {"anyOf": [{"type": "integer"}, {"type": "null"}]}}, "required": ["type", "name", "node"], "additionalProperties": false},
  SeekCommand: {"type": "object", "properties": {"type": {"const": "command"}, "name": {"const": "seek"}, "position": {"type": "integer"}}, "required": ["type", "name", "position"], "additionalProperties": false},
  ModuleSelect: {"type": "object", "properties": {"type": {"const": "select"}, "module": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["type", "module"], "additionalProperties": false},
  OverlayRequest: {"type": "object", "properties": {"type": {"const": "overlay"}, "name": {"anyOf": [{"type": "string"}, {"type": "null"}]}}, "required": ["type", "name"], "additionalProperties": false},
  ResyncRequest: {"type": "object", "properties": {"type": {"const": "resync"}}, "required": ["type"], "additionalProperties": false},
};

/** A JSON object (not null, not an array): what every parser of a trait or message checks first. */
export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
