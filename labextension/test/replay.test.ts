import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { LocalModel } from "../src/local_model.js";
import { ProtocolError, type NodeState } from "../src/model.js";
import { REPLAY_INSPECTION_NOTE, ReplayPlayer, REPLAY_COMMANDS } from "../src/player.js";
import { parseStandalone, STANDALONE_FORMAT, STANDALONE_VERSION, Timeline } from "../src/replay.js";
import { TINY_GRAPH } from "./fixtures.js";

const NAMES: NodeState[] = ["pending", "ready", "running", "done", "released", "error"];

// TINY_GRAPH's backward pass, as gradviz/widget/_html.py writes it (positions worked out by
// hand from ReplaySession's rules: boundaries are the node_started events 2, 5, 9, 12, 14).
const EVENTS: [string, number | null][] = [
  ["backward_started", null],
  ["node_ready", 4], ["node_started", 4], ["node_finished", 4],
  ["node_ready", 3], ["node_started", 3], ["node_finished", 3],
  ["node_ready", 2], ["node_ready", 0], ["node_started", 2], ["node_finished", 2],
  ["node_ready", 1], ["node_started", 0], ["node_finished", 0],
  ["node_started", 1], ["node_finished", 1],
  ["backward_finished", null],
];
const STATE_OF: Record<string, NodeState> = { node_ready: "ready", node_started: "running", node_finished: "done" };
const CURRENT = [4, 4, 4, 4, 3, 3, 3, 2, 2, 2, 2, 0, 0, 0, 1, 1, null, null];

function tinyData(overrides: Record<string, unknown> = {}): Record<string, unknown> {
  const changes = [[], ...EVENTS.map(([kind, node]) => {
    const state = STATE_OF[kind];
    return state === undefined || node === null ? [] : [node, NAMES.indexOf(state)];
  })];
  return {
    format: STANDALONE_FORMAT,
    version: STANDALONE_VERSION,
    title: "tiny",
    gradviz_version: "0.1.0",
    graph: TINY_GRAPH,
    state_names: NAMES,
    start: 2,
    final_status: "finished",
    events: EVENTS.map(([kind, node], seq) => [kind, node, `event ${seq}`]),
    changes,
    current: CURRENT,
    ...overrides,
  };
}

const timeline = new Timeline(parseStandalone(tinyData()));

describe("parseStandalone", () => {
  it("reads what _html.py writes", () => {
    const data = parseStandalone(tinyData());
    assert.equal(data.events.length, 17);
    assert.deepEqual(data.changes[2], [[4, "ready"]]);
    assert.equal(data.finalStatus, "finished");
  });
  for (const [what, overrides] of [
    ["another format", { format: "gradviz-trace" }],
    ["another version", { version: 2 }],
    ["a state code out of range", { changes: [[], ...Array.from({ length: 17 }, () => [0, 9])] }],
    ["an odd change list", { changes: [[4], ...Array.from({ length: 17 }, () => [])] }],
    ["one position too few", { current: CURRENT.slice(1) }],
    ["a start past the end", { start: 18 }],
    ["a bad event", { events: [["node_ready", -1, ""]] }],
  ] as const) {
    it(`refuses ${what}`, () => {
      assert.throws(() => parseStandalone(tinyData(overrides)), ProtocolError);
    });
  }
});

