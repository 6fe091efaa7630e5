// The graph model and the pure state logic of the debugger view.
//
// Everything here is data in, data out: no DOM, no widget model. Python owns the state
// and validates it before it is synced (see docs/widget_protocol.md); the parsers below
// still check every value they read, because a view that throws on a malformed trait
// shows nothing at all, while one that reports the problem can still be debugged.

import * as protocol from "./generated/widget_protocol.js";
import { describe, ProtocolError, readShape } from "./payload.js";

export { describe, ProtocolError } from "./payload.js";

/** The widget protocol this view speaks (docs/widget_protocol.md); Python sends its own. */
export const PROTOCOL_VERSION = 6;

/** A problem to show when Python speaks another protocol version, else null. */
export function protocolMismatch(value: unknown): string | null {
  if (value === PROTOCOL_VERSION) return null;
  return (
    `the kernel speaks widget protocol ${JSON.stringify(value)}, this view speaks ${PROTOCOL_VERSION}: ` +
    "rebuild the front end (npm --prefix labextension run build) and reload the page"
  );
}

// The values of the protocol's literal types, generated from gradviz/widget/_protocol.py.
export const NODE_STATES = protocol.NODE_STATES;
export type NodeState = protocol.NodeState;

export const NODE_KINDS = protocol.NODE_KINDS;
export type NodeKind = protocol.NodeKind;

/** "running": a session driving user code in a worker thread, between two pauses. */
export const SESSION_STATUSES = protocol.SESSION_STATUSES;
export type SessionStatus = protocol.SessionStatus;

/** The session commands, in toolbar order (docs/widget_protocol.md). `select` is separate. */
export const COMMANDS = protocol.COMMAND_NAMES;
export type CommandName = protocol.CommandName;

export interface GraphNode {
  readonly id: number;
  readonly name: string;
  readonly kind: NodeKind;
  readonly label: string;
  /** The leaf's name (`w`, `fc.weight`) on an AccumulateGrad node, when the session knows it. */
  readonly leaf_name?: string;
  /** A small display number per graph (1, 2, ...; 0 for the engine's GraphRoot); ids can be large. */
  readonly number?: number;
  /** The module path the node was recorded in, outermost first (`["blocks", "3", "attn"]`). */
  readonly module?: readonly string[];
  /** The class name of the module at each level of `module` ("" for a scope block). */
  readonly module_types?: readonly string[];
  /** Which application of that module built the node (0 for the first; an unrolled cell counts up). */
  readonly module_call?: number;
  /** The user's forward line that built it (`file.py:12: y = x * w`), when the forward was observed. */
  readonly source?: string;
}

/** An edge of the autograd graph: `source` is closer to the loss, `target` is one of its next_functions. */
export type GraphEdge = Readonly<protocol.GraphEdge>;

export interface Graph {
  readonly nodes: readonly GraphNode[];
  readonly edges: readonly GraphEdge[];
  readonly roots: readonly number[];
  readonly byId: ReadonlyMap<number, GraphNode>;
}

export const isRecord = protocol.isRecord;

