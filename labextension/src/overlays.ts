// Overlays (protocol 5): colour the graph's boxes by one value per node.
//
// The `overlays` trait lists every overlay (docs/widget_protocol.md): its kind (continuous,
// categorical, boolean), scale (linear or log) and values by node id; a built-in's values are
// null until this view asks for them (`overlay` message), because Python sends them only once
// some view shows them. Which overlay is shown is this view's own choice (the picker).
//
// Draw code colours a box through ONE function, `overlayStyle(memberIds, overlay, scale)`,
// called with the node ids the box stands for: one for a node box, all members for a folded
// module box (which then shows the min and max of its members), and `paintBox` applies it.
// Every piece of user text (overlay names, categories) is set with textContent.

import type * as protocol from "./generated/widget_protocol.js";
import { describe, ProtocolError, readShape } from "./payload.js";

export type OverlayKind = "continuous" | "categorical" | "boolean";
/** A continuous value: a number, or "nan" / "inf" / "-inf" (JSON has no NaN). */
export type OverlayValue = number | string | boolean;

export interface Overlay {
  readonly name: string;
  readonly kind: OverlayKind;
  readonly log: boolean;
  readonly builtin: boolean;
  readonly title: string;
  readonly description: string;
  /** null: not sent yet (a built-in no view asked for). */
  readonly values: ReadonlyMap<number, OverlayValue> | null;
  /** The gradient that flowed along each edge, by edgeKeys' key; null: no edge values. */
  readonly edges: ReadonlyMap<string, OverlayValue> | null;
}

/**
 * Each edge's key in an overlay's `edges`, in graph order: "source:target:input_nr:k", k
 * counting the edges that join the same three (x * x joins one pair twice).
 */
export function edgeKeys(edges: readonly { readonly source: number; readonly target: number; readonly input_nr: number }[]): string[] {
  const seen = new Map<string, number>();
  return edges.map((edge) => {
    const base = `${edge.source}:${edge.target}:${edge.input_nr}`;
    const k = seen.get(base) ?? 0;
    seen.set(base, k + 1);
    return `${base}:${k}`;
  });
}

/**
 * Check and convert the `overlays` trait (null or {}: none). Each entry must have the
 * generated `Overlay` shape, or a ProtocolError names its field; value keys that are not node
 * ids are left out (a value for no node paints nothing).
 */
export function parseOverlays(value: unknown): Overlay[] {
  if (value === null || value === undefined) return [];
  if (typeof value !== "object" || Array.isArray(value)) throw new ProtocolError(`overlays must be an object or null, got ${describe(value)}`);
  const found: Overlay[] = [];
  for (const [name, raw] of Object.entries(value as Record<string, unknown>)) {
    const entry = readShape<protocol.Overlay>("Overlay", raw, `overlays[${JSON.stringify(name)}]`);
    let values: Map<number, OverlayValue> | null = null;
    if (entry.values !== null) {
      values = new Map();
      for (const [key, item] of Object.entries(entry.values)) {
        const id = Number(key);
        if (Number.isSafeInteger(id) && id >= 0) values.set(id, item);
      }
    }
    found.push({
      name,
      edges: entry.edges === null ? null : new Map(Object.entries(entry.edges)),
      kind: entry.kind,
      log: entry.scale === "log",
      builtin: entry.builtin,
      title: entry.title !== "" ? entry.title : name,
      description: entry.description,
      values,
    });
  }
  return found;
}

// ---- colours ------------------------------------------------------------------------------

/** Sequential scale (viridis, dark purple = small, yellow = large): readable in colour-blindness. */
export const SEQUENTIAL: readonly string[] = ["#440154", "#3b528b", "#21918c", "#5ec962", "#fde725"];
/** NaN and infinities: a hue the sequential scale never reaches. */
export const NONFINITE_COLOUR = "#e7298a";
/** Categories (Tableau 10 without its pink, which is close to NONFINITE_COLOUR). */
export const CATEGORICAL: readonly string[] = ["#4e79a7", "#f28e2b", "#59a14f", "#e15759", "#76b7b2", "#edc948", "#b07aa1", "#9c755f", "#bab0ac"];
export const TRUE_COLOUR = "#d62728";
export const FALSE_COLOUR = "#c7e9c0";
/** Folded modules whose members fall in several categories. */
export const MIXED_COLOUR = "#9ca3af";

