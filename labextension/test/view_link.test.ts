import assert from "node:assert/strict";
import { test } from "node:test";

import { viewProblems } from "../src/view_canvas.js";
import { KernelLink, unreachableKernel, type ViewMessage } from "../src/view_link.js";
import type { WidgetModel } from "../src/view_traits.js";

/** The parts of an element KernelLink touches: its classes and data attributes. */
function fakeRoot(): { classes: Set<string>; element: HTMLElement } {
  const classes = new Set<string>();
  const classList = {
    toggle: (name: string, on: boolean) => (on ? classes.add(name) : classes.delete(name)),
    add: (name: string) => classes.add(name),
  };
  return { classes, element: { classList, dataset: {} } as unknown as HTMLElement };
}

/** A model whose send records (or throws) and whose manager hands out `callbacks`. */
function fakeModel(sent: [unknown, unknown][], fail = false): WidgetModel {
  return {
    send: (content: unknown, callbacks?: unknown) => {
      if (fail) throw new Error("Cannot send");
      sent.push([content, callbacks]);
    },
    widget_manager: { callbacks: () => "output callbacks" },
  } as unknown as WidgetModel;
}

const STEP: ViewMessage = { type: "command", name: "step" };

test("a message goes out with the manager's callbacks; none once the kernel is gone", () => {
  const sent: [unknown, unknown][] = [];
  const root = fakeRoot();
  const link = new KernelLink(fakeModel(sent), root.element, () => assert.fail("send did not fail"));
  link.send(STEP);
  assert.deepEqual(sent, [[STEP, "output callbacks"]]);
  link.setBusy(true);
  assert.ok(root.classes.has("gv-busy"));
  link.disconnect("the kernel was restarted");
  assert.equal(link.disconnected, "the kernel was restarted");
  assert.ok(root.classes.has("gv-disconnected") && !root.classes.has("gv-busy"));
  assert.equal(root.element.dataset["disconnected"], "true");
  link.send(STEP);
  assert.equal(sent.length, 1);
  link.dispose();
});

test("a send that throws ends the busy mark and says the kernel cannot be reached", () => {
  const root = fakeRoot();
  const failures: [ViewMessage, string][] = [];
  const link = new KernelLink(fakeModel([], true), root.element, (message, reason) => failures.push([message, reason]));
  link.setBusy(true);
  link.send(STEP);
  assert.deepEqual(failures, [[STEP, unreachableKernel("Error: Cannot send")]]);
  assert.ok(!root.classes.has("gv-busy"));
  link.dispose();
});

test("the error box lists Python's error first, then the view's own problems", () => {
  const none = { python: null, disconnected: null, view: null, refused: null, mismatch: null };
  assert.deepEqual(viewProblems(none), []);
  assert.deepEqual(viewProblems({ python: "ValueError: x", disconnected: "gone", view: "bad graph", refused: "unknown command", mismatch: "protocol 5, view 6" }), [
    "ValueError: x",
    "gradviz view: gone",
    "gradviz view: bad graph",
    "gradviz widget refused a message from this view: unknown command",
    "gradviz view: protocol 5, view 6",
  ]);
});
