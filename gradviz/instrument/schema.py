"""Print the trace schema: ``python -m gradviz.instrument.schema > docs/schema/trace.schema.json``
(JSON Schema) or ``... --typescript > labextension/src/generated/events.ts``."""

from ._schema import EVENT_KINDS, SCHEMA_VERSION, json_schema, main, typescript

__all__ = ["json_schema", "typescript", "EVENT_KINDS", "SCHEMA_VERSION"]

if __name__ == "__main__":
    raise SystemExit(main())
