// Is the view still connected to its kernel? Told at once, not on the next click.
//
// After Kernel > Restart (or Shut Down) the output stays on the page, but the Python widget
// behind it is gone: its buttons can do nothing. Two signals say so without a user action:
// - ipywidgets' widget manager sets every model's `comm_live` to false when the kernel
//   restarts, which the model announces as a "comm_live_update" event. `comm_live` is set to
//   true only when a model is created, so after a view exists the event means "disconnected"
//   (anywidget's model proxy forwards the event but not the property).
// - The manager's kernel connection (JupyterLab, Notebook 7) reports its status:
//   "restarting", "autorestarting" (it died and is being restarted) and "dead" all end this
//   widget's kernel; Kernel > Shut Down disposes the connection (its `disposed` signal)
//   without a status change. ipywidgets reacts to "restarting" only, so a shutdown is seen
//   here only. (Its connection status is not used: a network hiccup says "disconnected" too.)
// Hosts without a kernel object (VS Code, Colab) have the first signal only.

/** The kernel statuses after which the widget's Python side no longer exists. */
export const KERNEL_GONE_STATUSES: ReadonlySet<string> = new Set(["restarting", "autorestarting", "dead"]);

export function kernelGone(status: unknown): boolean {
  return typeof status === "string" && KERNEL_GONE_STATUSES.has(status);
}

/** The error box's text once the view knows its kernel is gone. */
export function disconnectedText(reason: string): string {
  return `disconnected: ${reason}, so this view is no longer live (its buttons are off; the graph shows the last state it received). Re-run the cell that showed the debugger.`;
}

/** A Lumino signal, as far as this module uses one. */
interface Signal {
  connect(slot: (sender: unknown, value: unknown) => void): unknown;
  disconnect(slot: (sender: unknown, value: unknown) => void): unknown;
}

interface KernelLike {
  readonly status?: unknown;
  readonly statusChanged?: Signal;
  readonly isDisposed?: unknown;
  readonly disposed?: Signal;
}

/** The part of the model this module reads (widget.ts's WidgetModel satisfies it). */
export interface ConnectionModel {
  on(event: string, callback: (...args: unknown[]) => void): void;
  off(event?: string | null, callback?: ((...args: unknown[]) => void) | null): void;
  readonly widget_manager?: unknown;
}

function isSignal(value: unknown): value is Signal {
  return typeof value === "object" && value !== null && typeof (value as Signal).connect === "function" && typeof (value as Signal).disconnect === "function";
}

/** The kernel of ipywidgets' widget manager (JupyterLab, Notebook 7), or null. */
function managerKernel(model: ConnectionModel): KernelLike | null {
  const manager = model.widget_manager;
  if (typeof manager !== "object" || manager === null) return null;
  try {
    const kernel = (manager as { kernel?: unknown }).kernel;
    return typeof kernel === "object" && kernel !== null ? (kernel as KernelLike) : null;
  } catch {
    return null; // a manager whose `kernel` getter throws (no session yet): no second signal
  }
}

/**
 * Call `onGone(reason)` once, as soon as the kernel behind the view is restarted or shut down.
 * Returns the function that stops watching (call it when the view is removed).
 */
export function watchConnection(model: ConnectionModel, onGone: (reason: string) => void): () => void {
  let gone = false;
  const report = (reason: string): void => {
    if (gone) return;
    gone = true;
    onGone(reason);
  };
  const onCommLive = (): void => report("the kernel was restarted or shut down");
  model.on("comm_live_update", onCommLive);
  const kernel = managerKernel(model);
  const statusChanged = kernel?.statusChanged;
  const onStatus = (_sender: unknown, status: unknown): void => {
    if (kernelGone(status)) report(status === "dead" ? "the kernel was shut down" : "the kernel was restarted");
  };
  const disposed = kernel?.disposed;
  const onDisposed = (): void => report("the kernel was shut down");
  if (isSignal(statusChanged)) statusChanged.connect(onStatus);
  if (isSignal(disposed)) disposed.connect(onDisposed);
  if (kernel !== null && (kernel.status === "dead" || kernel.isDisposed === true)) report("the kernel was shut down");
  return () => {
    model.off("comm_live_update", onCommLive);
    if (isSignal(statusChanged)) statusChanged.disconnect(onStatus);
    if (isSignal(disposed)) disposed.disconnect(onDisposed);
  };
}
