// Which synced traits a view watches, and what a change of each means (docs/widget_protocol.md).
//
// Python owns all state; a view only reacts. A new `graph` is laid out once. A change of a
// *state* trait means Python ran a command (or user code moved the session), so the "…" of a
// pending command ends; a change of a *view* trait only changes what is shown. One Step
// changes several traits, each with its own change event, and every restyle reads all of
// them, so restyles are coalesced into one per task (a microtask: it still runs before the
// browser paints).

/** The part of anywidget's model interface a view uses. */
export interface WidgetModel {
  get(name: string): unknown;
  on(event: string, callback: (...args: unknown[]) => void): void;
  off(event?: string | null, callback?: ((...args: unknown[]) => void) | null): void;
  send(content: unknown, callbacks?: unknown, buffers?: unknown[]): void;
  /** The ipywidgets widget manager (anywidget passes it through); absent in other hosts. */
  widget_manager?: { callbacks?: (view?: unknown) => unknown };
}

/** Traits whose change means the session moved: a pending command is over. */
export const STATE_TRAITS = [
  "states", "states_seq", "states_base", "current", "status", "error", "protocol_version", "commands", "last_event",
] as const;

/** Traits whose change only changes what is shown. */
export const VIEW_TRAITS = [
  "selected", "inspection", "doctor", "stopped_at", "delivered", "history", "history_position", "output", "overlays",
  "diff", "selected_module",
] as const;

/** What a view does when the traits change or a message comes. */
export interface TraitHandlers {
  /** The `graph` trait changed: lay the new graph out. */
  readonly graph: () => void;
  /** A state trait changed (called before the coalesced restyle). */
  readonly moved: () => void;
  /** Restyle from the traits (at most once per task). */
  readonly restyle: () => void;
  /** A custom message from Python (view_messages.ts). */
  readonly message: (content: unknown) => void;
}

/** Watch `model` for the view; returns the function that stops watching. */
export function watchTraits(model: WidgetModel, handlers: TraitHandlers): () => void {
  let queued = false;
  const queueRestyle = (): void => {
    if (queued) return;
    queued = true;
    queueMicrotask(() => {
      queued = false;
      handlers.restyle();
    });
  };
  const onMove = (): void => {
    handlers.moved();
    queueRestyle();
  };
  const subscriptions: [string, (...args: unknown[]) => void][] = [
    ["change:graph", handlers.graph],
    ...STATE_TRAITS.map((name): [string, () => void] => [`change:${name}`, onMove]),
    ...VIEW_TRAITS.map((name): [string, () => void] => [`change:${name}`, queueRestyle]),
    ["msg:custom", handlers.message],
  ];
  for (const [event, callback] of subscriptions) model.on(event, callback);
  return () => {
    for (const [event, callback] of subscriptions) model.off(event, callback);
  };
}
