// Layout on demand: one Graphviz `dot` run per graph, in a shared Web Worker.
//
// The worker is started once per page as a *classic* worker from a blob URL (a module
// worker from a blob fails on file:// pages) and is shared by every widget through
// globalThis (anywidget evaluates this module once per widget). When no worker can be
// started, or the first one dies before answering, the same script runs on the page.
// Layouts are cached by their DOT text, so a second view of a graph costs nothing. A view with
// frames is laid out one open module at a time (compose.ts, Note [Composed layout]): each
// interior is its own DOT text and cache entry, so expanding a module lays out only that
// module and re-places its ancestors.

import workerSource from "gv:layout-worker-source";

import { SHARED_KEY } from "./build_info.js";
import { composeLayout } from "./compose.js";
import { planToDot, type Layout } from "./dot.js";
import type { LayoutPlan } from "./plan.js";
import { IN_PAGE_SUFFIX, type InPageLayout, type LayoutAnswer, type LayoutJob } from "./worker_protocol.js";

export type LayoutSite = "worker" | "page" | "cache";

export interface LayoutOutcome {
  readonly layout: Layout;
  readonly site: LayoutSite;
  readonly millis: number;
  /** Graphviz runs it took (a composed layout: one per interior not in the cache). */
  readonly runs: number;
}

interface Waiting {
  readonly dot: string;
  readonly resolve: (outcome: LayoutOutcome) => void;
  readonly reject: (error: Error) => void;
  readonly started: number;
}

/** Interiors of open modules are small: keep many, so folding and expanding again costs nothing. */
const CACHE_ENTRIES = 512;

class LayoutEngine {
  private worker: Worker | null = null;
  private workerUsable = typeof Worker !== "undefined";
  private workerAnswered = false;
  private nextId = 1;
  private readonly waiting = new Map<number, Waiting>();
  private readonly cache = new Map<string, Layout>();
  private inPage: InPageLayout | null = null;

  layout(dot: string): Promise<LayoutOutcome> {
    const cached = this.cache.get(dot);
    if (cached !== undefined) {
      // Refresh its place in the least-recently-used order.
      this.cache.delete(dot);
      this.cache.set(dot, cached);
      return Promise.resolve({ layout: cached, site: "cache", millis: 0, runs: 0 });
    }
    return new Promise<LayoutOutcome>((resolve, reject) => {
      const waiting: Waiting = { dot, resolve, reject, started: performance.now() };
      const worker = this.ensureWorker();
      if (worker === null) {
        this.runInPage(waiting);
        return;
      }
      const id = this.nextId++;
      this.waiting.set(id, waiting);
      const job: LayoutJob = { id, dot };
      worker.postMessage(job);
    });
  }

  private remember(dot: string, layout: Layout): void {
    this.cache.set(dot, layout);
    while (this.cache.size > CACHE_ENTRIES) {
      const oldest = this.cache.keys().next();
      if (oldest.done === true) break;
      this.cache.delete(oldest.value);
    }
  }

  private ensureWorker(): Worker | null {
    if (this.worker !== null || !this.workerUsable) return this.worker;
    try {
      const url = URL.createObjectURL(new Blob([workerSource], { type: "text/javascript" }));
      const worker = new Worker(url, { name: "gradviz-layout" });
      worker.onmessage = (event: MessageEvent<LayoutAnswer>) => this.onAnswer(event.data);
      worker.onerror = (event: ErrorEvent) => {
        event.preventDefault();
        this.onWorkerDied(event.message || "the layout worker failed to start");
      };
      this.worker = worker;
    } catch (error) {
      console.warn("gradviz: cannot start a layout worker, laying out on the page instead:", error);
      this.workerUsable = false;
    }
    return this.worker;
  }

  private onAnswer(answer: LayoutAnswer): void {
    const waiting = this.waiting.get(answer.id);
    if (waiting === undefined) return;
    this.waiting.delete(answer.id);
    this.workerAnswered = true;
    if (answer.ok) {
      this.remember(waiting.dot, answer.layout);
      waiting.resolve({ layout: answer.layout, site: "worker", millis: performance.now() - waiting.started, runs: 1 });
    } else {
      waiting.reject(new Error(`Graphviz could not lay out the graph: ${answer.error}`));
    }
  }

  private onWorkerDied(message: string): void {
    this.worker?.terminate();
    this.worker = null;
    const orphans = [...this.waiting.values()];
    this.waiting.clear();
    if (!this.workerAnswered) {
      // It never worked (most likely a security policy): use the page from now on.
      console.warn(`gradviz: the layout worker failed (${message}); laying out on the page instead`);
      this.workerUsable = false;
      for (const waiting of orphans) this.runInPage(waiting);
    } else {
      // It worked before and died on a graph (out of memory?): do not freeze the page with
      // the same graph; report it, and start a fresh worker for the next one.
      for (const waiting of orphans) waiting.reject(new Error(`the layout worker died: ${message}`));
    }
  }

  private runInPage(waiting: Waiting): void {
    try {
      if (this.inPage === null) {
        // The worker script installs its entry point on globalThis when it is not in a worker.
        new Function(workerSource)();
        const entry = (globalThis as Record<string, unknown>)[SHARED_KEY + IN_PAGE_SUFFIX] as InPageLayout | undefined;
        if (entry === undefined) throw new Error("the layout script did not install itself");
        this.inPage = entry;
      }
    } catch (error) {
      waiting.reject(new Error(`cannot start the layout engine on this page: ${String(error)}`));
      return;
    }
    this.inPage.layout(waiting.dot).then(
      (layout) => {
        this.remember(waiting.dot, layout);
        waiting.resolve({ layout, site: "page", millis: performance.now() - waiting.started, runs: 1 });
      },
      (error: unknown) => waiting.reject(new Error(`Graphviz could not lay out the graph: ${String(error)}`)),
    );
  }
}

function sharedEngine(): LayoutEngine {
  const shared = globalThis as Record<string, unknown>;
  const existing = shared[SHARED_KEY];
  if (existing instanceof Object && "engine" in existing) return (existing as { engine: LayoutEngine }).engine;
  const engine = new LayoutEngine();
  shared[SHARED_KEY] = { engine };
  return engine;
}

const EMPTY_LAYOUT: Layout = { width: 0, height: 0, boxes: [], edges: [] };

/** Positions for every box and edge of a plan (with frames: one interior at a time, compose.ts). */
export async function computeLayout(plan: LayoutPlan): Promise<LayoutOutcome> {
  if (plan.boxes.length === 0) return { layout: EMPTY_LAYOUT, site: "cache", millis: 0, runs: 0 };
  const engine = sharedEngine();
  if ((plan.clusters ?? []).length === 0) return engine.layout(planToDot(plan));
  const started = performance.now();
  let site: LayoutSite = "cache";
  const composed = await composeLayout(plan, async (dot) => {
    const outcome = await engine.layout(dot);
    if (outcome.site !== "cache") site = outcome.site;
    return { layout: outcome.layout, cached: outcome.site === "cache" };
  });
  return { layout: composed.layout, site, millis: site === "cache" ? 0 : performance.now() - started, runs: composed.runs };
}
