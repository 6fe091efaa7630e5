// The view's overlay choice and the diff panel (widget.ts's renderView uses one OverlayWatch).
//
// Which overlay is shown is this view's own choice (two views of one widget may show
// different ones); a diff view proposes its first overlay until the user picks one. The
// scene is repainted only when the `overlays` trait, the choice or the scene changed.

import { DiffPanel, parseDiff } from "./diff_panel.js";
import type { GraphScene } from "./draw.js";
import type { OverlayRequestMessage } from "./module_inspector.js";
import { overlayRequestMessage } from "./module_inspector.js";
import { buildScale, OverlayLegend, OverlayPicker, parseOverlays, type Overlay } from "./overlays.js";

/** What the overlay controls call back into the view. */
export interface OverlayWatchCallbacks {
  /** Ask Python for a built-in overlay's values (the picker shows one not computed yet). */
  readonly send: (message: OverlayRequestMessage) => void;
  /** A diff row's node was clicked: select it. */
  readonly select: (id: number) => void;
  /** The choice changed: redraw. */
  readonly changed: () => void;
}

/** The traits and scene an overlay is painted from. */
export interface OverlayInputs {
  /** The `overlays` trait. */
  readonly overlays: unknown;
  /** The `diff` trait. */
  readonly diff: unknown;
  /** The drawn scene (null: nothing drawn yet). */
  readonly scene: GraphScene | null;
  /** The nodes a drawn box stands for (null: the box is one node). */
  readonly membersOf: (id: number) => readonly number[] | null;
}

/** The overlay picker, its legend and the diff panel, and which overlay this view shows. */
export class OverlayWatch {
  readonly legend = new OverlayLegend();
  readonly picker: OverlayPicker;
  readonly diffPanel: DiffPanel;
  private active: string | null = null;
  /** The user chose an overlay (a diff view's first overlay no longer applies). */
  private chosen = false;
  private list: Overlay[] = [];
  /** What the scene was last painted with: the trait object, the choice and the scene. */
  private paintedWith: [unknown, string | null, GraphScene | null] = [undefined, null, null];

  constructor(callbacks: OverlayWatchCallbacks) {
    this.picker = new OverlayPicker((name) => {
      this.active = name;
      this.chosen = true;
      const picked = this.list.find((overlay) => overlay.name === name);
      if (picked !== undefined && picked.values === null) callbacks.send(overlayRequestMessage(picked.name));
      callbacks.changed();
    });
    this.diffPanel = new DiffPanel((id) => callbacks.select(id));
  }

  /** Show the diff panel and paint the chosen overlay (when anything it depends on changed). */
  show({ overlays, diff: diffTrait, scene, membersOf }: OverlayInputs): void {
    const diff = parseDiff(diffTrait);
    this.diffPanel.update(diffTrait, diff);
    if (!this.chosen && diff?.overlay != null) this.active = diff.overlay;
    const [trait, active, painted] = this.paintedWith;
    if (trait === overlays && active === this.active && painted === scene) return;
    this.list = parseOverlays(overlays);
    if (this.active !== null && !this.list.some((overlay) => overlay.name === this.active)) this.active = null;
    const overlay = this.list.find((item) => item.name === this.active) ?? null;
    const scale = overlay === null || overlay.values === null ? null : buildScale(overlay);
    this.picker.update(this.list, this.active);
    this.legend.update(overlay, scale);
    scene?.setOverlay(overlay, scale, membersOf);
    this.paintedWith = [overlays, this.active, scene];
  }
}
