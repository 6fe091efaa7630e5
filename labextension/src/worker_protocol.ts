// Messages between the page and the layout worker (src/layout_worker.ts).

import type { Layout } from "./dot.js";

export interface LayoutJob {
  readonly id: number;
  readonly dot: string;
}

export type LayoutAnswer =
  | { readonly id: number; readonly ok: true; readonly layout: Layout; readonly millis: number }
  | { readonly id: number; readonly ok: false; readonly error: string };

/** What the worker script installs on globalThis when it runs on the page instead (fallback). */
export interface InPageLayout {
  layout(dot: string): Promise<Layout>;
}

export const IN_PAGE_SUFFIX = "_in_page_layout";