function hex(colour: string): [number, number, number] {
  return [1, 3, 5].map((index) => parseInt(colour.slice(index, index + 2), 16)) as [number, number, number];
}

function toHex(rgb: readonly number[]): string {
  return `#${rgb.map((part) => Math.round(part).toString(16).padStart(2, "0")).join("")}`;
}

/** The sequential scale's colour at t in [0, 1]. */
export function sequentialColour(t: number): string {
  const clamped = Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0));
  const position = clamped * (SEQUENTIAL.length - 1);
  const index = Math.min(SEQUENTIAL.length - 2, Math.floor(position));
  const [a, b] = [hex(SEQUENTIAL[index] ?? "#000000"), hex(SEQUENTIAL[index + 1] ?? "#000000")];
  const f = position - index;
  return toHex(a.map((part, k) => part + ((b[k] ?? 0) - part) * f));
}

/** Black or white, whichever reads better on `fill` (WCAG relative luminance). */
export function textColour(fill: string): string {
  const [r, g, b] = hex(fill).map((part) => {
    const c = part / 255;
    return c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4;
  }) as [number, number, number];
  const luminance = 0.2126 * r + 0.7152 * g + 0.0722 * b;
  // contrast with black (L + 0.05) / 0.05 against white 1.05 / (L + 0.05)
  return (luminance + 0.05) / 0.05 >= 1.05 / (luminance + 0.05) ? "#000000" : "#ffffff";
}

/** A number of a continuous overlay; null for NaN/Inf (and anything else). */
function finite(value: OverlayValue): number | null {
  return typeof value === "number" && Number.isFinite(value) ? value : null;
}

function isNonfinite(value: OverlayValue): boolean {
  return value === "nan" || value === "inf" || value === "-inf" || (typeof value === "number" && !Number.isFinite(value));
}

/**
 * A continuous value's position on the scale is rounded to one of LEVELS + 1 colours: when a
 * Step widens the domain a little, most boxes keep their colour and are not repainted.
 */
export const LEVELS = 32;

export interface ColourScale {
  readonly kind: OverlayKind;
  readonly log: boolean;
  /** Continuous: the smallest and largest finite value shown (log: the smallest positive). */
  readonly min: number | null;
  readonly max: number | null;
  /** Categorical: the categories, sorted, each with its colour. */
  readonly categories: readonly (readonly [string, string])[];
  /** How many values are NaN or infinite (continuous). */
  readonly nonfinite: number;
  colour(value: OverlayValue): string;
}

/** The colour scale of an overlay's values (its domain from the values themselves). */
export function buildScale(overlay: Overlay): ColourScale {
  const values = [...(overlay.values?.values() ?? [])];
  if (overlay.kind === "categorical") {
    const names = [...new Set(values.map(String))].sort();
    const categories = names.map((name, index): [string, string] => [name, CATEGORICAL[index % CATEGORICAL.length] ?? MIXED_COLOUR]);
    const byName = new Map(categories);
    return { kind: "categorical", log: false, min: null, max: null, categories, nonfinite: 0, colour: (value) => byName.get(String(value)) ?? MIXED_COLOUR };
  }
  if (overlay.kind === "boolean") {
    return { kind: "boolean", log: false, min: null, max: null, categories: [], nonfinite: 0, colour: (value) => (value === true ? TRUE_COLOUR : FALSE_COLOUR) };
  }
  const numbers = values.map(finite).filter((value): value is number => value !== null && (!overlay.log || value > 0));
  const nonfinite = values.filter(isNonfinite).length;
  const min = numbers.length === 0 ? null : Math.min(...numbers);
  const max = numbers.length === 0 ? null : Math.max(...numbers);
  const position = (value: number): number => {
    if (min === null || max === null || max === min) return 0.5;
    if (overlay.log) {
      if (value <= 0) return 0; // below the log scale's domain: its lowest colour
      return (Math.log10(value) - Math.log10(min)) / (Math.log10(max) - Math.log10(min));
    }
    return (value - min) / (max - min);
  };
  return {
    kind: "continuous",
    log: overlay.log,
    min,
    max,
    categories: [],
    nonfinite,
    colour: (value) => {
      if (isNonfinite(value)) return NONFINITE_COLOUR;
      const number = finite(value);
      return number === null ? MIXED_COLOUR : sequentialColour(Math.round(position(number) * LEVELS) / LEVELS);
    },
  };
}

