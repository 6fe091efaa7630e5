import assert from "node:assert/strict";
import { describe, it } from "node:test";

import {
  buildScale,
  edgeKeys,
  CATEGORICAL,
  FALSE_COLOUR,
  formatValue,
  MIXED_COLOUR,
  NONFINITE_COLOUR,
  overlayStyle,
  parseOverlays,
  SEQUENTIAL,
  sequentialColour,
  textColour,
  TRUE_COLOUR,
  type Overlay,
} from "../src/overlays.js";
import { parseDiff } from "../src/diff_panel.js";
import { contrast } from "./styles.test.js";

const HOSTILE = '<img src=x onerror="alert(1)">';

function overlay(kind: Overlay["kind"], values: Record<string, unknown> | null, scale = "linear"): Overlay {
  const [parsed] = parseOverlays({ [HOSTILE]: { kind, scale, builtin: false, title: HOSTILE, description: "", values, edges: null } });
  assert.ok(parsed);
  return parsed;
}

describe("parseOverlays", () => {
  it("keeps names, kinds, log scales and values by node id; null values mean not sent", () => {
    const parsed = parseOverlays({
      grad_norm: { kind: "continuous", scale: "log", builtin: true, title: "gradient norm", description: "d", values: null, edges: null },
      [HOSTILE]: { kind: "categorical", scale: "linear", builtin: false, title: HOSTILE, description: "", values: { "3": "float32", x: "bad", "-1": "bad" }, edges: null },
      untitled: { kind: "boolean", scale: "linear", builtin: false, title: "", description: "", values: { "2": true }, edges: null },
    });
    assert.deepEqual(parsed.map((item) => item.name), ["grad_norm", HOSTILE, "untitled"]);
    assert.equal(parsed[0]?.log, true);
    assert.equal(parsed[0]?.values, null);
    assert.deepEqual([...(parsed[1]?.values ?? [])], [[3, "float32"]]);
    assert.equal(parsed[2]?.title, "untitled");
    assert.deepEqual(parseOverlays(null), []);
    assert.deepEqual(parseOverlays({}), []);
  });

  it("names the field of a malformed overlay", () => {
    const good = { kind: "continuous", scale: "linear", builtin: false, title: "t", description: "", values: null, edges: null };
    assert.throws(() => parseOverlays([]), /^ProtocolError: overlays must be an object or null, got an array$/);
    assert.throws(() => parseOverlays({ a: 3 }), /^ProtocolError: overlays\["a"\] must be an object, got number$/);
    assert.throws(() => parseOverlays({ a: { ...good, kind: "colourful" } }), /overlays\["a"\]\.kind must be one of continuous, categorical, boolean, got the string "colourful"/);
    assert.throws(() => parseOverlays({ a: { ...good, values: { "1": [1] } } }), /overlays\["a"\]\.values\["1"\] must be a number or a string or a boolean, got an array/);
    assert.throws(() => parseOverlays({ a: { ...good, edges: undefined } }), /overlays\["a"\]\.edges/);
  });
});

describe("colour scales", () => {
  it("runs the sequential scale from its first to its last stop", () => {
    assert.equal(sequentialColour(0), SEQUENTIAL[0]);
    assert.equal(sequentialColour(1), SEQUENTIAL[SEQUENTIAL.length - 1]);
    assert.equal(sequentialColour(-5), SEQUENTIAL[0]);
    assert.equal(sequentialColour(0.5), SEQUENTIAL[2]);
  });

  it("maps a linear domain onto the scale, and NaN/Inf to their own colour", () => {
    const scale = buildScale(overlay("continuous", { "1": 0, "2": 5, "3": 10, "4": "nan", "5": "inf" }));
    assert.deepEqual([scale.min, scale.max, scale.nonfinite], [0, 10, 2]);
    assert.equal(scale.colour(0), SEQUENTIAL[0]);
    assert.equal(scale.colour(10), SEQUENTIAL[4]);
    assert.equal(scale.colour(5), SEQUENTIAL[2]);
    assert.equal(scale.colour("nan"), NONFINITE_COLOUR);
    assert.equal(scale.colour("-inf"), NONFINITE_COLOUR);
    assert.ok(!SEQUENTIAL.includes(NONFINITE_COLOUR));
  });

  it("spaces decades evenly on a log scale and gives zero its lowest colour", () => {
    const scale = buildScale(overlay("continuous", { "1": 1e-6, "2": 1e-3, "3": 1, "4": 0 }, "log"));
    assert.deepEqual([scale.min, scale.max], [1e-6, 1]);
    assert.equal(scale.colour(1e-3), SEQUENTIAL[2]);
    assert.equal(scale.colour(0), SEQUENTIAL[0]);
  });

  it("gives each category its colour in sorted order, and booleans two colours", () => {
    const scale = buildScale(overlay("categorical", { "1": "float64", "2": "float32", "3": "float32" }));
    assert.deepEqual(scale.categories, [["float32", CATEGORICAL[0]], ["float64", CATEGORICAL[1]]]);
    const flags = buildScale(overlay("boolean", { "1": true, "2": false }));
    assert.equal(flags.colour(true), TRUE_COLOUR);
    assert.equal(flags.colour(false), FALSE_COLOUR);
  });

  it("picks node text that meets WCAG AA on every colour it can paint", () => {
    const fills = [...SEQUENTIAL, sequentialColour(0.3), sequentialColour(0.7), NONFINITE_COLOUR, TRUE_COLOUR, FALSE_COLOUR, MIXED_COLOUR, ...CATEGORICAL];
    for (const fill of fills) assert.ok(contrast(textColour(fill), fill) >= 4.5, `${textColour(fill)} on ${fill}`);
  });
});

