// What a Step repaints, kept up to date from the nodes whose state changed (protocol 6).
//
// A Step changes a few node states, but folding every node's state onto the drawn boxes
// (FoldedView.states, FoldedView.progress) and counting them for the status line walks all
// nodes: at 100,000 nodes that was most of the view's refresh. With the states deltas the view
// knows which nodes changed (StatesCopy.takeChanged, states_sync.ts), so the per-box counts are
// adjusted for those only; a whole copy or new boxes (expand, fold) count everything again.
// The results equal FoldedView.states and FoldedView.progress (test/box_tally.test.ts checks).

import type { Severity } from "./doctor.js";
import { NODE_STATES, type NodeState, type StateCounts, type StateMap } from "./model.js";
import type { BoxProgress, FoldedView } from "./view_graph.js";

function zeroCounts(): StateCounts {
  return Object.fromEntries(NODE_STATES.map((state) => [state, 0])) as StateCounts;
}

/** A folded box's state from its members' counts (the rule of FoldedView.states). */
export function foldedState(counts: StateCounts, total: number): NodeState {
  if (counts.error > 0) return "error";
  if (counts.running > 0) return "running";
  if (total > 0 && counts.done + counts.released === total) return counts.done > 0 ? "done" : "released";
  if (counts.ready > 0) return "ready";
  return "pending";
}

/** Per-box and whole-graph state counts of a folded view, updated incrementally. */
export class BoxTally {
  private boxes: unknown = null;
  private source: StateMap | null = null;
  /** The state each node was counted with. */
  private counted = new Map<number, NodeState>();
  /** Folded box id -> its members' counts. */
  private perBox = new Map<number, StateCounts>();
  private totals = zeroCounts();

  /**
   * Count `states` onto `folded`'s boxes: only the `changed` nodes when the boxes and the state
   * map are those of the last call, else every node (`changed` null: all may have changed).
   */
  update(folded: FoldedView, states: StateMap, changed: ReadonlySet<number> | null): void {
    if (changed === null || folded.view !== this.boxes || states !== this.source) {
      this.recount(folded, states);
      return;
    }
    for (const id of changed) {
      const before = this.counted.get(id);
      const after = states.get(id);
      if (before === after) continue;
      const box = this.foldedBoxOf(folded, id);
      if (before !== undefined) {
        this.totals[before] -= 1;
        if (box !== undefined) box[before] -= 1;
      }
      if (after !== undefined) {
        this.totals[after] += 1;
        if (box !== undefined) box[after] += 1;
        this.counted.set(id, after);
      } else {
        this.counted.delete(id);
      }
    }
  }

  /** How many nodes are in each state (the whole graph). */
  counts(): StateCounts {
    return { ...this.totals };
  }

  /** The state of each drawn box (FoldedView.states). */
  boxStates(folded: FoldedView): Map<number, NodeState> {
    this.follow(folded);
    const shown = new Map<number, NodeState>();
    for (const box of folded.view.boxes) {
      if (box.kind === "node") {
        const state = this.counted.get(box.id);
        if (state !== undefined) shown.set(box.id, state);
        continue;
      }
      shown.set(box.id, foldedState(this.perBox.get(box.id) ?? zeroCounts(), box.members.length));
    }
    return shown;
  }

  /** The progress line of each folded box (FoldedView.progress). */
  progress(folded: FoldedView, current: number | null, findings: ReadonlyMap<number, Severity>): Map<number, BoxProgress> {
    this.follow(folded);
    const flagged = new Set<number>();
    for (const id of findings.keys()) {
      const box = folded.view.boxOf.get(id);
      if (box !== undefined && box.kind !== "node") flagged.add(box.id);
    }
    const runningBox = folded.shownAs(current);
    const result = new Map<number, BoxProgress>();
    for (const box of folded.view.boxes) {
      if (box.kind === "node") continue;
      const counts = this.perBox.get(box.id) ?? zeroCounts();
      const running = runningBox === box.id;
      const error = counts.error > 0;
      const finding = flagged.has(box.id);
      const parts = [`${counts.done + counts.released}/${box.members.length} done`];
      if (running) parts.push("▶ running");
      if (error) parts.push("✖ error");
      if (finding) parts.push("! finding");
      result.set(box.id, { text: parts.join(" · "), running, error, finding });
    }
    return result;
  }

  /** The fold changed since the last count (follow opened a module): count onto its boxes. */
  private follow(folded: FoldedView): void {
    if (folded.view !== this.boxes && this.source !== null) this.recount(folded, this.source);
  }

  private foldedBoxOf(folded: FoldedView, id: number): StateCounts | undefined {
    const box = folded.view.boxOf.get(id);
    return box === undefined || box.kind === "node" ? undefined : this.perBox.get(box.id);
  }

  private recount(folded: FoldedView, states: StateMap): void {
    this.boxes = folded.view;
    this.source = states;
    this.counted = new Map();
    this.perBox = new Map();
    this.totals = zeroCounts();
    for (const box of folded.view.boxes) if (box.kind !== "node") this.perBox.set(box.id, zeroCounts());
    for (const [id, state] of states) {
      if (!folded.graph.byId.has(id)) continue;
      this.counted.set(id, state);
      this.totals[state] += 1;
      const box = this.foldedBoxOf(folded, id);
      if (box !== undefined) box[state] += 1;
    }
  }
}

/**
 * The deliveries between drawn boxes (FoldedView.deliveries), extended by the pairs a delta
 * appended: the copy's list only grows between whole copies, so only its new pairs are mapped.
 */
export class BoxDeliveries {
  private boxes: unknown = null;
  private source: readonly (readonly [number, number])[] | null = null;
  private seen = 0;
  private pairs: (readonly [number, number])[] = [];

  update(folded: FoldedView, deliveries: readonly (readonly [number, number])[] | null): readonly (readonly [number, number])[] | null {
    if (deliveries === null) return null;
    if (folded.view !== this.boxes || deliveries !== this.source || deliveries.length < this.seen) {
      this.boxes = folded.view;
      this.source = deliveries;
      this.seen = 0;
      this.pairs = [];
    }
    const added = folded.deliveries(deliveries.slice(this.seen));
    if (added !== null) this.pairs.push(...added);
    this.seen = deliveries.length;
    return this.pairs;
  }
}
