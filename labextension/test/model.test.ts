import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  changedNodes,
  commandMessage,
  commandsEnabled,
  countStates,
  hasRun,
  parseAck,
  parseCurrent,
  parseErrorText,
  parseGraph,
  parseStates,
  parseStatus,
  protocolMismatch,
  ProtocolError,
  stateClass,
  statusText,
  type NodeState,
} from "../src/model.js";
import { TINY_GRAPH } from "./fixtures.js";

const graph = parseGraph(TINY_GRAPH);

describe("parseGraph", () => {
  it("reads nodes, edges and roots", () => {
    assert.equal(graph.nodes.length, 5);
    assert.equal(graph.edges.length, 4);
    assert.deepEqual(graph.roots, [4]);
    assert.equal(graph.byId.get(2)?.label, "x * w");
  });

  it("treats the empty default trait as the empty graph", () => {
    assert.equal(parseGraph({}).nodes.length, 0);
  });

  const bad: [string, unknown, RegExp][] = [
    ["not an object", [], /graph must be an object/],
    ["nodes missing", { edges: [], roots: [] }, /graph\.nodes must be an array/],
    ["negative id", { ...TINY_GRAPH, nodes: [{ id: -1, name: "A", kind: "builtin", label: "" }] }, /nodes\[0\]\.id/],
    ["unknown kind", { ...TINY_GRAPH, nodes: [{ id: 1, name: "A", kind: "magic", label: "" }] }, /kind must be one of/],
    ["duplicate id", { ...TINY_GRAPH, nodes: [TINY_GRAPH.nodes[0], TINY_GRAPH.nodes[0]] }, /used by two nodes/],
    ["dangling edge", { ...TINY_GRAPH, edges: [{ source: 4, target: 99, input_nr: 0 }] }, /edges\[0\]\.target must be the id of a node/],
    ["dangling root", { ...TINY_GRAPH, roots: [42] }, /roots\[0\]/],
    ["label not text", { ...TINY_GRAPH, nodes: [{ id: 1, name: "A", kind: "builtin", label: 3 }] }, /label must be a string/],
  ];
  for (const [what, value, message] of bad) {
    it(`rejects ${what}`, () => assert.throws(() => parseGraph(value), (error: unknown) => error instanceof ProtocolError && message.test(error.message)));
  }
});

describe("parseStates", () => {
  it("maps string ids to states and defaults missing nodes to pending", () => {
    const states = parseStates({ "4": "done", "3": "ready" }, graph);
    assert.equal(states.get(4), "done");
    assert.equal(states.get(3), "ready");
    assert.equal(states.get(0), "pending");
    assert.equal(states.size, 5);
  });

  it("ignores ids that are not in the graph", () => {
    assert.equal(parseStates({ "77": "done" }, graph).has(77), false);
  });

  it("rejects unknown states and non-id keys", () => {
    assert.throws(() => parseStates({ "4": "finished" }, graph), /states\[4\] must be one of/);
    assert.throws(() => parseStates({ "04": "done" }, graph), /not a node id/);
    assert.throws(() => parseStates({ x: "done" }, graph), /not a node id/);
    assert.throws(() => parseStates(null, graph), /states must be an object/);
  });
});

describe("scalar traits", () => {
  it("reads current, status and error", () => {
    assert.equal(parseCurrent(3, graph), 3);
    assert.equal(parseCurrent(null, graph), null);
    assert.equal(parseCurrent(99, graph), null);
    assert.throws(() => parseCurrent("3", graph), ProtocolError);
    assert.equal(parseStatus("finished"), "finished");
    assert.throws(() => parseStatus("stepping"), /status must be one of/);
    assert.equal(parseStatus("running"), "running");
    assert.equal(parseErrorText(null), null);
    assert.equal(parseErrorText(""), null);
    assert.equal(parseErrorText("ValueError: boom"), "ValueError: boom");
  });
});

describe("state logic", () => {
  it("maps every state to one CSS class", () => {
    const states: NodeState[] = ["pending", "ready", "running", "done", "released", "error"];
    assert.deepEqual(states.map(stateClass), states.map((state) => `gv-state-${state}`));
  });

  it("counts a node as run when done or released", () => {
    assert.deepEqual(
      (["pending", "ready", "running", "done", "released", "error"] as const).map(hasRun),
      [false, false, false, true, true, false],
    );
  });

  it("finds the nodes whose state changed", () => {
    const before = parseStates({ "4": "ready" }, graph);
    const after = parseStates({ "4": "released", "3": "ready" }, graph);
    assert.deepEqual(changedNodes(before, after), [3, 4]);
    assert.deepEqual(changedNodes(after, after), []);
    assert.deepEqual(changedNodes(after, new Map()), [0, 1, 2, 3, 4]);
  });

  it("counts states", () => {
    const counts = countStates(parseStates({ "4": "released", "3": "done", "2": "ready" }, graph));
    assert.equal(counts.released, 1);
    assert.equal(counts.done, 1);
    assert.equal(counts.ready, 1);
    assert.equal(counts.pending, 2);
  });

  it("allows commands only while paused", () => {
    assert.equal(commandsEnabled("paused"), true);
    for (const status of ["running", "finished", "aborted", "error"] as const) assert.equal(commandsEnabled(status), false);
  });
});

describe("statusText", () => {
  it("names the next node and the progress while paused", () => {
    const states = parseStates({ "4": "released", "3": "ready" }, graph);
    assert.equal(statusText({ graph, states, current: 3, status: "paused" }), "Paused · next: AddBackward0 #3 · 1 of 5 nodes run");
  });

  it("names the failing node on error", () => {
    const states = parseStates({ "4": "released", "3": "error" }, graph);
    assert.equal(statusText({ graph, states, current: null, status: "error" }), "Error in AddBackward0 #3 · 1 of 5 nodes run");
  });

  it("reports the end", () => {
    const all = Object.fromEntries(TINY_GRAPH.nodes.map((node) => [String(node.id), "done"]));
    assert.equal(statusText({ graph, states: parseStates(all, graph), current: null, status: "finished" }), "Finished · 5 of 5 nodes run");
  });
});

describe("protocol version", () => {
  it("accepts its own version and explains any other", () => {
    assert.equal(protocolMismatch(1), null);
    assert.match(protocolMismatch(2) ?? "", /kernel speaks widget protocol 2, this view speaks 1: rebuild/);
    assert.match(protocolMismatch(undefined) ?? "", /protocol undefined/);
  });
});

describe("messages", () => {
  it("builds commands", () => {
    assert.deepEqual(commandMessage("step"), { type: "command", name: "step" });
  });

  it("recognises acks and nothing else", () => {
    assert.deepEqual(parseAck({ type: "ack", name: "step", ok: false, reason: "finished" }), {
      type: "ack",
      name: "step",
      ok: false,
      reason: "finished",
    });
    assert.equal(parseAck({ type: "ack", name: "step" }), null);
    assert.equal(parseAck({ type: "other" }), null);
    assert.equal(parseAck("ack"), null);
  });
});
