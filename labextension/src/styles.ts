// The widget's style sheet. Every selector starts with .gv-root, so nothing leaks into the
// notebook; colours fall back to fixed values outside JupyterLab (Notebook 7, VS Code).

/** The colours of the graph in one theme (CSS custom properties `--gv-<name>`). */
export interface Palette {
  readonly [name: string]: string;
}

/**
 * Light themes (and hosts without JupyterLab's theme). Every `<state>-text` is drawn on its
 * `<state>-fill` at 12px: WCAG AA asks a contrast of at least 4.5:1 (test/styles.test.ts).
 */
export const LIGHT: Palette = {
  edge: "#8c959f",
  "pending-fill": "#f3f4f6", "pending-stroke": "#9ca3af", "pending-text": "#4b5563",
  "ready-fill": "#fffbeb", "ready-stroke": "#d97706", "ready-text": "#1f2328",
  "running-fill": "#2563eb", "running-stroke": "#1e40af", "running-text": "#ffffff",
  "done-fill": "#dcfce7", "done-stroke": "#16a34a", "done-text": "#14532d",
  "released-fill": "#f3faf5", "released-stroke": "#4ade80", "released-text": "#3f6b50",
  "error-fill": "#fee2e2", "error-stroke": "#dc2626", "error-text": "#991b1b",
  // The doctor's "!" badge: badge-text on each badge fill is 12px bold text, so AA's 4.5:1 holds
  // there too (the ready stroke, #d97706, gave the warning badge only 3.2:1). A finding is not
  // the error state (a backward that raised): its own hue, fuchsia, so the two never read alike.
  "badge-text": "#ffffff", "badge-error-fill": "#a21caf", "badge-warning-fill": "#b45309",
  finding: "#a21caf",
  current: "#2563eb",
  selected: "#7c3aed",
  // Coloured text on the theme's own background (not on a node's fill).
  alert: "#b91c1c", ok: "#15803d", warn: "#b45309",
};

/** JupyterLab's dark themes (body[data-jp-theme-light="false"]). */
export const DARK: Palette = {
  edge: "#8b949e",
  "pending-fill": "#2d333b", "pending-stroke": "#768390", "pending-text": "#cdd9e5",
  "ready-fill": "#3a2a05", "ready-stroke": "#f59e0b", "ready-text": "#fde68a",
  "running-fill": "#1d4ed8", "running-stroke": "#93c5fd", "running-text": "#ffffff",
  "done-fill": "#0f3320", "done-stroke": "#22c55e", "done-text": "#bbf7d0",
  "released-fill": "#18231c", "released-stroke": "#15803d", "released-text": "#9cc3aa",
  "error-fill": "#450a0a", "error-stroke": "#f87171", "error-text": "#fecaca",
  "badge-text": "#111111", "badge-error-fill": "#e879f9", "badge-warning-fill": "#f59e0b",
  finding: "#e879f9",
  current: "#60a5fa",
  selected: "#a78bfa",
  alert: "#f87171", ok: "#4ade80", warn: "#fbbf24",
};

function paletteVariables(palette: Palette): string {
  return Object.entries(palette).map(([name, value]) => `  --gv-${name}: ${value};`).join("\n");
}

