// Keyboard use of the graph canvas: one tab stop, a keyboard cursor moved with the arrows.
//
// The drawing flows downwards from the loss: ↓ follows an edge to one of the node's next
// functions, ↑ goes back to a node that uses it, ← and → move among the nodes drawn on the
// same row. Enter (or Space) selects the node under the cursor, which opens the inspector and
// makes it the target of "Run to"; Escape closes the inspector. Moving the cursor sends
// nothing to the kernel: only Enter and Escape do (as a `select` message), and the command
// letters (COMMAND_KEYS: s step, e step event, r run to selected, c continue), which press
// the toolbar's buttons.
//
// Pure functions (unit-tested); GraphScene (draw.ts) listens for the keys and draws the cursor.

import type { CommandName, Graph } from "./model.js";

export type Direction = "up" | "down" | "left" | "right";

export type KeyAction =
  | { readonly kind: "move"; readonly direction: Direction }
  | { readonly kind: "select" }
  | { readonly kind: "close" }
  | { readonly kind: "expand" }
  | { readonly kind: "fold" }
  | { readonly kind: "command"; readonly name: CommandName };

/**
 * One-letter keys for the session's commands, while the graph has focus (only then: outside
 * the widget the letters stay JupyterLab's command-mode shortcuts). A key does what a click on
 * the button does, and nothing when the button is off.
 */
export const COMMAND_KEYS: Readonly<Partial<Record<CommandName, string>>> = {
  step: "s",
  step_event: "e",
  run_to: "r",
  continue: "c",
};

/** The help text for the canvas's tooltip and the colour key. */
export const KEYS_HELP =
  "Tab to the graph, then ↑ ↓ follow edges, ← → move along a row, Enter selects (inspector, Run to), Escape closes the inspector; " +
  "+ expands a folded module, - folds the one around the cursor, / searches; s Step, e Step event, r Run to selected, c Continue";

/** The short form in the colour key (KEYS_HELP is its tooltip). */
export const KEYS_LEGEND = "keys: Tab to the graph · ↑↓←→ move · Enter select · Esc close · s step · e step event · r run to selected · c continue";

const MOVES: Readonly<Record<string, Direction>> = { ArrowUp: "up", ArrowDown: "down", ArrowLeft: "left", ArrowRight: "right" };

/** What a key press on the canvas does; null: not ours (let the browser have it). */
export function keyAction(key: string, modifiers: { ctrl?: boolean; meta?: boolean; alt?: boolean } = {}): KeyAction | null {
  if (modifiers.ctrl || modifiers.meta || modifiers.alt) return null; // browser and notebook shortcuts
  const direction = MOVES[key];
  if (direction !== undefined) return { kind: "move", direction };
  if (key === "Enter" || key === " ") return { kind: "select" };
  if (key === "Escape") return { kind: "close" };
  if (key === "+" || key === "=") return { kind: "expand" };
  if (key === "-") return { kind: "fold" };
  for (const [name, letter] of Object.entries(COMMAND_KEYS) as [CommandName, string][]) {
    if (key === letter) return { kind: "command", name };
  }
  return null;
}

export interface Point {
  readonly x: number;
  readonly y: number;
}

/** Nodes whose centres are this close vertically are on the same row of the drawing. */
const SAME_ROW = 1;

/**
 * Where the cursor starts when the canvas gets a key and has none yet: the selected node,
 * else the node that runs next, else the first root, else the first node.
 */
export function startNode(graph: Graph, selected: number | null, current: number | null): number | null {
  for (const id of [selected, current, graph.roots[0] ?? null, graph.nodes[0]?.id ?? null]) {
    if (id !== null && graph.byId.has(id)) return id;
  }
  return null;
}

/**
 * The node the cursor moves to from `from` (null: nowhere to go, stay). Up and down follow the
 * graph's edges and, among several, take the node drawn closest horizontally (ties: edge
 * order); left and right take the nearest node on the same row. Without a position for a
 * node (not drawn), up and down take the first edge and left and right do nothing.
 */
export function neighbour(graph: Graph, positions: ReadonlyMap<number, Point>, from: number, direction: Direction): number | null {
  const here = positions.get(from);
  if (direction === "up" || direction === "down") {
    const candidates: number[] = [];
    for (const edge of graph.edges) {
      const [tail, head] = direction === "down" ? [edge.source, edge.target] : [edge.target, edge.source];
      if (tail === from && head !== from && !candidates.includes(head)) candidates.push(head);
    }
    let best: number | null = null;
    let bestDistance = Infinity;
    for (const id of candidates) {
      const there = positions.get(id);
      const distance = here === undefined || there === undefined ? Infinity : Math.abs(there.x - here.x);
      if (best === null || distance < bestDistance) {
        best = id;
        bestDistance = distance;
      }
    }
    return best;
  }
  if (here === undefined) return null;
  const sign = direction === "right" ? 1 : -1;
  let best: number | null = null;
  let bestDistance = Infinity;
  for (const [id, there] of positions) {
    if (id === from || Math.abs(there.y - here.y) > SAME_ROW) continue;
    const distance = (there.x - here.x) * sign;
    if (distance > 0 && distance < bestDistance) {
      best = id;
      bestDistance = distance;
    }
  }
  return best;
}
