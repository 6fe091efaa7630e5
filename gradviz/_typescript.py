"""The one TypeScript emitter of gradviz's generated files.

Two sets of declarations become TypeScript: the trace events (``gradviz/instrument/_schema.py``,
giving ``labextension/src/generated/events.ts``) and the widget protocol
(``gradviz/widget/_protocol.py``, giving ``labextension/src/generated/widget_protocol.ts``).
Both are Python types (``TypedDict``, ``Literal``, unions); this module turns such a type into
a JSON Schema fragment (:func:`type_schema`, :func:`object_schema`) and a JSON Schema fragment
into TypeScript (:func:`ts_type`, :func:`ts_interface`).

Note [Through JSON Schema]
--------------------------
The events' TypeScript is generated from the *committed* JSON Schema of a trace file (the test
checks ``events.ts`` against ``docs/schema/trace.schema.json``, so the two cannot drift), so
the TypeScript side has to read JSON Schema. The widget protocol goes the same way (Python type
-> schema fragment -> TypeScript) rather than having a second Python-type-to-TypeScript
printer: a type that has a name of its own in the generated file (an alias such as
``NodeState``, or an imported one such as ``Summary``) becomes a ``$ref`` to that name, which
the TypeScript side prints as the name.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Literal, NotRequired, Union

__all__ = ["is_typeddict", "type_schema", "object_schema", "ts_type", "ts_literal", "ts_interface"]

# Types printed by name: id(the Python object) -> the name of its definition.
Names = Mapping[int, str]
_NO_NAMES: dict[int, str] = {}


def is_typeddict(tp: object) -> bool:
    """Whether ``tp`` is a ``TypedDict`` class."""
    return isinstance(tp, type) and issubclass(tp, dict) and hasattr(tp, "__annotations__")


def type_schema(tp: object, names: Names = _NO_NAMES) -> dict:
    """The JSON Schema of a Python annotation; a type in ``names`` becomes a ``$ref``."""
    if id(tp) in names:
        return {"$ref": f"#/$defs/{names[id(tp)]}"}
    origin = typing.get_origin(tp)
    args = typing.get_args(tp)
    if tp is int:
        return {"type": "integer"}
    if tp is float:
        return {"type": "number"}
    if tp is str:
        return {"type": "string"}
    if tp is bool:
        return {"type": "boolean"}
    if tp is type(None) or tp is None:
        return {"type": "null"}
    if tp is object:
        return {}
    if tp is dict:
        return {"type": "object"}
    if origin is Literal:
        if len(args) == 1:
            return {"const": args[0]}
        return {"enum": list(args)}
    if origin in (Union, types.UnionType):
        options: list = []
        for arg in args:
            schema = type_schema(arg, names)
            # flatten nested unions (Number | None)
            options.extend(schema["anyOf"] if set(schema) == {"anyOf"} else [schema])
        return {"anyOf": options}
    if origin is list:
        return {"type": "array", "items": type_schema(args[0], names)}
    if origin is tuple:
        return {"type": "array", "prefixItems": [type_schema(arg, names) for arg in args],
                "items": False}
    if origin is dict:
        return {"type": "object", "additionalProperties": type_schema(args[1], names)}
    if is_typeddict(tp):
        return {"$ref": f"#/$defs/{typing.cast(type, tp).__name__}"}
    raise TypeError(f"no JSON Schema for {tp!r}: expected int, float, str, bool, None, object, "
                    "a Literal, a union, list, tuple, dict or a TypedDict")


def object_schema(tp: type, names: Names = _NO_NAMES, overrides: dict | None = None) -> dict:
    """The JSON Schema of a ``TypedDict``: its fields, which are required, its docstring."""
    hints = typing.get_type_hints(tp)
    properties = {name: type_schema(hint, names) for name, hint in hints.items()}
    properties.update(overrides or {})
    # NotRequired[...] marks an optional key (read from the annotations themselves: with
    # postponed annotations Python 3.11's __required_keys__ does not see it); so does total=False.
    extras = typing.get_type_hints(tp, include_extras=True)
    optional_keys: frozenset[str] = getattr(tp, "__optional_keys__", frozenset())
    required = [name for name in hints
                if typing.get_origin(extras[name]) is not NotRequired and name not in optional_keys]
    schema = {"type": "object", "properties": properties, "required": required,
              "additionalProperties": False}
    doc = (tp.__doc__ or "").strip()
    if doc and tp.__doc__ is not dict.__doc__ and not doc.startswith(f"{tp.__name__}("):
        schema["description"] = " ".join(doc.split())
    return schema


def ts_literal(value: object) -> str:
    """A JSON value as a TypeScript literal."""
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return str(value).lower() if isinstance(value, bool) else str(value)


def ts_type(schema: dict) -> str:
    """The TypeScript type of a JSON Schema fragment (as :func:`type_schema` writes them)."""
    if "$ref" in schema:
        return schema["$ref"].rsplit("/", 1)[1]
    if "const" in schema:
        return ts_literal(schema["const"])
    if "enum" in schema:
        return " | ".join(ts_literal(v) for v in schema["enum"])
    if "anyOf" in schema:
        return " | ".join(ts_type(s) for s in schema["anyOf"])
    if not schema:
        return "unknown"
    kind = schema.get("type")
    if kind in ("integer", "number"):
        return "number"
    if kind in ("string", "boolean", "null"):
        return kind
    if kind == "array":
        if "prefixItems" in schema:
            return "[" + ", ".join(ts_type(s) for s in schema["prefixItems"]) + "]"
        inner = ts_type(schema["items"])
        return f"({inner})[]" if "|" in inner else f"{inner}[]"
    if kind == "object":
        values = schema.get("additionalProperties")
        if isinstance(values, dict):
            return f"{{ [key: string]: {ts_type(values)} }}"
        return "{ [key: string]: unknown }"
    raise TypeError(f"no TypeScript type for {schema!r}")


def ts_interface(name: str, schema: dict, *, open_keys: bool = False) -> list[str]:
    """The lines of ``export interface name`` for an object schema; ``open_keys``: the object
    may carry keys of its own beyond those listed (``[more: string]: unknown``)."""
    lines = []
    if "description" in schema:
        lines.append(f"/** {schema['description']} */")
    lines.append(f"export interface {name} {{")
    required = set(schema.get("required", ()))
    for field, field_schema in schema["properties"].items():
        optional = "" if field in required else "?"
        lines.append(f"  {field}{optional}: {ts_type(field_schema)};")
    if open_keys:
        lines.append("  [more: string]: unknown;")
    lines.append("}")
    return lines
