// Replay of a recorded trace in the browser, for the self-contained HTML page (standalone.ts).
//
// Python (gradviz/widget/_html.py) precomputes, with ReplaySession, what the session shows
// after each prefix of the event stream: "position p" = the first p events shown, 0 <= p <= n.
// This module only indexes into that data; its step targets mirror ReplaySession's (step,
// step_event, step_back, continue_ without breakpoints, run_to, restart). Pure: no DOM.
//
// The data (docs/widget_protocol.md, "Self-contained HTML"):
//   { format: "gradviz-standalone", version: 1, title, gradviz_version,
//     graph,                      // the `graph` trait, once
//     state_names,                // node state names; a state code indexes into it
//     start,                      // where the replay begins (before the first node ran)
//     final_status,               // status at position n (earlier positions are "paused")
//     events: [kind, node, text, producer?][],  // event i; position p's last event is event p - 1;
//                                 // a buffer_added event adds its producer (the edge it arrives on)
//     changes: number[][],        // changes[p]: flat [id, code, id, code, ...] vs position p-1
//     current: (number | null)[],        // the current node at each position (length n + 1)
//     inspections?: { [id: string]: [position, info][] },  // node() snapshots where they changed
//     inspection_budget?: { bytes, limit, left_out },      // (optional: older pages have none)
//     doctor?: DoctorReport }     // a gradient doctor's report of the graph (optional): the
//                                 // page's Check gradients shows it (doctor.ts parses it)

import { ProtocolError, NODE_STATES, SESSION_STATUSES, type EventLine, type NodeState, type SessionStatus } from "./model.js";

export const STANDALONE_FORMAT = "gradviz-standalone";
export const STANDALONE_VERSION = 1;

/** One event as the page needs it: kind, node (or null), its narration text and, for a
 * buffer_added event, the producer that delivered the gradient (pages written before it was
 * added have none). */
export type EventTuple = readonly [kind: string, node: number | null, text: string, producer?: number];

