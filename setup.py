"""Build steps that pyproject.toml cannot express: compile the engine with Cython and build
the front-end bundle from labextension/ (always from sources, so a stale bundle cannot ship).

Set GRADVIZ_CYTHON_TRACE=1 to compile with bounds/None checks and line tracing for debugging.
"""

import os
import shutil
import subprocess
import sys

from Cython.Build import cythonize
from setuptools import Extension, setup
from setuptools.command.build_py import build_py

HERE = os.path.dirname(os.path.abspath(__file__))
LABEXTENSION = os.path.join(HERE, "labextension")


def build_frontend():
    """npm ci + npm run build in labextension/: writes gradviz/widget/static/."""
    if os.environ.get("GRADVIZ_SKIP_FRONTEND") == "1":
        print("gradviz: GRADVIZ_SKIP_FRONTEND=1, not building the front end", file=sys.stderr)
        return
    if not os.path.exists(os.path.join(LABEXTENSION, "package.json")):
        return  # an sdist without the front-end sources ships the prebuilt bundle
    npm = shutil.which("npm")
    if npm is None:
        raise RuntimeError("building gradviz's widget needs npm (Node.js 20); install it and retry")
    lock = os.path.join(LABEXTENSION, "package-lock.json")
    installed = os.path.join(LABEXTENSION, "node_modules", ".package-lock.json")
    if not os.path.exists(installed) or os.path.getmtime(installed) < os.path.getmtime(lock):
        # node_modules missing or older than the lock file: install exactly what the lock says
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=LABEXTENSION, check=True)
    subprocess.run([npm, "run", "build"], cwd=LABEXTENSION, check=True)


class BuildPyWithFrontend(build_py):
    def run(self):
        build_frontend()
        super().run()


directives = {"language_level": "3", "embedsignature": True}
macros = []
if os.environ.get("GRADVIZ_CYTHON_TRACE") == "1":
    directives.update(linetrace=True, boundscheck=True, nonecheck=True)
    macros.append(("CYTHON_TRACE", "1"))

extensions = [
    Extension("gradviz_ext._engine", ["gradviz_ext/_engine.py"], define_macros=macros),
    Extension("gradviz_ext._task", ["gradviz_ext/_task.py"], define_macros=macros),
    Extension("gradviz_ext._ops", ["gradviz_ext/_ops.py"], define_macros=macros),
    Extension("gradviz_ext._function", ["gradviz_ext/_function.py"], define_macros=macros),
]

setup(
    ext_modules=cythonize(extensions, compiler_directives=directives, annotate=False),
    cmdclass={"build_py": BuildPyWithFrontend},
)
