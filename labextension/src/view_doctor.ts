// The view's "Check gradients" state (widget.ts's renderView uses one DoctorWatch).
//
// Between the click and Python's answer nothing in the traits says a check was asked for, so
// the view keeps that itself: pending (clicked, neither a new `doctor` run nor an ack yet), the
// latest progress message of the running check, and which run's panel the user closed (its
// marks are hidden too). The panel itself and the marks are doctor.ts's.

import { DoctorPanel, findingMarks, panelContent, parseDoctor, type DoctorState, type NumberOf, type Progress, type Severity } from "./doctor.js";

/** What the doctor panel calls back into the view. */
export interface DoctorWatchCallbacks {
  /** A finding's node was clicked: show it. */
  readonly goTo: (node: number) => void;
  /** The panel was closed: redraw. */
  readonly changed: () => void;
}

/** The doctor panel and the view's own state of the check (pending, progress, dismissed). */
export class DoctorWatch {
  readonly panel: DoctorPanel;
  /** Check gradients: clicked, and Python has not answered yet (neither `doctor` nor an ack). */
  private pending = false;
  /** The latest progress message of the check that is running. */
  private progress: Progress | null = null;
  /** The `run` of the check whose panel the user closed (its marks are hidden too). */
  private dismissedRun: number | null = null;
  private lastRun: number | null = null;

  constructor(callbacks: DoctorWatchCallbacks) {
    this.panel = new DoctorPanel(
      (node) => callbacks.goTo(node),
      () => {
        this.dismissedRun = this.lastRun;
        callbacks.changed();
      },
    );
  }

  /** Check gradients was clicked (a new check: nothing dismissed, no progress yet). */
  started(): void {
    this.pending = true;
    this.progress = null;
    this.dismissedRun = null;
  }

  /** Python answered the command (an ack, or a refusal), or can no longer answer. */
  answered(): void {
    this.pending = false;
  }

  /** A progress message of the running check. */
  setProgress(progress: Progress): void {
    this.progress = progress;
  }

  /** The `doctor` trait; a new check ends the "clicked, no answer yet" wait. */
  read(trait: unknown): DoctorState | null {
    const doctor = parseDoctor(trait);
    if (doctor !== null && doctor.run !== this.lastRun) {
      this.lastRun = doctor.run;
      this.pending = false;
    }
    if (doctor?.state !== "checking") this.progress = null;
    return doctor;
  }

  /** The check to show: none when the user closed this run's panel (and none is pending). */
  shown(doctor: DoctorState | null): DoctorState | null {
    return doctor !== null && doctor.run === this.dismissedRun && !this.pending ? null : doctor;
  }

  /** The nodes to mark on the graph for the shown check. */
  marks(shown: DoctorState | null): Map<number, Severity> {
    return findingMarks(shown);
  }

  /** A check is asked for or running: the button is off. */
  checking(doctor: DoctorState | null): boolean {
    return this.pending || doctor?.state === "checking";
  }

  /** Redraw the panel for the shown check; `numberOf` names a node as the graph shows it. */
  update(shown: DoctorState | null, numberOf: NumberOf): void {
    this.panel.update(panelContent(shown, this.progress, this.pending, numberOf));
  }
}
