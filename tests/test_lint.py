"""The lint configuration stays honest (Note [Lint configuration] in pyproject.toml).

``scripts/test`` runs ``ruff check`` over the repository; this file checks the one blanket
exception the configuration makes: ruff cannot read Cython's ``.pxd`` files, so undefined
names (F821) are ignored in the compiled core's pure-Python-mode modules. Every name ruff
reports there must be declared in the ``.pxd`` beside the module, so a real typo still fails.
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
RUFF = [sys.executable, "-m", "ruff"]


def _undefined_names(module: Path) -> set[str]:
    result = subprocess.run(
        [*RUFF, "check", "--isolated", "--select", "F821", "--output-format", "json", str(module)],
        capture_output=True, text=True, cwd=REPO)
    assert result.returncode in (0, 1), result.stderr
    return {re.search(r"`([^`]+)`", finding["message"]).group(1) for finding in json.loads(result.stdout)}


def test_names_undefined_to_ruff_in_the_core_are_declared_in_its_pxd_files():
    checked = 0
    for module in sorted((REPO / "gradviz_ext").glob("_*.py")):
        names = _undefined_names(module)
        if not names:
            continue
        declarations = module.with_suffix(".pxd")
        assert declarations.exists(), f"{module.name}: undefined names {sorted(names)} and no .pxd beside it"
        text = declarations.read_text()
        missing = sorted(name for name in names if not re.search(rf"\b{re.escape(name)}\b", text))
        assert not missing, (f"{module.name} uses {missing}, declared nowhere (not in {declarations.name}): "
                             "a typo, or a declaration the .pxd lacks")
        checked += len(names)
    assert checked > 0, "ruff found no undefined names in gradviz_ext: drop the F821 ignores in pyproject.toml"


def test_the_f821_ignores_name_exactly_the_modules_that_need_them():
    config = (REPO / "pyproject.toml").read_text()
    ignored = set(re.findall(r'^"gradviz_ext/(_\w+\.py)" = \["F821"', config, flags=re.MULTILINE))
    needed = {module.name for module in (REPO / "gradviz_ext").glob("_*.py") if _undefined_names(module)}
    assert ignored == needed, f"F821 ignored for {sorted(ignored)}, needed for {sorted(needed)}"

