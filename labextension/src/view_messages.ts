// The custom messages Python sends a view (docs/widget_protocol.md, "Python → browser"),
// routed to the view's handlers.
//
// Each message is recognised by its `type` and checked against its generated shape by its
// parser (states_sync.ts, doctor.ts, model.ts): a message of a known type that does not fit
// goes to `malformed` with the field named, never dropped in silence (a lost ack would leave
// the view's "…" running). A message of an unknown type is ignored: a newer kernel may send
// more kinds than this view knows.

import { parseProgress, type Progress } from "./doctor.js";
import { parseAck, parseErrorReply, type AckMessage } from "./model.js";
import { parseStatesDelta, type StatesDelta } from "./states_sync.js";

/** What a view does with each kind of message. */
export interface MessageHandlers {
  /** A Step's node states (protocol 6): apply them to the view's copy. */
  readonly delta: (delta: StatesDelta) => void;
  /** Check gradients is running: how far it got. */
  readonly progress: (progress: Progress) => void;
  /** Python refused a malformed message from this view (no command ran): why. */
  readonly refused: (reason: string) => void;
  /** Python answered a command. */
  readonly ack: (ack: AckMessage) => void;
  /** A message of a known type did not have its shape: the ProtocolError. */
  readonly malformed: (error: unknown) => void;
}

/** Route one custom message to its handler (see the module comment). */
export function dispatchMessage(content: unknown, handlers: MessageHandlers): void {
  let route: (() => void) | null;
  try {
    route = routeOf(content, handlers);
  } catch (error) {
    handlers.malformed(error);
    return;
  }
  route?.();
}

function routeOf(content: unknown, handlers: MessageHandlers): (() => void) | null {
  const delta = parseStatesDelta(content);
  if (delta !== null) return () => handlers.delta(delta);
  const progress = parseProgress(content);
  if (progress !== null) return () => handlers.progress(progress);
  const reply = parseErrorReply(content);
  if (reply !== null) return () => handlers.refused(reply.reason);
  const ack = parseAck(content);
  if (ack !== null) return () => handlers.ack(ack);
  return null;
}
