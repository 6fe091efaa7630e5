import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  ackNotice,
  changedNodes,
  commandEnabled,
  commandMessage,
  commandsEnabled,
  countStates,
  deliveredEdges,
  hasRun,
  narrationLine,
  nodeTitle,
  parseAck,
  parseCommands,
  parseCurrent,
  parseDelivered,
  parseErrorText,
  parseGraph,
  parseLastEvent,
  parseSelected,
  parseStates,
  parseStatus,
  parseStoppedAt,
  protocolMismatch,
  ProtocolError,
  selectMessage,
  stateClass,
  statusText,
  awaitingDelivery,
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

  it("reads a leaf's name, and shows it before the class name", () => {
    const named = parseGraph({
      nodes: [
        { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "[3] float32", leaf_name: "fc.weight" },
        { id: 1, name: "AccumulateGrad", kind: "accumulate_grad", label: "[3] float32" },
      ],
      edges: [],
      roots: [0, 1],
    });
    assert.equal(named.byId.get(0)?.leaf_name, "fc.weight");
    assert.equal(named.byId.get(1)?.leaf_name, undefined);
    assert.equal(nodeTitle(named.byId.get(0)!), "fc.weight · AccumulateGrad #0");
    assert.equal(nodeTitle(named.byId.get(1)!), "AccumulateGrad #1");
    assert.equal(
      statusText({ graph: named, states: parseStates({ "0": "ready" }, named), current: 0, status: "paused" }),
      "Paused · next: fc.weight · AccumulateGrad #0 · 0 of 2 nodes run",
    );
  });

  it("titles nodes by their small display number, not their engine id", () => {
    const numbered = parseGraph({
      nodes: [
        { id: 176, name: "SumBackward0", kind: "builtin", label: "[]", number: 1 },
        { id: 3, name: "AccumulateGrad", kind: "accumulate_grad", label: "[2] float32", leaf_name: "w", number: 2 },
      ],
      edges: [{ source: 176, target: 3, input_nr: 0 }],
      roots: [176],
    });
    assert.equal(nodeTitle(numbered.byId.get(176)!), "SumBackward0 #1");
    assert.equal(nodeTitle(numbered.byId.get(3)!), "w · AccumulateGrad #2");
    assert.throws(
      () => parseGraph({ nodes: [{ id: 1, name: "A", kind: "builtin", label: "", number: -1 }], edges: [], roots: [1] }),
      /number must be a non-negative integer/,
    );
  });

  it("treats the empty default trait as the empty graph", () => {
    assert.equal(parseGraph({}).nodes.length, 0);
  });

  const bad: [string, unknown, RegExp][] = [
    ["not an object", [], /graph must be an object/],
    ["nodes missing", { edges: [], roots: [] }, /^graph\.nodes is missing$/],
    ["nodes not a list", { nodes: {}, edges: [], roots: [] }, /^graph\.nodes must be a list, got object$/],
    ["fractional input_nr", { ...TINY_GRAPH, edges: [{ source: 4, target: 3, input_nr: 0.5 }] }, /^graph\.edges\[0\]\.input_nr must be an integer, got number$/],
    ["negative id", { ...TINY_GRAPH, nodes: [{ id: -1, name: "A", kind: "builtin", label: "" }] }, /nodes\[0\]\.id/],
    ["unknown kind", { ...TINY_GRAPH, nodes: [{ id: 1, name: "A", kind: "magic", label: "" }] }, /kind must be one of/],
    ["duplicate id", { ...TINY_GRAPH, nodes: [TINY_GRAPH.nodes[0], TINY_GRAPH.nodes[0]] }, /used by two nodes/],
    ["dangling edge", { ...TINY_GRAPH, edges: [{ source: 4, target: 99, input_nr: 0 }] }, /edges\[0\]\.target must be the id of a node/],
    ["dangling root", { ...TINY_GRAPH, roots: [42] }, /roots\[0\]/],
    ["label not text", { ...TINY_GRAPH, nodes: [{ id: 1, name: "A", kind: "builtin", label: 3 }] }, /label must be a string/],
    ["leaf_name not text", { nodes: [{ id: 1, name: "AccumulateGrad", kind: "accumulate_grad", label: "", leaf_name: 7 }], edges: [], roots: [] }, /leaf_name must be a string/],
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

describe("narrationLine", () => {
  const ready = { seq: 7, kind: "node_ready", node: 3, text: "AddBackward0 is ready: every gradient it waits for has arrived." };

  it("shows the last event while the pass is live or over", () => {
    const states = parseStates({ "4": "released", "3": "ready" }, graph);
    for (const status of ["paused", "running", "finished", "error"] as const) assert.equal(narrationLine(ready, status, states), ready);
    assert.equal(narrationLine(null, "paused", states), null);
  });

  it("says what Abort did instead of an event that will never happen", () => {
    const states = parseStates({ "4": "released", "3": "ready" }, graph);
    const line = narrationLine(ready, "aborted", states);
    assert.equal(line?.text, "Backward aborted: 4 nodes never ran, so their gradients never arrive.");
    assert.equal(line?.kind, "aborted");
    const one = parseStates({ "4": "done", "3": "done", "2": "done", "1": "done", "0": "ready" }, graph);
    assert.match(narrationLine(null, "aborted", one)?.text ?? "", /: 1 node never ran,/);
  });
});

describe("statusText", () => {
  it("says when the node that runs next still waits for a gradient on the way (after Step event showed node_finished)", () => {
    const graph = parseGraph(TINY_GRAPH);
    // SumBackward0 finished; its buffer_added and AddBackward0's node_ready are still to show.
    const states = parseStates({ "4": "done" }, graph);
    const view = { graph, states, current: 3, status: "paused" as const };
    assert.ok(awaitingDelivery(view));
    assert.equal(statusText(view), "Paused · next: AddBackward0 #3 (its gradient is on the way: Step event shows it arrive) · 1 of 5 nodes run");
    // Once node_ready is shown, the plain "next:" again; never while running or finished.
    const ready = { ...view, states: parseStates({ "4": "done", "3": "ready" }, graph) };
    assert.ok(!awaitingDelivery(ready));
    assert.equal(statusText(ready), "Paused · next: AddBackward0 #3 · 1 of 5 nodes run");
    assert.ok(!awaitingDelivery({ ...view, status: "running" }));
    assert.ok(!awaitingDelivery({ ...view, current: null }));
  });

  it("says inside, not next, for a node whose saved tensors were freed before its node_finished was shown", () => {
    const graph = parseGraph(TINY_GRAPH);
    const states = parseStates({ "4": "released" }, graph);
    assert.equal(statusText({ graph, states, current: 4, status: "paused" }), "Paused · inside SumBackward0 #4 · 1 of 5 nodes run");
  });

  it("names the next node and the progress while paused", () => {
    const states = parseStates({ "4": "released", "3": "ready" }, graph);
    assert.equal(statusText({ graph, states, current: 3, status: "paused" }), "Paused · next: AddBackward0 #3 · 1 of 5 nodes run");
  });

  it("says when the session is paused inside a node (after Step event)", () => {
    const states = parseStates({ "4": "released", "3": "running" }, graph);
    assert.equal(statusText({ graph, states, current: 3, status: "paused" }), "Paused · inside AddBackward0 #3 · 1 of 5 nodes run");
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
    assert.equal(protocolMismatch(6), null);
    assert.match(protocolMismatch(5) ?? "", /kernel speaks widget protocol 5, this view speaks 6: rebuild/);
    assert.match(protocolMismatch(undefined) ?? "", /protocol undefined/);
  });
});

describe("messages", () => {
  it("builds commands", () => {
    assert.deepEqual(commandMessage("step"), { type: "command", name: "step" });
    assert.deepEqual(commandMessage("step_event", 3), { type: "command", name: "step_event" });
    assert.deepEqual(commandMessage("step_back"), { type: "command", name: "step_back" });
    assert.deepEqual(commandMessage("abort"), { type: "command", name: "abort" });
    assert.deepEqual(commandMessage("check_gradients", 3), { type: "command", name: "check_gradients" });
  });

  it("sends run_to with the selected node, and nothing without one", () => {
    assert.deepEqual(commandMessage("run_to", 2), { type: "command", name: "run_to", node: 2 });
    assert.equal(commandMessage("run_to", null), null);
  });

  it("builds select messages", () => {
    assert.deepEqual(selectMessage(3), { type: "command", name: "select", node: 3 });
    assert.deepEqual(selectMessage(null), { type: "command", name: "select", node: null });
  });

  it("recognises acks and nothing else", () => {
    assert.deepEqual(parseAck({ type: "ack", name: "step", ok: false, reason: "finished" }), {
      type: "ack",
      name: "step",
      ok: false,
      reason: "finished",
    });
    assert.equal(parseAck({ type: "other" }), null);
    assert.equal(parseAck("ack"), null);
    // a malformed ack is a protocol bug: named, not ignored (the "…" would never end)
    assert.throws(() => parseAck({ type: "ack", name: "step" }), /^ProtocolError: ack\.ok is missing$/);
    assert.throws(() => parseAck({ type: "ack", name: "step", ok: "yes", reason: null }), /ack\.ok must be a boolean, got the string "yes"/);
    assert.throws(() => parseAck({ type: "ack", name: "step", ok: false, reason: 3 }), /ack\.reason must be a string or null, got number/);
  });
});

describe("commands offered and enabled", () => {
  it("reads the commands trait and rejects unknown names", () => {
    assert.deepEqual([...parseCommands(["step", "step_event", "continue"])], ["step", "step_event", "continue"]);
    assert.equal(parseCommands([]).size, 0);
    assert.throws(() => parseCommands(["step", "rewind"]), /commands\[1\] must be one of/);
    assert.throws(() => parseCommands("step"), /commands must be an array/);
  });

  const paused = { graph, states: parseStates({ "4": "released", "3": "ready" }, graph), current: 3, status: "paused" as const };

  it("enables session commands only while paused", () => {
    for (const name of ["step", "step_event", "continue", "abort"] as const) {
      assert.equal(commandEnabled(name, paused, null), true, name);
      for (const status of ["running", "finished", "aborted", "error"] as const) {
        assert.equal(commandEnabled(name, { ...paused, status }, null), false, `${name} ${status}`);
      }
    }
  });

  it("lets a replay step back after its end, but not while running", () => {
    for (const status of ["paused", "finished", "aborted", "error"] as const) assert.equal(commandEnabled("step_back", { ...paused, status }, null), true);
    assert.equal(commandEnabled("step_back", { ...paused, status: "running" }, null), false);
  });

  it("checks gradients whatever the pass has done, but not while user code runs", () => {
    for (const status of ["paused", "finished", "aborted", "error"] as const) {
      assert.equal(commandEnabled("check_gradients", { ...paused, status }, null), true, status);
    }
    assert.equal(commandEnabled("check_gradients", { ...paused, status: "running" }, null), false);
    assert.deepEqual([...parseCommands(["step", "check_gradients"])], ["step", "check_gradients"]);
  });

  it("runs to a selected node that has yet to run", () => {
    assert.equal(commandEnabled("run_to", paused, null), false);
    assert.equal(commandEnabled("run_to", paused, 1), true);
    assert.equal(commandEnabled("run_to", paused, 3), false, "already the next node");
    assert.equal(commandEnabled("run_to", paused, 4), false, "already run");
    assert.equal(commandEnabled("run_to", { ...paused, status: "finished" }, 1), false);
  });
});

describe("selection and narration traits", () => {
  it("reads selected as a node of the graph", () => {
    assert.equal(parseSelected(2, graph), 2);
    assert.equal(parseSelected(null, graph), null);
    assert.equal(parseSelected(undefined, graph), null);
    assert.equal(parseSelected(77, graph), null);
    assert.throws(() => parseSelected("2", graph), /selected must be a node id/);
  });

  it("reads the last event", () => {
    const text = "MulBackward0 input 0: stored in the buffer.";
    assert.deepEqual(parseLastEvent({ seq: 7, kind: "buffer_added", node: 2, text }), { seq: 7, kind: "buffer_added", node: 2, text });
    assert.deepEqual(parseLastEvent({ seq: null, kind: "backward_finished", node: null, text: "" }), {
      seq: null,
      kind: "backward_finished",
      node: null,
      text: "",
    });
    assert.equal(parseLastEvent(null), null);
    assert.throws(() => parseLastEvent({ seq: 1, kind: "node_ready", node: 2 }), /^ProtocolError: last_event\.text is missing$/);
    assert.throws(() => parseLastEvent({ seq: 1, kind: 3, node: 2, text: "" }), /^ProtocolError: last_event\.kind must be a string, got number$/);
    assert.throws(() => parseLastEvent({ seq: "1", kind: "node_ready", node: 2, text: "" }), /^ProtocolError: last_event\.seq must be an integer or null, got the string "1"$/);
    assert.throws(() => parseLastEvent("node_ready"), /^ProtocolError: last_event must be an object, got the string "node_ready"$/);
    assert.throws(() => parseLastEvent([]), /last_event must be an object/);
  });
});

describe("ackNotice", () => {
  it("says nothing after a command that ran", () => {
    assert.equal(ackNotice({ type: "ack", name: "step", ok: true, reason: null }, null), null);
  });

  it("says why a command was refused", () => {
    const ack = { type: "ack", name: "step_event", ok: false, reason: "the session is finished" } as const;
    assert.equal(ackNotice(ack, null), "step event ignored: the session is finished");
  });

  it("points to the error box, without calling it ignored, when the command raised", () => {
    const reason = "RuntimeError: Function BoomBackward returned an invalid gradient at index 0";
    const ack = { type: "ack", name: "continue", ok: false, reason } as const;
    const notice = ackNotice(ack, `${reason}\n\nTraceback (most recent call last):\n  ...`);
    assert.equal(notice, "continue raised an error (below)");
  });
});

describe("stopped at a breakpoint", () => {
  it("says so in the status line, so that Continue stopping early does not look stuck", () => {
    const states = parseStates({ "4": "done", "3": "ready" }, graph);
    const stoppedAt = parseStoppedAt("breakpoint on AddBackward0");
    assert.equal(
      statusText({ graph, states, current: 3, status: "paused", stoppedAt }),
      "Paused at breakpoint on AddBackward0 · next: AddBackward0 #3 · 1 of 5 nodes run",
    );
  });

  it("reads an absent or empty trait as no breakpoint, and rejects other types", () => {
    assert.equal(parseStoppedAt(undefined), null);
    assert.equal(parseStoppedAt(""), null);
    assert.throws(() => parseStoppedAt(3), ProtocolError);
  });
});

describe("delivered edges follow the buffer_added events shown", () => {
  // TINY_GRAPH edges: 0: 4→3, 1: 3→2, 2: 3→0, 3: 2→1
  const states = (entries: [number, NodeState][]) => new Map<number, NodeState>([...graph.nodes.map((n) => [n.id, "pending"] as [number, NodeState]), ...entries]);

  it("keeps the edges of a node that has run grey until each delivery is shown", () => {
    // Step event has shown AddBackward0's node_finished and one of its two buffer_added events.
    const shown = states([[4, "done"], [3, "done"]]);
    const delivered = deliveredEdges(graph, shown, parseDelivered([[4, 3], [3, 2]], graph));
    assert.deepEqual([...delivered].sort(), [0, 1]);
  });

  it("greens the k-th edge between the same two nodes only after k + 1 deliveries (x * x)", () => {
    const twice = parseGraph({
      nodes: [{ id: 2, name: "MulBackward0", kind: "builtin", label: "" }, { id: 1, name: "AccumulateGrad", kind: "accumulate_grad", label: "x" }],
      edges: [{ source: 2, target: 1, input_nr: 0 }, { source: 2, target: 1, input_nr: 0 }],
      roots: [2],
    });
    const done = new Map<number, NodeState>([[2, "done"], [1, "ready"]]);
    assert.deepEqual([...deliveredEdges(twice, done, [])], []);
    assert.deepEqual([...deliveredEdges(twice, done, [[2, 1]])], [0]);
    assert.deepEqual([...deliveredEdges(twice, done, [[2, 1], [2, 1]])], [0, 1]);
  });

  it("without an event stream (null) greens every edge of a node that has run", () => {
    const delivered = deliveredEdges(graph, states([[4, "done"], [3, "released"]]), null);
    assert.deepEqual([...delivered].sort(), [0, 1, 2]);
  });

  it("checks the trait and drops pairs outside the graph", () => {
    assert.equal(parseDelivered(null, graph), null);
    assert.equal(parseDelivered(undefined, graph), null);
    assert.deepEqual(parseDelivered([[4, 3], [99, 3]], graph), [[4, 3]]);
    assert.throws(() => parseDelivered({}, graph), (e: unknown) => e instanceof ProtocolError && /delivered must be a list/.test(e.message));
    assert.throws(() => parseDelivered([[4]], graph), (e: unknown) => e instanceof ProtocolError && /delivered\[0\] must be a \[producer, receiver\] pair/.test(e.message));
  });
});
