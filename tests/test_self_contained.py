"""The repository is self-contained: code, tests and docs cite design documents that are in
``docs/`` (function_contract.md, design.md, style.md, frontend_notes.md, ...), never notes kept
outside the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
FOLDERS = ["gradviz", "gradviz_ext", "tests", "docs", "scripts", "bench", "notebooks",
           "labextension/src", "labextension/test", "labextension/scripts"]
SUFFIXES = {".py", ".pxd", ".md", ".ts", ".mjs", ".js", ".ipynb", ".toml", ".json", ""}
# Built from pieces so that this file does not match itself.
OUTSIDE = re.compile("|".join([
    r"\.\./" + "shared", "/work/" + "shared", r"\bshared/" + "spec", r"\bspec/" + r"0\d\d",
    r"\bDESIGN" + r"\.md", r"\bSEMANTICS\b", r"\bSTYLE" + r"\.md", r"\bSTYLE:",
    r"\bFRONTEND" + "_NOTES",
]))


def _files():
    yield ROOT / "README.md"
    yield ROOT / "pyproject.toml"
    for folder in FOLDERS:
        for path in (ROOT / folder).rglob("*"):
            parts = set(path.relative_to(ROOT).parts)
            if parts & {"node_modules", "dist", "_build", "api", "static", "__pycache__"}:
                continue
            if path.is_file() and path.suffix in SUFFIXES and path.stat().st_size < 2_000_000:
                yield path


def test_no_citation_of_documents_outside_the_repository():
    found = []
    for path in _files():
        text = path.read_text(encoding="utf-8", errors="replace")
        for number, line in enumerate(text.splitlines(), 1):
            if OUTSIDE.search(line):
                found.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()[:100]}")
    assert not found, ("cite the page in docs/ that says it (docs/function_contract.md, "
                       "docs/design.md, docs/style.md, docs/frontend_notes.md):\n"
                       + "\n".join(found))


def test_the_pattern_finds_an_outside_citation():
    semantics, shared = "SEMANT" + "ICS", "../sha" + "red/"
    assert OUTSIDE.search(f"# as {semantics} 9 says")
    assert OUTSIDE.search(f"see {shared}DES" + "IGN.md")
    assert not OUTSIDE.search("# contract rule 9 (docs/function_contract.md)")
