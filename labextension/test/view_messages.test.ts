import assert from "node:assert/strict";
import { test } from "node:test";

import { dispatchMessage, type MessageHandlers } from "../src/view_messages.js";

/** Handlers that record what each was called with. */
function recorder(): { calls: [string, unknown][]; handlers: MessageHandlers } {
  const calls: [string, unknown][] = [];
  const handlers: MessageHandlers = {
    delta: (delta) => calls.push(["delta", delta.seq]),
    progress: (progress) => calls.push(["progress", progress]),
    refused: (reason) => calls.push(["refused", reason]),
    ack: (ack) => calls.push(["ack", ack]),
    malformed: (error) => calls.push(["malformed", String(error)]),
  };
  return { calls, handlers };
}

test("each message goes to its handler, checked against its shape", () => {
  const { calls, handlers } = recorder();
  dispatchMessage({ type: "states_delta", seq: 3, states: { "1": "done" }, delivered: [[1, 0]] }, handlers);
  dispatchMessage({ type: "progress", name: "check_gradients", done: 1, total: 4, label: "MulBackward0" }, handlers);
  dispatchMessage({ type: "error", reason: "unknown command 'x'" }, handlers);
  dispatchMessage({ type: "ack", name: "step", ok: true, reason: null }, handlers);
  assert.deepEqual(calls, [
    ["delta", 3],
    ["progress", { done: 1, total: 4, label: "MulBackward0" }],
    ["refused", "unknown command 'x'"],
    ["ack", { type: "ack", name: "step", ok: true, reason: null }],
  ]);
});

test("a malformed message of a known type is reported with its field, never dropped", () => {
  const { calls, handlers } = recorder();
  dispatchMessage({ type: "ack", name: "step", ok: "yes", reason: null }, handlers);
  dispatchMessage({ type: "error" }, handlers);
  dispatchMessage({ type: "progress", name: "check_gradients", done: 1, total: "4", label: "" }, handlers);
  dispatchMessage({ type: "states_delta", seq: 0, states: {}, delivered: [] }, handlers);
  assert.deepEqual(calls, [
    ["malformed", 'ProtocolError: ack.ok must be a boolean, got the string "yes"'],
    ["malformed", "ProtocolError: error reply.reason is missing"],
    ["malformed", 'ProtocolError: progress.total must be an integer, got the string "4"'],
    ["malformed", "ProtocolError: states_delta.seq must be an integer >= 1, got 0"],
  ]);
});

test("a message of a type this view does not know is ignored (a newer kernel may send more)", () => {
  const { calls, handlers } = recorder();
  for (const content of [{ type: "hello" }, "ack", null, 7, [], { name: "step" }]) dispatchMessage(content, handlers);
  assert.deepEqual(calls, []);
});
