import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { parseGraph, ProtocolError } from "../src/model.js";
import { parseStatesDelta, StatesCopy, type TraitReader } from "../src/states_sync.js";
import { TINY_GRAPH } from "./fixtures.js";

const graph = parseGraph(TINY_GRAPH);

function traits(values: Record<string, unknown>): TraitReader {
  return (name) => values[name];
}

function delta(seq: number, states: Record<string, string>, delivered: [number, number][] = []): unknown {
  return { type: "states_delta", seq, states, delivered };
}

describe("parseStatesDelta", () => {
  it("recognises a delta and leaves other messages alone", () => {
    assert.equal(parseStatesDelta({ type: "ack", name: "step", ok: true, reason: null }), null);
    assert.equal(parseStatesDelta("states_delta"), null);
    const parsed = parseStatesDelta(delta(3, { "4": "done", "3": "ready" }, [[4, 3]]));
    assert.ok(parsed !== null);
    assert.equal(parsed.seq, 3);
    assert.deepEqual(Object.fromEntries(parsed.states), { 3: "ready", 4: "done" });
    assert.deepEqual(parsed.delivered, [[4, 3]]);
  });

  it("names the field of a malformed delta", () => {
    const cases: [unknown, RegExp][] = [
      [delta(0, {}), /states_delta\.seq must be an integer >= 1, got 0/],
      [{ type: "states_delta", seq: "2", states: {}, delivered: [] }, /states_delta\.seq must be an integer, got the string "2"/],
      [{ type: "states_delta", seq: 2, delivered: [] }, /states_delta\.states is missing/],
      [{ type: "states_delta", seq: 2, states: [], delivered: [] }, /states_delta\.states must be an object, got an array/],
      [delta(2, { x: "done" }), /states_delta\.states key "x" is not a node id/],
      [delta(2, { "4": "finished" }), /states_delta\.states\["4"\] must be one of pending, ready/],
      [{ type: "states_delta", seq: 2, states: {}, delivered: null }, /states_delta\.delivered must be a list, got null/],
      [{ type: "states_delta", seq: 2, states: {}, delivered: [[4]] }, /states_delta\.delivered\[0\] must be a \[producer, receiver\] pair/],
    ];
    for (const [content, message] of cases) assert.throws(() => parseStatesDelta(content), (error: unknown) => error instanceof ProtocolError && message.test(error.message));
  });
});

describe("StatesCopy", () => {
  const whole = { states: { "4": "ready" }, delivered: [], states_base: 5, states_seq: 5 };

  it("takes the traits whole, then applies deltas in order", () => {
    const copy = new StatesCopy();
    assert.equal(copy.sync(traits(whole), graph), true);
    assert.equal(copy.sync(traits(whole), graph), false); // same objects: nothing to take
    assert.equal(copy.seq, 5);
    assert.equal(copy.states.get(4), "ready");
    assert.equal(copy.states.get(0), "pending"); // not sent: pending
    const steps = [
      delta(6, { "4": "done", "3": "ready" }, [[4, 3]]),
      delta(7, { "3": "done", "2": "ready", "0": "ready" }, [[3, 2], [3, 0]]),
      delta(8, { "2": "running" }),
    ];
    for (const step of steps) assert.equal(copy.apply(parseStatesDelta(step)!, graph), "applied");
    assert.deepEqual(Object.fromEntries(copy.states), { 4: "done", 3: "done", 2: "running", 1: "pending", 0: "ready" });
    assert.deepEqual(copy.deliveries, [[4, 3], [3, 2], [3, 0]]);
    assert.equal(copy.seq, 8);
    assert.equal(copy.behind(8), false);
  });

  it("ignores old deltas and reports a gap", () => {
    const copy = new StatesCopy();
    copy.sync(traits(whole), graph);
    assert.equal(copy.apply(parseStatesDelta(delta(5, { "4": "error" }))!, graph), "old");
    assert.equal(copy.states.get(4), "ready");
    assert.equal(copy.apply(parseStatesDelta(delta(7, { "4": "done" }))!, graph), "gap");
    assert.equal(copy.states.get(4), "ready"); // nothing applied past a gap
    assert.equal(copy.askResync(), true);
    assert.equal(copy.askResync(), false); // one request per gap
    // The whole traits answer it: a new states_base, taken whole, and deltas apply again.
    copy.sync(traits({ states: { "4": "done", "3": "ready" }, delivered: [[4, 3]], states_base: 9, states_seq: 9 }), graph);
    assert.equal(copy.seq, 9);
    assert.equal(copy.states.get(3), "ready");
    assert.equal(copy.apply(parseStatesDelta(delta(10, { "3": "running" }))!, graph), "applied");
    assert.equal(copy.askResync(), true);
  });

  it("sees a view opened after some steps as behind", () => {
    // The model holds the traits as last sent whole (base 5) and the latest states_seq (9).
    const copy = new StatesCopy();
    copy.sync(traits({ ...whole, states_seq: 9 }), graph);
    assert.equal(copy.behind(9), true);
    assert.equal(copy.behind(undefined), false); // the offline page: no deltas
  });

  it("drops nodes outside the graph and follows a new graph", () => {
    const copy = new StatesCopy();
    copy.sync(traits(whole), graph);
    copy.apply(parseStatesDelta(delta(6, { "99": "done" }, [[99, 4]]))!, graph);
    assert.equal(copy.states.has(99), false);
    assert.deepEqual(copy.deliveries, []);
    const other = parseGraph({ nodes: [{ id: 7, name: "ExpBackward0", kind: "builtin", label: "" }], edges: [], roots: [7] });
    assert.equal(copy.sync(traits(whole), other), true);
    assert.deepEqual([...copy.states], [[7, "pending"]]);
  });
});
