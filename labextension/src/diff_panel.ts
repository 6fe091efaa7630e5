// The diff panel (protocol 5): `gradviz.debug.diff(trace_a, trace_b).show()` draws trace a's
// graph coloured by the "difference" overlay, and this panel lists what the `diff` trait says:
// the nodes whose gradients differ (a click selects the node), and the nodes of each side
// without a partner. Every name comes from user code: set with textContent only.

import type * as protocol from "./generated/widget_protocol.js";
import { formatValue } from "./overlays.js";
import { readShape } from "./payload.js";

export interface DiffEntry {
  /** The node's id in its own trace (a's graph is the one drawn). */
  readonly node: number | null;
  readonly key: string;
  readonly detail: string;
}

export interface DiffView {
  readonly a: string;
  readonly b: string;
  /** The overlay the view opens with. */
  readonly overlay: string | null;
  readonly summary: string;
  readonly counts: { readonly pairs: number; readonly differ: number; readonly onlyA: number; readonly onlyB: number };
  readonly differences: readonly DiffEntry[];
  readonly onlyA: readonly DiffEntry[];
  readonly onlyB: readonly DiffEntry[];
}

/**
 * Read the `diff` trait (null: not a diff view), checked against the generated shape: a
 * malformed one is a ProtocolError naming the field. The panel's rows are a mapping of it.
 */
export function parseDiff(value: unknown): DiffView | null {
  if (value === null || value === undefined) return null;
  const diff = readShape<protocol.DiffData>("DiffData", value, "diff");
  const row = (item: protocol.DiffOnly, detail: string): DiffEntry => ({ node: item.node, key: item.key, detail });
  return {
    a: diff.a,
    b: diff.b,
    overlay: diff.overlay,
    summary: diff.summary,
    counts: { pairs: diff.counts.pairs, differ: diff.counts.differ, onlyA: diff.counts.only_a, onlyB: diff.counts.only_b },
    differences: diff.differences.map((item) =>
      row(item, [`relative gap ${formatValue(item.max_relative)}`, ...item.reasons].join("; "))),
    onlyA: diff.only_a.map((item) => row(item, "")),
    onlyB: diff.only_b.map((item) => row(item, "")),
  };
}

function element<K extends keyof HTMLElementTagNameMap>(tag: K, className: string, content = ""): HTMLElementTagNameMap[K] {
  const node = document.createElement(tag);
  if (className !== "") node.className = className;
  if (content !== "") node.textContent = content;
  return node;
}

export class DiffPanel {
  readonly element: HTMLElement;
  private shown: unknown = undefined;

  constructor(private readonly onSelect: (id: number) => void) {
    this.element = element("section", "gv-diff");
    this.element.dataset["testid"] = "gv-diff";
    this.element.setAttribute("aria-label", "differences between two passes");
    this.element.hidden = true;
  }

  /** `raw`: the trait as received (the panel is rebuilt only when it changes). */
  update(raw: unknown, diff: DiffView | null): void {
    if (raw === this.shown) return;
    this.shown = raw;
    this.element.replaceChildren();
    this.element.hidden = diff === null;
    if (diff === null) return;
    const head = element("div", "gv-diff-summary", `Comparing ${diff.a} (drawn) with ${diff.b}: ${diff.summary}`);
    head.dataset["testid"] = "gv-diff-summary";
    this.element.append(head);
    const lists: [string, string, readonly DiffEntry[], number, boolean][] = [
      ["differences", `Gradients differ (${diff.counts.differ})`, diff.differences, diff.counts.differ, true],
      ["only-a", `Only in ${diff.a} (${diff.counts.onlyA})`, diff.onlyA, diff.counts.onlyA, true],
      ["only-b", `Only in ${diff.b}, not drawn (${diff.counts.onlyB})`, diff.onlyB, diff.counts.onlyB, false],
    ];
    for (const [key, title, items, total, selectable] of lists) {
      const section = element("details", "gv-diff-list");
      section.dataset["testid"] = `gv-diff-${key}`;
      section.open = items.length > 0 && items.length <= 12;
      section.append(element("summary", "", title));
      const list = element("ul", "");
      for (const item of items) {
        const line = element("li", "");
        line.dataset["testid"] = "gv-diff-item";
        if (selectable && item.node !== null) {
          const id = item.node;
          const link = element("button", "gv-link", item.key);
          link.type = "button";
          link.dataset["nodeId"] = String(id);
          link.title = "Select this node";
          link.addEventListener("click", () => this.onSelect(id));
          line.append(link);
        } else {
          line.append(element("span", "", item.key));
        }
        if (item.detail !== "") line.append(element("span", "gv-diff-detail", ` · ${item.detail}`));
        list.append(line);
      }
      if (total > items.length) list.append(element("li", "gv-diff-detail", `… and ${total - items.length} more`));
      section.append(list);
      this.element.append(section);
    }
  }
}

export const DIFF_STYLES = `
.gv-root .gv-diff { padding: 4px 8px; border-bottom: 1px solid var(--gv-border); font-size: 12px; }
.gv-root .gv-diff-summary { font-weight: 600; margin-bottom: 2px; }
.gv-root .gv-diff-list ul { margin: 2px 0 4px 1.2em; padding: 0; max-height: 10em; overflow: auto; }
.gv-root .gv-diff-detail { color: var(--gv-fg-muted); }
`;
