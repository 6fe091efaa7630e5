import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  FINDING_COLUMNS,
  findingMarks,
  findingRow,
  panelContent,
  parseDoctor,
  parseProgress,
  parseReport,
  worstText,
  type DoctorState,
} from "../src/doctor.js";
import { ProtocolError } from "../src/model.js";

// As Python sends it: json_safe(session.doctor().to_dict()) for (Twice(BadSquare(x))).sum(),
// where BadSquare's backward has the wrong sign and Twice saved nothing the doctor could use.
const REPORT = {
  ok: false,
  summary: "gradient doctor: 1 custom Function node checked against finite differences, 1 skipped; 1 problem",
  findings: [
    {
      kind: "wrong_gradient",
      severity: "error",
      function: "BadSquare",
      node: 0,
      node_name: "BadSquareBackward",
      input_index: 0,
      message: "BadSquareBackward input 0: gradient disagrees with finite differences (max abs err 16 at [1]: analytic -8 vs numeric 8) - sign flipped?",
      hint: "sign flipped?",
      max_abs_error: 16.0,
      max_rel_error: 2.0,
      worst: [
        { index: [1], analytic: -8.0, numeric: 8.0 },
        { index: [0], analytic: -4.0, numeric: 4.0 },
      ],
    },
  ],
  checked: [0],
  skipped: [
    {
      node: 2,
      name: "TwiceBackward",
      reason: "its forward arguments were not recorded and it saved no tensors (build the graph inside gradviz.debug.capture() to record them)",
    },
  ],
  notes: [],
};

const CLEAN = {
  ok: true,
  summary: "gradient doctor: 1 custom Function node checked against finite differences, 0 skipped; no problems found",
  findings: [],
  checked: [0],
  skipped: [],
  notes: [],
};

const done = (report: unknown, run = 1): DoctorState => {
  const state = parseDoctor({ run, state: "done", report, error: null });
  assert.ok(state !== null);
  return state;
};

describe("parseDoctor", () => {
  it("reads the three states", () => {
    assert.deepEqual(parseDoctor({ run: 2, state: "checking", report: null, error: null }), { state: "checking", run: 2 });
    assert.deepEqual(parseDoctor({ run: 1, state: "error", report: null, error: "RuntimeError: no roots" }), {
      state: "error",
      run: 1,
      error: "RuntimeError: no roots",
    });
    const state = done(REPORT);
    assert.equal(state.state, "done");
    if (state.state !== "done") return;
    assert.equal(state.report.ok, false);
    assert.equal(state.report.findings[0]?.function, "BadSquare");
    assert.equal(state.report.findings[0]?.inputIndex, 0);
    assert.deepEqual(state.report.findings[0]?.worst[0], { index: [1], analytic: -8, numeric: 8 });
    assert.deepEqual(state.report.skipped, [{ node: 2, name: "TwiceBackward", reason: REPORT.skipped[0]?.reason }]);
  });

  it("is null before the first check and rejects what is not a doctor state", () => {
    assert.equal(parseDoctor(null), null);
    assert.equal(parseDoctor(undefined), null);
    assert.equal(parseDoctor({}), null);
    assert.throws(() => parseDoctor([]), ProtocolError);
    assert.throws(() => parseDoctor({ run: 1, state: "thinking" }), /doctor\.state must be one of checking, done, error/);
    assert.throws(() => parseDoctor({ run: "1", state: "done", report: {}, error: null }), /^ProtocolError: doctor\.run must be an integer, got the string "1"$/);
    assert.throws(() => parseDoctor({ run: 1, state: "done", error: null }), /doctor\.report is missing/);
    assert.throws(() => parseDoctor({ run: 1, state: "done", report: "ok", error: null }), /doctor\.report must be an object, got the string "ok"/);
    assert.throws(() => parseDoctor({ run: 1, state: "error", report: null, error: 3 }), /doctor\.error must be a string, got number/);
    assert.throws(() => parseDoctor({ run: 1, state: "checking", report: null }), /doctor\.error is missing/);
    assert.throws(() => parseDoctor("done"), /doctor must be an object or null, got the string "done"/);
    assert.deepEqual(parseDoctor({ run: 2, state: "checking", report: null, error: null }), { state: "checking", run: 2 });
    assert.deepEqual(parseDoctor({ run: 3, state: "error", report: null, error: "" }), { state: "error", run: 3, error: "the gradient doctor failed" });
  });

  it("reads a damaged report without failing", () => {
    const report = parseReport({ findings: [7, { kind: "nonfinite", node: "3", worst: [{ index: "0" }] }], skipped: "x", notes: [1, "n"] });
    assert.equal(report.findings.length, 1);
    assert.deepEqual([report.findings[0]?.node, report.findings[0]?.nodeName, report.findings[0]?.severity], [null, "?", "error"]);
    assert.deepEqual(report.findings[0]?.worst, [{ index: [], analytic: null, numeric: null }]);
    assert.deepEqual([report.skipped, report.notes, report.ok], [[], ["n"], false]);
  });
});

