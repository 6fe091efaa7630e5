import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { NODE_STATES } from "../src/model.js";
import { STYLES } from "../src/styles.js";
import { LEGEND, NEXT_TITLE } from "../src/toolbar.js";

describe("the colour key under the graph", () => {
  it("explains every node state, in the order a node goes through them", () => {
    assert.deepEqual(
      LEGEND.map((entry) => entry.state),
      [...NODE_STATES],
    );
  });

  it("has a swatch style and a tooltip for each entry", () => {
    for (const { state, title } of LEGEND) {
      if (state !== "pending") assert.ok(STYLES.includes(`.gv-swatch-${state} `), `no style for the ${state} swatch`);
      assert.ok(title.length > 10, `no tooltip for ${state}`);
    }
  });

  it("explains the blue halo apart from the blue running state", () => {
    assert.ok(STYLES.includes(".gv-swatch-next "), "no style for the runs-next swatch");
    assert.match(NEXT_TITLE, /next Step/);
    assert.doesNotMatch(LEGEND.find((entry) => entry.state === "running")?.title ?? "", /halo/);
  });
});
