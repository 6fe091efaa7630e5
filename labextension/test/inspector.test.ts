import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { formatNumber, parseInspection, parseSummary, SUMMARY_COLUMNS, summaryCells, WRAPPING_COLUMN } from "../src/inspector.js";
import { ProtocolError } from "../src/model.js";

// As Python sends it: session.node(id) made JSON-safe (NaN and infinities as text).
const SUMMARY = { shape: [3], dtype: "float32", numel: 3, nan: 0, inf: 0, min: -0.75, max: 1.5, mean: 0.25, norm: 1.7320508075688772, values: [1, -0.75, 1.5] };
const BAD = { shape: [8], dtype: "float32", numel: 8, nan: 2, inf: 1, min: -1, max: 2, mean: 0.5, norm: 3, values: ["nan", 1, "inf", -1, 2, "nan"] };

const MUL = {
  id: 2,
  name: "MulBackward0",
  kind: "builtin",
  label: "x * w",
  state: "released",
  grads_in: [SUMMARY],
  grads_out: [null, BAD],
  pending_buffer: null,
  accumulated: null,
  error: null,
  hooks: { pre: [], post: [], tensor_pre: {} },
};

describe("parseInspection", () => {
  it("reads the header and the gradient tables", () => {
    const inspection = parseInspection(MUL);
    assert.ok(inspection !== null);
    assert.deepEqual([inspection.id, inspection.name, inspection.kind, inspection.label, inspection.state], [2, "MulBackward0", "builtin", "x * w", "released"]);
    assert.deepEqual(inspection.sections.map((section) => section.key), ["in", "out"]);
    const [gradsIn, gradsOut] = inspection.sections;
    assert.equal(gradsIn?.rows.length, 1);
    assert.equal(gradsOut?.rows[0]?.summary, null, "an undefined gradient (None) stays null");
    assert.equal(gradsOut?.rows[1]?.summary?.nan, 2);
    assert.equal(inspection.error, null);
  });

  it("reads a leaf's name for the header, and none when the session does not know it", () => {
    const leaf = { id: 0, name: "AccumulateGrad", kind: "accumulate_grad", label: "[3] float32", state: "done" };
    assert.equal(parseInspection({ ...leaf, leaf_name: "fc.bias" })?.leafName, "fc.bias");
    assert.equal(parseInspection(leaf)?.leafName, "");
  });

  it("says what is not known yet for a ready node, and shows its buffer", () => {
    const ready = parseInspection({ ...MUL, state: "ready", grads_in: null, grads_out: null, pending_buffer: [SUMMARY] });
    assert.deepEqual(ready?.sections.map((section) => [section.key, section.rows.length]), [["buffer", 1], ["in", 0], ["out", 0]]);
    const [buffer, gradsIn, gradsOut] = ready?.sections ?? [];
    assert.equal(buffer?.title, "Gradients collected so far");
    // Its gradients have all arrived: "not received yet" under them contradicted the buffer.
    assert.doesNotMatch(gradsIn?.note ?? "", /not received/);
    assert.match(gradsIn?.note ?? "", /when it runs/);
    assert.equal(gradsOut?.note, "not computed yet");
  });

  it("tells a pending node with some gradients from one with none", () => {
    const partly = parseInspection({ ...MUL, state: "pending", grads_in: null, grads_out: null, pending_buffer: [SUMMARY] });
    assert.match(partly?.sections.find((section) => section.key === "in")?.note ?? "", /not all received yet/);
    const none = parseInspection({ ...MUL, state: "pending", grads_in: null, grads_out: null, pending_buffer: null });
    assert.deepEqual(none?.sections.map((section) => [section.key, section.note]), [
      ["in", "not received yet"],
      ["out", "not computed yet"],
    ]);
  });

  it("shows a leaf's .grad before and after, and explains its empty gradients out", () => {
    const leaf = parseInspection({ ...MUL, kind: "accumulate_grad", grads_out: [], accumulated: { before: null, after: SUMMARY } });
    const out = leaf?.sections.find((section) => section.key === "out");
    assert.match(out?.note ?? "", /\.grad/);
    const accumulated = leaf?.sections.find((section) => section.key === "accumulated");
    assert.deepEqual(accumulated?.rows.map((row) => [row.label, row.summary?.shape ?? null]), [["before", null], ["after", [3]]]);
  });

  it("reports the node's error", () => {
    const failed = parseInspection({ ...MUL, state: "error", error: { exception: "ValueError", message: "wrong shape" } });
    assert.equal(failed?.error, "ValueError: wrong shape");
  });

  it("shows only the header for a session without node()", () => {
    const bare = parseInspection({ id: 2, name: "MulBackward0", kind: "builtin", label: "", state: "pending" });
    assert.deepEqual(bare?.sections, []);
    assert.equal(bare?.note, "");
  });

  it("keeps the note that says why there is nothing more (a saved page)", () => {
    const saved = parseInspection({ id: 2, name: "MulBackward0", kind: "builtin", label: "", state: "done", note: "This saved page keeps no gradient values." });
    assert.equal(saved?.note, "This saved page keeps no gradient values.");
  });

  it("is null when nothing is selected and rejects what is not a node", () => {
    assert.equal(parseInspection(null), null);
    assert.throws(() => parseInspection([]), ProtocolError);
    const node = { id: 2, name: "MulBackward0", kind: "builtin", label: "", state: "done" };
    assert.throws(() => parseInspection({ ...node, id: "2" }), /^ProtocolError: inspection\.id must be an integer, got the string "2"$/);
    assert.throws(() => parseInspection({ id: 2, name: "A" }), /inspection\.kind is missing/);
    assert.throws(() => parseInspection({ ...node, state: "sleeping" }), /inspection\.state must be one of pending, ready, running, done, released, error, got the string "sleeping"/);
    assert.throws(() => parseInspection({ ...node, grads_in: "x" }), /inspection\.grads_in must be a list or null, got the string "x"/);
    assert.throws(() => parseInspection({ ...node, leaf_name: 7 }), /inspection\.leaf_name must be a string, got number/);
  });
});

