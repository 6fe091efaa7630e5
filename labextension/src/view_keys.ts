// The widget-wide keys (widget.ts's renderView): `/` or Ctrl+F (Cmd+F) while the widget has
// focus goes to the search box. The graph's own keys (arrows, Enter, command letters) are
// keys.ts's and draw.ts's, on the canvas only.

/** The modifier state and key of a key press (a KeyboardEvent's fields this module reads). */
export interface KeyPress {
  readonly key: string;
  readonly ctrlKey: boolean;
  readonly metaKey: boolean;
  readonly altKey: boolean;
}

/** Whether a key press asks for the search box: `/` alone, or Ctrl+F / Cmd+F. */
export function isFindKey(press: KeyPress): boolean {
  return (press.key === "/" && !press.ctrlKey && !press.metaKey && !press.altKey) || ((press.ctrlKey || press.metaKey) && press.key === "f");
}

/** Focus (and select the text of) `search` when a find key is pressed inside `root`, outside a text field. */
export function watchFindKey(root: HTMLElement, search: HTMLInputElement): void {
  root.addEventListener("keydown", (event) => {
    const typing = event.target instanceof HTMLInputElement || event.target instanceof HTMLTextAreaElement;
    if (!isFindKey(event) || typing) return;
    event.preventDefault();
    event.stopPropagation();
    search.focus();
    search.select();
  });
}
