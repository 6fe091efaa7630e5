// Modules that scripts/build.mjs provides at bundle time.

declare module "gv:layout-worker-source" {
  /** The classic-script source of src/layout_worker.ts, bundled with Graphviz. */
  const source: string;
  export default source;
}
