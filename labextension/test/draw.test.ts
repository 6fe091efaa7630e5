import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { canvasHeight, fitTransform, initialTransform, MAX_HEIGHT, MIN_HEIGHT, READABLE_SCALE } from "../src/draw.js";

describe("fitTransform", () => {
  it("never enlarges a small drawing and centres it", () => {
    const { k, x, y } = fitTransform(100, 50, 800, 400);
    assert.equal(k, 1);
    // 16 px margin on each side: the drawing's left edge sits at (800 - 132) / 2 + 16.
    assert.equal(x, 350);
    assert.equal(y, (400 - 82) / 2 + 16);
  });

  it("shrinks a large drawing to fit the narrower dimension", () => {
    const { k } = fitTransform(2000 - 32, 500 - 32, 1000, 1000);
    assert.equal(k, 0.5);
  });

  it("keeps a minimum scale for huge drawings", () => {
    assert.equal(fitTransform(1e7, 1e7, 100, 100).k, 0.05);
  });
});

describe("canvasHeight", () => {
  const layout = (height: number) => ({ width: 10, height, boxes: [], edges: [] });
  it("follows the drawing within limits", () => {
    assert.equal(canvasHeight(layout(10)), MIN_HEIGHT);
    assert.equal(canvasHeight(layout(300)), 332);
    assert.equal(canvasHeight(layout(5000)), MAX_HEIGHT);
  });
});

describe("initialTransform", () => {
  it("shows all of a drawing that fits readably", () => {
    assert.deepEqual(initialTransform(100, 50, 800, 400, { x: 10, y: 10 }), fitTransform(100, 50, 800, 400));
  });

  it("zooms in on the focus of a big drawing", () => {
    const { k, x, y } = initialTransform(5000, 20000, 800, 400, { x: 2500, y: 8000 });
    assert.equal(k, READABLE_SCALE);
    assert.equal(x + 2500 * k, 400);
    assert.ok(Math.abs(y + 8000 * k - 400 / 3) < 1e-9);
  });

  it("leaves no empty band above a focus near the top of the drawing", () => {
    // The first node of a backward pass sits at the top: a third of the view above it was blank.
    const { k, y } = initialTransform(5000, 20000, 800, 400, { x: 2500, y: 20 });
    assert.equal(y, 16 * k); // the drawing's top edge at the margin
    assert.ok(y + 20 * k < 400 / 3);
  });

  it("starts at the top centre without a focus", () => {
    const { k, x } = initialTransform(5000, 20000, 800, 400, null);
    assert.equal(x + 2500 * k, 400);
  });
});
