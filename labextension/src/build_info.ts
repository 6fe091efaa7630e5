// Constants that the build script (scripts/build.mjs) substitutes at bundle time.

declare const __GV_VERSION__: string;
declare const __GV_SOURCES_SHA256__: string;

/** The package version of this bundle. */
export const VERSION: string = typeof __GV_VERSION__ === "string" ? __GV_VERSION__ : "dev";

/** Fingerprint of the sources this bundle was built from (Note [Bundle fingerprint]). */
export const SOURCES_SHA256: string = typeof __GV_SOURCES_SHA256__ === "string" ? __GV_SOURCES_SHA256__ : "dev";

/**
 * Key for state shared by every widget of a page. anywidget evaluates the module once per
 * widget, so module-level singletons are not shared; globalThis is. The key names the build,
 * so that a page that loaded two different bundles never mixes their workers.
 */
export const SHARED_KEY = `__gradviz_widget_${VERSION}_${SOURCES_SHA256.slice(0, 12)}`;
