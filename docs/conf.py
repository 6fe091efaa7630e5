"""Sphinx configuration of the gradviz documentation site (build it with ``scripts/docs``).

The pages are the Markdown files of this folder (MyST) and the notebooks of ``notebooks/``
(copied into ``docs/notebooks/`` by ``notebook_pages`` and executed at every build, so the pages
show their outputs; each debugger widget is shown as an offline replay page, see "Notebooks in
the site" below). The
API reference is generated from the docstrings: ``api_pages`` below writes one page per package
of ``API_PACKAGES`` into ``docs/api/`` (git-ignored) at every build, with an autosummary table of
the package's ``__all__`` and the documentation of each name.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import gradviz  # noqa: E402
from gradviz.widget._docs_pages import DOCS_PAGES_ENV, DOCS_PAGES_URL_ENV  # noqa: E402

project = "gradviz"
author = "the gradviz developers"
copyright = "2026, the gradviz developers"  # noqa: A001  (Sphinx's name)
release = gradviz.__version__

extensions = [
    "myst_nb",  # MyST Markdown pages and the notebooks (myst_nb includes myst_parser)
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb", ".rst": "restructuredtext"}
root_doc = "index"
exclude_patterns = ["_build", "build", "_replays"]
html_theme = "furo"
html_title = "gradviz"
myst_heading_anchors = 3
myst_enable_extensions = ["colon_fence"]
# Notebooks in the site: they are stored without outputs, so the build executes them (in a
# temporary folder, so files they write stay out of docs/) and fails on any error. A debugger
# widget needs a kernel, which a page does not have: while GRADVIZ_DOCS_PAGES is set (here, for
# the kernels the build starts), each widget also offers text/html, an iframe of an offline
# replay page of its session written into _replays/replays/, which Sphinx copies to the site's
# replays/ (Note [Widgets in the built docs] in gradviz/widget/_docs_pages.py). The site prefers
# that text/html to the widget's own view, which a page cannot draw.
nb_execution_mode = "force"
nb_execution_in_temp = True
nb_execution_timeout = 180
nb_execution_raise_on_error = True
nb_mime_priority_overrides = [("html", "text/html", 5)]
REPLAY_PAGES = HERE / "_replays"
os.environ[DOCS_PAGES_ENV] = str(REPLAY_PAGES / "replays")
os.environ[DOCS_PAGES_URL_ENV] = "../replays/"  # the notebooks' pages are in notebooks/
html_extra_path = [str(REPLAY_PAGES)]
REPLAY_PAGES.joinpath("replays").mkdir(parents=True, exist_ok=True)

# Docstrings are numpy style (docs/style.md); signatures are shown as written, type hints inline.
napoleon_google_docstring = False
napoleon_numpy_docstring = True
autodoc_typehints = "signature"
autodoc_member_order = "bysource"
autodoc_default_options = {"members": False}
autosummary_generate = False  # the tables link to the entries on the same page
# Objects that are one Python object under several public names (``gradviz.nn.ReLU`` is
# ``gradviz.nn.modules.ReLU``) are documented under each name; cross-references to the type
# names used in signatures and docstrings (``Tensor``, ``dtype``, ...) need no target.
nitpicky = False
suppress_warnings = ["myst.xref_missing"]

#: The packages whose ``__all__`` is the documented API (tests/test_public_docstrings.py checks
#: that every callable in them has a docstring).
API_PACKAGES = {
    "gradviz": ("The top-level namespace: tensors, dtypes, creation, math and the torch-style "
                "functions."),
    "gradviz.autograd": ("Custom Functions, ``backward`` and ``grad``, grad modes, hooks, "
                         "forward AD."),
    "gradviz.debug": ("The debugger: step through backward, breakpoints, replay, the gradient "
                      "doctor, the PyTorch recorder."),
    "gradviz.nn": "Modules, layers and losses.",
    "gradviz.nn.functional": "The functional forms of the layers, activations and losses.",
    "gradviz.nn.init": "Parameter initialisation.",
    "gradviz.nn.modules": "The module classes (the same classes as ``gradviz.nn``).",
    "gradviz.optim": "Optimizers and learning-rate schedulers.",
    "gradviz.testing": "``assert_close`` with torch's tolerances and messages, and ``make_tensor``.",
    "gradviz.amp": ("Mixed precision: ``autocast`` (gradviz keeps computing in float32 on the CPU) "
                    "and ``GradScaler``, exact as torch's."),
    "gradviz.func": "Function transforms: ``vmap``, ``grad``, ``jacrev``, ``functional_call``, ...",
    "gradviz.course": "The checkers of the course notebooks' exercises.",
}


def _kind(value) -> str | None:
    if inspect.isclass(value):
        return "class"
    if inspect.ismodule(value):
        return None  # documented on its own page or in the package's summary
    if callable(value):
        return "function"
    return "data"


def _homes() -> dict[int, str]:
    """For each object public in several packages, the one page that indexes it: the package
    whose name is the longest prefix of the object's ``__module__`` (``gradviz.nn`` for
    ``ReLU``, ``gradviz.autograd`` for ``no_grad``), else the first that lists it. The other
    pages show it too, without an index entry (Sphinx allows one description per object)."""
    homes: dict[int, tuple[int, str]] = {}
    for package_name in API_PACKAGES:
        package = importlib.import_module(package_name)
        for name in package.__all__:
            value = getattr(package, name)
            if _kind(value) in (None, "data"):
                continue
            module = getattr(value, "__module__", None) or ""
            inside = module == package_name or module.startswith(package_name + ".")
            score = len(package_name) if inside else -1
            if id(value) not in homes or score > homes[id(value)][0]:
                homes[id(value)] = (score, package_name)
    return {key: package_name for key, (_, package_name) in homes.items()}


def _page(package_name: str, summary: str, homes: dict[int, str]) -> str:
    package = importlib.import_module(package_name)
    names = list(dict.fromkeys(package.__all__))
    title = f"``{package_name}``"
    lines = [title, "=" * len(title), "", summary, "", f".. py:module:: {package_name}", "",
             f".. currentmodule:: {package_name}", ""]
    documented = [n for n in names if _kind(getattr(package, n)) is not None]
    modules = [n for n in names if _kind(getattr(package, n)) is None]
    if modules:
        listed = ", ".join(f"``{package_name}.{n}``" for n in modules)
        lines += [f"Subpackages and modules: {listed}", ""]
    lines += [".. autosummary::", "   :nosignatures:", ""]
    lines += [f"   {n}" for n in documented if _kind(getattr(package, n)) != "data"]
    lines += ["", "----", ""]
    for name in documented:
        value = getattr(package, name)
        kind = _kind(value)
        elsewhere = homes.get(id(value), package_name) != package_name
        options = ["   :no-index:"] if elsewhere else []
        if kind == "class":
            lines += [f".. autoclass:: {name}", "   :members:", *options, ""]
        elif kind == "function":
            lines += [f".. autofunction:: {name}", *options, ""]
        else:
            value = _data_value(getattr(package, name))
            lines += [f".. py:data:: {name}", f"   :value: {value}", ""]
    return "\n".join(lines) + "\n"


def _data_value(value) -> str:
    text = repr(value).replace("\n", " ")
    return text if len(text) < 80 else text[:77] + "..."


def api_pages(app=None) -> None:
    """Write ``docs/api/<package>.rst`` for every package of ``API_PACKAGES`` (only when the
    text changed, so that an unchanged page is not rebuilt)."""
    folder = HERE / "api"
    folder.mkdir(exist_ok=True)
    homes = _homes()
    for package_name, summary in API_PACKAGES.items():
        path = folder / f"{package_name}.rst"
        text = _page(package_name, summary, homes)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")


def notebook_pages(app=None) -> None:
    """Copy ``notebooks/*.ipynb`` into ``docs/notebooks/`` (git-ignored), where Sphinx reads
    them (a source must be inside this folder); only changed files are copied."""
    folder = HERE / "notebooks"
    folder.mkdir(exist_ok=True)
    for source in sorted((HERE.parent / "notebooks").glob("*.ipynb")):
        target = folder / source.name
        if not target.exists() or target.read_bytes() != source.read_bytes():
            target.write_bytes(source.read_bytes())


def setup(app):
    app.connect("builder-inited", api_pages)
    app.connect("builder-inited", notebook_pages)
