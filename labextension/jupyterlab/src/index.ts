// gradviz's JupyterLab / Notebook 7 mime extension: shows a saved trace view without a kernel.
//
// It renders `application/vnd.gradviz.trace+json` (an output, from `trace.view()`) and opens
// `.gvtrace.json` files (from `trace.save_view(path)`) in the file browser. The view is the
// offline HTML page's, built from the same modules (../../src): trace_view.ts checks the
// document, then standalone.ts's mountReplay shows it exactly as the page does (a ReplayPlayer
// standing in for the kernel, the header, Restart and the scrubber, the notebook widget's view). Nothing is fetched and no kernel
// is started; the layout worker comes from a blob URL, as in the widget.
//
// All text from the trace (node, module and parameter names, narration) reaches the DOM
// through the view's textContent only; the error box uses textContent too.

import type { IRenderMime } from "@jupyterlab/rendermime-interfaces";
import { Widget } from "@lumino/widgets";

import { mountReplay } from "../../src/standalone.js";
import { parseTraceView, TRACE_VIEW_EXTENSION, TRACE_VIEW_MIME } from "../../src/trace_view.js";

/** The class of every renderer's node (tests and styles find the view by it). */
export const RENDERER_CLASS = "jp-GradvizTraceView";
const STYLE_ID = "gradviz-jupyterlab-styles";
export const FILE_TYPE = "gradviz-trace-view";

// The offline page's header and error styles (styles.ts, PAGE_STYLES), scoped to the renderer:
// JupyterLab's page is not ours to restyle.
const STYLES = `
.${RENDERER_CLASS} { padding: 8px 12px; overflow: auto; color: var(--jp-ui-font-color1); font-family: var(--jp-ui-font-family, system-ui, sans-serif); }
.${RENDERER_CLASS} .gv-page-header h1 { font-size: 16px; margin: 0 0 2px; font-weight: 600; overflow-wrap: anywhere; }
.${RENDERER_CLASS} .gv-page-header p { margin: 0 0 8px; color: var(--jp-ui-font-color2); font-size: 12px; }
.${RENDERER_CLASS} .gv-page-error { color: #991b1b; background: #fee2e2; padding: 8px; white-space: pre-wrap; }
`;

function ensureStyles(): void {
  if (document.getElementById(STYLE_ID) !== null) return;
  const style = document.createElement("style");
  style.id = STYLE_ID;
  style.textContent = STYLES;
  document.head.append(style);
}

/** One trace view: an output, or the content of an opened .gvtrace.json document. */
export class TraceViewRenderer extends Widget implements IRenderMime.IRenderer {
  private cleanup: (() => void) | null = null;

  constructor(private readonly mimeType: string) {
    super();
    this.addClass(RENDERER_CLASS);
  }

  /** Called for the first render and whenever the output or the file changes. */
  async renderModel(model: IRenderMime.IMimeModel): Promise<void> {
    this.teardown();
    ensureStyles();
    try {
      this.cleanup = mountReplay(this.node, parseTraceView(model.data[this.mimeType])).cleanup;
    } catch (error) {
      this.node.replaceChildren();
      const box = document.createElement("pre");
      box.className = "gv-page-error";
      box.setAttribute("role", "alert");
      box.textContent = `gradviz could not show this trace: ${error instanceof Error ? error.message : String(error)}`;
      this.node.append(box);
    }
  }

  override dispose(): void {
    if (this.isDisposed) return;
    this.teardown();
    super.dispose();
  }

  private teardown(): void {
    const cleanup = this.cleanup;
    this.cleanup = null;
    if (cleanup !== null) cleanup();
    this.node.replaceChildren();
  }
}

export const rendererFactory: IRenderMime.IRendererFactory = {
  // Safe: the data is only read as data and shown as text; nothing in it is run or parsed as
  // HTML, so an untrusted notebook's output may be rendered too.
  safe: true,
  mimeTypes: [TRACE_VIEW_MIME],
  createRenderer: (options) => new TraceViewRenderer(options.mimeType),
};

const extension: IRenderMime.IExtension = {
  id: "gradviz-jupyterlab:trace-view",
  description: "Opens saved gradviz traces (.gvtrace.json) and trace view outputs without a kernel.",
  rendererFactory,
  // Before text/plain (120) and text/html (50): a bundle from trace.view() shows the view.
  rank: 0,
  dataType: "json",
  fileTypes: [
    {
      name: FILE_TYPE,
      displayName: "gradviz trace",
      mimeTypes: [TRACE_VIEW_MIME],
      extensions: [TRACE_VIEW_EXTENSION],
      fileFormat: "text",
      iconClass: "jp-MaterialIcon jp-JSONIcon",
    },
  ],
  documentWidgetFactoryOptions: {
    name: "gradviz trace viewer",
    primaryFileType: FILE_TYPE,
    fileTypes: [FILE_TYPE],
    defaultFor: [FILE_TYPE],
  },
};

export default extension;
