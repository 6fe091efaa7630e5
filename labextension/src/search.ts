// Search the graph: by node name, module path or class, parameter (leaf) name, or a regular
// expression written /like this/ (flags after the last slash, e.g. /attn\.\d+/i).
//
// Pure (no DOM): fold_controls.ts has the search box, widget.ts opens and selects the hits.

import { displayName, type Graph, type GraphNode } from "./model.js";

export type SearchQuery = { readonly ok: true; readonly test: (text: string) => boolean } | { readonly ok: false; readonly error: string };

/** Read what the user typed; a /regex/ that does not compile is an error saying why. */
export function parseQuery(text: string): SearchQuery | null {
  const query = text.trim();
  if (query === "") return null;
  const regex = /^\/(.+)\/([a-z]*)$/.exec(query);
  if (regex !== null) {
    try {
      const pattern = new RegExp(regex[1] ?? "", (regex[2] ?? "").replace(/[gy]/g, ""));
      return { ok: true, test: (value) => pattern.test(value) };
    } catch (error) {
      return { ok: false, error: `not a regular expression: ${error instanceof Error ? error.message : String(error)}` };
    }
  }
  const needle = query.toLowerCase();
  return { ok: true, test: (value) => value.toLowerCase().includes(needle) };
}

/** The texts a node is found by: its name and label, parameter name, module path and classes. */
export function searchTexts(node: GraphNode): string[] {
  const texts = [node.name, displayName(node), node.label];
  if (node.leaf_name !== undefined) texts.push(node.leaf_name);
  if (node.module !== undefined) texts.push(node.module.join("."), ...(node.module_types ?? []));
  if (node.number !== undefined) texts.push(`#${node.number}`);
  return texts;
}

/** The ids of the nodes matching `query`, in graph order (the loss first). */
export function searchGraph(graph: Graph, query: SearchQuery & { ok: true }): number[] {
  return graph.nodes.filter((node) => searchTexts(node).some((text) => query.test(text))).map((node) => node.id);
}

/** The hit after (`step` 1) or before (-1) position `at` (-1: none yet), wrapping around. */
export function nextHit(count: number, at: number, step: 1 | -1): number {
  if (count === 0) return -1;
  if (at < 0) return step === 1 ? 0 : count - 1;
  return (at + step + count) % count;
}
