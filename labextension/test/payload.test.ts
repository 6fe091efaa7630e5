import assert from "node:assert/strict";
import { describe, it } from "node:test";

import type { AckMessage, Graph, History, Overlay } from "../src/generated/widget_protocol.js";
import { ProtocolError } from "../src/model.js";
import { readShape } from "../src/payload.js";

const GRAPH = {
  nodes: [
    { id: 1, name: "SumBackward0", kind: "builtin", label: "sum", number: 1 },
    { id: 2, name: "AccumulateGrad", kind: "accumulate_grad", label: "w", leaf_name: "w", module: ["fc"] },
  ],
  edges: [{ source: 1, target: 2, input_nr: 0 }],
  roots: [1],
};

function refuses(name: string, value: unknown, message: RegExp): void {
  assert.throws(() => readShape(name, value, "payload"), (error: unknown) => error instanceof ProtocolError && message.test(error.message));
}

describe("readShape", () => {
  it("returns a well-formed payload as it is, typed", () => {
    const graph = readShape<Graph>("Graph", GRAPH, "graph");
    assert.equal(graph.nodes[1]!.leaf_name, "w");
    const history = readShape<History>("History", { start: 0, total: 1, events: [["node_ready", 4, "ready"]], seekable: true }, "history");
    assert.deepEqual(history.events[0], ["node_ready", 4, "ready"]);
    const ack = readShape<AckMessage>("AckMessage", { type: "ack", name: "step", ok: false, reason: null, extra: 1 }, "ack");
    assert.equal(ack.reason, null);
  });

  it("names the path, what it must be and what it was", () => {
    refuses("Graph", [], /^payload must be an object, got an array$/);
    refuses("Graph", { nodes: [], edges: [] }, /^payload\.roots is missing$/);
    refuses("Graph", { ...GRAPH, roots: [1.5] }, /^payload\.roots\[0\] must be an integer, got number$/);
    refuses("Graph", { ...GRAPH, nodes: [{ ...GRAPH.nodes[0], kind: "leaf" }] }, /^payload\.nodes\[0\]\.kind must be one of builtin, custom, accumulate_grad, got the string "leaf"$/);
    refuses("Graph", { ...GRAPH, nodes: [{ ...GRAPH.nodes[1], module: ["fc", 3] }] }, /^payload\.nodes\[0\]\.module\[1\] must be a string, got number$/);
    refuses("AckMessage", { type: "ack", name: "step", ok: "yes", reason: null }, /^payload\.ok must be a boolean, got the string "yes"$/);
    refuses("AckMessage", { type: "error", name: "step", ok: true, reason: null }, /^payload\.type must be "ack", got the string "error"$/);
    refuses("History", { start: 0, total: 1, events: [["node_ready", 4]], seekable: true }, /^payload\.events\[0\] must be a list of 3, got an array$/);
    refuses("History", { start: 0, total: 1, events: [["node_ready", "4", "x"]], seekable: true }, /^payload\.events\[0\]\[1\] must be an integer or null, got the string "4"$/);
  });

  it("checks a map's values and a union's object option precisely", () => {
    const overlay = { kind: "continuous", scale: "log", builtin: true, title: "t", description: "d", values: { "1": 0.5 }, edges: null };
    assert.equal(readShape<Overlay>("Overlay", overlay, "overlay").scale, "log");
    refuses("Overlay", { ...overlay, values: { "1": [1] } }, /^payload\.values\["1"\] must be a number or a string or a boolean, got an array$/);
    refuses("Overlay", { ...overlay, values: 3 }, /^payload\.values must be an object or null, got number$/);
  });

  it("says when the generated file has no such shape", () => {
    assert.throws(() => readShape("NoSuchShape", {}, "payload"), /no generated shape named "NoSuchShape"/);
  });
});
