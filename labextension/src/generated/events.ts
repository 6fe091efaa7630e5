// Generated from docs/schema/trace.schema.json by
// `python -m gradviz.instrument.schema --typescript`. Do not edit.

export const SCHEMA_VERSION = 3;

/** A tensor, summarized: statistics over its finite entries (null when there are none); ``values``: every entry of a tensor of at most 32 entries, else the first six. */
export interface Summary {
  shape: number[];
  dtype: string;
  numel: number;
  nan: number;
  inf: number;
  min: number | "nan" | "inf" | "-inf" | null;
  max: number | "nan" | "inf" | "-inf" | null;
  mean: number | "nan" | "inf" | "-inf" | null;
  norm: number | "nan" | "inf" | "-inf" | null;
  values: (number | "nan" | "inf" | "-inf")[];
}

/** ``(node, input_nr)`` of ``next_functions``; ``node`` is null for an input without grad. */
export interface Edge {
  node: number | null;
  input_nr: number;
}

/** What a node expects on one input slot (one forward output); dtype null: any dtype. */
export interface OutputMeta {
  shape: number[];
  dtype: string | null;
}

/** One tensor a node saved for backward. */
export interface SavedInfo {
  slot: number;
  label: string;
  shape: number[];
  dtype: string;
  hooked: boolean;
}

/** Where forward recorded the node: the first frame outside gradviz. */
export interface SourceLocation {
  file: string;
  line: number;
  function: string;
  code: string;
}

export interface ExposedInput {
  input: number;
  edge: number;
  exposed: boolean;
  reason: string;
}

export interface GraphNode {
  id: number;
  name: string;
  kind: "builtin" | "custom" | "accumulate_grad";
  label: string;
  number?: number;
  leaf_name?: string;
  module?: string[];
  module_types?: string[];
  module_call?: number;
}

export interface GraphEdge {
  source: number;
  target: number;
  input_nr: number;
}

/** Every node the trace's backward passes could reach (the union of their graphs). */
export interface Graph {
  nodes: GraphNode[];
  edges: GraphEdge[];
  roots: number[];
}

export interface NodeCreatedEvent {
  kind: "node_created";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  name: string;
  node_kind: "builtin" | "custom" | "accumulate_grad";
  edges: Edge[];
  outputs: (OutputMeta | null)[];
  needs_input_grad: boolean[];
  saved: SavedInfo[];
  materialize_grads: boolean;
  dirty_outputs: number[];
  non_differentiable_outputs: number[];
  grad_dtypes: (string | null)[] | null;
  source: SourceLocation | null;
  module?: string[];
}

export interface SavedPackedEvent {
  kind: "saved_packed";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  slot: number;
  label: string;
  hook: string;
}

export interface SavedUnpackedEvent {
  kind: "saved_unpacked";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  slot: number;
  label: string;
  hook: string;
}

export interface BackwardStartedEvent {
  kind: "backward_started";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  roots: Edge[];
  retain_graph: boolean;
  create_graph: boolean;
  inputs: number[] | null;
  dependencies: { [key: string]: number };
}

/** A gradient reached a pending node's input ``slot``; ``sum`` is the slot's value after it was added (the buffer as the node will receive it, if nothing else arrives). ``written_by_backward``: a custom backward added into an exposed buffer in place (``ctx.input_grad_buffers``), so ``grad`` is null and only the new ``sum`` is known. */
export interface BufferAddedEvent {
  kind: "buffer_added";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  slot: number;
  producer: number;
  how: "stored" | "accumulated_in_place" | "accumulated_out_of_place" | "written_by_backward";
  contribution: number;
  grad: Summary | null;
  sum: Summary | null;
}

export interface NodeReadyEvent {
  kind: "node_ready";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  name: string;
}

/** A tensor pre-hook (``slot`` >= 0, one gradient) or a node pre-hook (``slot`` -1, all of them) ran. ``before`` is what the hook received, as it was before the hook ran; ``replaced``: the hook returned a value; ``changed``: the gradients differ afterwards (replaced, or modified in place). */
export interface PrehookEvent {
  kind: "prehook";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  hook: string;
  slot: number;
  replaced: boolean;
  changed: boolean;
  before: (Summary | null)[];
  after: (Summary | null)[];
}

/** A node post-hook ran: ``before`` are the node's results as the hook received them, ``grad_inputs`` what the node hands on after it. */
export interface PosthookEvent {
  kind: "posthook";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  hook: string;
  replaced: boolean;
  changed: boolean;
  before: (Summary | null)[];
  grad_inputs: (Summary | null)[];
}

export interface GradCastEvent {
  kind: "grad_cast";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  slot: number;
  from_dtype: string;
  to_dtype: string;
}

export interface GradReducedEvent {
  kind: "grad_reduced";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  slot: number;
  from_shape: number[];
  to_shape: number[];
}

export interface GradsMaterializedEvent {
  kind: "grads_materialized";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  slots: number[];
}

export interface BuffersExposedEvent {
  kind: "buffers_exposed";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  inputs: ExposedInput[];
}

export interface NodeStartedEvent {
  kind: "node_started";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  name: string;
  grads_in: (Summary | null)[];
}

export interface NodeFinishedEvent {
  kind: "node_finished";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  name: string;
  grads_in: (Summary | null)[];
  grads_out: (Summary | null)[];
  duration: number;
}

export interface GradAccumulatedEvent {
  kind: "grad_accumulated";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  before: Summary | null;
  after: Summary | null;
}

export interface SavedReleasedEvent {
  kind: "saved_released";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  count: number;
  bytes: number;
}

export interface BackwardFinishedEvent {
  kind: "backward_finished";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  duration: number;
}

export interface ErrorEvent {
  kind: "error";
  seq: number;
  task: number | null;
  node: number | null;
  time: number;
  text: string;
  exception: string;
  message: string;
  traceback: string[];
}

export type Event = NodeCreatedEvent | SavedPackedEvent | SavedUnpackedEvent | BackwardStartedEvent | BufferAddedEvent | NodeReadyEvent | PrehookEvent | PosthookEvent | GradCastEvent | GradReducedEvent | GradsMaterializedEvent | BuffersExposedEvent | NodeStartedEvent | NodeFinishedEvent | GradAccumulatedEvent | SavedReleasedEvent | BackwardFinishedEvent | ErrorEvent;

export type EventKind = Event["kind"];

export const EVENT_KINDS: readonly EventKind[] = [
  "node_created",
  "saved_packed",
  "saved_unpacked",
  "backward_started",
  "buffer_added",
  "node_ready",
  "prehook",
  "posthook",
  "grad_cast",
  "grad_reduced",
  "grads_materialized",
  "buffers_exposed",
  "node_started",
  "node_finished",
  "grad_accumulated",
  "saved_released",
  "backward_finished",
  "error",
];

export interface Trace {
  format: "gradviz-trace";
  schema_version: 3;
  gradviz_version: string;
  graph: Graph;
  events: Event[];
}
