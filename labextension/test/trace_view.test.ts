import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { ProtocolError } from "../src/model.js";
import { STANDALONE_FORMAT, STANDALONE_VERSION } from "../src/replay.js";
import { parseTraceView, TRACE_VIEW_FORMAT, TRACE_VIEW_MIME, TRACE_VIEW_VERSION } from "../src/trace_view.js";
import { TINY_GRAPH } from "./fixtures.js";

/** A trace view as gradviz/widget/_trace_view.py writes it: a pass that has not started. */
function document(overrides: Record<string, unknown> = {}, view: Record<string, unknown> = {}): Record<string, unknown> {
  return {
    format: TRACE_VIEW_FORMAT,
    version: TRACE_VIEW_VERSION,
    gradviz_version: "0.1.0",
    trace: { format: "gradviz-trace" },
    view: {
      format: STANDALONE_FORMAT, version: STANDALONE_VERSION, title: "<img src=x onerror=alert(1)>", gradviz_version: "0.1.0",
      graph: TINY_GRAPH, state_names: ["pending", "ready"], start: 0, final_status: "finished",
      events: [["backward_started", null, "Backward started"]], changes: [[], [4, 1]], current: [null, 4],
      ...view,
    },
    ...overrides,
  };
}

describe("parseTraceView", () => {
  it("reads the view of what _trace_view.py writes, and keeps text as it is", () => {
    const data = parseTraceView(document());
    assert.equal(data.title, "<img src=x onerror=alert(1)>");
    assert.deepEqual(data.changes[1], [[4, "ready"]]);
    assert.equal(TRACE_VIEW_MIME, "application/vnd.gradviz.trace+json");
  });
  for (const [what, value, message] of [
    ["a list", [], /must be a JSON object, got an array/],
    ["a raw trace", { format: "gradviz-trace" }, /this is a raw trace \(Trace\.save\).*save_view/],
    ["a newer version", document({ version: 2, gradviz_version: "9.0" }), /version 2 \(written by gradviz "9\.0"\), but this extension reads version 1/],
    ["no view", document({ view: null }), /needs a "view" object, got null/],
    ["a malformed view", document({}, { changes: [[]] }), /changes must have one entry per position/],
  ] as const) {
    it(`refuses ${what} with what is wrong`, () => {
      assert.throws(() => parseTraceView(value), (error: unknown) => error instanceof ProtocolError && message.test(error.message));
    });
  }
});