export interface StandaloneData {
  readonly title: string;
  readonly gradvizVersion: string;
  readonly graph: unknown; // checked by the view (model.parseGraph), like the trait
  readonly start: number;
  readonly finalStatus: SessionStatus;
  readonly events: readonly EventTuple[];
  /** changes[p]: [id, state] pairs that differ from position p - 1 (position 0: from all pending). */
  readonly changes: readonly (readonly (readonly [number, NodeState])[])[];
  readonly current: readonly (number | null)[];
  /** Per node, `session.node(id)` at each position where it changed (position order); null: the page has none. */
  readonly inspections: ReadonlyMap<number, readonly (readonly [number, Record<string, unknown>])[]> | null;
  readonly inspectionBudget: { readonly bytes: number; readonly limit: number; readonly leftOut: number } | null;
  /** A gradient doctor's report of the graph (DoctorReport.to_dict()), checked by doctor.ts; null: none. */
  readonly doctor: Record<string, unknown> | null;
  /** Protocol 5 traits a page may carry as they are (a diff page: `overlays`, `diff`); the view checks them. */
  readonly overlays: unknown;
  readonly diff: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function isId(value: unknown): value is number {
  return typeof value === "number" && Number.isSafeInteger(value) && value >= 0;
}

function fail(what: string): never {
  throw new ProtocolError(`the page's trace data is malformed: ${what}`);
}

/** Check the page's data (JSON.parse of its data element) and decode it. */
export function parseStandalone(value: unknown): StandaloneData {
  if (!isRecord(value)) fail("not an object");
  if (value["format"] !== STANDALONE_FORMAT) fail(`format must be "${STANDALONE_FORMAT}"`);
  if (value["version"] !== STANDALONE_VERSION) {
    fail(`version ${String(value["version"])} is not ${STANDALONE_VERSION}; write the page again with this gradviz`);
  }
  const { title, gradviz_version: gradvizVersion, start, final_status: finalStatus, state_names: names } = value;
  if (typeof title !== "string" || typeof gradvizVersion !== "string") fail("title and gradviz_version must be strings");
  if (!Array.isArray(names) || names.some((name) => !(NODE_STATES as readonly unknown[]).includes(name))) {
    fail("state_names must list node states");
  }
  const stateNames = names as NodeState[];
  if (!(SESSION_STATUSES as readonly unknown[]).includes(finalStatus)) fail("final_status is not a session status");
  const rawEvents = value["events"];
  if (!Array.isArray(rawEvents)) fail("events must be an array");
  const events = rawEvents.map((event, index): EventTuple => {
    if (!Array.isArray(event) || (event.length !== 3 && event.length !== 4)) fail(`events[${index}] must be [kind, node, text, producer?]`);
    const [kind, node, text, producer] = event as unknown[];
    if (typeof kind !== "string" || typeof text !== "string" || !(node === null || isId(node))) {
      fail(`events[${index}] must be [kind, node, text, producer?]`);
    }
    if (event.length === 4) {
      if (!isId(producer)) fail(`events[${index}]'s producer must be a node id`);
      return [kind, node, text, producer];
    }
    return [kind, node, text];
  });
  const n = events.length;
  if (!isId(start) || start > n) fail("start must be a position");
  const rawChanges = value["changes"];
  const rawCurrent = value["current"];
  if (!Array.isArray(rawChanges) || rawChanges.length !== n + 1) fail("changes must have one entry per position");
  if (!Array.isArray(rawCurrent) || rawCurrent.length !== n + 1) fail("current must have one entry per position");
  const changes = rawChanges.map((flat, position) => {
    if (!Array.isArray(flat) || flat.length % 2 !== 0) fail(`changes[${position}] must be [id, code, ...]`);
    const pairs: [number, NodeState][] = [];
    for (let i = 0; i < flat.length; i += 2) {
      const id: unknown = flat[i];
      const code: unknown = flat[i + 1];
      const state = typeof code === "number" ? stateNames[code] : undefined;
      if (!isId(id) || state === undefined) fail(`changes[${position}] has a bad entry at ${i}`);
      pairs.push([id, state]);
    }
    return pairs;
  });
  const current = rawCurrent.map((id, position): number | null => {
    if (id !== null && !isId(id)) fail(`current[${position}] must be a node id or null`);
    return id;
  });
  const { inspections, inspectionBudget } = parseInspections(value);
  const rawDoctor = value["doctor"];
  if (rawDoctor !== undefined && rawDoctor !== null && !isRecord(rawDoctor)) fail("doctor must be an object");
  const doctor = isRecord(rawDoctor) ? rawDoctor : null;
  return { title, gradvizVersion, graph: value["graph"], start, finalStatus: finalStatus as SessionStatus, events, changes, current, inspections, inspectionBudget, doctor, overlays: value["overlays"] ?? null, diff: value["diff"] ?? null };
}

function parseInspections(value: Record<string, unknown>): Pick<StandaloneData, "inspections" | "inspectionBudget"> {
  const raw = value["inspections"];
  if (raw === undefined) return { inspections: null, inspectionBudget: null };
  if (!isRecord(raw)) fail("inspections must be an object");
  const inspections = new Map<number, [number, Record<string, unknown>][]>();
  for (const [key, snapshots] of Object.entries(raw)) {
    const id = Number(key);
    if (!isId(id) || !Array.isArray(snapshots)) fail(`inspections[${JSON.stringify(key)}] must list [position, info] pairs`);
    inspections.set(id, snapshots.map((pair: unknown, index): [number, Record<string, unknown>] => {
      if (!Array.isArray(pair) || pair.length !== 2 || !isId(pair[0]) || !isRecord(pair[1])) {
        fail(`inspections[${key}][${index}] must be [position, info]`);
      }
      return [pair[0], pair[1]];
    }));
  }
  const budget = value["inspection_budget"];
  const inspectionBudget = isRecord(budget) && isId(budget["bytes"]) && isId(budget["limit"]) && isId(budget["left_out"])
    ? { bytes: budget["bytes"], limit: budget["limit"], leftOut: budget["left_out"] }
    : null;
  return { inspections, inspectionBudget };
}

/** How often a full copy of the states is kept (seeking applies at most this many changes). */
const CHECKPOINT_EVERY = 64;
/**
 * At most about this many map entries in all checkpoints together: each checkpoint copies every
 * node's state, so a 100,000-node recording (600,000 events) checkpointed every 64 events would
 * need billions of entries and crash the page. Bigger recordings space their checkpoints wider
 * (a seek then replays up to that many events, still a few milliseconds).
 */
const CHECKPOINT_ENTRIES = 4_000_000;

/** What the session shows at each position, and where each command goes from there. */
export class Timeline {
  /** The number of events; positions run from 0 to length. */
  readonly length: number;
  /** Positions of node_started events (node boundaries, as in ReplaySession). */
  private readonly boundaries: number[] = [];
  private readonly checkpoints: Map<number, NodeState>[] = [];
  /** Events between two checkpoints (CHECKPOINT_EVERY, or more for big recordings). */
  private readonly spacing: number;
  /** The deliveries ([position after the event, producer, receiver]); null: the page has none. */
  private readonly deliveries: (readonly [number, number, number])[] | null;