describe("progress messages", () => {
  it("recognises the doctor's progress and nothing else", () => {
    assert.deepEqual(parseProgress({ type: "progress", name: "check_gradients", done: 2, total: 3, label: "SquareBackward" }), {
      done: 2,
      total: 3,
      label: "SquareBackward",
    });
    assert.equal(parseProgress({ type: "ack", name: "check_gradients", ok: true, reason: null }), null);
    assert.equal(parseProgress("progress"), null);
    // a progress message that is malformed is a protocol bug: named, not ignored
    assert.throws(() => parseProgress({ type: "progress", name: "check_gradients", done: "2", total: 3, label: "" }), /^ProtocolError: progress\.done must be an integer, got the string "2"$/);
    assert.throws(() => parseProgress({ type: "progress", name: "check_gradients", done: 2, total: 3 }), /progress\.label is missing/);
    assert.throws(() => parseProgress({ type: "progress", name: "step", done: 2, total: 3, label: "" }), /progress\.name must be "check_gradients", got the string "step"/);
    assert.throws(() => parseProgress({ type: "progress", name: "check_gradients", done: -1, total: 3, label: "" }), /progress must count from 0/);
  });
});

describe("the panel's content", () => {
  it("lays a finding out in the columns: kind, Function, node, input, errors, worst entries", () => {
    const state = done(REPORT);
    const content = panelContent(state, null, false);
    assert.ok(content !== null);
    assert.equal(content.tone, "problems");
    assert.equal(content.status, "1 problem found");
    assert.equal(content.summary, REPORT.summary);
    assert.equal(content.rows.length, 1);
    const row = content.rows[0];
    assert.equal(row?.cells.length, FINDING_COLUMNS.length);
    assert.deepEqual(row?.cells, ["wrong gradient", "BadSquare", "BadSquareBackward #0", "0", "16", "2", "[1]: -8 vs 8; [0]: -4 vs 4"]);
    assert.deepEqual([row?.node, row?.kind, row?.severity], [0, "wrong_gradient", "error"]);
    assert.match(row?.message ?? "", /sign flipped\?$/);
  });

  it("says which nodes could not be checked, and why", () => {
    const content = panelContent(done(REPORT), null, false);
    assert.deepEqual(content?.skipped, {
      title: "Could not check 1 node:",
      lines: [`TwiceBackward #2: ${REPORT.skipped[0]?.reason}`],
    });
    const two = panelContent(done({ ...CLEAN, skipped: [REPORT.skipped[0], { node: 5, name: "ExpFnBackward", reason: "freed" }] }), null, false);
    assert.equal(two?.skipped?.title, "Could not check 2 nodes:");
  });

  it("says no problems were found", () => {
    const content = panelContent(done(CLEAN), null, false);
    assert.deepEqual([content?.tone, content?.status, content?.rows.length, content?.skipped], ["ok", "No problems found", 0, null]);
  });

  it("does not call a check clean when nodes could not be checked", () => {
    const skipped = { node: 1, name: "SquareBackward", reason: "its saved tensors were freed" };
    const nothing = panelContent(done({ ...CLEAN, checked: [], skipped: [skipped] }), null, false);
    assert.deepEqual([nothing?.tone, nothing?.status], ["warnings", "Nothing checked: 1 node could not be checked (below)"]);
    assert.equal(nothing?.skipped?.title, "Could not check 1 node:");
    const some = panelContent(done({ ...CLEAN, checked: [0, 2], skipped: [skipped] }), null, false);
    assert.deepEqual([some?.tone, some?.status], ["warnings", "No problems in 2 checked nodes; 1 node could not be checked (below)"]);
    // Findings still lead when there are some.
    assert.equal(panelContent(done(REPORT), null, false)?.status, "1 problem found");
  });

  it("counts warnings apart from problems", () => {
    const warning = { ...REPORT.findings[0], kind: "coerced_gradient", severity: "warning", max_abs_error: null, max_rel_error: null, worst: [] };
    const content = panelContent(done({ ...REPORT, findings: [warning] }), null, false);
    assert.deepEqual([content?.tone, content?.status], ["warnings", "1 warning found"]);
    assert.deepEqual(content?.rows[0]?.cells.slice(4), ["—", "—", "—"]);
  });

  it("shows checking… from the click until the report, with progress", () => {
    assert.equal(panelContent(null, null, false), null, "no panel before the first check");
    const clicked = panelContent(null, null, true);
    assert.deepEqual([clicked?.tone, clicked?.status], ["checking", "Checking gradients against finite differences…"]);
    const running = panelContent({ state: "checking", run: 1 }, { done: 1, total: 3, label: "backward pass" }, false);
    assert.equal(running?.status, "Checking gradients against finite differences… 1 of 3 · backward pass");
    assert.deepEqual(running?.progress, { done: 1, total: 3 });
    const again = panelContent(done(REPORT), null, true);
    assert.equal(again?.tone, "checking", "a new click hides the old report");
  });

  it("shows the doctor's error", () => {
    const content = panelContent({ state: "error", run: 1, error: "RuntimeError: this session was not made by gradviz.debug.backward()" }, null, false);
    assert.deepEqual([content?.tone, content?.status], ["error", "The gradient doctor failed: RuntimeError: this session was not made by gradviz.debug.backward()"]);
  });

  it("words mutated saved tensors as saved and now", () => {
    const finding = parseReport({
      findings: [{ kind: "mutated_saved", node: 4, node_name: "MulBackward0", worst: [{ index: [0, 1], analytic: 1, numeric: "nan" }] }],
    }).findings[0];
    assert.ok(finding !== undefined);
    assert.equal(worstText(finding), "[0, 1]: saved 1, now nan");
    assert.deepEqual(findingRow(finding).cells.slice(0, 4), ["mutated saved", "—", "MulBackward0 #4", "—"]);
  });

  it("words a modified grad_output as given and then", () => {
    const finding = parseReport({
      findings: [{ kind: "mutated_grad_output", node: 2, node_name: "ScaleBackward", function: "Scale", worst: [{ index: [3], analytic: 1.5, numeric: 3 }] }],
    }).findings[0];
    assert.ok(finding !== undefined);
    assert.equal(worstText(finding), "[3]: given 1.5, then 3");
    assert.equal(findingRow(finding).cells[0], "mutated grad output");
  });
});

