import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { historyAction, historyTitle, parseHistory } from "../src/history.js";
import { ProtocolError, parseErrorReply, seekMessage } from "../src/model.js";

const EVENTS = [
  ["backward_started", null, "Backward starts."],
  ["node_ready", 4, "SumBackward0 is ready."],
  ["node_started", 4, "SumBackward0 runs."],
];

describe("event history", () => {
  it("reads the trait, numbering entries from its start", () => {
    const history = parseHistory({ start: 10, total: 13, events: EVENTS, seekable: false }, 13);
    assert.deepEqual(history?.entries.map((e) => [e.index, e.node, e.text]), [[10, null, "Backward starts."], [11, 4, "SumBackward0 is ready."], [12, 4, "SumBackward0 runs."]]);
    assert.equal(history?.position, 13);
    assert.equal(parseHistory(null, 0), null);
    assert.throws(() => parseHistory({ start: 0, total: 1, events: [[1, 2]] }, 0), ProtocolError);
    const wellFormed = { start: 0, total: 1, events: [["node_ready", 2, "ready"]], seekable: false };
    assert.throws(() => parseHistory({ ...wellFormed, events: [["node_ready", 2]] }, 0), /^ProtocolError: history\.events\[0\] must be a list of 3, got an array$/);
    assert.throws(() => parseHistory({ ...wellFormed, events: [[1, 2, "x"]] }, 0), /^ProtocolError: history\.events\[0\]\[0\] must be a string, got number$/);
    assert.throws(() => parseHistory({ ...wellFormed, seekable: "no" }, 0), /^ProtocolError: history\.seekable must be a boolean, got the string "no"$/);
    assert.throws(() => parseHistory({ ...wellFormed, start: -1 }, 0), /^ProtocolError: history\.start must be a non-negative integer, got -1$/);
    assert.throws(() => parseHistory([], 0), ProtocolError);
  });

  it("jumps in a replay, selects the event's node in a live session", () => {
    const replay = parseHistory({ start: 0, total: 3, events: EVENTS, seekable: true }, 1)!;
    assert.deepEqual(historyAction(replay, replay.entries[2]!), { seek: 3 });
    assert.deepEqual(historyAction(replay, replay.entries[0]!), { seek: 1 });
    const live = parseHistory({ start: 0, total: 3, events: EVENTS, seekable: false }, 3)!;
    assert.deepEqual(historyAction(live, live.entries[1]!), { select: 4 });
    assert.equal(historyAction(live, live.entries[0]!), null, "an event without a node selects nothing");
    assert.deepEqual(seekMessage(3), { type: "command", name: "seek", position: 3 });
  });

  it("says where it stands and what it leaves out", () => {
    const replay = parseHistory({ start: 5, total: 20, events: EVENTS, seekable: true }, 6)!;
    assert.equal(historyTitle(replay), "Event history · event 6 of 20 (5 earlier, 12 later not listed) · click an event to jump to it");
    const live = parseHistory({ start: 0, total: 3, events: EVENTS, seekable: false }, 3)!;
    assert.equal(historyTitle(live), "Event history · 3 events so far · click an event to select its node");
  });
});

describe("error replies", () => {
  it("recognises Python's reply to a malformed message", () => {
    assert.deepEqual(parseErrorReply({ type: "error", reason: "unknown command 'x'" }), { type: "error", reason: "unknown command 'x'" });
    assert.equal(parseErrorReply({ type: "ack", name: "step", ok: false, reason: "x" }), null);
    assert.equal(parseErrorReply("error"), null);
  });
});
