// The self-contained HTML page of a trace (gradviz.widget.trace_to_html / Trace.to_html).
//
// The page carries this script and the trace's precomputed replay (replay.ts) as JSON in a
// <script type="application/json" id="gradviz-data"> element. The same view as the notebook
// widget (widget.ts) draws it; a ReplayPlayer (player.ts) stands in for the kernel. Nothing
// is fetched: Graphviz is inlined in this script and the layout worker comes from a blob URL.

import { ReplayPlayer } from "./player.js";
import { parseStandalone, type StandaloneData } from "./replay.js";
import { PAGE_STYLES } from "./styles.js";
import { button } from "./toolbar.js";
import { renderView } from "./widget.js";

export const DATA_ELEMENT_ID = "gradviz-data";

/** Restart button and the scrubber over event positions, kept in step with the player. */
function timelineControls(player: ReplayPlayer): { restart: HTMLButtonElement; row: HTMLDivElement } {
  const restart = button("Restart", "Back to the start, before the first node ran", "gv-restart", () => player.restart());
  const row = document.createElement("div");
  row.className = "gv-timeline";
  const scrubber = document.createElement("input");
  scrubber.type = "range";
  scrubber.min = "0";
  scrubber.max = String(player.timeline.length);
  scrubber.step = "1";
  scrubber.dataset["testid"] = "gv-scrubber";
  scrubber.setAttribute("aria-label", "Events shown");
  const label = document.createElement("span");
  label.className = "gv-timeline-label";
  label.dataset["testid"] = "gv-position";
  scrubber.addEventListener("input", () => player.seek(Number(scrubber.value)));
  const show = (position: number): void => {
    scrubber.value = String(position);
    label.textContent = `${position} of ${player.timeline.length} events`;
    restart.disabled = position === player.timeline.start;
  };
  player.onMove(show);
  show(player.at);
  row.append(scrubber, label);
  return { restart, row };
}

function header(data: StandaloneData): HTMLElement {
  const element = document.createElement("header");
  element.className = "gv-page-header";
  const title = document.createElement("h1");
  title.textContent = data.title;
  const about = document.createElement("p");
  const budget = data.inspectionBudget;
  const kept = budget === null ? "" : ` · inspector data ${Math.round(budget.bytes / 1024)} KiB${budget.leftOut > 0 ? `, up to ${budget.leftOut} snapshots left out (size budget)` : ""}`;
  about.textContent = `A recorded backward pass, replayed offline · ${data.events.length} events · gradviz ${data.gradvizVersion}${kept}`;
  element.append(title, about);
  return element;
}

/** The replay of `data` in `mount`: the header, then the view with Restart and the scrubber.
 * The page and the JupyterLab extension (jupyterlab/src/index.ts) both show a trace this way. */
export function mountReplay(mount: HTMLElement, data: StandaloneData): { player: ReplayPlayer; cleanup: () => void } {
  const player = new ReplayPlayer(data);
  const { restart, row } = timelineControls(player);
  mount.append(header(data));
  const el = document.createElement("div");
  mount.append(el);
  const cleanup = renderView({ model: player.model, el }, { toolbar: [restart], belowToolbar: row });
  return { player, cleanup };
}

/** Read the page's data and show the replay in `mount`. */
export function start(mount: HTMLElement, dataText: string): ReplayPlayer {
  const data = parseStandalone(JSON.parse(dataText));
  const style = document.createElement("style");
  style.textContent = PAGE_STYLES;
  document.head.append(style);
  return mountReplay(mount, data).player;
}

function boot(): void {
  // Only the offline page has this mount; the JupyterLab extension (jupyterlab/src/index.ts)
  // imports this module for mountReplay and must not boot a page here.
  const mount = document.getElementById("gradviz-app");
  if (mount === null) return;
  try {
    const text = document.getElementById(DATA_ELEMENT_ID)?.textContent;
    if (text === null || text === undefined) throw new Error(`this page has no #${DATA_ELEMENT_ID} element`);
    const player = start(mount, text);
    (globalThis as Record<string, unknown>)["gradvizReplay"] = player; // for tests and the console
  } catch (error) {
    const box = document.createElement("pre");
    box.className = "gv-page-error";
    box.setAttribute("role", "alert");
    box.textContent = `gradviz could not show this trace: ${error instanceof Error ? error.message : String(error)}`;
    mount.append(box);
    throw error;
  }
}

if (typeof document !== "undefined") {
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", boot, { once: true });
  else boot();
}