describe("Timeline", () => {
  it("shows the states, current node, status and narration of each position", () => {
    assert.deepEqual(timeline.statesAt(0), {});
    assert.deepEqual(timeline.statesAt(2), { "4": "ready" });
    assert.deepEqual(timeline.statesAt(9), { "4": "done", "3": "done", "2": "ready", "0": "ready" });
    assert.equal(timeline.currentAt(9), 2);
    assert.equal(timeline.statusAt(16), "paused");
    assert.equal(timeline.statusAt(17), "finished");
    assert.equal(timeline.lastEventAt(0), null);
    assert.deepEqual(timeline.lastEventAt(3), { seq: 2, kind: "node_started", node: 4, text: "event 2" });
  });

  it("moves like ReplaySession", () => {
    assert.equal(timeline.start, 2);
    assert.deepEqual([2, 3, 4, 14, 16, 17].map((p) => timeline.stepTarget(p)), [5, 5, 5, 17, 17, 17]);
    assert.deepEqual([0, 2, 3, 5, 17].map((p) => timeline.stepBackTarget(p)), [0, 2, 2, 2, 14]);
    assert.equal(timeline.stepEventTarget(16), 17);
    assert.equal(timeline.stepEventTarget(17), 17);
    assert.equal(timeline.runToTarget(2, 1), 14);
    assert.equal(timeline.runToTarget(2, 0), 12);
    assert.equal(timeline.runToTarget(2, 4), 17, "the node at the position itself is not a stop");
    assert.equal(timeline.continueTarget(), 17);
  });

  it("agrees with replaying every change, across checkpoints", () => {
    const n = 300;
    const events = Array.from({ length: n }, (_, i) => ["node_ready", i % 5, ""]);
    const changes = [[], ...Array.from({ length: n }, (_, i) => [i % 5, (i * 7) % NAMES.length])];
    const long = new Timeline(parseStandalone(tinyData({ events, changes, current: Array(n + 1).fill(null), start: 0 })));
    const naive = new Map<number, NodeState>();
    for (let p = 0; p <= n; p++) {
      const flat = changes[p] ?? [];
      if (flat.length > 0) naive.set(flat[0] as number, NAMES[flat[1] as number] as NodeState);
      assert.deepEqual(long.statesAt(p), Object.fromEntries([...naive].map(([id, s]) => [String(id), s])), `position ${p}`);
    }
  });
});

describe("LocalModel", () => {
  it("emits a change only for traits whose value changed, and answers sends later", async () => {
    const received: unknown[] = [];
    const model = new LocalModel({ status: "paused", states: { "1": "ready" } }, (content) => received.push(content));
    const changes: string[] = [];
    const onStatus = (): void => void changes.push("status");
    model.on("change:status", onStatus);
    model.on("change:states", () => changes.push("states"));
    model.set({ status: "paused", states: { "1": "done" } });
    model.set({ status: "finished" });
    assert.deepEqual(changes, ["states", "status"]);
    model.off("change:status", onStatus);
    model.set({ status: "paused" });
    assert.deepEqual(changes, ["states", "status"]);
    model.send({ type: "command", name: "step" });
    assert.deepEqual(received, [], "a send is answered after the caller returns");
    await Promise.resolve();
    assert.deepEqual(received, [{ type: "command", name: "step" }]);
  });
});