export const STYLES = `
.gv-root {
  --gv-fg: var(--jp-ui-font-color1, #1f2328);
  --gv-fg-muted: var(--jp-ui-font-color2, #59636e);
  --gv-bg: var(--jp-layout-color0, #ffffff);
  --gv-border: var(--jp-border-color1, #d0d7de);
${paletteVariables(LIGHT)}
  font-family: var(--jp-ui-font-family, system-ui, sans-serif);
  font-size: 13px;
  color: var(--gv-fg);
  border: 1px solid var(--gv-border);
  border-radius: 4px;
  background: var(--gv-bg);
  overflow: hidden;
}
/* JupyterLab's dark themes: dark node fills with light text, and coloured text that stays
   readable on a dark background (DARK, checked for WCAG AA contrast by the tests). */
body[data-jp-theme-light="false"] .gv-root {
${paletteVariables(DARK)}
}
.gv-toolbar {
  display: flex; align-items: center; gap: 6px; flex-wrap: wrap;
  padding: 6px 8px; border-bottom: 1px solid var(--gv-border);
}
.gv-toolbar button {
  font: inherit; padding: 2px 10px; min-height: 26px; cursor: pointer;
  color: var(--gv-fg); background: var(--jp-layout-color1, #f6f8fa);
  border: 1px solid var(--gv-border); border-radius: 4px;
}
.gv-toolbar button:hover:enabled { background: var(--jp-layout-color2, #eaeef2); }
.gv-toolbar button:disabled { opacity: 0.45; cursor: default; }
.gv-toolbar button.gv-primary { border-color: var(--gv-current); }
.gv-toolbar button.gv-danger:enabled { color: var(--gv-alert); }
.gv-toolbar button[hidden] { display: none; }
/* The command buttons keep one line while they fit. The status (what runs next, how far the pass
   is) and the zoom group end the toolbar together (.gv-toolbar-end): on the buttons' line when
   at least 22em are free there, else on a line of their own under them. The status is one line:
   cut with an ellipsis when longer than its room (its tooltip holds it whole); the zoom buttons
   stay one group at the right. */
.gv-toolbar-end { display: flex; align-items: center; gap: 6px; flex: 1 1 22em; min-width: min(22em, 100%); }
.gv-status {
  flex: 1 1 0; min-width: 0; color: var(--gv-fg-muted); line-height: 1.3;
  white-space: nowrap; overflow: hidden; text-overflow: ellipsis;
}
.gv-zoom { display: inline-flex; gap: 6px; flex: none; margin-left: auto; }
.gv-root.gv-busy .gv-status::after { content: " …"; }
/* The kernel is gone: the last state stays readable, but clearly not live. */
.gv-root.gv-disconnected .gv-status { color: var(--gv-alert); }
.gv-root.gv-disconnected .gv-canvas svg, .gv-root.gv-disconnected .gv-legend { filter: grayscale(1); opacity: 0.6; }
.gv-timeline {
  display: flex; align-items: center; gap: 8px; padding: 4px 8px; border-bottom: 1px solid var(--gv-border);
}
.gv-timeline input[type=range] { flex: 1 1 auto; margin: 0; accent-color: var(--gv-current); }
.gv-timeline-label { color: var(--gv-fg-muted); white-space: nowrap; font-variant-numeric: tabular-nums; }
.gv-narration {
  padding: 4px 8px; border-bottom: 1px solid var(--gv-border); color: var(--gv-fg);
  background: var(--jp-layout-color1, #f6f8fa); overflow-wrap: anywhere;
}
.gv-narration { display: flex; align-items: baseline; gap: 4px; }
.gv-narration-toggle { font: inherit; border: none; background: none; cursor: pointer; color: var(--gv-fg-muted); padding: 0 2px; }
.gv-narration-toggle[hidden] { display: none; }
.gv-narration-text { min-width: 0; overflow-wrap: anywhere; }
.gv-history { border-bottom: 1px solid var(--gv-border); padding: 4px 8px; }
.gv-history[hidden] { display: none; }
.gv-history-title { font-size: 12px; color: var(--gv-fg-muted); margin-bottom: 2px; }
.gv-history-list { position: relative; margin: 0; padding-left: 3.5em; max-height: 12em; overflow: auto; font-size: 12px; }
.gv-history-item { padding: 1px 4px; overflow-wrap: anywhere; }
.gv-history-link { cursor: pointer; }
.gv-history-link:hover { background: var(--jp-layout-color2, #eaeef2); }
.gv-history-link:focus-visible { outline: 2px solid var(--gv-selected); outline-offset: -2px; }
.gv-history-current { background: var(--gv-ready-fill); outline: 1px solid var(--gv-ready-stroke); font-weight: 600; }
.gv-history-later { color: var(--gv-fg-muted); }
.gv-output { border-bottom: 1px solid var(--gv-border); padding: 4px 8px; font-size: 12px; }
.gv-output[hidden] { display: none; }
.gv-output summary { cursor: pointer; color: var(--gv-fg-muted); }
.gv-root .gv-output-text { margin: 4px 0 0; padding: 4px 6px; white-space: pre-wrap; overflow-wrap: anywhere; max-height: 12em; overflow: auto; font-family: var(--jp-code-font-family, monospace); background: var(--jp-layout-color1, #f6f8fa); }
.gv-narration[hidden] { display: none; }
/* .gv-root first: JupyterLab's ".jp-OutputArea-output pre" (padding 0, no border) outranks a single class. */
.gv-root .gv-error {
  margin: 0; padding: 6px 8px; white-space: pre-wrap; font-family: var(--jp-code-font-family, monospace);
  font-size: 12px; color: var(--gv-error-text); background: var(--gv-error-fill);
  border-bottom: 1px solid var(--gv-error-stroke); max-height: 12em; overflow: auto;
}
.gv-root .gv-error[hidden] { display: none; }
.gv-canvas { position: relative; width: 100%; touch-action: none; cursor: grab; user-select: none; }
.gv-canvas.gv-dragging { cursor: grabbing; }
.gv-canvas svg { display: block; width: 100%; height: 100%; }
.gv-message { position: absolute; inset: 0; display: flex; align-items: center; justify-content: center; color: var(--gv-fg-muted); }
.gv-message[hidden] { display: none; }

.gv-edge { fill: none; stroke: var(--gv-edge); stroke-width: 1.2; }
.gv-edge.gv-edge-delivered { stroke: var(--gv-done-stroke); stroke-width: 1.6; }
.gv-arrow { fill: var(--gv-edge); }
.gv-arrow-delivered { fill: var(--gv-done-stroke); }

.gv-node rect.gv-box { stroke-width: 1.2; fill: var(--gv-pending-fill); stroke: var(--gv-pending-stroke); }
.gv-node text { font-size: 12px; fill: var(--gv-pending-text); dominant-baseline: central; text-anchor: middle; }
.gv-node text.gv-name { font-weight: 600; }
.gv-node.gv-kind-custom rect.gv-box { stroke-width: 2.2; }
.gv-node.gv-copy rect.gv-box { stroke-dasharray: 2 2; }
.gv-node rect.gv-ring { fill: none; stroke: var(--gv-selected); stroke-width: 2; stroke-dasharray: 4 2; visibility: hidden; }
.gv-node.gv-selected rect.gv-ring { visibility: visible; }
.gv-canvas:focus { outline: none; }
.gv-canvas:focus-visible { outline: 2px solid var(--gv-selected); outline-offset: -2px; }
.gv-canvas:focus-visible .gv-node.gv-focused rect.gv-ring { visibility: visible; stroke-width: 3; stroke-dasharray: none; }
.gv-node { cursor: pointer; }
.gv-node rect.gv-halo { fill: none; stroke: var(--gv-current); stroke-width: 3; visibility: hidden; }
.gv-node.gv-current rect.gv-halo { visibility: visible; }
/* Runs next, but its gradient is still on the way (model.awaitingDelivery): a dashed halo. */
.gv-node.gv-current.gv-waiting rect.gv-halo { stroke-dasharray: 5 3; }

.gv-node.gv-state-ready rect.gv-box { fill: var(--gv-ready-fill); stroke: var(--gv-ready-stroke); stroke-width: 2.5; }
.gv-node.gv-state-ready text { fill: var(--gv-ready-text); }
.gv-node.gv-state-running rect.gv-box { fill: var(--gv-running-fill); stroke: var(--gv-running-stroke); }
.gv-node.gv-state-running text { fill: var(--gv-running-text); }
.gv-node.gv-state-done rect.gv-box { fill: var(--gv-done-fill); stroke: var(--gv-done-stroke); }
.gv-node.gv-state-done text { fill: var(--gv-done-text); }
/* Its own muted colours, not opacity: a translucent box mixes with the edges and the theme's
   background (muddy on a dark one) and its text loses contrast. */
.gv-node.gv-state-released rect.gv-box { fill: var(--gv-released-fill); stroke: var(--gv-released-stroke); stroke-dasharray: 5 3; }
.gv-node.gv-state-released text { fill: var(--gv-released-text); }
.gv-node.gv-state-error rect.gv-box { fill: var(--gv-error-fill); stroke: var(--gv-error-stroke); stroke-width: 2.5; }
.gv-node.gv-state-error text { fill: var(--gv-error-text); }

.gv-node .gv-badge { visibility: hidden; }
.gv-node.gv-finding .gv-badge { visibility: visible; }
.gv-node .gv-badge circle { fill: var(--gv-badge-error-fill); stroke: var(--gv-bg); stroke-width: 1.5; }
.gv-node.gv-finding-warning .gv-badge circle { fill: var(--gv-badge-warning-fill); }
.gv-node.gv-finding .gv-badge text { fill: var(--gv-badge-text); font-size: 11px; font-weight: 700; }
.gv-node.gv-finding-error rect.gv-box { stroke: var(--gv-finding); stroke-width: 2.5; stroke-dasharray: 6 2; }
.gv-node.gv-finding-warning rect.gv-box { stroke: var(--gv-ready-stroke); stroke-width: 2.5; }

.gv-legend {
  display: flex; flex-wrap: wrap; gap: 2px 12px; padding: 3px 8px; font-size: 11px;
  color: var(--gv-fg-muted); border-top: 1px solid var(--gv-border);
}
.gv-legend-item { display: inline-flex; align-items: center; gap: 4px; white-space: nowrap; cursor: help; }
.gv-legend-keys { color: var(--gv-fg-muted); white-space: normal; }
.gv-swatch {
  display: inline-block; width: 14px; height: 9px; border-radius: 2px; border: 1.2px solid var(--gv-pending-stroke);
  background: var(--gv-pending-fill);
}
.gv-swatch-ready { background: var(--gv-ready-fill); border: 2px solid var(--gv-ready-stroke); }
.gv-swatch-running { background: var(--gv-running-fill); border-color: var(--gv-running-stroke); }
.gv-swatch-done { background: var(--gv-done-fill); border-color: var(--gv-done-stroke); }
.gv-swatch-released { background: var(--gv-released-fill); border: 1.2px dashed var(--gv-released-stroke); }
.gv-swatch-error { background: var(--gv-error-fill); border: 2px solid var(--gv-error-stroke); }
.gv-swatch-custom { border-width: 2.5px; }
.gv-swatch-next { background: var(--gv-ready-fill); border: 2px solid var(--gv-ready-stroke); outline: 2px solid var(--gv-current); outline-offset: 1px; margin: 0 3px; }

.gv-doctor { border-bottom: 1px solid var(--gv-border); padding: 6px 8px; max-height: 20em; overflow: auto; }
.gv-doctor[hidden] { display: none; }
.gv-doctor { container-type: inline-size; } /* for the narrow layout of the findings, at the end */
.gv-doctor-header { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.gv-doctor-title { font-weight: 600; }
.gv-doctor-status { color: var(--gv-fg-muted); }
.gv-doctor[data-tone=ok] .gv-doctor-status { color: var(--gv-ok); font-weight: 600; }
.gv-doctor[data-tone=warnings] .gv-doctor-status { color: var(--gv-warn); font-weight: 600; }
.gv-doctor[data-tone=problems] .gv-doctor-status { color: var(--gv-finding); font-weight: 600; }
.gv-doctor[data-tone=error] .gv-doctor-status { color: var(--gv-alert); font-weight: 600; }
.gv-doctor-close { margin-left: auto; font: inherit; border: none; background: none; cursor: pointer; color: var(--gv-fg-muted); font-size: 16px; line-height: 1; }
.gv-doctor-progress { display: block; width: 100%; margin-top: 4px; accent-color: var(--gv-current); }
.gv-doctor-summary { font-size: 12px; color: var(--gv-fg-muted); margin-top: 2px; }
.gv-findings { border-collapse: collapse; font-size: 12px; margin-top: 4px; width: 100%; }
.gv-findings th { font-weight: 600; color: var(--gv-fg-muted); text-align: left; padding: 1px 8px; border-bottom: 1px solid var(--gv-border); vertical-align: bottom; }
.gv-findings td { padding: 2px 8px 0; overflow-wrap: break-word; font-family: var(--jp-code-font-family, monospace); vertical-align: top; }
.gv-findings td:last-child { white-space: normal; }
.gv-finding-row td:first-child { white-space: nowrap; }
.gv-finding-row { cursor: pointer; }
.gv-finding-row:focus-visible { outline: 2px solid var(--gv-selected); outline-offset: -2px; }
.gv-finding-row:hover { background: var(--jp-layout-color2, #eaeef2); }
.gv-finding-row.gv-finding-error td:first-child { color: var(--gv-finding); font-weight: 700; }
.gv-finding-row.gv-finding-warning td:first-child { color: var(--gv-warn); font-weight: 700; }
.gv-finding-message td { white-space: pre-wrap; font-family: inherit; color: var(--gv-fg); padding: 0 8px 4px 20px; border-bottom: 1px solid var(--gv-border); }
.gv-doctor-skipped, .gv-doctor-notes { margin-top: 4px; font-size: 12px; color: var(--gv-fg-muted); }
.gv-doctor-subtitle { font-weight: 600; }
.gv-doctor ul { margin: 2px 0 0; padding-left: 20px; }

.gv-inspector { border-top: 1px solid var(--gv-border); padding: 6px 8px 8px; max-height: 22em; overflow: auto; cursor: auto; }
.gv-inspector[hidden] { display: none; }
.gv-inspector-header { display: flex; align-items: center; gap: 8px; flex-wrap: wrap; }
.gv-inspector-header > span { min-width: 0; overflow-wrap: anywhere; }
.gv-inspector-name, .gv-inspector-leaf { font-weight: 600; }
.gv-inspector-sep { color: var(--gv-fg-muted); }
.gv-inspector-id, .gv-inspector-label { color: var(--gv-fg-muted); }
.gv-inspector-label { font-family: var(--jp-code-font-family, monospace); font-size: 12px; }
.gv-chip { font-size: 11px; padding: 0 6px; border-radius: 8px; border: 1px solid var(--gv-border); color: var(--gv-fg-muted); }
.gv-chip-state[data-state=ready] { border-color: var(--gv-ready-stroke); color: var(--gv-warn); }
.gv-chip-state[data-state=running] { border-color: var(--gv-running-stroke); color: var(--gv-current); }
.gv-chip-state[data-state=done], .gv-chip-state[data-state=released] { border-color: var(--gv-done-stroke); color: var(--gv-ok); }
.gv-chip-state[data-state=error] { border-color: var(--gv-error-stroke); color: var(--gv-alert); }
.gv-inspector-close { margin-left: auto; font: inherit; border: none; background: none; cursor: pointer; color: var(--gv-fg-muted); font-size: 16px; line-height: 1; }
.gv-inspector-error { margin-top: 4px; color: var(--gv-error-text); background: var(--gv-error-fill); padding: 2px 6px; white-space: pre-wrap; }
.gv-inspector-section { margin-top: 6px; }
.gv-inspector-title { font-size: 12px; font-weight: 600; color: var(--gv-fg-muted); margin-bottom: 2px; }
.gv-inspector-note { font-size: 12px; color: var(--gv-fg-muted); font-style: italic; }
/* Fixed column widths from inspector.ts (SUMMARY_COLUMNS), the same in every section's table;
   numbers right-aligned in tabular figures; a cell too long for its column ends in "…" (its
   tooltip has the whole text), except the first values, which wrap. */
.gv-grads {
  border-collapse: collapse; table-layout: fixed; width: 100%; /* min-width: the columns' sum, set by inspector.ts */
  font-family: var(--jp-code-font-family, monospace); font-size: 12px; font-variant-numeric: tabular-nums;
}
.gv-grads-scroll { overflow-x: auto; }
.gv-grads th, .gv-grads td {
  padding: 1px 6px; white-space: nowrap; overflow: hidden; text-overflow: ellipsis; vertical-align: top;
}
.gv-grads th { font-weight: 600; color: var(--gv-fg-muted); border-bottom: 1px solid var(--gv-border); cursor: help; }
.gv-grads .gv-num { text-align: right; }
.gv-grads .gv-text { text-align: left; }
.gv-grads th:first-child, .gv-grads td:first-child { color: var(--gv-fg-muted); }
.gv-grads td:last-child { white-space: normal; overflow-wrap: anywhere; text-overflow: clip; }
.gv-grads td.gv-alarm { color: var(--gv-alert); font-weight: 700; }
.gv-inspector { container-type: inline-size; } /* for the stacked gradient tables, at the end */
.gv-facts { margin: 0; padding-left: 18px; font-size: 12px; overflow-wrap: anywhere; }
.gv-facts li.gv-alarm { color: var(--gv-alert); }
/* A narrow panel has no room for seven columns: each finding becomes a block of "column: value" lines. */
@container (max-width: 560px) {
  .gv-findings, .gv-findings tbody, .gv-findings tr, .gv-findings td { display: block; }
  .gv-findings thead { display: none; }
  .gv-findings td { padding: 0 8px; }
  .gv-findings .gv-finding-row td:first-child { padding-top: 4px; }
  .gv-findings .gv-finding-row td[data-label]:not(:first-child)::before { content: attr(data-label) ": "; color: var(--gv-fg-muted); font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
  .gv-findings .gv-finding-message td { padding: 2px 8px 4px; }
}
/* A narrow inspector (a side panel, a phone) has no room for ten columns: each gradient becomes
   a block of "column: value" lines, its slot label as the block's heading. */
@container (max-width: 400px) {
  .gv-grads { min-width: 0 !important; table-layout: auto; }
  .gv-grads colgroup, .gv-grads thead { display: none; }
  .gv-grads, .gv-grads tbody, .gv-grads tr, .gv-grads td { display: block; width: auto; }
  .gv-grads tr { padding: 2px 0; border-bottom: 1px solid var(--gv-border); }
  .gv-grads td { white-space: normal; overflow-wrap: anywhere; text-align: left !important; padding: 0 6px; }
  .gv-grads td:first-child { font-weight: 600; }
  .gv-grads td[data-label]::before { content: attr(data-label) ": "; color: var(--gv-fg-muted); }
}
`;

/** The page around the view in the self-contained HTML file (standalone.ts). */
export const PAGE_STYLES = `
body { margin: 0; padding: 16px 20px; font-family: system-ui, sans-serif; color: #1f2328; background: #ffffff; }
.gv-page-header h1 { font-size: 18px; margin: 0 0 2px; font-weight: 600; overflow-wrap: anywhere; }
.gv-page-header p { margin: 0 0 10px; color: #59636e; font-size: 13px; }
.gv-page-error { color: #991b1b; background: #fee2e2; padding: 8px; white-space: pre-wrap; }
`;
