// The row under the toolbar for big graphs: hide AccumulateGrad / view nodes, "follow" the
// running node, and search (search.ts). Keyboard: `/` or Ctrl+F (while the widget has focus)
// focuses the search box; Enter / Shift+Enter go to the next / previous hit; Escape goes back
// to the graph. All text is set with textContent.

import { nextHit, parseQuery, searchGraph } from "./search.js";
import type { Graph } from "./model.js";

export interface FoldControlActions {
  /** The hide options changed. */
  hide(hideAccumulateGrad: boolean, hideViews: boolean): void;
  /** Go to a search hit (open its modules, select it, pan to it). */
  goTo(id: number): void;
  /** Back to the graph (Escape in the search box). */
  leave(): void;
}

/** The styles of this row and of folded boxes and frames (kept here, next to what they style). */
export const FOLD_STYLES = `
.gv-foldbar { display: flex; flex-wrap: wrap; align-items: center; gap: 6px 12px; margin: 2px 0 4px; font-size: 12px; }
.gv-foldbar label { display: inline-flex; align-items: center; gap: 4px; cursor: pointer; }
.gv-foldbar input[type=search] { font: inherit; padding: 1px 4px; width: 16em; }
.gv-foldbar .gv-search-count { color: var(--jp-ui-font-color2, #57606a); min-width: 6em; }
.gv-foldbar .gv-search-count.gv-search-error { color: var(--gv-error, #cf222e); }
.gv-node.gv-folded rect.gv-box { stroke-width: 1.6; stroke-dasharray: 6 2; }
.gv-node.gv-folded text.gv-progress { font-size: 11px; }
.gv-node.gv-folded text.gv-toggle, .gv-frame text.gv-frame-toggle { font-size: 13px; cursor: pointer; text-anchor: middle; dominant-baseline: central; }
.gv-node.gv-holds-running rect.gv-halo { visibility: visible; stroke-dasharray: 4 2; }
.gv-node.gv-holds-error rect.gv-box { stroke: var(--gv-error, #cf222e); stroke-width: 2.4; }
.gv-frame rect { fill: rgba(127, 127, 127, 0.06); stroke: rgba(127, 127, 127, 0.55); stroke-dasharray: 3 3; }
.gv-frame text { font-size: 11px; fill: var(--jp-ui-font-color1, #24292f); dominant-baseline: central; }
.gv-edge.gv-edge-multi { stroke-width: 2.2; }
`;

export class FoldControls {
  readonly element: HTMLDivElement;
  readonly search: HTMLInputElement;
  private readonly count: HTMLSpanElement;
  private readonly follow: HTMLInputElement;
  private readonly hideLeaves: HTMLInputElement;
  private readonly hideViews: HTMLInputElement;
  private graph: Graph | null = null;
  private hits: number[] = [];
  private at = -1;
  private lastQuery = "";

  constructor(private readonly actions: FoldControlActions) {
    this.element = document.createElement("div");
    this.element.className = "gv-foldbar";
    this.element.dataset["testid"] = "gv-foldbar";
    const check = (text: string, title: string, testid: string, checked: boolean): HTMLInputElement => {
      const label = document.createElement("label");
      label.title = title;
      const input = document.createElement("input");
      input.type = "checkbox";
      input.checked = checked;
      input.dataset["testid"] = testid;
      label.append(input, document.createTextNode(text));
      this.element.append(label);
      return input;
    };
    this.follow = check("Follow", "After Step, Continue or a breakpoint, open the modules around the running node and pan to it", "gv-follow", true);
    this.hideLeaves = check("Hide AccumulateGrad", "Do not draw parameter (AccumulateGrad) nodes; their edges are left out", "gv-hide-leaves", false);
    this.hideViews = check("Hide views", "Do not draw pure view/shape nodes (View, Reshape, Permute...); edges pass through them", "gv-hide-views", false);
    const onHide = (): void => actions.hide(this.hideLeaves.checked, this.hideViews.checked);
    this.hideLeaves.addEventListener("change", onHide);
    this.hideViews.addEventListener("change", onHide);

    this.search = document.createElement("input");
    this.search.type = "search";
    this.search.placeholder = "Search: name, module, parameter, /regex/";
    this.search.setAttribute("aria-label", "Search the graph (Enter: next hit, Shift+Enter: previous, Escape: back to the graph)");
    this.search.dataset["testid"] = "gv-search";
    this.count = document.createElement("span");
    this.count.className = "gv-search-count";
    this.count.dataset["testid"] = "gv-search-count";
    this.count.setAttribute("role", "status");
    this.count.setAttribute("aria-live", "polite");
    this.search.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        this.go(event.shiftKey ? -1 : 1);
      } else if (event.key === "Escape") {
        event.preventDefault();
        actions.leave();
      }
      event.stopPropagation(); // typing here is not a graph key nor a notebook shortcut
    });
    this.search.addEventListener("input", () => this.find());
    this.element.append(this.search, this.count);
  }

  get following(): boolean {
    return this.follow.checked;
  }

  /** A new graph: hits are searched again. */
  setGraph(graph: Graph): void {
    this.graph = graph;
    this.lastQuery = "";
    this.find();
  }

  private find(): void {
    const text = this.search.value;
    if (text === this.lastQuery) return;
    this.lastQuery = text;
    this.at = -1;
    this.hits = [];
    this.count.classList.remove("gv-search-error");
    const query = parseQuery(text);
    if (query === null || this.graph === null) {
      this.count.textContent = "";
      return;
    }
    if (!query.ok) {
      this.count.classList.add("gv-search-error");
      this.count.textContent = query.error;
      return;
    }
    this.hits = searchGraph(this.graph, query);
    this.count.textContent = `${this.hits.length} hit${this.hits.length === 1 ? "" : "s"}`;
  }

  /** Next (1) or previous (-1) hit. */
  go(step: 1 | -1): void {
    this.find();
    this.at = nextHit(this.hits.length, this.at, step);
    const id = this.hits[this.at];
    if (id === undefined) return;
    this.count.textContent = `${this.at + 1} of ${this.hits.length}`;
    this.actions.goTo(id);
  }
}