describe("marks on the graph", () => {
  it("marks each node named by a finding with its worst severity, only when a report is shown", () => {
    const warning = { ...REPORT.findings[0], severity: "warning", node: 2 };
    const both = { ...REPORT.findings[0], severity: "warning" };
    const marks = findingMarks(done({ ...REPORT, findings: [both, REPORT.findings[0], warning] }));
    assert.deepEqual([...marks.entries()].sort(), [[0, "error"], [2, "warning"]]);
    assert.equal(findingMarks(null).size, 0);
    assert.equal(findingMarks({ state: "checking", run: 1 }).size, 0);
    assert.equal(findingMarks(done(CLEAN)).size, 0);
  });
});

// As Python sends it for a model whose layer1 was cut off upstream (`layer2(layer1(x).detach())`),
// an unused layer, and a saved tensor overwritten in place (docs/doctor.md, the whole-model doctor).
const MODEL_REPORT = {
  ok: false,
  summary: "gradient doctor: no custom Function to check; 3 problems",
  findings: [
    {
      kind: "no_gradient", severity: "error", function: null, node: 7, node_name: "AddmmBackward0", input_index: null,
      message: "layer1.weight requires grad but the loss's graph does not reach it: layer1 (Linear) ran in this forward ...",
      hint: "a .detach() ...", max_abs_error: null, max_rel_error: null, worst: [],
      params: ["layer1.weight"], module: "layer1", summary: "layer1.weight requires grad but gets no gradient from the loss: its path was cut.",
      fix: "use layer1.weight itself in forward", related_nodes: [], param_nodes: [],
    },
    {
      kind: "unused_parameter", severity: "warning", function: null, node: null, node_name: "?", input_index: null,
      message: "extra.weight requires grad but the loss's graph does not reach it", hint: null, max_abs_error: null,
      max_rel_error: null, worst: [], params: ["extra.weight"], module: "extra", summary: "extra.weight is never reached by the loss.",
      fix: null, related_nodes: [], param_nodes: [],
    },
    {
      kind: "stale_grad", severity: "warning", function: null, node: null, node_name: "?", input_index: null,
      message: "fc.weight.grad holds a gradient", hint: null, max_abs_error: null, max_rel_error: null, worst: [],
      params: ["fc.weight"], module: "fc", summary: "fc.weight.grad already held a gradient.", fix: "call zero_grad",
      related_nodes: [], param_nodes: [9],
    },
    {
      kind: "inplace_overwrite", severity: "error", function: null, node: 3, node_name: "SigmoidBackward0", input_index: null,
      message: "SigmoidBackward0 saved result for backward, then MulBackward0, an in-place op, overwrote it", hint: null,
      max_abs_error: null, max_rel_error: null, worst: [], params: ["fc.weight"], module: "fc",
      summary: "a tensor SigmoidBackward0 saved for backward was overwritten in place by MulBackward0.", fix: "clone first",
      related_nodes: [1], param_nodes: [9],
    },
  ],
  checked: [],
  skipped: [],
  notes: [],
};

