import assert from "node:assert/strict";
import { test } from "node:test";

import { LocalModel } from "../src/local_model.js";
import { STATE_TRAITS, VIEW_TRAITS, watchTraits } from "../src/view_traits.js";

function watched(): { model: LocalModel; calls: string[]; stop: () => void } {
  const model = new LocalModel({}, () => undefined);
  const calls: string[] = [];
  const stop = watchTraits(model, {
    graph: () => calls.push("graph"),
    moved: () => calls.push("moved"),
    restyle: () => calls.push("restyle"),
    message: (content) => calls.push(`message ${JSON.stringify(content)}`),
  });
  return { model, calls, stop };
}

const nextTask = (): Promise<void> => new Promise((resolve) => setTimeout(resolve, 0));

test("a Step's many trait changes end the pending command and restyle once", async () => {
  const { model, calls } = watched();
  model.set({ states: { "1": "done" }, current: 2, status: "paused", last_event: { seq: 1 }, selected: 1, history_position: 4 });
  assert.deepEqual(calls, ["moved", "moved", "moved", "moved"], "restyles wait for the end of the task");
  await nextTask();
  assert.deepEqual(calls, ["moved", "moved", "moved", "moved", "restyle"]);
});

test("a view trait only restyles; a new graph lays out; messages pass through", async () => {
  const { model, calls } = watched();
  model.set({ inspection: { id: 1 } });
  model.set({ graph: { nodes: [] } });
  model.sendToView({ type: "ack" });
  await nextTask();
  assert.deepEqual(calls, ["graph", 'message {"type":"ack"}', "restyle"]);
});

test("every documented trait is watched once, and stopping unsubscribes all", async () => {
  assert.equal(new Set([...STATE_TRAITS, ...VIEW_TRAITS]).size, STATE_TRAITS.length + VIEW_TRAITS.length);
  const { model, calls, stop } = watched();
  stop();
  model.set(Object.fromEntries([...STATE_TRAITS, ...VIEW_TRAITS, "graph"].map((name) => [name, 1])));
  model.sendToView({ type: "ack" });
  await nextTask();
  assert.deepEqual(calls, []);
});