describe("ReplayPlayer", () => {
  async function command(player: ReplayPlayer, content: Record<string, unknown>): Promise<unknown[]> {
    const acks: unknown[] = [];
    const onAck = (message: unknown): void => void acks.push(message);
    player.model.on("msg:custom", onAck);
    player.model.send(content);
    await Promise.resolve();
    player.model.off("msg:custom", onAck);
    return acks;
  }

  it("starts where a ReplaySession starts and offers its commands", () => {
    const player = new ReplayPlayer(parseStandalone(tinyData()));
    assert.equal(player.at, 2);
    assert.deepEqual(player.model.get("commands"), [...REPLAY_COMMANDS]);
    assert.deepEqual(player.model.get("states"), { "4": "ready" });
    assert.equal(player.model.get("current"), 4);
  });

  it("answers commands as the Python widget does", async () => {
    const player = new ReplayPlayer(parseStandalone(tinyData()));
    assert.deepEqual(await command(player, { type: "command", name: "step" }), [{ type: "ack", name: "step", ok: true, reason: null }]);
    assert.equal(player.at, 5);
    await command(player, { type: "command", name: "select", node: 1 });
    assert.deepEqual(player.model.get("inspection"), { id: 1, name: "AccumulateGrad", kind: "accumulate_grad", label: "w", state: "pending", note: REPLAY_INSPECTION_NOTE });
    await command(player, { type: "command", name: "run_to", node: 1 });
    assert.equal(player.at, 14);
    assert.equal((player.model.get("inspection") as { state: string }).state, "ready");
    await command(player, { type: "command", name: "continue" });
    assert.equal(player.model.get("status"), "finished");
    assert.deepEqual(await command(player, { type: "command", name: "step" }), [
      { type: "ack", name: "step", ok: false, reason: "the session is finished" },
    ]);
    await command(player, { type: "command", name: "step_back" });
    assert.equal(player.at, 14, "a finished replay can go back");
    const refused = await command(player, { type: "command", name: "abort" });
    assert.deepEqual(refused, [{ type: "ack", name: "abort", ok: false, reason: "this replay page has no abort" }]);
    player.restart();
    assert.equal(player.at, 2);
  });

  it("answers a module select with the module's inspection, as Python's module_inspection", async () => {
    // TINY_GRAPH with its multiply and w in a module "lin" (a Linear), and w named lin.weight
    const graph = {
      ...TINY_GRAPH,
      nodes: TINY_GRAPH.nodes.map((node) =>
        node.id === 2 ? { ...node, module: ["lin"], module_types: ["Linear"] }
          : node.id === 1 ? { ...node, module: ["lin"], module_types: ["Linear"], leaf_name: "lin.weight" } : node),
    };
    const player = new ReplayPlayer(parseStandalone(tinyData({ graph })));
    await command(player, { type: "command", name: "run_to", node: 1 });
    await command(player, { type: "select", module: "lin" });
    assert.equal(player.model.get("selected_module"), "lin");
    assert.equal(player.model.get("selected"), null);
    assert.deepEqual(player.model.get("inspection"), {
      module: "lin", type: "Linear", count: 2, calls: 1, states: { done: 1, ready: 1 },
      parameters: [{ id: 1, name: "lin.weight", grad: null }],
    });
    const refused = await command(player, { type: "select", module: "<img src=x>" });
    assert.deepEqual(refused, [{ type: "error", reason: 'no module "<img src=x>" in this graph' }]);
    await command(player, { type: "command", name: "select", node: 0 });
    assert.equal(player.model.get("selected_module"), null, "a node select leaves the module");
    assert.equal((player.model.get("inspection") as { id: number }).id, 0);
  });

  it("offers Check gradients only with a doctor report, and answers it with that report", async () => {
    const report = { ok: false, summary: "s", findings: [{ kind: "no_gradient", node: 2, params: ["w"] }], checked: [], skipped: [], notes: [] };
    const player = new ReplayPlayer(parseStandalone(tinyData({ doctor: report })));
    assert.deepEqual(player.model.get("commands"), [...REPLAY_COMMANDS, "check_gradients"]);
    assert.equal(player.model.get("doctor"), null);
    await command(player, { type: "command", name: "continue" });
    const acks = await command(player, { type: "command", name: "check_gradients" });
    assert.deepEqual(acks, [{ type: "ack", name: "check_gradients", ok: true, reason: null }], "also after the pass, as in Python");
    assert.deepEqual(player.model.get("doctor"), { run: 1, state: "done", report, error: null });
    await command(player, { type: "command", name: "check_gradients" });
    assert.equal((player.model.get("doctor") as { run: number }).run, 2);
    const without = new ReplayPlayer(parseStandalone(tinyData()));
    const refused = await command(without, { type: "command", name: "check_gradients" });
    assert.equal((refused[0] as { ok: boolean }).ok, false);
    assert.throws(() => parseStandalone(tinyData({ doctor: [1] })), (e: unknown) => e instanceof ProtocolError && /doctor must be an object/.test(e.message));
  });
});

describe("Timeline.deliveredAt", () => {
  // The same pass with AddBackward0's deliveries recorded as buffer_added events (producer 3).
  const withDeliveries = tinyData({
    events: [
      ...EVENTS.slice(0, 7).map(([kind, node], seq) => [kind, node, `event ${seq}`]),
      ["buffer_added", 2, "to MulBackward0", 3],
      ["buffer_added", 0, "to b", 3],
      ...EVENTS.slice(9).map(([kind, node], seq) => [kind, node, `event ${seq + 9}`]),
    ],
  });
  const line = new Timeline(parseStandalone(withDeliveries));

  it("lists a delivery only once its buffer_added event is shown", () => {
    assert.deepEqual(line.deliveredAt(7), []);
    assert.deepEqual(line.deliveredAt(8), [[3, 2]]);
    assert.deepEqual(line.deliveredAt(9), [[3, 2], [3, 0]]);
    assert.deepEqual(line.deliveredAt(100), [[3, 2], [3, 0]]);
  });

  it("is null for a page without producers (written before they were added)", () => {
    assert.equal(timeline.deliveredAt(5), null);
  });

  it("rejects a producer that is not a node id", () => {
    const bad = tinyData({ events: EVENTS.map(([kind, node], seq) => [kind, node, `event ${seq}`, seq === 3 ? "x" : 1]) });
    assert.throws(() => parseStandalone(bad), (e: unknown) => e instanceof ProtocolError && /producer must be a node id/.test(e.message));
  });
});

