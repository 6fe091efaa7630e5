"""Strict validation of trace data against the generated JSON Schema, without dependencies.

The schema ``_schema.json_schema()`` produces uses a small part of JSON Schema: ``type``,
``const``, ``enum``, ``anyOf``, ``$ref``, ``properties`` / ``required`` /
``additionalProperties``, ``items`` (an array without ``items`` is checked as an array only,
which lets a caller check a document's outline first and its items one by one). This module
checks exactly that part, more strictly
than JSON allows in one respect: an ``integer`` must be a Python ``int`` (never ``1.0`` and
never ``true``). Errors name the path of the offending value (``events[3].grads_in[0].shape``).
The test suite checks the same data with the ``jsonschema`` package as a second opinion.
"""

from __future__ import annotations

import math

__all__ = ["SchemaError", "Validator", "validate"]

_MAX_INTEGER = 2 ** 53  # beyond this a JavaScript front end would lose precision
_INTEGER = {"type": "integer"}


class SchemaError(ValueError):
    """Data does not match the schema; ``path`` says where."""

    def __init__(self, path: str, message: str):
        super().__init__(f"{path or 'the trace'}: {message}")
        self.path = path


def _describe(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _type_ok(kind: str, value) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and abs(value) <= _MAX_INTEGER
    if kind == "number":
        if isinstance(value, bool):
            return False
        if isinstance(value, int):
            return abs(value) <= _MAX_INTEGER
        return isinstance(value, float) and math.isfinite(value)
    if kind == "string":
        return isinstance(value, str)
    if kind == "boolean":
        return isinstance(value, bool)
    if kind == "null":
        return value is None
    if kind == "array":
        return isinstance(value, list)
    if kind == "object":
        return isinstance(value, dict)
    raise ValueError(f"unsupported schema type {kind!r}")


class Validator:
    """Checks values against ``root`` (a schema with ``$defs``), one definition at a time."""

    def __init__(self, root: dict):
        self.root = root

    def check_definition(self, name: str, value, path: str) -> None:
        """Raise :class:`SchemaError` unless ``value`` matches ``$defs/name``."""
        self.check(self.root["$defs"][name], value, path)

    def resolve(self, ref: str) -> dict:
        if not ref.startswith("#/$defs/"):
            raise ValueError(f"unsupported $ref {ref!r}")
        return self.root["$defs"][ref[len("#/$defs/"):]]

    def check(self, schema: dict, value, path: str) -> None:
        if "$ref" in schema:
            self.check(self.resolve(schema["$ref"]), value, path)
            return
        if "const" in schema:
            expected = schema["const"]
            if type(value) is not type(expected) or value != expected:
                raise SchemaError(path, f"expected {expected!r}, got {_describe(value)}")
            return
        if "enum" in schema:
            if not isinstance(value, str) or value not in schema["enum"]:
                options = ", ".join(repr(v) for v in schema["enum"])
                raise SchemaError(path, f"expected one of {options}, got {_describe(value)}")
            return
        if "anyOf" in schema:
            self.check_any(schema["anyOf"], value, path)
            return
        kind = schema["type"]
        if not _type_ok(kind, value):
            raise SchemaError(path, f"expected {_article(kind)}, got {_describe(value)}")
        if kind == "array":
            items = schema.get("items")
            if items is None:
                return
            if items == _INTEGER and all(type(item) is int and -_MAX_INTEGER <= item <= _MAX_INTEGER
                                         for item in value):
                return  # the common all-integer array, checked without a call per item
            for index, item in enumerate(value):
                self.check(items, item, f"{path}[{index}]")
        elif kind == "object":
            self.check_object(schema, value, path)

    def check_object(self, schema, value, path):
        properties = schema.get("properties")
        if properties is None:
            values = schema.get("additionalProperties")
            for key, item in value.items():
                if not isinstance(key, str):
                    raise SchemaError(path, f"keys must be strings, got {_describe(key)}")
                if isinstance(values, dict):
                    self.check(values, item, f"{path}.{key}" if path else key)
            return
        for key in schema.get("required", ()):
            if key not in value:
                raise SchemaError(path, f"missing the field {key!r}")
        for key, item in value.items():
            field = properties.get(key)
            if field is None:
                raise SchemaError(path, f"unknown field {_describe(key)}")
            self.check(field, item, f"{path}.{key}" if path else key)

    def check_any(self, options, value, path):
        # Events: pick the alternative by its ``kind`` constant, for a precise message.
        if isinstance(value, dict) and all("$ref" in o for o in options):
            by_kind = {}
            for option in options:
                target = self.resolve(option["$ref"])
                kind = target.get("properties", {}).get("kind", {}).get("const")
                if kind is not None:
                    by_kind[kind] = target
            if by_kind and len(by_kind) == len(options):
                kind = value.get("kind")
                if kind not in by_kind:
                    raise SchemaError(path, f"unknown event kind {_describe(kind)}")
                self.check(by_kind[kind], value, path)
                return
        errors = []
        for option in options:
            try:
                self.check(option, value, path)
                return
            except SchemaError as exc:
                errors.append(exc)
        if len(errors) == 1:
            raise errors[0]
        expected = " or ".join(_expected(self, o) for o in options)
        raise SchemaError(path, f"expected {expected}, got {_describe(value)}")


def _expected(validator, schema) -> str:
    if "$ref" in schema:
        return f"a {schema['$ref'].rsplit('/', 1)[1]} object"
    if "const" in schema:
        return repr(schema["const"])
    if "enum" in schema:
        return " or ".join(repr(v) for v in schema["enum"])
    return _article(schema.get("type", "value"))


def _article(kind: str) -> str:
    return {"integer": "an integer", "object": "an object", "array": "an array",
            "null": "null", "number": "a finite number"}.get(kind, f"a {kind}")


def validate(schema: dict, value, path: str = "", definition: str | None = None) -> None:
    """Raise :class:`SchemaError` unless ``value`` matches ``schema`` (or ``$defs/definition``)."""
    validator = Validator(schema)
    target = schema if definition is None else schema["$defs"][definition]
    validator.check(target, value, path)
