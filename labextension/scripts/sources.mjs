// The fingerprint of the widget bundle's sources.
//
// Note [Bundle fingerprint]: the build writes this hash into manifest.json next to
// widget.js; gradviz/widget/_bundle.py recomputes it in a dev checkout and refuses to
// serve a bundle built from other sources. Both sides must hash the same bytes the same
// way, so the algorithm is spelled out here and mirrored line for line in Python:
//
//   files  = every path listed in bundle-sources.json (or, for the JupyterLab extension,
//            jupyterlab/extension-sources.json); a directory entry ("src/") means
//            every file below it whose path has no component starting with "."
//   order  = sorted by their POSIX path relative to labextension/ (plain string order; the
//            paths are ASCII, so JavaScript and Python sort them alike)
//   digest = sha256 over, for each file: path (UTF-8), NUL, byte length (decimal ASCII),
//            NUL, the file's bytes
import { createHash } from "node:crypto";
import { readFileSync, readdirSync, statSync } from "node:fs";
import { join, relative, sep } from "node:path";

function walk(root, dir, out) {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    if (entry.name.startsWith(".")) continue;
    const full = join(dir, entry.name);
    if (entry.isDirectory()) walk(root, full, out);
    else if (entry.isFile()) out.push(relative(root, full).split(sep).join("/"));
  }
}

/** The sorted list of source paths (relative, POSIX) that make up the bundle (`spec`: the list file). */
export function bundleSourcePaths(root, specPath = "bundle-sources.json") {
  const spec = JSON.parse(readFileSync(join(root, specPath), "utf8"));
  const paths = [];
  for (const entry of spec.include) {
    if (entry.endsWith("/")) walk(root, join(root, entry), paths);
    else if (statSync(join(root, entry)).isFile()) paths.push(entry);
  }
  const compare = (a, b) => (a < b ? -1 : a > b ? 1 : 0);
  return [...new Set(paths)].sort(compare);
}

/** sha256 (hex) of the bundle's sources, see Note [Bundle fingerprint]. */
export function bundleSourcesSha256(root, specPath = "bundle-sources.json") {
  const hash = createHash("sha256");
  for (const path of bundleSourcePaths(root, specPath)) {
    const data = readFileSync(join(root, path));
    hash.update(Buffer.from(path, "utf8"));
    hash.update(Buffer.from([0]));
    hash.update(Buffer.from(String(data.length), "ascii"));
    hash.update(Buffer.from([0]));
    hash.update(data);
  }
  return hash.digest("hex");
}