describe("formatting", () => {
  it("formats numbers compactly and keeps non-finite text", () => {
    assert.equal(formatNumber(1.7320508075688772), "1.732");
    assert.equal(formatNumber(3), "3");
    assert.equal(formatNumber(-0.75), "-0.75");
    assert.equal(formatNumber(123456.7), "1.235e+5");
    assert.equal(formatNumber(1e-8), "1.000e-8");
    assert.equal(formatNumber(0), "0");
    assert.equal(formatNumber("nan"), "nan");
    assert.equal(formatNumber("-inf"), "-inf");
    assert.equal(formatNumber(null), "—");
  });

  it("lays a summary out in the table's columns, NaN and Inf counts flagged", () => {
    const cells = summaryCells({ label: "1", summary: parseSummary(BAD) });
    assert.equal(cells.length, SUMMARY_COLUMNS.length);
    assert.deepEqual(
      cells.map((cell) => cell.text),
      ["1", "[8]", "float32", "-1", "2", "0.5", "3", "2", "1", "[nan, 1, inf, -1, 2, nan, …]"],
    );
    assert.deepEqual(cells.map((cell, index) => (cell.alarm ? SUMMARY_COLUMNS[index]?.name : null)).filter(Boolean), ["NaN", "Inf"]);
    const clean = summaryCells({ label: "0", summary: parseSummary(SUMMARY) });
    assert.equal(clean.some((cell) => cell.alarm), false);
    assert.equal(clean[9]?.text, "[1, -0.75, 1.5]");
  });

  it("shows an undefined gradient as None", () => {
    const cells = summaryCells({ label: "0", summary: null });
    assert.equal(cells.length, SUMMARY_COLUMNS.length);
    assert.equal(cells[1]?.text, "None");
  });

  it("reads a damaged summary without failing", () => {
    const summary = parseSummary({ shape: "3", values: [1, {}] });
    assert.deepEqual(summaryCells({ label: "0", summary }).slice(1, 4).map((cell) => cell.text), ["?", "?", "—"]);
  });

  it("aligns numbers right in fixed-width columns, the same for every table", () => {
    assert.deepEqual(SUMMARY_COLUMNS.map((column) => column.name), ["", "shape", "dtype", "min", "max", "mean", "norm", "NaN", "Inf", "values"]);
    assert.deepEqual(
      SUMMARY_COLUMNS.filter((column) => column.numeric).map((column) => column.name),
      ["min", "max", "mean", "norm", "NaN", "Inf"],
    );
    for (const column of SUMMARY_COLUMNS) assert.ok(Number.isInteger(column.width) && column.width > 0, column.name);
    assert.equal(SUMMARY_COLUMNS[WRAPPING_COLUMN]?.name, "values", "only the first values wrap");
  });

  it("gives every formatted number room in its column: no statistic is cut", () => {
    const extremes = [-1.2345678e-30, -123456789.5, -1e300, -999999, -0.00012345, -99999.99, "-inf", "nan"];
    for (const value of extremes) {
      const cells = summaryCells({ label: "0", summary: parseSummary({ ...SUMMARY, min: value, max: value, mean: value, norm: value }) });
      for (const index of [3, 4, 5, 6]) assert.equal(cells[index]?.title, "", `${String(value)} does not fit ${SUMMARY_COLUMNS[index]?.name}`);
    }
  });

  it("fits a widget in a JupyterLab notebook at 1280 px without scrolling sideways", () => {
    // The widget is about 830 px wide there; 12 px monospace is about 7.3 px a character, and
    // every cell has 6 px of padding on each side. The last column's width is its least width.
    const characters = SUMMARY_COLUMNS.reduce((sum, column) => sum + column.width, 0);
    assert.ok(characters * 7.3 + 12 * SUMMARY_COLUMNS.length <= 830 - 16, `${characters} characters do not fit`);
  });

  it("puts the whole text of a cell too long for its column in its tooltip", () => {
    const big = { ...SUMMARY, shape: [1024, 1024, 3, 3, 7], dtype: "complex128", numel: 1024 * 1024 * 63, nan: 12345678 };
    const cells = summaryCells({ label: "before", summary: parseSummary(big) });
    const byName = new Map(SUMMARY_COLUMNS.map((column, index) => [column.name, cells[index]]));
    assert.equal(byName.get("shape")?.title, "[1024, 1024, 3, 3, 7]");
    assert.equal(byName.get("dtype")?.title, "complex128");
    assert.equal(byName.get("NaN")?.title, "12345678");
    assert.equal(byName.get("")?.title, "", "'before' fits its column");
    assert.equal(byName.get("values")?.title, "", "the values wrap instead");
    assert.equal(summaryCells({ label: "0", summary: parseSummary(SUMMARY) }).every((cell) => cell.title === ""), true);
  });
});