describe("overlayStyle", () => {
  const values = overlay("continuous", { "1": 1, "2": 3, "3": "nan", "4": 2 });
  const scale = buildScale(values);

  it("paints a node box with its value's colour and no box without a value", () => {
    const paint = overlayStyle([2], values, scale);
    assert.equal(paint?.fill, scale.colour(3));
    assert.equal(paint?.label, "3");
    assert.equal(paint?.minFill, null);
    assert.equal(overlayStyle([9], values, scale), null);
    assert.equal(overlayStyle([2], null, null), null);
  });

  it("paints a folded module with the max of its members and a stripe for the min", () => {
    const paint = overlayStyle([1, 2, 4, 9], values, scale);
    assert.equal(paint?.fill, scale.colour(3));
    assert.equal(paint?.minFill, scale.colour(1));
    assert.equal(paint?.label, "min 1 · max 3 (3 of 4 nodes)");
  });

  it("lets a NaN member take a module's fill", () => {
    const paint = overlayStyle([1, 3], values, scale);
    assert.equal(paint?.fill, NONFINITE_COLOUR);
    assert.match(paint?.label ?? "", /1 NaN\/Inf/);
  });

  it("names a module's categories and counts its true members", () => {
    const dtypes = overlay("categorical", { "1": "float32", "2": "float64" });
    assert.equal(overlayStyle([1, 2], dtypes, buildScale(dtypes))?.fill, MIXED_COLOUR);
    assert.equal(overlayStyle([1, 2], dtypes, buildScale(dtypes))?.label, "float32, float64 (2 of 2 nodes)");
    const flags = overlay("boolean", { "1": false, "2": true });
    assert.equal(overlayStyle([1, 2], flags, buildScale(flags))?.fill, TRUE_COLOUR);
  });
});

describe("formatValue", () => {
  it("keeps four significant digits", () => {
    assert.equal(formatValue(1234.5678), "1235");
    assert.equal(formatValue(0.000012345), "1.23e-5");
    assert.equal(formatValue(42), "42");
    assert.equal(formatValue("inf"), "inf");
    assert.equal(formatValue(Number.NaN), "nan");
  });
});

describe("parseDiff", () => {
  it("reads the diff trait's lists and counts", () => {
    const diff = parseDiff({
      a: "before", b: HOSTILE, overlay: "difference", summary: "3 matched nodes, 1 differ",
      counts: { pairs: 3, differ: 1, only_a: 0, only_b: 1 },
      differences: [{ node: 2, key: "MulBackward0", max_relative: "inf", reasons: ["ran only in a"] }],
      only_a: [], only_b: [{ node: 7, key: HOSTILE }],
    });
    assert.equal(diff?.b, HOSTILE);
    assert.deepEqual(diff?.counts, { pairs: 3, differ: 1, onlyA: 0, onlyB: 1 });
    assert.deepEqual(diff?.differences, [{ node: 2, key: "MulBackward0", detail: "relative gap inf; ran only in a" }]);
    assert.deepEqual(diff?.onlyB, [{ node: 7, key: HOSTILE, detail: "" }]);
    assert.equal(parseDiff(null), null);
  });

  it("names the field of a malformed diff", () => {
    const diff = {
      a: "a", b: "b", overlay: null, summary: "", counts: { pairs: 0, differ: 0, only_a: 0, only_b: 1 },
      differences: [], only_a: [], only_b: [{ node: 7, key: "x" }],
    };
    assert.ok(parseDiff(diff) !== null);
    const cases: [unknown, RegExp][] = [
      [[], /^ProtocolError: diff must be an object, got an array$/],
      [{ ...diff, only_b: [{ node: 7, key: "x" }, "junk"] }, /^ProtocolError: diff\.only_b\[1\] must be an object, got the string "junk"$/],
      [{ ...diff, counts: { pairs: 0, differ: 0, only_a: 0 } }, /^ProtocolError: diff\.counts\.only_b is missing$/],
      [{ ...diff, differences: [{ node: 2, key: "k", max_relative: [1], reasons: [] }] }, /^ProtocolError: diff\.differences\[0\]\.max_relative must be a number or one of nan, inf, -inf, got an array$/],
    ];
    for (const [value, message] of cases) assert.throws(() => parseDiff(value), message);
  });
});

describe("edge values", () => {
  it("keys the graph's edges as the kernel does, counting repeated joins", () => {
    const keys = edgeKeys([
      { source: 4, target: 2, input_nr: 0 },
      { source: 2, target: 1, input_nr: 0 },
      { source: 2, target: 1, input_nr: 0 },
    ]);
    assert.deepEqual(keys, ["4:2:0:0", "2:1:0:0", "2:1:0:1"]);
    const [parsed] = parseOverlays({ grad_norm: { kind: "continuous", scale: "log", builtin: true, title: "", description: "", values: {}, edges: { "2:1:0:1": 0.5 } } });
    assert.deepEqual([...(parsed?.edges ?? [])], [["2:1:0:1", 0.5]]);
  });
});