/** Four significant digits (exponent notation for very large and small magnitudes). */
export function formatValue(value: OverlayValue): string {
  if (typeof value !== "number") return String(value);
  if (!Number.isFinite(value)) return Number.isNaN(value) ? "nan" : value > 0 ? "inf" : "-inf";
  if (Number.isInteger(value) && Math.abs(value) < 1e6) return String(value);
  const magnitude = Math.abs(value);
  if (magnitude >= 1e5 || (magnitude !== 0 && magnitude < 1e-3)) return value.toExponential(2);
  return String(Number(value.toPrecision(4)));
}

/** How one box is painted for the active overlay. */
export interface BoxPaint {
  readonly fill: string;
  readonly text: string;
  /** A folded module whose members span several colours: the colour of its smallest member. */
  readonly minFill: string | null;
  /** What the box's tooltip and `data-overlay` say: "0.25", or "min 0.1 · max 3 (12 nodes)". */
  readonly label: string;
}

/**
 * The paint of a box standing for `memberIds` (one node, or a folded module's members) under
 * `overlay`; null when no member has a value (the box keeps its state colours).
 */
export function overlayStyle(memberIds: readonly number[], overlay: Overlay | null, scale: ColourScale | null): BoxPaint | null {
  if (overlay === null || scale === null || overlay.values === null) return null;
  const values: OverlayValue[] = [];
  for (const id of memberIds) {
    const value = overlay.values.get(id);
    if (value !== undefined) values.push(value);
  }
  if (values.length === 0) return null;
  const paint = (fill: string, label: string, minFill: string | null = null): BoxPaint => ({ fill, text: textColour(fill), minFill, label });
  const first = values[0] as OverlayValue;
  if (values.length === 1) return paint(scale.colour(first), formatValue(first));
  const of = `(${values.length} of ${memberIds.length} nodes)`;
  if (overlay.kind === "boolean") {
    const count = values.filter((value) => value === true).length;
    return paint(scale.colour(count > 0), `${count} true ${of}`);
  }
  if (overlay.kind === "categorical") {
    const names = [...new Set(values.map(String))].sort();
    if (names.length === 1) return paint(scale.colour(first), `${names[0] ?? ""} ${of}`);
    const shown = names.slice(0, 3).join(", ") + (names.length > 3 ? `, +${names.length - 3} more` : "");
    return paint(MIXED_COLOUR, `${shown} ${of}`);
  }
  const bad = values.filter(isNonfinite).length;
  const numbers = values.map(finite).filter((value): value is number => value !== null);
  if (numbers.length === 0) return paint(NONFINITE_COLOUR, `${bad} NaN/Inf ${of}`);
  const low = Math.min(...numbers);
  const high = Math.max(...numbers);
  const range = `min ${formatValue(low)} · max ${formatValue(high)}${bad > 0 ? ` · ${bad} NaN/Inf` : ""} ${of}`;
  // NaN/Inf inside a module is the alarm: it takes the fill, the largest value the stripe.
  if (bad > 0) return paint(NONFINITE_COLOUR, range, scale.colour(high));
  return paint(scale.colour(high), range, scale.colour(low));
}

const SVG_NS = "http://www.w3.org/2000/svg";