export function isId(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

export function isOneOf<T extends string>(values: readonly T[], value: unknown): value is T {
  return typeof value === "string" && (values as readonly string[]).includes(value);
}

/** The empty graph, shown before Python has sent one. */
export const EMPTY_GRAPH: Graph = { nodes: [], edges: [], roots: [], byId: new Map() };

/**
 * Check and convert the `graph` trait. Throws ProtocolError naming the first bad field.
 * An empty object (the trait's default) is the empty graph.
 */
export function parseGraph(value: unknown): Graph {
  if (isRecord(value) && Object.keys(value).length === 0) return EMPTY_GRAPH;
  const checked = readShape<protocol.Graph>("Graph", value, "graph");
  // What the shape does not say: ids are non-negative and unique, a node's module_types has one
  // name per module, edges and roots name nodes of the graph.
  const byId = new Map<number, GraphNode>();
  const nodes = checked.nodes.map((raw, index): GraphNode => {
    const where = `graph.nodes[${index}]`;
    for (const key of ["id", "number", "module_call"] as const) {
      const field = raw[key];
      if (field !== undefined && field < 0) throw new ProtocolError(`${where}.${key} must be a non-negative integer, got ${field}`);
    }
    if (byId.has(raw.id)) throw new ProtocolError(`${where}.id ${raw.id} is used by two nodes`);
    const { module, module_types: types, module_call: call, leaf_name: leafName, source, number } = raw;
    if (module !== undefined && types !== undefined && types.length !== module.length) {
      throw new ProtocolError(`${where}.module_types must be a list of ${module.length} strings (one per module name), got ${types.length}`);
    }
    const node: GraphNode = {
      id: raw.id, name: raw.name, kind: raw.kind, label: raw.label,
      ...(leafName === undefined || leafName === "" ? {} : { leaf_name: leafName }),
      ...(number === undefined ? {} : { number }),
      ...(source === undefined || source === "" ? {} : { source }),
      ...(module === undefined ? {} : { module, ...(types === undefined ? {} : { module_types: types }), ...(call === undefined ? {} : { module_call: call }) }),
    };
    byId.set(raw.id, node);
    return node;
  });
  const edges = checked.edges.map((edge, index): GraphEdge => {
    const where = `graph.edges[${index}]`;
    for (const key of ["source", "target"] as const) {
      if (!byId.has(edge[key])) throw new ProtocolError(`${where}.${key} must be the id of a node, got ${edge[key]}`);
    }
    if (edge.input_nr < 0) throw new ProtocolError(`${where}.input_nr must be a non-negative integer, got ${edge.input_nr}`);
    return { source: edge.source, target: edge.target, input_nr: edge.input_nr };
  });
  checked.roots.forEach((root, index) => {
    if (!byId.has(root)) throw new ProtocolError(`graph.roots[${index}] must be the id of a node, got ${root}`);
  });
  return { nodes, edges, roots: [...checked.roots], byId };
}

export type StateMap = ReadonlyMap<number, NodeState>;

/**
 * Check and convert the `states` trait (JSON object: node id as a decimal string → state).
 * Nodes of the graph missing from it are pending; ids not in the graph are ignored.
 */
export function parseStates(value: unknown, graph: Graph): Map<number, NodeState> {
  if (!isRecord(value)) throw new ProtocolError(`states must be an object, got ${describe(value)}`);
  const states = new Map<number, NodeState>();
  for (const node of graph.nodes) states.set(node.id, "pending");
  for (const [key, state] of Object.entries(value)) {
    if (!/^(0|[1-9][0-9]*)$/.test(key)) throw new ProtocolError(`states key ${JSON.stringify(key)} is not a node id`);
    if (!isOneOf(NODE_STATES, state)) {
      throw new ProtocolError(`states[${key}] must be one of ${NODE_STATES.join(", ")}, got ${describe(state)}`);
    }
    const id = Number(key);
    if (graph.byId.has(id)) states.set(id, state);
  }
  return states;
}

/** The `current` trait: a node id of the graph, or null. */
export function parseCurrent(value: unknown, graph: Graph): number | null {
  if (value === null || value === undefined) return null;
  if (!isId(value)) throw new ProtocolError(`current must be a node id or null, got ${describe(value)}`);
  return graph.byId.has(value) ? value : null;
}

/** Gradients delivered so far: one [producer, receiver] per shown `buffer_added` event. */
export type Deliveries = readonly (readonly [number, number])[];

/**
 * The `delivered` trait: [producer, receiver] pairs, one per gradient delivery shown so far
 * (a pair repeats once per delivery); null when the session has no event stream (then an
 * edge counts as delivered once its source node has run). Pairs naming nodes outside the
 * graph are dropped.
 */
export function parseDelivered(value: unknown, graph: Graph): Deliveries | null {
  if (value === null || value === undefined) return null;
  if (!Array.isArray(value)) throw new ProtocolError(`delivered must be a list or null, got ${describe(value)}`);
  const pairs: (readonly [number, number])[] = [];
  value.forEach((pair: unknown, index) => {
    if (!Array.isArray(pair) || pair.length !== 2 || !isId(pair[0]) || !isId(pair[1])) {
      throw new ProtocolError(`delivered[${index}] must be a [producer, receiver] pair of node ids, got ${describe(pair)}`);
    }
    if (graph.byId.has(pair[0]) && graph.byId.has(pair[1])) pairs.push([pair[0], pair[1]]);
  });
  return pairs;
}

/**
 * Which edges (indices into graph.edges) carry a delivered gradient. With `deliveries`, the
 * k-th edge (in graph order) from a producer to a receiver is delivered once k + 1 of its
 * `buffer_added` events are shown: the colour follows the events stepped through, not the
 * producer's state (after Step event shows `node_finished`, its gradients are still on the
 * way). Without (null): every edge of a node that has run.
 */
export function deliveredEdges(graph: Graph, states: StateMap, deliveries: Deliveries | null): Set<number> {
  const delivered = new Set<number>();
  if (deliveries === null) {
    graph.edges.forEach((edge, index) => {
      const state = states.get(edge.source);
      if (state !== undefined && hasRun(state)) delivered.add(index);
    });
    return delivered;
  }
  const counts = new Map<string, number>();
  for (const [producer, receiver] of deliveries) {
    const key = `${producer}>${receiver}`;
    counts.set(key, (counts.get(key) ?? 0) + 1);
  }
  const rank = new Map<string, number>();
  graph.edges.forEach((edge, index) => {
    const key = `${edge.source}>${edge.target}`;
    const k = rank.get(key) ?? 0;
    rank.set(key, k + 1);
    if ((counts.get(key) ?? 0) > k) delivered.add(index);
  });
  return delivered;
}

/** The `status` trait. Unknown values are reported, not guessed at. */
export function parseStatus(value: unknown): SessionStatus {
  if (!isOneOf(SESSION_STATUSES, value)) {
    throw new ProtocolError(`status must be one of ${SESSION_STATUSES.join(", ")}, got ${describe(value)}`);
  }
  return value;
}

/** The `error` trait: a message, or null when there is none. */
export function parseErrorText(value: unknown): string | null {
  if (value === null || value === undefined || value === "") return null;
  return typeof value === "string" ? value : `(malformed error trait: ${describe(value)})`;
}

export function stateClass(state: NodeState): string {
  return `gv-state-${state}`;
}

export const ALL_STATE_CLASSES: readonly string[] = NODE_STATES.map(stateClass);

/** A node whose backward has run: its gradients have been sent along its edges. */
export function hasRun(state: NodeState): boolean {
  return state === "done" || state === "released";
}

/** The ids whose state differs between two maps (present in either), in ascending order. */
export function changedNodes(before: StateMap, after: StateMap): number[] {
  const changed = new Set<number>();
  for (const [id, state] of after) if (before.get(id) !== state) changed.add(id);
  for (const id of before.keys()) if (!after.has(id)) changed.add(id);
  return [...changed].sort((a, b) => a - b);
}

export type StateCounts = Record<NodeState, number>;

export function countStates(states: StateMap): StateCounts {
  const counts = Object.fromEntries(NODE_STATES.map((state) => [state, 0])) as StateCounts;
  for (const state of states.values()) counts[state] += 1;
  return counts;
}

/** Step and Continue make sense only while the session is paused. */
export function commandsEnabled(status: SessionStatus): boolean {
  return status === "paused";
}

/**
 * Whether a command's button is enabled (Python checks again: docs/widget_protocol.md).
 * Step back also works at the end of a replay, and Check gradients after the pass (the doctor
 * checks the graph, not the pass); Run to needs a selected node that has not run.
 */
export function commandEnabled(name: CommandName, view: ViewState, selected: number | null): boolean {
  if (name === "step_back" || name === "check_gradients") return view.status !== "running";
  if (!commandsEnabled(view.status)) return false;
  if (name !== "run_to") return true;
  if (selected === null || selected === view.current) return false;
  const state = view.states.get(selected);
  return state !== undefined && !hasRun(state) && state !== "error";
}

/** The `commands` trait: the commands this session offers, in toolbar order. */
export function parseCommands(value: unknown): ReadonlySet<CommandName> {
  if (!Array.isArray(value)) throw new ProtocolError(`commands must be an array, got ${describe(value)}`);
  const names = new Set<CommandName>();
  value.forEach((name, index) => {
    if (!isOneOf(COMMANDS, name)) {
      throw new ProtocolError(`commands[${index}] must be one of ${COMMANDS.join(", ")}, got ${describe(name)}`);
    }
    names.add(name);
  });
  return names;
}

/** The `selected` trait: a node id of the graph, or null (also for an id the graph lacks). */
export function parseSelected(value: unknown, graph: Graph): number | null {
  if (value === null || value === undefined) return null;
  if (!isId(value)) throw new ProtocolError(`selected must be a node id or null, got ${describe(value)}`);
  return graph.byId.has(value) ? value : null;
}

/** The `last_event` trait: the latest event shown, for the narration line. */
export type EventLine = Readonly<protocol.EventLine>;

export function parseLastEvent(value: unknown): EventLine | null {
  if (value === null || value === undefined) return null;
  const { seq, kind, node, text } = readShape<protocol.EventLine>("EventLine", value, "last_event");
  return { seq: isId(seq) ? seq : null, kind, node: isId(node) ? node : null, text };
}

/**
 * The narration line to show. An abort records no event, so the last event ("X is ready: …")
 * would stay under an "Aborted" status as if X were still about to run; say what Abort did.
 */
export function narrationLine(event: EventLine | null, status: SessionStatus, states: StateMap): EventLine | null {
  if (status !== "aborted") return event;
  const counts = countStates(states);
  const never = counts.pending + counts.ready;
  const text = `Backward aborted: ${never} node${never === 1 ? "" : "s"} never ran, so their gradients never arrive.`;
  return { seq: event?.seq ?? null, kind: "aborted", node: null, text };
}

export interface ViewState {
  readonly graph: Graph;
  readonly states: StateMap;
  readonly current: number | null;
  readonly status: SessionStatus;
  /** Why the paused session stopped ("breakpoint on TanhBackward0"): the `stopped_at` trait. */
  readonly stoppedAt?: string | null;
}

/** The node's name as shown: its class name, after the leaf's name when known ("w · AccumulateGrad"). */
export function displayName(node: { readonly name: string; readonly leaf_name?: string }): string {
  return node.leaf_name === undefined ? node.name : `${node.leaf_name} · ${node.name}`;
}

/** The node's display title: its shown name, with the id to tell equal names apart. */
export function nodeTitle(node: GraphNode): string {
  return `${displayName(node)} #${nodeNumber(node)}`;
}

/** The number a person reads for a node: its small display number, else its id (older traces). */
export function nodeNumber(node: { readonly id: number; readonly number?: number }): number {
  return node.number ?? node.id;
}

/** One line of text for the toolbar, e.g. "Paused · next: MulBackward0 #3 · 2 of 7 nodes run". */
/**
 * The node that runs next is still pending: Step event has shown a node's `node_finished`, and
 * the events that deliver its gradients (`buffer_added`, then `node_ready`) are still to show.
 * The engine already knows which node it runs next (the halo), but in the events shown so far
 * that node's gradient has not arrived, so it is not drawn ready yet.
 */
export function awaitingDelivery(view: Pick<ViewState, "states" | "current" | "status">): boolean {
  return view.status === "paused" && view.current !== null && view.states.get(view.current) === "pending";
}

export function statusText(view: ViewState): string {
  const counts = countStates(view.states);
  const total = view.states.size;
  const progress = `${counts.done + counts.released} of ${total} node${total === 1 ? "" : "s"} run`;
  switch (view.status) {
    case "paused": {
      const next = view.current === null ? undefined : view.graph.byId.get(view.current);
      // After Continue, say why it stopped: otherwise a breakpoint looks like a stuck run.
      const paused = view.stoppedAt ? `Paused at ${view.stoppedAt}` : "Paused";
      if (next === undefined) return `${paused} · ${progress}`;
      // After Step event the current node is part-way through its backward.
      // Its saved_released comes before its node_finished: "released" and current is still inside.
      const state = view.states.get(next.id);
      const where = state === "running" || (state !== undefined && hasRun(state)) ? "inside" : "next:";
      const waiting = awaitingDelivery(view) ? " (its gradient is on the way: Step event shows it arrive)" : "";
      return `${paused} · ${where} ${nodeTitle(next)}${waiting} · ${progress}`;
    }
    case "running":
      return `Running · ${progress}`;
    case "finished":
      return `Finished · ${progress}`;
    case "aborted":
      return `Aborted · ${progress}`;
    case "error": {
      const failed = view.graph.nodes.filter((node) => view.states.get(node.id) === "error");
      const where = failed.length > 0 ? ` in ${failed.map(nodeTitle).join(", ")}` : "";
      return `Error${where} · ${progress}`;
    }
  }
}

/** A command message as sent to Python (docs/widget_protocol.md, "browser → Python"). */
export type CommandMessage = Readonly<protocol.CommandMessage>;

/** The message for a toolbar command; `run_to` goes to the selected node (null: no message). */
export function commandMessage(name: CommandName, selected: number | null = null): CommandMessage | null {
  if (name !== "run_to") return { type: "command", name };
  return selected === null ? null : { type: "command", name, node: selected };
}

/** Show a node in the inspector (null: none). */
export function selectMessage(node: number | null): CommandMessage {
  return { type: "command", name: "select", node };
}

/** Show the first `position` events of a replay (a click in the event history). */
export function seekMessage(position: number): CommandMessage {
  return { type: "command", name: "seek", position };
}

/** Python's reply to a malformed message (unknown command, missing or mistyped fields). */
export type ErrorReply = Readonly<protocol.ErrorReply>;

/** Recognise an error reply: null for any other message; a ProtocolError naming the field when it is one but malformed. */
export function parseErrorReply(value: unknown): ErrorReply | null {
  if (!isRecord(value) || value["type"] !== "error") return null;
  return readShape<protocol.ErrorReply>("ErrorReply", value, "error reply");
}

/** Python's answer to a command (docs/widget_protocol.md, "Python → browser"). */
export type AckMessage = Readonly<protocol.AckMessage>;

/** Recognise an ack: null for any other message; a ProtocolError naming the field when it is one but malformed. */
export function parseAck(value: unknown): AckMessage | null {
  if (!isRecord(value) || value["type"] !== "ack") return null;
  return readShape<protocol.AckMessage>("AckMessage", value, "ack");
}

/**
 * The note the status line shows after a command Python answered: none when it ran; when
 * it was refused, why ("step ignored: the session is finished"). A command that ran and
 * raised (a user's backward failing) is not "ignored": its exception is already in the
 * error box (`errorText`), so the note only points there instead of repeating it.
 */
export function ackNotice(ack: AckMessage, errorText: string | null): string | null {
  if (ack.ok) return null;
  const command = ack.name.replace(/_/g, " ");
  const reason = ack.reason ?? "no reason given";
  if (ack.reason !== null && errorText !== null && errorText.includes(ack.reason)) return `${command} raised an error (below)`;
  return `${command} ignored: ${reason}`;
}

/** The `stopped_at` trait: a short text, or null (absent in older kernels and other hosts). */
export function parseStoppedAt(value: unknown): string | null {
  if (value === null || value === undefined) return null;
  if (typeof value !== "string") throw new ProtocolError(`stopped_at must be a string or null, got ${describe(value)}`);
  return value === "" ? null : value;
}
