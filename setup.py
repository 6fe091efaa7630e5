"""Build steps that pyproject.toml cannot express: compile the engine with Cython, build the
front-end bundle from labextension/ and the prebuilt JupyterLab extension from
labextension/jupyterlab/ (always from sources, so a stale bundle cannot ship), and install that
extension as data files into share/jupyter/labextensions/gradviz-jupyterlab/, where JupyterLab
and Notebook 7 find it (Note [Installing the JupyterLab extension]).

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
JUPYTERLAB_PACKAGE = os.path.join(LABEXTENSION, "jupyterlab")
# The built extension (labextension/jupyterlab/package.json, jupyterlab.outputDir) and where it goes.
LAB_OUTPUT = os.path.join("gradviz", "labextension")
LAB_NAME = "gradviz-jupyterlab"
LAB_TARGET = "share/jupyter/labextensions/" + LAB_NAME

# Note [Installing the JupyterLab extension]
# ------------------------------------------
# JupyterLab and Notebook 7 load prebuilt extensions from <sys.prefix>/share/jupyter/
# labextensions/<name>/. A wheel puts files there through data_files. The files only exist
# after the build, and setup() is called before it runs, so data_files starts as an empty list
# that build_py fills once the extension is built; install_data runs after build_py and reads
# it then. An editable install (`pip install -e .`) installs no data files at all (setuptools'
# editable_wheel asks the distribution for a `has_data` method that does not exist), so
# scripts/setup.sh copies the built extension to the same place itself. scripts/setup.sh refreshes the
# same copy when only the front end changed (scripts/build_state.py checks it).
DATA_FILES = []
# The Jupyter Server extension's switch (gradviz_jupyter/__init__.py), a file from the sources.
SERVER_CONFIG = [("etc/jupyter/jupyter_server_config.d",
                  ["jupyter-config/jupyter_server_config.d/gradviz_jupyter.json"])]


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
    lab_lock = os.path.join(JUPYTERLAB_PACKAGE, "package-lock.json")
    lab_installed = os.path.join(JUPYTERLAB_PACKAGE, "node_modules", ".package-lock.json")
    if not os.path.exists(lab_installed) or os.path.getmtime(lab_installed) < os.path.getmtime(lab_lock):
        subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=JUPYTERLAB_PACKAGE, check=True)
    subprocess.run([npm, "run", "build"], cwd=JUPYTERLAB_PACKAGE, check=True)


def lab_data_files():
    """(directory, [files]) pairs that install the built extension under LAB_TARGET."""
    pairs = []
    root = os.path.join(HERE, LAB_OUTPUT)
    for directory, _, files in sorted(os.walk(root)):
        relative = os.path.relpath(directory, root)
        target = LAB_TARGET if relative == "." else f"{LAB_TARGET}/{relative.replace(os.sep, '/')}"
        paths = [os.path.relpath(os.path.join(directory, name), HERE) for name in sorted(files)
                 if not name.endswith(".tmp")]
        if paths:
            pairs.append((target, paths))
    return pairs


class BuildPyWithFrontend(build_py):
    def run(self):
        build_frontend()
        DATA_FILES[:] = lab_data_files() + SERVER_CONFIG  # Note [Installing the JupyterLab extension]
        if len(DATA_FILES) == len(SERVER_CONFIG) and os.environ.get("GRADVIZ_SKIP_FRONTEND") != "1":
            raise RuntimeError(f"the JupyterLab extension was not built into {LAB_OUTPUT}; "
                               "run `npm --prefix labextension/jupyterlab run build` and look at its output")
        super().run()


directives = {"language_level": "3", "embedsignature": True}
macros = []
if os.environ.get("GRADVIZ_CYTHON_TRACE") == "1":
    directives.update(linetrace=True, boundscheck=True, nonecheck=True)
    macros.append(("CYTHON_TRACE", "1"))

extensions = [
    Extension(f"gradviz_ext.{name}", [f"gradviz_ext/{name}.py"], define_macros=macros)
    for name in ("_engine", "_task", "_ops", "_function")
]

setup(
    ext_modules=cythonize(extensions, compiler_directives=directives, annotate=False),
    cmdclass={"build_py": BuildPyWithFrontend},
    data_files=DATA_FILES,
)
