import assert from "node:assert/strict";
import { test } from "node:test";

import { isFindKey } from "../src/view_keys.js";

const press = (key: string, modifiers: { ctrlKey?: boolean; metaKey?: boolean; altKey?: boolean } = {}) => ({
  key,
  ctrlKey: modifiers.ctrlKey ?? false,
  metaKey: modifiers.metaKey ?? false,
  altKey: modifiers.altKey ?? false,
});

test("slash alone and Ctrl+F / Cmd+F open the search box", () => {
  assert.equal(isFindKey(press("/")), true);
  assert.equal(isFindKey(press("f", { ctrlKey: true })), true);
  assert.equal(isFindKey(press("f", { metaKey: true })), true);
});

test("other keys, and slash with a modifier, do not", () => {
  assert.equal(isFindKey(press("f")), false);
  assert.equal(isFindKey(press("/", { ctrlKey: true })), false);
  assert.equal(isFindKey(press("/", { altKey: true })), false);
  assert.equal(isFindKey(press("s")), false);
});
