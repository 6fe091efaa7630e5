// A stand-in for the anywidget model, for pages without a kernel (standalone.ts).
//
// It holds the traits in memory and emits the same events as anywidget's model
// ("change:<name>", "msg:custom"); what the view sends goes to a local handler instead of
// Python. Like the kernel, the handler answers after the view's click handler has returned.

import type { WidgetModel } from "./view_traits.js";

type Callback = (...args: unknown[]) => void;

export class LocalModel implements WidgetModel {
  private readonly traits = new Map<string, unknown>();
  private readonly listeners = new Map<string, Set<Callback>>();

  constructor(
    initial: Record<string, unknown>,
    private readonly onMessage: (content: unknown) => void,
  ) {
    for (const [name, value] of Object.entries(initial)) this.traits.set(name, value);
  }

  get(name: string): unknown {
    return this.traits.get(name);
  }

  /** Assign traits together, then emit one change event per trait that changed (by JSON value). */
  set(values: Record<string, unknown>): void {
    const changed: string[] = [];
    for (const [name, value] of Object.entries(values)) {
      if (JSON.stringify(this.traits.get(name)) === JSON.stringify(value)) continue;
      this.traits.set(name, value);
      changed.push(name);
    }
    for (const name of changed) this.emit(`change:${name}`, this.traits.get(name));
  }

  /** A custom message to the view, as Python's `widget.send(...)`. */
  sendToView(content: unknown): void {
    this.emit("msg:custom", content);
  }

  on(event: string, callback: Callback): void {
    let set = this.listeners.get(event);
    if (set === undefined) this.listeners.set(event, (set = new Set()));
    set.add(callback);
  }

  off(event?: string | null, callback?: Callback | null): void {
    if (event === undefined || event === null) {
      this.listeners.clear();
    } else if (callback === undefined || callback === null) {
      this.listeners.delete(event);
    } else {
      this.listeners.get(event)?.delete(callback);
    }
  }

  send(content: unknown): void {
    queueMicrotask(() => this.onMessage(content));
  }

  private emit(event: string, ...args: unknown[]): void {
    for (const callback of [...(this.listeners.get(event) ?? [])]) callback(...args);
  }
}
