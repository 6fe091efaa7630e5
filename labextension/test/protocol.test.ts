// The view's hand-written parsers read what the generated protocol types describe.
//
// Every fixture below is typed with src/generated/widget_protocol.ts, which is generated from
// gradviz/widget/_protocol.py: a change of a shape on the Python side makes these fixtures fail
// to type-check (`npm run typecheck`) until the parsers and the fixtures follow it, and each
// parser must accept the value the Python types describe.
import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { parseDoctor, parseProgress } from "../src/doctor.js";
import type * as protocol from "../src/generated/widget_protocol.js";
import { isRecord } from "../src/generated/widget_protocol.js";
import { parseHistory } from "../src/history.js";
import { parseInspection } from "../src/inspector.js";
import { overlayRequestMessage, parseModuleInspection, readInspectionTrait, selectModuleMessage } from "../src/module_inspector.js";
import {
  COMMANDS,
  NODE_STATES,
  commandMessage,
  parseAck,
  parseCommands,
  parseErrorReply,
  parseGraph,
  parseLastEvent,
  parseStates,
  seekMessage,
  selectMessage,
} from "../src/model.js";
import { parseOverlays } from "../src/overlays.js";
import { TINY_GRAPH } from "./fixtures.js";

const GRAPH: protocol.Graph = {
  nodes: [
    { id: 2, name: "SumBackward0", kind: "builtin", label: "loss", number: 1, module: ["fc"], module_types: ["Linear"], module_call: 0 },
    { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "", leaf_name: "fc.weight", number: 2 },
  ],
  edges: [{ source: 2, target: 0, input_nr: 0 }],
  roots: [2],
};

const SUMMARY = { shape: [2], dtype: "float32", numel: 2, nan: 0, inf: 0, min: 1, max: 2, mean: 1.5, norm: "inf" as const, values: [1, 2] };

describe("the generated protocol types", () => {
  it("describe the graph, states and commands the model reads", () => {
    const graph = parseGraph(GRAPH);
    assert.deepEqual(graph.nodes.map((node) => [node.id, node.leaf_name, node.module]), [[2, undefined, ["fc"]], [0, "fc.weight", undefined]]);
    const states: { [id: string]: protocol.NodeState } = { "2": "done", "0": "ready" };
    assert.deepEqual([...parseStates(states, graph)], [[2, "done"], [0, "ready"]]);
    const commands: protocol.CommandName[] = ["step", "continue", "check_gradients"];
    assert.deepEqual([...parseCommands(commands)], commands);
    assert.deepEqual([...NODE_STATES], ["pending", "ready", "running", "done", "released", "error"]);
    assert.equal(COMMANDS.length, 7);
  });

  it("describe the narration, the history and the inspections", () => {
    const line: protocol.EventLine = { seq: 3, kind: "node_ready", node: 2, text: "SumBackward0 is ready." };
    assert.deepEqual(parseLastEvent(line), line);
    const history: protocol.History = { start: 0, total: 1, events: [["node_ready", 2, "SumBackward0 is ready."]], seekable: false };
    assert.equal(parseHistory(history, 1)?.entries[0]?.node, 2);
    const inspection: protocol.Inspection = { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "", state: "done", leaf_name: "fc.weight", grads_in: [SUMMARY], number: 2 };
    assert.equal(parseInspection(inspection)?.leafName, "fc.weight");
    const module: protocol.ModuleInspection = { module: "fc", type: "Linear", count: 2, calls: 1, states: { done: 2 }, parameters: [{ id: 0, name: "fc.weight", grad: SUMMARY }] };
    assert.equal(parseModuleInspection(module)?.parameters[0]?.name, "fc.weight");
    assert.deepEqual(parseModuleInspection({ ...module, states: { pending: 1, done: 2 } })?.states, [["done", 2], ["pending", 1]]);
    assert.equal(parseModuleInspection(inspection), null); // a node's inspection is not a module's
    assert.throws(() => parseModuleInspection({ ...module, count: "2" }), /^ProtocolError: inspection\.count must be an integer, got the string "2"$/);
    assert.throws(() => parseModuleInspection({ ...module, parameters: [{ id: 0, grad: null }] }), /^ProtocolError: inspection\.parameters\[0\]\.name is missing$/);
    assert.throws(() => parseModuleInspection({ ...module, states: { done: "2" } }), /^ProtocolError: inspection\.states\["done"\] must be an integer, got the string "2"$/);
  });

  it("read the inspection trait for the inspector it belongs to", () => {
    const graph = parseGraph(TINY_GRAPH);
    const node: protocol.Inspection = { id: 2, name: "MulBackward0", kind: "builtin", label: "x * w", state: "done" };
    assert.equal(readInspectionTrait(node, graph, 2).node?.name, "MulBackward0");
    assert.equal(readInspectionTrait(node, graph, 2).module, null);
    assert.equal(readInspectionTrait(node, graph, 3).node, null); // not the selected node: stale
    const module: protocol.ModuleInspection = { module: "fc", type: "Linear", count: 1, calls: 1, states: { done: 1 }, parameters: [] };
    assert.deepEqual(readInspectionTrait(module, graph, null), { module: parseModuleInspection(module), node: null });
    assert.deepEqual(readInspectionTrait(null, graph, null), { module: null, node: null });
    assert.throws(() => readInspectionTrait({ ...node, state: "gone" }, graph, 2), /^ProtocolError: inspection\.state must be one of /);
  });

  it("describe the overlays and the doctor", () => {
    const overlays: { [name: string]: protocol.Overlay } = {
      grad_norm: { kind: "continuous", scale: "log", builtin: true, title: "gradient norm", description: "", values: { "0": 1.5, "2": "inf" }, edges: null },
    };
    assert.deepEqual(parseOverlays(overlays).map((overlay) => [overlay.name, overlay.log, overlay.values?.get(2)]), [["grad_norm", true, "inf"]]);
    const checking: protocol.DoctorState = { run: 1, state: "checking", report: null, error: null };
    assert.equal(parseDoctor(checking)?.state, "checking");
    const failed: protocol.DoctorState = { run: 2, state: "error", report: null, error: "ValueError: bad" };
    assert.deepEqual(parseDoctor(failed), { state: "error", run: 2, error: "ValueError: bad" });
  });

  it("describe the messages both ways", () => {
    const progress: protocol.ProgressMessage = { type: "progress", name: "check_gradients", done: 1, total: 2, label: "backward pass" };
    assert.deepEqual(parseProgress(progress), { done: 1, total: 2, label: "backward pass" });
    const ack: protocol.AckMessage = { type: "ack", name: "step", ok: false, reason: "the session is finished" };
    assert.deepEqual(parseAck(ack), ack);
    const reply: protocol.ErrorReply = { type: "error", reason: "unknown command 'rm'" };
    assert.deepEqual(parseErrorReply(reply), reply);
    // what the view sends is a value of the generated message types (checked by the compiler)
    const sent: protocol.CommandMessage[] = [selectMessage(2), seekMessage(3)];
    const step = commandMessage("step");
    if (step !== null) sent.push(step);
    const panel: protocol.PanelMessage[] = [selectModuleMessage("fc"), overlayRequestMessage(null)];
    assert.deepEqual(sent, [{ type: "command", name: "select", node: 2 }, { type: "command", name: "seek", position: 3 }, { type: "command", name: "step" }]);
    assert.equal(panel.length, 2);
  });

  it("check a JSON object once, for every parser", () => {
    assert.equal(isRecord({}), true);
    assert.equal(isRecord(null), false);
    assert.equal(isRecord([]), false);
    assert.equal(isRecord("a"), false);
  });
});