  constructor(private readonly data: StandaloneData) {
    this.length = data.events.length;
    const deliveries: (readonly [number, number, number])[] = [];
    let hasProducers = false;
    data.events.forEach(([kind, node, , producer], index) => {
      if (kind === "node_started") this.boundaries.push(index);
      if (producer !== undefined) hasProducers = true;
      if (kind === "buffer_added" && producer !== undefined && node !== null) deliveries.push([index + 1, producer, node]);
    });
    this.deliveries = hasProducers ? deliveries : null;
    const nodes = isRecord(data.graph) && Array.isArray(data.graph["nodes"]) ? data.graph["nodes"].length : 0;
    this.spacing = Math.max(CHECKPOINT_EVERY, Math.ceil(((this.length + 1) * nodes) / CHECKPOINT_ENTRIES));
    let states = new Map<number, NodeState>();
    for (let position = 0; position <= this.length; position++) {
      for (const [id, state] of data.changes[position] ?? []) states.set(id, state);
      if (position % this.spacing === 0) {
        this.checkpoints.push(states);
        states = new Map(states);
      }
    }
  }

  get start(): number {
    return this.data.start;
  }

  private clamp(position: number): number {
    return Math.max(0, Math.min(this.length, Math.trunc(position)));
  }

  /** The `states` trait at a position (absent ids are pending). */
  statesAt(position: number): Record<string, NodeState> {
    const p = this.clamp(position);
    const base = Math.floor(p / this.spacing);
    const states = new Map(this.checkpoints[base]);
    for (let q = base * this.spacing + 1; q <= p; q++) {
      for (const [id, state] of this.data.changes[q] ?? []) states.set(id, state);
    }
    const out: Record<string, NodeState> = {};
    for (const [id, state] of states) out[String(id)] = state;
    return out;
  }

  /** The `delivered` trait at a position: [producer, receiver] per buffer_added shown. */
  deliveredAt(position: number): [number, number][] | null {
    if (this.deliveries === null) return null;
    const p = this.clamp(position);
    return this.deliveries.filter(([after]) => after <= p).map(([, producer, receiver]) => [producer, receiver]);
  }

  currentAt(position: number): number | null {
    return this.data.current[this.clamp(position)] ?? null;
  }

  statusAt(position: number): SessionStatus {
    return this.clamp(position) < this.length ? "paused" : this.data.finalStatus;
  }

  /** What the inspector shows of `node` at a position: its last snapshot at or before it. */
  inspectionAt(position: number, node: number): Record<string, unknown> | null {
    const snapshots = this.data.inspections?.get(node);
    if (snapshots === undefined) return null;
    const p = this.clamp(position);
    let found: Record<string, unknown> | null = null;
    for (const [at, info] of snapshots) {
      if (at > p) break;
      found = info;
    }
    return found;
  }

  /** The `history` trait: every event of the trace (a click seeks to it). */
  history(): { start: number; total: number; events: [string, number | null, string][]; seekable: boolean } {
    return { start: 0, total: this.length, events: this.data.events.map(([kind, node, text]) => [kind, node, text]), seekable: true };
  }

  /** The narration line: the last shown event (null before the first). */
  lastEventAt(position: number): EventLine | null {
    const p = this.clamp(position);
    const event = this.data.events[p - 1];
    if (event === undefined) return null;
    const [kind, node, text] = event;
    return { seq: p - 1, kind, node, text };
  }

  /** First boundary > position, else the end (ReplaySession._next_boundary). */
  private nextBoundary(position: number): number {
    return this.boundaries.find((b) => b > position) ?? this.length;
  }

  /** Step: show the next node (all its events). */
  stepTarget(position: number): number {
    return position >= this.length ? position : this.nextBoundary(position);
  }

  stepEventTarget(position: number): number {
    return Math.min(position + 1, this.length);
  }

  /** Step back: just before the previous node ran; unchanged at the start. */
  stepBackTarget(position: number): number {
    let index = -1;
    for (let i = 0; i < this.boundaries.length && (this.boundaries[i] ?? Infinity) < position; i++) index = i;
    const target = this.boundaries[index];
    return target === undefined || target < this.data.start ? position : target;
  }

  /** Continue (the page has no breakpoints): to the end. */
  continueTarget(): number {
    return this.length;
  }

  /** Run to: until `node`'s next node_started is the next event (not the one at position), else the end. */
  runToTarget(position: number, node: number): number {
    const hit = this.boundaries.find((b) => b > position && this.data.events[b]?.[1] === node);
    return hit ?? this.length;
  }
}