/**
 * Apply a paint to a drawn box (`g.gv-node` or a folded module's box): the fill of its
 * `rect.gv-box`, its text colour, `data-overlay` (the label) and, for a module's range, a
 * stripe along its left side in the colour of its smallest member. null: back to the
 * state's colours. The state still shows in the box's border.
 */
export function paintBox(element: Element, paint: BoxPaint | null, active: boolean): void {
  const box = element.querySelector("rect.gv-box");
  element.querySelector("rect.gv-overlay-min")?.remove();
  element.classList.toggle("gv-overlay-missing", active && paint === null);
  element.classList.toggle("gv-overlay-painted", paint !== null);
  if (paint === null) {
    element.removeAttribute("data-overlay");
    if (box instanceof SVGElement) box.style.removeProperty("fill");
    for (const text of element.querySelectorAll("text")) if (text instanceof SVGElement && text.closest(".gv-badge") === null) text.style.removeProperty("fill");
    return;
  }
  element.setAttribute("data-overlay", paint.label);
  if (box instanceof SVGElement) {
    box.style.fill = paint.fill;
    if (paint.minFill !== null) {
      const stripe = document.createElementNS(SVG_NS, "rect");
      stripe.setAttribute("class", "gv-overlay-min");
      const x = Number(box.getAttribute("x") ?? 0);
      const y = Number(box.getAttribute("y") ?? 0);
      const height = Number(box.getAttribute("height") ?? 0);
      for (const [name, value] of [["x", x + 1.5], ["y", y + 1.5], ["width", 6], ["height", Math.max(0, height - 3)], ["rx", 2]] as const) stripe.setAttribute(name, String(value));
      stripe.style.fill = paint.minFill;
      box.after(stripe);
    }
  }
  for (const text of element.querySelectorAll("text")) if (text instanceof SVGElement && text.closest(".gv-badge") === null) text.style.fill = paint.text;
}

// ---- legend and picker --------------------------------------------------------------------

function span(className: string, text = ""): HTMLSpanElement {
  const element = document.createElement("span");
  element.className = className;
  if (text !== "") element.textContent = text;
  return element;
}

function swatch(colour: string, label: string): HTMLSpanElement {
  const item = span("gv-overlay-key");
  const mark = span("gv-overlay-swatch");
  mark.style.background = colour;
  item.append(mark, document.createTextNode(label));
  return item;
}

/** The CSS gradient of the sequential scale (the legend's bar). */
export function gradientCss(): string {
  return `linear-gradient(to right, ${SEQUENTIAL.join(", ")})`;
}

/** The legend of the active overlay: its title, then its scale; hidden while none is active. */
export class OverlayLegend {
  readonly element: HTMLDivElement;

  constructor() {
    this.element = document.createElement("div");
    this.element.className = "gv-overlay-legend";
    this.element.dataset["testid"] = "gv-overlay-legend";
    this.element.setAttribute("aria-label", "overlay colour scale");
    this.element.hidden = true;
  }

  update(overlay: Overlay | null, scale: ColourScale | null): void {
    this.element.replaceChildren();
    this.element.hidden = overlay === null;
    if (overlay === null) return;
    this.element.dataset["overlay"] = overlay.name;
    this.element.dataset["kind"] = overlay.kind;
    const title = span("gv-overlay-title", overlay.title);
    title.dataset["testid"] = "gv-overlay-title";
    if (overlay.description !== "") title.title = overlay.description;
    this.element.append(title);
    if (overlay.values === null || scale === null) {
      this.element.append(span("gv-overlay-note", "loading…"));
      return;
    }
    if (overlay.values.size === 0) {
      this.element.append(span("gv-overlay-note", "no values yet (they appear as the backward pass runs)"));
      return;
    }
    if (scale.kind === "continuous") {
      if (scale.min !== null && scale.max !== null) {
        const bar = span("gv-overlay-bar");
        bar.dataset["testid"] = "gv-overlay-bar";
        bar.style.background = gradientCss();
        const low = span("gv-overlay-min", formatValue(scale.min));
        low.dataset["testid"] = "gv-overlay-min";
        const high = span("gv-overlay-max", formatValue(scale.max));
        high.dataset["testid"] = "gv-overlay-max";
        this.element.append(low, bar, high);
        if (scale.log) this.element.append(span("gv-overlay-note", "log scale"));
      }
      if (scale.nonfinite > 0 || scale.min === null) this.element.append(swatch(NONFINITE_COLOUR, `NaN/Inf (${scale.nonfinite})`));
    } else if (scale.kind === "boolean") {
      this.element.append(swatch(TRUE_COLOUR, "true"), swatch(FALSE_COLOUR, "false"));
    } else {
      for (const [name, colour] of scale.categories.slice(0, 12)) this.element.append(swatch(colour, name));
      if (scale.categories.length > 12) this.element.append(span("gv-overlay-note", `+${scale.categories.length - 12} more`));
    }
    this.element.append(span("gv-overlay-note", "faded: no value"));
  }
}

