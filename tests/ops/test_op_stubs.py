"""The committed type stubs of the names bound at import are what their generator writes, and a
type checker reading them sees the ops and Tensor methods a user program calls (Note [Op stubs]
in ``scripts/generate_op_stubs.py``).

Regenerate after adding or changing an op::

    .venv/bin/python scripts/generate_op_stubs.py
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent.parent
REGENERATE = "regenerate with `.venv/bin/python scripts/generate_op_stubs.py`"

# written in a fresh interpreter: tests that ran before may have imported more of gradviz
GENERATED = json.loads(subprocess.run(
    [sys.executable, "-c", "import json, sys; sys.path.insert(0, sys.argv[1]); sys.path.insert(0, sys.argv[2]); "
                           "import generate_op_stubs as g; "
                           "print(json.dumps({str(p): t for p, t in g.generated().items()}))",
     str(REPO / "scripts"), str(REPO)],
    capture_output=True, text=True, check=True, cwd=REPO).stdout)


@pytest.mark.parametrize("path", sorted(GENERATED), ids=lambda path: Path(path).name)
def test_committed_stub_equals_the_generated_one(path):
    assert Path(path).read_text() == GENERATED[path], REGENERATE


def test_the_stubs_ship_in_the_wheel():
    text = (REPO / "pyproject.toml").read_text()
    assert (REPO / "gradviz" / "py.typed").exists()
    assert 'gradviz = ["py.typed", "*.pyi"]' in text
    assert '"gradviz.ops" = ["*.pyi"]' in text


def test_every_op_name_is_in_the_stub():
    import gradviz
    from gradviz.ops import _registry

    stub = Path(next(path for path in GENERATED if path.endswith("_op_exports.pyi"))).read_text()
    stubbed = set(re.findall(r"^def (\w+)", stub, flags=re.M)) | set(re.findall(r" as (\w+)$", stub, flags=re.M))
    names = {name for declared in _registry.DECLARED for name in (*declared.names, *declared.hidden)}
    assert stubbed == names
    assert all(hasattr(gradviz, name) for name in names)


# A user program, as the issue wrote it, and one Tensor-typed function using installed methods.
GOOD = """
import gradviz as torch
import gradviz.nn.functional as F

y = torch.tanh(torch.ones(3))
y.sum().backward()
z = torch.empty(3)
torch.tanh(torch.ones(3), out=z)
total = torch.sum(torch.ones(2, 3), axis=1, keepdims=True)
pieces = torch.cat([z, z], dim=0)
ops_sum = torch.ops.sum(pieces)
g: torch.Generator = torch.Generator()


def step(x: torch.Tensor) -> torch.Tensor:
    h = x.tanh().relu_() + x.T @ x.mT
    return h.sum(dim=0).mean() * x.float().max()
"""

# Each line a mistake the stubs let the checker see, with the error it must report.
BAD = """
import gradviz as torch

torch.tanhh(torch.ones(3))
torch.tanh(torch.ones(3), outt=None)
torch.complex64
torch.ops.gelux


def step(x: torch.Tensor) -> None:
    x.tanh(1.0)
"""
BAD_ERRORS = {
    4: 'Module has no attribute "tanhh"',
    5: 'Unexpected keyword argument "outt" for "tanh"',
    6: 'Module has no attribute "complex64"',
    7: 'Module has no attribute "gelux"',
    11: 'Too many arguments for "tanh"',
}


@pytest.mark.slow
def test_mypy_sees_the_ops_and_tensor_methods(tmp_path):
    (tmp_path / "good.py").write_text(textwrap.dedent(GOOD))
    (tmp_path / "bad.py").write_text(textwrap.dedent(BAD))
    result = subprocess.run(
        [sys.executable, "-m", "mypy", "--follow-imports=silent", "--cache-dir", str(tmp_path / "cache"),
         "--no-error-summary", "--hide-error-context", "good.py", "bad.py"],
        capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "MYPYPATH": str(REPO)})
    errors = {}
    for line in result.stdout.splitlines():
        if re.match(r"\w+\.py:\d+: note: ", line):
            continue
        match = re.match(r"(\w+)\.py:(\d+): error: (.*)", line)
        assert match, f"unexpected mypy output: {line}\n{result.stdout}{result.stderr}"
        errors.setdefault(match.group(1), {})[int(match.group(2))] = match.group(3)
    assert "good" not in errors, result.stdout
    assert set(errors.get("bad", {})) == set(BAD_ERRORS), result.stdout
    for line, message in BAD_ERRORS.items():
        assert message in errors["bad"][line]
