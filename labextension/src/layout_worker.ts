// The layout engine: Graphviz `dot` compiled to WebAssembly.
//
// The build bundles this file (with Graphviz, ~0.8 MB) into a classic script that
// src/layout.ts starts as a Web Worker from a blob URL. When a page cannot start workers
// (a security policy), layout.ts runs the same script on the page; it then installs an
// in-page entry point on globalThis instead of listening for messages.

import { Graphviz } from "@hpcc-js/wasm-graphviz";

import { SHARED_KEY } from "./build_info.js";
import { parseJson0, type Layout } from "./dot.js";
import { IN_PAGE_SUFFIX, type InPageLayout, type LayoutAnswer, type LayoutJob } from "./worker_protocol.js";

let engine: Promise<Graphviz> | null = null;

async function layout(dot: string): Promise<Layout> {
  engine ??= Graphviz.load();
  const graphviz = await engine;
  let json: string;
  try {
    // "json0" is JSON with positions but without drawing operations; the package's Format
    // type does not list it, Graphviz does.
    json = graphviz.layout(dot, "json0" as "json", "dot");
  } catch (error) {
    // A failed run can leave the WebAssembly heap unusable: start the next one afresh.
    Graphviz.unload();
    engine = null;
    throw error;
  }
  return parseJson0(json);
}

function errorText(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

interface WorkerScope {
  onmessage: ((event: MessageEvent<LayoutJob>) => void) | null;
  postMessage(message: LayoutAnswer): void;
}

const inWorker =
  typeof (globalThis as { WorkerGlobalScope?: unknown }).WorkerGlobalScope !== "undefined" &&
  typeof (globalThis as { importScripts?: unknown }).importScripts === "function";

if (inWorker) {
  const scope = globalThis as unknown as WorkerScope;
  scope.onmessage = (event) => {
    const { id, dot } = event.data;
    const started = performance.now();
    layout(dot).then(
      (result) => scope.postMessage({ id, ok: true, layout: result, millis: performance.now() - started }),
      (error: unknown) => scope.postMessage({ id, ok: false, error: errorText(error) }),
    );
  };
} else {
  const entry: InPageLayout = { layout };
  (globalThis as Record<string, unknown>)[SHARED_KEY + IN_PAGE_SUFFIX] = entry;
}