describe("the page's inspector snapshots", () => {
  async function command(player: ReplayPlayer, content: Record<string, unknown>): Promise<unknown[]> {
    const replies: unknown[] = [];
    const onReply = (message: unknown): void => void replies.push(message);
    player.model.on("msg:custom", onReply);
    player.model.send(content);
    await Promise.resolve();
    player.model.off("msg:custom", onReply);
    return replies;
  }
  const summary = (value: number) => ({ shape: [1], dtype: "float32", numel: 1, nan: 0, inf: 0, min: value, max: value, mean: value, norm: value, values: [value] });
  // Node 3 (AddBackward0) as node() gives it: nothing at first, a buffer at 4, gradients at 6.
  const snapshots = {
    "3": [
      [0, { state: "pending", pending_buffer: null }],
      [4, { state: "ready", pending_buffer: [summary(1)] }],
      [6, { state: "done", grads_in: [summary(1)], grads_out: [summary(2), summary(2)] }],
    ],
  };
  const data = tinyData({ inspections: snapshots, inspection_budget: { bytes: 300, limit: 1000, left_out: 0 } });

  it("shows the node as of the shown position, over its graph entry", async () => {
    const player = new ReplayPlayer(parseStandalone(data));
    await command(player, { type: "command", name: "select", node: 3 });
    const at = (position: number) => {
      player.seek(position);
      return player.model.get("inspection") as Record<string, unknown>;
    };
    assert.deepEqual(at(3), { state: "pending", pending_buffer: null, id: 3, name: "AddBackward0", kind: "builtin", label: "" });
    assert.deepEqual((at(4)["pending_buffer"] as unknown[]).length, 1);
    assert.deepEqual((at(5)["pending_buffer"] as unknown[]).length, 1, "unchanged until the next snapshot");
    assert.equal(at(6)["grads_out"] !== undefined, true);
    assert.equal(at(17)["state"], "done");
  });

  it("says the snapshots were left out for the budget, and keeps the old note for pages without any", async () => {
    const cut = new ReplayPlayer(parseStandalone(tinyData({ inspections: {}, inspection_budget: { bytes: 0, limit: 0, left_out: 9 } })));
    await command(cut, { type: "command", name: "select", node: 3 });
    assert.match((cut.model.get("inspection") as { note: string }).note, /left out to keep the page small/);
    const old = new ReplayPlayer(parseStandalone(tinyData()));
    await command(old, { type: "command", name: "select", node: 3 });
    assert.equal((old.model.get("inspection") as { note: string }).note, REPLAY_INSPECTION_NOTE);
  });

  it("shows the budget note, not an older snapshot, from a node's left-out marker on", async () => {
    const marked = { "3": [snapshots["3"][0], snapshots["3"][1], [6, { left_out: true }]] };
    const player = new ReplayPlayer(parseStandalone(tinyData({ inspections: marked, inspection_budget: { bytes: 300, limit: 300, left_out: 4 } })));
    await command(player, { type: "command", name: "select", node: 3 });
    const at = (position: number) => {
      player.seek(position);
      return player.model.get("inspection") as Record<string, unknown>;
    };
    assert.equal((at(5)["pending_buffer"] as unknown[]).length, 1, "before the marker: the kept snapshot");
    for (const position of [6, 9, 17]) {
      const shown = at(position);
      assert.match(shown["note"] as string, /left out to keep the page small/);
      assert.equal(shown["pending_buffer"], undefined, "the buffer as of position 4 is not shown as current");
      assert.equal(shown["left_out"], undefined);
    }
  });

  it("rejects malformed snapshots", () => {
    assert.throws(() => parseStandalone(tinyData({ inspections: { "3": [[0]] } })), ProtocolError);
    assert.throws(() => parseStandalone(tinyData({ inspections: { x: [] } })), ProtocolError);
  });

  it("lists every event as the history and jumps on seek", async () => {
    const player = new ReplayPlayer(parseStandalone(data));
    const history = player.model.get("history") as { events: unknown[]; seekable: boolean; total: number };
    assert.equal(history.events.length, EVENTS.length);
    assert.equal(history.seekable, true);
    assert.deepEqual(await command(player, { type: "command", name: "seek", position: 9 }), [{ type: "ack", name: "seek", ok: true, reason: null }]);
    assert.equal(player.at, 9);
    assert.equal(player.model.get("history_position"), 9);
    assert.deepEqual(await command(player, { type: "command", name: "seek", position: "9" }), [
      { type: "error", reason: "a seek command's position must be an integer >= 0, got 9" },
    ]);
  });
});