describe("model-level findings", () => {
  it("reads the parameters, module, summary, fix and the other nodes", () => {
    const report = parseReport(MODEL_REPORT);
    const [cut, , stale, overwrite] = report.findings;
    assert.deepEqual(cut?.params, ["layer1.weight"]);
    assert.equal(cut?.module, "layer1");
    assert.equal(cut?.summary, "layer1.weight requires grad but gets no gradient from the loss: its path was cut.");
    assert.equal(cut?.fix, "use layer1.weight itself in forward");
    assert.deepEqual(stale?.paramNodes, [9]);
    assert.deepEqual(overwrite?.relatedNodes, [1]);
    // a report of an older gradviz, without them
    assert.deepEqual(parseReport(REPORT).findings[0]?.params, []);
  });

  it("marks a finding's node and the op that overwrote; the parameters' leaves only without a node", () => {
    const marks = findingMarks(done(MODEL_REPORT));
    assert.deepEqual([...marks.entries()].sort((a, b) => a[0] - b[0]), [[1, "error"], [3, "error"], [7, "error"], [9, "warning"]]);
  });

  it("lists the parameters and the fix with the diagnosis; a click selects a node, or a parameter's leaf", () => {
    const rows = panelContent(done(MODEL_REPORT), null, false)?.rows ?? [];
    assert.equal(rows[0]?.params, "parameters: layer1.weight");
    assert.equal(rows[0]?.fix, "fix: use layer1.weight itself in forward");
    assert.equal(rows[0]?.node, 7);
    assert.deepEqual(rows[0]?.cells.slice(0, 3), ["no gradient", "—", "AddmmBackward0 #7"]);
    assert.equal(rows[1]?.node, null, "an unused parameter is in no graph: nothing to select");
    assert.equal(rows[1]?.fix, "");
    assert.equal(rows[2]?.node, 9, "no node of its own: its parameter's AccumulateGrad");
    assert.equal(rows[3]?.node, 3);
  });
});
