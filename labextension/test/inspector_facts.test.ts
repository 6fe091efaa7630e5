import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { parseInspection, summaryCells } from "../src/inspector.js";
import { formatBytes, savedLines, slotList, sourceLines } from "../src/inspector_facts.js";

const S = (value: number) => ({ shape: [2], dtype: "float32", numel: 2, nan: 0, inf: 0, min: value, max: value, mean: value, norm: value, values: [value, value] });

// session.node(id) of a MulBackward0 whose tensor pre-hook multiplied its gradient by 10, as
// the lead's node() gives it (every key the inspector reads).
const HOOKED = {
  id: 1, name: "MulBackward0", kind: "builtin", label: "[2]", state: "released",
  grads_in: [S(1)], grads_out: [S(30), null], pending_buffer: null,
  hook_runs: [
    { kind: "prehook", hook: "<lambda>", replaced: true, slot: 0, before: [S(1)], after: [S(10)] },
    { kind: "posthook", hook: "log_grads", replaced: false, before: [S(30), null], after: [S(30), null] },
  ],
  hooks: { pre: [], post: ["log_grads"], tensor_pre: { "0": ["<lambda>"] } },
  materialized: [1],
  casts: [{ slot: 0, from: "float64", to: "float32" }],
  contributions: [{ slot: 0, producer: 2, how: "stored" }, { slot: 0, producer: 3, how: "accumulated_in_place" }],
  saved: [
    { slot: 0, label: "input 0", hooked: false, held: false, version: 0, bytes: 8, released_at: 14 },
    { slot: 1, label: "input 1", hooked: true, held: true, version: 2, bytes: 4096 },
  ],
  released: { count: 2, bytes: 16 },
  needs_input_grad: [true, false],
  dirty: [0],
  non_differentiable: [1],
  source: { file: "train.py", line: 12, function: "forward", code: "    y = w * x\n" },
};

function section(key: string) {
  return parseInspection(HOOKED, (id) => `Node${id} #${id}`)?.sections.find((s) => s.key === key);
}

describe("inspector facts", () => {
  it("orders the sections: gradients in, the hooks that ran on them, gradients out, then the facts", () => {
    const keys = parseInspection(HOOKED)?.sections.map((s) => s.key);
    assert.deepEqual(keys, ["in", "hook-0", "hook-1", "hooks", "out", "flow", "saved", "facts", "source"]);
  });

  it("shows each hook run with its effect and its gradient before and after", () => {
    const pre = section("hook-0");
    assert.equal(pre?.title, "Hook 1: tensor pre-hook on input 0 <lambda> · replaced the gradient");
    assert.deepEqual(pre?.rows.map((row) => [row.label, row.summary?.max]), [["before", 1], ["after", 10]]);
    const post = section("hook-1");
    assert.match(post?.title ?? "", /post-hook log_grads · returned None: gradient unchanged/);
    assert.deepEqual(post?.rows.map((row) => [row.label, row.summary?.max ?? null]), [["before 0", 30], ["before 1", null], ["after 0", 30], ["after 1", null]]);
  });

  it("reads an older trace's post-hook, which carries only what it was given", () => {
    const old = parseInspection({ ...HOOKED, hook_runs: [{ kind: "posthook", hook: "h", replaced: false, grad_inputs: [S(2)] }] });
    assert.deepEqual(old?.sections.find((s) => s.key === "hook-0")?.rows.map((row) => row.label), ["given"]);
  });

  it("lists the registered hooks, contributions with their producers' names, and casts", () => {
    assert.deepEqual(section("hooks")?.lines?.map((l) => l.text), ["tensor pre-hooks on input 0: <lambda>", "post-hooks: log_grads"]);
    assert.deepEqual(section("flow")?.lines?.map((l) => l.text), [
      "input 0 from Node2 #2: stored (first to arrive)",
      "input 0 from Node3 #3: summed into the buffer in place",
      "result 0 cast from float64 to float32",
    ]);
  });

  it("shows saved tensors with version, bytes, and when they were released", () => {
    assert.deepEqual(section("saved")?.lines?.map((l) => l.text), [
      "input 0 · version 0 · 8 B · released at event 14",
      "input 1 · version 2 · 4.0 KiB · through pack/unpack hooks · held",
    ]);
    // An older node() without versions, bytes or released_at
    assert.deepEqual(savedLines({ saved: [{ slot: 0, label: "output", hooked: false, held: false }] }).map((l) => l.text), ["output · released"]);
  });

  it("shows needs_input_grad, dirty, non-differentiable and zero-filled slots, and the source line", () => {
    assert.deepEqual(section("facts")?.lines?.map((l) => l.text), [
      "needs_input_grad: (True, False)",
      "dirty (modified in place by forward): output 0",
      "non-differentiable: output 1",
      "slot 1 had no gradient (None) and got zeros before backward ran",
      "2 saved tensors (16 B) freed after it ran",
    ]);
    assert.deepEqual(section("source")?.lines?.map((l) => l.text), ["train.py:12 in forward", "y = w * x"]);
  });

  it("shows nothing for missing, null or malformed keys (old traces, test doubles)", () => {
    const bare = { id: 1, name: "MulBackward0", kind: "builtin", label: "", state: "done" };
    assert.deepEqual(parseInspection(bare)?.sections, []);
    const nulls = { ...bare, hook_runs: null, hooks: null, saved: null, source: null, contributions: null, casts: null, needs_input_grad: null, dirty: null, materialized: [] };
    assert.deepEqual(parseInspection(nulls)?.sections, []);
    const junk = { ...bare, hook_runs: "x", hooks: [1], saved: [3, "a"], source: 7, contributions: {}, needs_input_grad: [1, "a"], dirty: ["a"] };
    assert.deepEqual(parseInspection(junk)?.sections, []);
  });

  it("formats bytes, slots and sources", () => {
    assert.deepEqual([0, 1023, 1024, 1536, 3 * 1024 * 1024].map(formatBytes), ["0 B", "1023 B", "1.0 KiB", "1.5 KiB", "3.0 MiB"]);
    assert.deepEqual(slotList([false, true, true]), [1, 2]);
    assert.deepEqual(slotList([2, 0]), [2, 0]);
    assert.equal(slotList(["0"]), null);
    assert.deepEqual(sourceLines({ source: "model.py:3" }).map((l) => l.text), ["model.py:3"]);
  });

  it("says 'above' for a ready node only when its collected gradients are shown above", () => {
    const ready = { id: 1, name: "MulBackward0", kind: "builtin", label: "", state: "ready", grads_in: null, grads_out: null };
    const without = parseInspection(ready)?.sections.find((s) => s.key === "in")?.note ?? "";
    assert.doesNotMatch(without, /above/);
    const withBuffer = parseInspection({ ...ready, pending_buffer: [S(1)] })?.sections.find((s) => s.key === "in")?.note ?? "";
    assert.match(withBuffer, /above/);
  });

  it("shows a buffer slot that has received nothing yet as such, not as an undefined gradient", () => {
    const pending = parseInspection({ id: 1, name: "AddBackward0", kind: "builtin", label: "", state: "pending", pending_buffer: [S(1), null] });
    const buffer = pending?.sections.find((s) => s.key === "buffer");
    assert.deepEqual(buffer?.rows.map((row) => summaryCells(row)[1]?.text), ["[2]", "nothing yet"]);
  });
});
