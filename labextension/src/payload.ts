// One validated reader for trait and message payloads, driven by the generated shapes.
//
// generated/widget_protocol.ts holds each protocol shape's JSON Schema (`SHAPES`, generated
// from gradviz/widget/_protocol.py). `readShape` checks a value from the wire against one of
// them and returns it typed as the generated interface, or throws a ProtocolError naming the
// path of the first field that does not fit, what it must be, and what it was. A parser then
// only maps the checked value to the view's own shape where the view needs another one.
// Keys a shape does not list are ignored (a newer kernel may add some); a `$ref` to a shape
// defined elsewhere (the events' `Summary`) is not checked here.

import { SHAPES } from "./generated/widget_protocol.js";

/** A trait value that does not have the documented shape. */
export class ProtocolError extends Error {
  override name = "ProtocolError";
}

/** A value from the wire, in words for an error message ("null", "an array", "the string \"x\"", "number"). */
export function describe(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "an array";
  return typeof value === "string" ? `the string ${JSON.stringify(value.slice(0, 40))}` : typeof value;
}

/** The subset of JSON Schema the generator writes (gradviz/_typescript.py's `type_schema`). */
interface Shape {
  readonly $ref?: string;
  readonly const?: unknown;
  readonly enum?: readonly unknown[];
  readonly anyOf?: readonly Shape[];
  readonly type?: string;
  readonly items?: Shape | false;
  readonly prefixItems?: readonly Shape[];
  readonly properties?: { readonly [field: string]: Shape };
  readonly required?: readonly string[];
  readonly additionalProperties?: Shape | boolean;
}

function isObject(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** What a shape accepts, in words ("an integer", "one of a, b", "a Graph"). */
function expected(shape: Shape): string {
  if (shape.$ref !== undefined) return `a ${shape.$ref.slice(shape.$ref.lastIndexOf("/") + 1)}`;
  if (shape.const !== undefined) return JSON.stringify(shape.const);
  if (shape.enum !== undefined) return `one of ${shape.enum.map((value) => String(value)).join(", ")}`;
  if (shape.anyOf !== undefined) return shape.anyOf.map(expected).join(" or ");
  switch (shape.type) {
    case "integer":
      return "an integer";
    case "number":
      return "a number";
    case "string":
      return "a string";
    case "boolean":
      return "a boolean";
    case "null":
      return "null";
    case "array":
      return shape.prefixItems !== undefined ? `a list of ${shape.prefixItems.length}` : "a list";
    case "object":
      return "an object";
    default:
      return "anything";
  }
}

/** The first problem of `value` against `shape` at `path`, or null when it fits. */
function problem(shape: Shape, value: unknown, path: string): string | null {
  if (shape.$ref !== undefined) {
    const name = shape.$ref.slice(shape.$ref.lastIndexOf("/") + 1);
    const target = SHAPES[name] as Shape | undefined;
    return target === undefined ? null : problem(target, value, path);
  }
  const mismatch = (): string => `${path} must be ${expected(shape)}, got ${describe(value)}`;
  if (shape.const !== undefined) return value === shape.const ? null : `${path} must be ${JSON.stringify(shape.const)}, got ${describe(value)}`;
  if (shape.enum !== undefined) return shape.enum.includes(value) ? null : mismatch();
  if (shape.anyOf !== undefined) {
    const problems = shape.anyOf.map((option) => problem(option, value, path));
    if (problems.some((found) => found === null)) return null;
    // One option of the right kind (an object among null | Graph): its own, more precise problem.
    const near = shape.anyOf.findIndex((option) => isObject(value) && (option.$ref !== undefined || option.type === "object"));
    return near >= 0 ? problems[near]! : mismatch();
  }
  switch (shape.type) {
    case "integer":
      return Number.isSafeInteger(value) ? null : mismatch();
    case "number":
      return typeof value === "number" && Number.isFinite(value) ? null : mismatch();
    case "string":
    case "boolean":
      return typeof value === shape.type ? null : mismatch();
    case "null":
      return value === null ? null : mismatch();
    case "array": {
      if (!Array.isArray(value)) return mismatch();
      if (shape.prefixItems !== undefined) {
        if (value.length !== shape.prefixItems.length) return mismatch();
        for (const [index, item] of shape.prefixItems.entries()) {
          const found = problem(item, value[index], `${path}[${index}]`);
          if (found !== null) return found;
        }
        return null;
      }
      const items = shape.items;
      if (items === undefined || items === false) return null;
      for (const [index, item] of value.entries()) {
        const found = problem(items, item, `${path}[${index}]`);
        if (found !== null) return found;
      }
      return null;
    }
    case "object": {
      if (!isObject(value)) return mismatch();
      for (const field of shape.required ?? []) {
        if (!(field in value)) return `${path}.${field} is missing`;
      }
      for (const [field, fieldShape] of Object.entries(shape.properties ?? {})) {
        if (!(field in value)) continue;
        const found = problem(fieldShape, value[field], `${path}.${field}`);
        if (found !== null) return found;
      }
      const more = shape.additionalProperties;
      if (shape.properties === undefined && typeof more === "object") {
        for (const [key, item] of Object.entries(value)) {
          const found = problem(more, item, `${path}[${JSON.stringify(key)}]`);
          if (found !== null) return found;
        }
      }
      return null;
    }
    default:
      return null;
  }
}

/**
 * Check `value` against the generated shape `name` and return it as that shape's type; a
 * ProtocolError naming the field (`where` is the payload's name: a trait or message type) when
 * it does not fit. The caller names `T`, the generated interface of `name`.
 */
export function readShape<T>(name: string, value: unknown, where: string): T {
  const shape = SHAPES[name] as Shape | undefined;
  if (shape === undefined) throw new Error(`no generated shape named ${JSON.stringify(name)} (generated/widget_protocol.ts)`);
  const found = problem(shape, value, where);
  if (found !== null) throw new ProtocolError(found);
  return value as T;
}
