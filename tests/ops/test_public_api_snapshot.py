"""The public API the op declarations produce stays the API gradviz had.

``public_api_snapshot.json`` was written by ``scripts/snapshot_public_api.py`` from the package
as it was before the namespaces, method tables, in-place lists and ``out=`` list were generated
from the op declarations (Note [Declared once] in ``gradviz/ops/_registry.py``). Each set here
must equal the snapshot's: a name gained or lost, or a name bound to another function, fails.
A deliberate API change re-runs the script and says why in its commit.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent

SNAPSHOT = json.loads((Path(__file__).parent / "public_api_snapshot.json").read_text())
# taken in a fresh interpreter, as the script takes it: in this one, tests that ran before have
# imported subpackages (gradviz.widget, gradviz.course), which then show in dir(gradviz)
CURRENT = json.loads(subprocess.run(
    [sys.executable, "-c", "import json, sys; sys.path.insert(0, sys.argv[1]); import snapshot_public_api; "
                           "print(json.dumps(snapshot_public_api.snapshot()))", str(REPO / "scripts")],
    capture_output=True, text=True, check=True, cwd=REPO).stdout)


@pytest.mark.parametrize("key", sorted(SNAPSHOT))
def test_public_api_matches_the_snapshot(key):
    want, got = SNAPSHOT[key], CURRENT[key]
    if isinstance(want, dict):
        changed = {name: (want.get(name), got.get(name)) for name in set(want) | set(got)
                   if want.get(name) != got.get(name)}
        assert changed == {}, f"{key}: name -> (snapshot, now)"
    else:
        assert sorted(set(got) - set(want)) == [], f"{key}: names gained"
        assert sorted(set(want) - set(got)) == [], f"{key}: names lost"


def test_no_name_is_listed_twice_in_all():
    import gradviz

    assert len(gradviz.__all__) == len(set(gradviz.__all__))
