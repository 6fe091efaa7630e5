import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { disconnectedText, kernelGone, watchConnection, type ConnectionModel } from "../src/connection.js";

type Callback = (...args: unknown[]) => void;
type Slot = (sender: unknown, value: unknown) => void;

/** A model with Backbone-style events and, optionally, a manager whose kernel has a status signal. */
function fakeModel(kernel?: { status?: string; isDisposed?: boolean }) {
  const listeners = new Map<string, Set<Callback>>();
  const slots = new Set<Slot>();
  const disposedSlots = new Set<Slot>();
  const statusChanged = { connect: (slot: Slot) => slots.add(slot), disconnect: (slot: Slot) => slots.delete(slot) };
  const disposed = { connect: (slot: Slot) => disposedSlots.add(slot), disconnect: (slot: Slot) => disposedSlots.delete(slot) };
  const model: ConnectionModel = {
    on: (event, callback) => {
      if (!listeners.has(event)) listeners.set(event, new Set());
      listeners.get(event)?.add(callback);
    },
    off: (event, callback) => {
      if (typeof event === "string" && callback) listeners.get(event)?.delete(callback);
    },
    widget_manager: kernel === undefined ? {} : { kernel: { ...kernel, statusChanged, disposed } },
  };
  return {
    model,
    trigger: (event: string) => [...(listeners.get(event) ?? [])].forEach((callback) => callback()),
    status: (value: string) => [...slots].forEach((slot) => slot(null, value)),
    dispose: () => [...disposedSlots].forEach((slot) => slot(null, undefined)),
    listening: () => (listeners.get("comm_live_update")?.size ?? 0) + slots.size + disposedSlots.size,
  };
}

describe("kernelGone", () => {
  it("is true for the statuses after which the widget's Python side is gone", () => {
    for (const status of ["restarting", "autorestarting", "dead"]) assert.equal(kernelGone(status), true, status);
    for (const status of ["idle", "busy", "starting", "unknown", undefined, 3]) assert.equal(kernelGone(status), false, String(status));
  });
});

describe("watchConnection", () => {
  it("reports ipywidgets' disconnect (comm_live_update) at once, and only once", () => {
    const fake = fakeModel();
    const reasons: string[] = [];
    watchConnection(fake.model, (reason) => reasons.push(reason));
    assert.deepEqual(reasons, []);
    fake.trigger("comm_live_update");
    fake.trigger("comm_live_update");
    assert.deepEqual(reasons, ["the kernel was restarted or shut down"]);
  });

  it("reports a restart or a shutdown from the manager's kernel status", () => {
    const fake = fakeModel({ status: "idle" });
    const reasons: string[] = [];
    watchConnection(fake.model, (reason) => reasons.push(reason));
    fake.status("busy");
    fake.status("idle");
    assert.deepEqual(reasons, [], "a busy kernel is still there");
    fake.status("dead");
    assert.deepEqual(reasons, ["the kernel was shut down"]);

    const restarted = fakeModel({ status: "idle" });
    const more: string[] = [];
    watchConnection(restarted.model, (reason) => more.push(reason));
    restarted.status("restarting");
    restarted.status("idle"); // a new kernel: this widget's Python object is still gone
    assert.deepEqual(more, ["the kernel was restarted"]);
  });

  it("reports a shutdown that disposes the kernel connection without a status change", () => {
    const fake = fakeModel({ status: "idle" });
    const reasons: string[] = [];
    watchConnection(fake.model, (reason) => reasons.push(reason));
    fake.dispose();
    assert.deepEqual(reasons, ["the kernel was shut down"]);
  });

  it("reports a kernel that is already dead or disposed when the view is drawn", () => {
    for (const kernel of [{ status: "dead" }, { status: "idle", isDisposed: true }]) {
      const reasons: string[] = [];
      watchConnection(fakeModel(kernel).model, (reason) => reasons.push(reason));
      assert.deepEqual(reasons, ["the kernel was shut down"], JSON.stringify(kernel));
    }
  });

  it("stops listening when the view is removed", () => {
    const fake = fakeModel({ status: "idle" });
    const reasons: string[] = [];
    const stop = watchConnection(fake.model, (reason) => reasons.push(reason));
    assert.equal(fake.listening(), 3);
    stop();
    assert.equal(fake.listening(), 0);
    fake.trigger("comm_live_update");
    fake.status("dead");
    fake.dispose();
    assert.deepEqual(reasons, []);
  });

  it("works with a manager whose kernel getter throws, or with no manager", () => {
    const throwing: ConnectionModel = {
      on: () => undefined,
      off: () => undefined,
      widget_manager: Object.defineProperty({}, "kernel", { get: () => { throw new Error("no session"); } }),
    };
    assert.doesNotThrow(() => watchConnection(throwing, () => undefined)());
    assert.doesNotThrow(() => watchConnection({ on: () => undefined, off: () => undefined }, () => undefined)());
  });
});

describe("disconnectedText", () => {
  it("says what happened, what it means and what to do", () => {
    const text = disconnectedText("the kernel was restarted");
    assert.match(text, /^disconnected: the kernel was restarted/);
    assert.match(text, /no longer live/);
    assert.match(text, /Re-run the cell that showed the debugger/);
  });
});
