// The view's link to the kernel (widget.ts's renderView): sending a message, the "…" shown
// while a command runs, and the state of a view whose kernel is gone.
//
// ipywidgets' own views send with the manager's callbacks, which route the kernel's output
// during the handler (prints, warnings, tracebacks) to JupyterLab's Log Console; without them
// that output is silently dropped, so every message goes through `send` here.

import type { CommandMessage } from "./model.js";
import type { ModuleSelectMessage, OverlayRequestMessage } from "./module_inspector.js";
import type { ResyncMessage } from "./states_sync.js";
import type { WidgetModel } from "./view_traits.js";

/** Every message a view sends to Python (docs/widget_protocol.md, "browser → Python"). */
export type ViewMessage = CommandMessage | ModuleSelectMessage | OverlayRequestMessage | ResyncMessage;

/** How long to show "…" after a command when Python does not answer. */
export const BUSY_TIMEOUT_MS = 10_000;

/** The error box's text when a command cannot reach the kernel. */
export function unreachableKernel(reason: string): string {
  return `cannot reach the kernel (${reason}): it was restarted or shut down, so this view is no longer live. Re-run the cell that showed the debugger.`;
}

/** A thrown value in words for the error box ("Error: message"). */
export function messageOf(error: unknown): string {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * Sends the view's messages and keeps its busy mark (the class gv-busy on `root`, ended by an
 * answer or after BUSY_TIMEOUT_MS). Once `disconnect` is called nothing more is sent: the
 * error box already says why nothing happens.
 */
export class KernelLink {
  private busyTimer: ReturnType<typeof setTimeout> | null = null;
  /** Why the kernel is gone (connection.ts's text), or null while it is reachable. */
  disconnected: string | null = null;

  /** `failed` runs when the host throws on send (a comm gone without the connection's signals). */
  constructor(
    private readonly model: WidgetModel,
    private readonly root: HTMLElement,
    private readonly failed: (message: ViewMessage, reason: string) => void,
  ) {}

  /** Show (or end) the busy mark; a busy mark ends by itself after BUSY_TIMEOUT_MS. */
  setBusy(busy: boolean): void {
    this.root.classList.toggle("gv-busy", busy);
    if (this.busyTimer !== null) clearTimeout(this.busyTimer);
    this.busyTimer = busy ? setTimeout(() => this.setBusy(false), BUSY_TIMEOUT_MS) : null;
  }

  /** Send `message` to Python with the manager's output callbacks; nothing once disconnected. */
  send(message: ViewMessage): void {
    if (this.disconnected !== null) return;
    const manager = this.model.widget_manager;
    const callbacks = typeof manager?.callbacks === "function" ? manager.callbacks() : undefined;
    try {
      this.model.send(message, callbacks);
    } catch (error) {
      // After a kernel restart the view stays on the page but its comm is gone: ipywidgets
      // throws "Cannot send". watchConnection (connection.ts) normally says so first and the
      // buttons are off; a host that reports neither of its signals lands here. Say so where
      // the user looks instead of an uncaught page error and a "…" that never ends.
      this.setBusy(false);
      this.failed(message, unreachableKernel(messageOf(error)));
    }
  }

  /** The kernel is gone (`reason`: connection.ts's text): mark the view and stop sending. */
  disconnect(reason: string): void {
    this.disconnected = reason;
    this.root.classList.add("gv-disconnected");
    this.root.dataset["disconnected"] = "true";
    this.setBusy(false);
  }

  /** Stop the busy timer (the view is torn down). */
  dispose(): void {
    if (this.busyTimer !== null) clearTimeout(this.busyTimer);
    this.busyTimer = null;
  }
}
