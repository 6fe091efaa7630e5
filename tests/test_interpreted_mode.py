"""The interpreted engine (``GRADVIZ_PURE_PYTHON=1``) passes the same tests as the compiled one.

``_engine.py`` is one source file run two ways; this runs the engine, autograd, debug and ops
suites again in a subprocess with the interpreted engine.
"""

from __future__ import annotations

import os
import subprocess
import sys

import gradviz
import gradviz_ext

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def interpreted_env():
    env = dict(os.environ)
    env["GRADVIZ_PURE_PYTHON"] = "1"
    return env


def test_normal_run_uses_the_compiled_engine():
    assert gradviz_ext.COMPILED is True, (
        "the compiled engine is not built; run `cythonize -i -3 gradviz_ext/_engine.py`")
    assert gradviz.config()["engine"] == "compiled"


def test_pure_python_switch_selects_the_interpreted_engine():
    code = ("import gradviz, gradviz_ext; "
            "print(gradviz.config()['engine'], gradviz_ext.COMPILED, gradviz_ext.engine.__file__)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=ROOT, env=interpreted_env(), timeout=300)
    assert result.returncode == 0, result.stderr
    engine, compiled, path = result.stdout.split()
    assert engine == "interpreted" and compiled == "False"
    assert path.endswith("_engine.py")


def test_engine_suites_pass_with_the_interpreted_engine():
    command = [sys.executable, "-m", "pytest", "tests/engine", "tests/autograd", "tests/debug",
               "tests/ops", "-q", "-p", "no:cacheprovider"]
    result = subprocess.run(command, capture_output=True, text=True, cwd=ROOT,
                            env=interpreted_env(), timeout=1800)
    summary = result.stdout.strip().splitlines()[-1] if result.stdout.strip() else ""
    assert result.returncode == 0, (
        f"interpreted engine: {summary}\n{result.stdout[-6000:]}\n{result.stderr[-2000:]}")