/** The toolbar's overlay menu (view-local): "no overlay" and one option per overlay. */
export class OverlayPicker {
  readonly element: HTMLLabelElement;
  private readonly select: HTMLSelectElement;
  private names: string[] = [];

  constructor(onChange: (name: string | null) => void) {
    this.element = document.createElement("label");
    this.element.className = "gv-overlay-picker";
    this.element.append(document.createTextNode("Colour by "));
    this.select = document.createElement("select");
    this.select.dataset["testid"] = "gv-overlay-picker";
    this.select.title = "Colour the nodes by a value per node (a folded module shows the range of its nodes)";
    this.select.addEventListener("change", () => onChange(this.select.value === "" ? null : this.select.value));
    this.element.append(this.select);
    this.element.hidden = true;
  }

  /** The chosen overlay's name (null: none). */
  get value(): string | null {
    return this.select.value === "" ? null : this.select.value;
  }

  update(overlays: readonly Overlay[], active: string | null): void {
    this.element.hidden = overlays.length === 0;
    const names = overlays.map((overlay) => `${overlay.name}\u0000${overlay.title}`);
    if (names.join("\u0001") !== this.names.join("\u0001")) {
      this.names = names;
      const none = document.createElement("option");
      none.value = "";
      none.textContent = "nothing (node states)";
      const options = overlays.map((overlay) => {
        const option = document.createElement("option");
        option.value = overlay.name;
        option.textContent = overlay.builtin ? overlay.title : `${overlay.title} (yours)`;
        if (overlay.description !== "") option.title = overlay.description;
        return option;
      });
      this.select.replaceChildren(none, ...options);
    }
    this.select.value = active ?? "";
  }
}

export const OVERLAY_STYLES = `
.gv-root .gv-overlay-picker { display: inline-flex; align-items: center; gap: 4px; font-size: 12px; color: var(--gv-fg-muted); }
.gv-root .gv-overlay-picker select { font: inherit; max-width: 14em; color: var(--gv-fg); background: var(--jp-layout-color1, #f6f8fa); border: 1px solid var(--gv-border); border-radius: 4px; }
.gv-root .gv-overlay-legend { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 10px; padding: 4px 8px; font-size: 12px; border-top: 1px solid var(--gv-border); }
.gv-root .gv-overlay-title { font-weight: 600; }
.gv-root .gv-overlay-bar { display: inline-block; width: 120px; height: 10px; border-radius: 2px; }
.gv-root .gv-overlay-key { display: inline-flex; align-items: center; gap: 4px; white-space: nowrap; }
.gv-root .gv-overlay-swatch { display: inline-block; width: 12px; height: 12px; border-radius: 2px; border: 1px solid var(--gv-border); }
.gv-root .gv-overlay-note { color: var(--gv-fg-muted); }
.gv-root .gv-overlay-picker[hidden], .gv-root .gv-overlay-legend[hidden] { display: none; }
.gv-root path.gv-edge.gv-overlay-painted { stroke-width: 2.2; }
.gv-root .gv-node.gv-overlay-missing, .gv-root .gv-module.gv-overlay-missing { opacity: 0.45; }
`;
