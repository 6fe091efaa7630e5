"""The compiled engine's C lives in ``gradviz_ext/c/*.h`` (issue 19 item 3): the ``.pxd`` files
declare it and hold none, so ``gradviz_ext/*.py`` with their ``.pxd`` read as Python and
Cython, and each header explains itself and is listed in docs/architecture.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEADERS = sorted((ROOT / "gradviz_ext" / "c").glob("*.h"))


def test_no_pxd_holds_inline_c():
    offenders = [path.name for path in (ROOT / "gradviz_ext").glob("*.pxd")
                 if re.search(r'cdef extern from \*:\s*\n\s*"""', path.read_text())]
    assert offenders == [], f"inline C in {offenders}: move it into gradviz_ext/c/<topic>.h"


def test_the_headers_exist():
    assert len(HEADERS) >= 7, [path.name for path in HEADERS]


@pytest.mark.parametrize("header", HEADERS, ids=lambda path: path.name)
def test_header_opens_with_its_purpose_and_is_guarded(header):
    text = header.read_text()
    assert text.startswith("/* "), f"{header.name} must open with a comment saying what it holds"
    guard = "GRADVIZ_" + re.sub(r"\W", "_", header.name).upper()
    assert f"#ifndef {guard}" in text and f"#define {guard}" in text, (
        f"{header.name} needs the include guard {guard}: several .pxd files include it")


@pytest.mark.parametrize("header", HEADERS, ids=lambda path: path.name)
def test_header_is_documented_and_used(header):
    architecture = (ROOT / "docs" / "architecture.md").read_text()
    assert f"`{header.name}`" in architecture, f"list {header.name} in docs/architecture.md"
    includes = "".join(path.read_text() for path in (ROOT / "gradviz_ext").glob("*.pxd"))
    includes += "".join(path.read_text() for path in HEADERS if path != header)
    assert f'"c/{header.name}"' in includes or f'"{header.name}"' in includes, (
        f"nothing includes {header.name}")
