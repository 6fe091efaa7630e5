"""The committed schema files are exactly what the Python definitions generate.

Regenerate after changing ``gradviz/instrument/_schema.py``::

    python -m gradviz.instrument.schema > docs/schema/trace.schema.json
    python -m gradviz.instrument.schema --typescript > labextension/src/generated/events.ts
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import jsonschema

from gradviz.instrument._schema import EVENT_KINDS, SCHEMA_VERSION, json_schema, typescript

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
SCHEMA_FILE = os.path.join(ROOT, "docs", "schema", "trace.schema.json")
TS_FILE = os.path.join(ROOT, "labextension", "src", "generated", "events.ts")
REGENERATE = "regenerate with `python -m gradviz.instrument.schema{} > {}`"


def test_committed_json_schema_equals_the_generated_one():
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        committed = handle.read()
    generated = json.dumps(json_schema(), indent=2) + "\n"
    assert committed == generated, REGENERATE.format("", "docs/schema/trace.schema.json")


def test_committed_typescript_equals_what_the_committed_schema_generates():
    with open(SCHEMA_FILE, encoding="utf-8") as handle:
        schema = json.load(handle)
    with open(TS_FILE, encoding="utf-8") as handle:
        committed = handle.read()
    assert committed == typescript(schema), REGENERATE.format(
        " --typescript", "labextension/src/generated/events.ts")


def test_schema_is_a_valid_draft_2020_12_schema_with_every_kind():
    schema = json_schema()
    jsonschema.Draft202012Validator.check_schema(schema)
    assert schema["properties"]["schema_version"] == {"const": SCHEMA_VERSION}
    kinds = [schema["$defs"][ref["$ref"].rsplit("/", 1)[1]]["properties"]["kind"]["const"]
             for ref in schema["$defs"]["Event"]["anyOf"]]
    assert kinds == list(EVENT_KINDS)
    with open(TS_FILE, encoding="utf-8") as handle:
        ts = handle.read()
    for kind in EVENT_KINDS:
        assert f'kind: "{kind}";' in ts


def test_the_module_prints_the_schema():
    result = subprocess.run([sys.executable, "-m", "gradviz.instrument.schema"], cwd=ROOT,
                            capture_output=True, text=True, timeout=120, check=True)
    assert json.loads(result.stdout) == json_schema()
    bad = subprocess.run([sys.executable, "-m", "gradviz.instrument.schema", "--yaml"], cwd=ROOT,
                         capture_output=True, text=True, timeout=120)
    assert bad.returncode == 2 and "usage" in bad.stderr
