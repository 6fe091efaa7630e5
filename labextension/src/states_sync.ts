// The view's copy of the node states and gradient deliveries (protocol 6).
//
// Python sends `states` and `delivered` whole only when a view needs all of them (the widget
// opens, a new graph, a replay going back, a `resync`), with `states_base`: the number of the
// last `states_delta` they include. A Step sends a `states_delta` custom message instead (the
// states that changed and the deliveries added), numbered `seq`, followed by an `update` that
// sets `states_seq` to that number (docs/widget_protocol.md, "States deltas"). This module
// keeps the copy: it takes the traits whole when they (or `states_base`, or the graph) change,
// applies the delta numbered one more than the copy's, ignores older ones, and reports a gap
// (a later delta, or a `states_seq` beyond the copy: a view opened after some steps got the
// traits as they were last sent whole), for which the view sends `{"type": "resync"}`.
// Hosts without deltas (the offline page) set `states` whole on every change and no
// `states_seq`: the copy then follows the `states` trait alone.

import {
  isId,
  isRecord,
  parseDelivered,
  parseStates,
  ProtocolError,
  type Deliveries,
  type Graph,
  type NodeState,
  type StateMap,
} from "./model.js";
import type * as protocol from "./generated/widget_protocol.js";
import type { ResyncRequest } from "./generated/widget_protocol.js";
import { readShape } from "./payload.js";

/** A `states_delta` message, checked. */
export interface StatesDelta {
  readonly seq: number;
  readonly states: ReadonlyMap<number, NodeState>;
  readonly delivered: Deliveries;
}

/** What the view asks for when its copy missed a delta (the generated protocol type). */
export type ResyncMessage = ResyncRequest;

export const RESYNC_MESSAGE: ResyncMessage = { type: "resync" };

/**
 * Recognise a `states_delta` message: null for any other message; a ProtocolError naming the
 * field when it is one but malformed.
 */
export function parseStatesDelta(content: unknown): StatesDelta | null {
  if (!isRecord(content) || content["type"] !== "states_delta") return null;
  const { seq, states, delivered } = readShape<protocol.StatesDelta>("StatesDelta", content, "states_delta");
  // What the shape does not say: numbering starts at 1, keys are node ids, a delivery is a pair.
  if (seq < 1) throw new ProtocolError(`states_delta.seq must be an integer >= 1, got ${seq}`);
  const changed = new Map<number, NodeState>();
  for (const [key, state] of Object.entries(states)) {
    if (!/^(0|[1-9][0-9]*)$/.test(key)) throw new ProtocolError(`states_delta.states key ${JSON.stringify(key)} is not a node id`);
    changed.set(Number(key), state);
  }
  const pairs: (readonly [number, number])[] = [];
  delivered.forEach((pair, index) => {
    if (pair.length !== 2 || !isId(pair[0]) || !isId(pair[1])) {
      throw new ProtocolError(`states_delta.delivered[${index}] must be a [producer, receiver] pair of node ids, got ${JSON.stringify(pair)}`);
    }
    pairs.push([pair[0], pair[1]]);
  });
  return { seq, states: changed, delivered: pairs };
}

/** The traits the copy is taken from (a widget model's `get`). */
export type TraitReader = (name: string) => unknown;

/** The outcome of `apply`: the delta was applied, was older than the copy, or follows a gap. */
export type DeltaOutcome = "applied" | "old" | "gap";

/** The view's copy of the states and deliveries (see the top of this file). */
export class StatesCopy {
  /** Every node of the graph with its state (pending when not sent); updated in place. */
  states = new Map<number, NodeState>();
  /** The deliveries so far (null: the session has no event stream). */
  deliveries: (readonly [number, number])[] | null = null;
  /** The number of the last delta the copy includes (0: a host without deltas). */
  seq = 0;
  /** The nodes whose state changed since `takeChanged` was last called (null: all may have). */
  private changed: Set<number> | null = null;
  private source: readonly unknown[] = [];
  private resyncAsked = false;

  /**
   * Take `states` and `delivered` whole when they, `states_base` or the graph changed since
   * the copy was taken. Returns true when it did. Throws a ProtocolError on malformed traits.
   */
  sync(get: TraitReader, graph: Graph): boolean {
    const source = [get("states"), get("delivered"), get("states_base"), graph];
    if (source.every((item, index) => item === this.source[index])) return false;
    const states = parseStates(source[0], graph);
    const deliveries = parseDelivered(source[1], graph);
    this.source = source;
    this.states = states;
    this.deliveries = deliveries === null ? null : [...deliveries];
    this.seq = isId(source[2]) ? source[2] : 0;
    this.changed = null;
    this.resyncAsked = false;
    return true;
  }

  /** Apply a delta (nodes outside the graph are ignored), or say why not. */
  apply(delta: StatesDelta, graph: Graph): DeltaOutcome {
    if (delta.seq <= this.seq) return "old";
    if (delta.seq !== this.seq + 1) return "gap";
    for (const [id, state] of delta.states) {
      if (!graph.byId.has(id) || this.states.get(id) === state) continue;
      this.states.set(id, state);
      this.changed?.add(id);
    }
    if (this.deliveries !== null) {
      for (const pair of delta.delivered) if (graph.byId.has(pair[0]) && graph.byId.has(pair[1])) this.deliveries.push(pair);
    }
    this.seq = delta.seq;
    return "applied";
  }

  /** Whether `states_seq` (the trait) is beyond the copy: a delta was missed. */
  behind(statesSeq: unknown): boolean {
    return isId(statesSeq) && statesSeq > this.seq;
  }

  /**
   * Whether to send a resync now: once per gap, until the whole traits arrive (a second
   * request while the first is on its way would only send them twice).
   */
  askResync(): boolean {
    if (this.resyncAsked) return false;
    this.resyncAsked = true;
    return true;
  }

  /** The nodes whose state changed since the last call; null when all may have (a whole copy). */
  takeChanged(): ReadonlySet<number> | null {
    const changed = this.changed;
    this.changed = new Set();
    return changed;
  }
}
