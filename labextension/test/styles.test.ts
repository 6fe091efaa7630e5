import assert from "node:assert/strict";
import { describe, it } from "node:test";

import { NODE_STATES } from "../src/model.js";
import { DARK, LIGHT, STYLES, type Palette } from "../src/styles.js";

// WCAG 2.x relative luminance and contrast ratio (https://www.w3.org/TR/WCAG21/#dfn-contrast-ratio).
function luminance(hex: string): number {
  const match = /^#([0-9a-f]{2})([0-9a-f]{2})([0-9a-f]{2})$/i.exec(hex);
  assert.ok(match, `not a #rrggbb colour: ${hex}`);
  const [r, g, b] = match.slice(1).map((part) => {
    const c = parseInt(part, 16) / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

export function contrast(a: string, b: string): number {
  const [light, dark] = [luminance(a), luminance(b)].sort((x, y) => y - x) as [number, number];
  return (light + 0.05) / (dark + 0.05);
}

const THEMES: [string, Palette][] = [["light", LIGHT], ["dark", DARK]];

describe("contrast (the WCAG formula itself)", () => {
  it("gives the published extremes and a known pair", () => {
    assert.equal(contrast("#000000", "#ffffff"), 21);
    assert.equal(contrast("#777777", "#777777"), 1);
    assert.ok(Math.abs(contrast("#767676", "#ffffff") - 4.54) < 0.01); // the usual "lightest AA grey"
  });
});

describe("the graph's palettes", () => {
  for (const [theme, palette] of THEMES) {
    it(`${theme}: node text meets WCAG AA (4.5:1) on every state's fill`, () => {
      for (const state of NODE_STATES) {
        const text = palette[`${state}-text`];
        const fill = palette[`${state}-fill`];
        assert.ok(text !== undefined && fill !== undefined, `${theme} palette lacks ${state}`);
        const ratio = contrast(text, fill);
        assert.ok(ratio >= 4.5, `${theme} ${state}: ${text} on ${fill} is ${ratio.toFixed(2)}:1`);
      }
    });

    it(`${theme}: the doctor's badge text meets WCAG AA (4.5:1) on the error and the warning badge`, () => {
      for (const severity of ["error", "warning"]) {
        const fill = palette[`badge-${severity}-fill`];
        assert.ok(fill !== undefined, `${theme} palette lacks badge-${severity}-fill`);
        const ratio = contrast(palette["badge-text"]!, fill);
        assert.ok(ratio >= 4.5, `${theme} ${severity} badge: ${palette["badge-text"]} on ${fill} is ${ratio.toFixed(2)}:1`);
      }
      // and the style sheet paints the badges with exactly these fills
      assert.match(STYLES, /\.gv-node \.gv-badge circle \{ fill: var\(--gv-badge-error-fill\);/);
      assert.match(STYLES, /\.gv-node\.gv-finding-warning \.gv-badge circle \{ fill: var\(--gv-badge-warning-fill\); \}/);
      assert.match(STYLES, /\.gv-badge text \{ fill: var\(--gv-badge-text\);/);
    });

    it(`${theme}: a doctor's finding has its own colour, not the error state's, readable as text`, () => {
      const finding = palette["finding"]!;
      for (const name of ["error-fill", "error-stroke", "error-text", "alert"]) {
        assert.notEqual(finding, palette[name], `finding and ${name} share a colour`);
      }
      assert.notEqual(palette["badge-error-fill"], palette["error-stroke"]);
      const background = theme === "dark" ? "#111111" : "#ffffff";
      assert.ok(contrast(finding, background) >= 4.5, `${finding} on ${background} is ${contrast(finding, background).toFixed(2)}:1`);
      assert.match(STYLES, /\.gv-node\.gv-finding-error rect\.gv-box \{ stroke: var\(--gv-finding\);/);
      assert.match(STYLES, /\.gv-finding-row\.gv-finding-error td:first-child \{ color: var\(--gv-finding\);/);
    });

    it(`${theme}: a released node is set apart from a done one by its own colours, not by opacity`, () => {
      assert.notEqual(palette["released-fill"], palette["done-fill"]);
      assert.ok(contrast(palette["released-text"]!, palette["released-fill"]!) < contrast(palette["done-text"]!, palette["done-fill"]!));
    });
  }

  it("dark: fills are dark and coloured text is light, on a dark theme's background", () => {
    for (const state of NODE_STATES) {
      if (state === "running") continue; // a saturated blue in both themes, with white text
      assert.ok(luminance(DARK[`${state}-fill`]!) < 0.05, `${state} fill is not dark`);
      assert.ok(luminance(DARK[`${state}-fill`]!) < luminance(LIGHT[`${state}-fill`]!));
    }
    const background = "#111111"; // JupyterLab Dark's --jp-layout-color0
    for (const name of ["alert", "ok", "warn", "selected", "current"]) {
      assert.ok(contrast(DARK[name]!, background) >= 4.5, `${name} is unreadable on the dark background`);
    }
  });

  it("has the same names in both themes, and the style sheet switches to the dark one under JupyterLab's dark theme", () => {
    assert.deepEqual(Object.keys(DARK).sort(), Object.keys(LIGHT).sort());
    const dark = STYLES.indexOf('body[data-jp-theme-light="false"] .gv-root {');
    assert.ok(dark > 0, "no dark-theme rule");
    for (const [name, value] of Object.entries(DARK)) {
      assert.ok(STYLES.indexOf(`--gv-${name}: ${value};`, dark) > dark, `dark rule lacks --gv-${name}`);
      assert.ok(STYLES.includes(`--gv-${name}: ${LIGHT[name]};`), `light rule lacks --gv-${name}`);
    }
    assert.doesNotMatch(STYLES, /gv-state-released \{ opacity/);
    assert.doesNotMatch(STYLES, /\.gv-node[^{]* text \{ fill: #/, "a node text colour that ignores the theme");
  });
});
