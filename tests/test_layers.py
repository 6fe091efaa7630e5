"""The layers of docs/architecture.md hold: a module imports only from its own layer or below.

The layer table is read from docs/architecture.md itself (the code block under "# Architecture"),
so the page and this test cannot drift apart. Every import counts, at module level or inside a
function: an import moved into a function body still makes the lower layer depend on the upper
one. The few upward imports left are listed in KNOWN_VIOLATIONS, each with its reason; the test
fails on any other upward import, on a listed one that is gone (delete its entry), and on a module
placed in no layer.

A second check finds import cycles among module-level imports (a cycle works only while its
modules happen to be imported in a lucky order): the known ones are listed in KNOWN_CYCLES, and
any other fails the test.

A third keeps imports of gradviz modules at module level, where a reader sees the dependency:
the modules that still import some inside function bodies are listed in
KNOWN_FUNCTION_IMPORTS, each with why (imports of optional packages, torch, IPython,
graphviz, stay where they are used).
"""

from __future__ import annotations

import ast
import functools
import re
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("gradviz", "gradviz_ext")

# (importing module, imported module) -> why it is still there. Fix one, delete its line.
KNOWN_VIOLATIONS = {
    # gradcheck's batched check runs torch.func's vmap loop (func sits above autograd).
    # Installing the loop at func's import, as func installs Function.apply's rule into
    # autograd/_transform_state.py, is the fix.
    ("gradviz.autograd.gradcheck", "gradviz.func._vmap"): "gradcheck(check_batched_grad=True)",
    # Trace.to_html writes the widget's standalone page. The widget (anywidget, ipywidgets) is
    # loaded only when asked for, so the convenience method imports it when called.
    ("gradviz.instrument._trace", "gradviz.widget._html"): "Trace.to_html delegates to the widget",
    # Trace.view and Trace.save_view build the widget's replay view, the same way.
    ("gradviz.instrument._trace", "gradviz.widget._trace_view"): "Trace.view delegates to the widget",
    # TraceDiff.show and TraceDiff.to_html build the widget's diff view, the same way.
    ("gradviz.debug._diff", "gradviz.widget._diff_view"): "TraceDiff.show delegates to the widget",
    # utils.benchmark.Timer runs statements with ``torch`` bound to the whole package, as
    # torch.utils.benchmark does: the package is its subject, read when a Timer is made.
    ("gradviz.utils.benchmark", "gradviz"): "Timer's default globals are the package",
}


# Groups of modules whose module-level imports form a cycle. Fix one, delete (or shrink) it.
KNOWN_CYCLES = [
    # utils.benchmark reads the package for Timer's default globals (KNOWN_VIOLATIONS).
    {"gradviz", "gradviz.utils", "gradviz.utils.benchmark"},
]


def _layers_from_the_docs() -> list[tuple[str, list[tuple[str, bool]]]]:
    """[(layer, [(module, whole package?), ...]), ...] from the bottom layer up: a path ending
    in ``/`` is a package and everything in it, a ``.py`` path that one module."""
    text = (REPO / "docs" / "architecture.md").read_text()
    block = re.search(r"```\n(.*?)```", text, flags=re.DOTALL).group(1)
    layers = []
    for line in block.strip().splitlines():
        name, rest = line.split(None, 1)
        paths = re.split(r"\s{2,}", rest.strip())[0]
        prefixes = []
        for path in (p.strip() for p in paths.split(",")):
            if not path.startswith(PACKAGES):
                continue  # labextension/: TypeScript
            module = path.removesuffix("/").removesuffix(".py").removesuffix("/__init__").replace("/", ".")
            prefixes.append((module, path.endswith("/")))
        layers.append((name, prefixes))
    return layers[::-1]  # the block lists the top layer first


LAYERS = _layers_from_the_docs()


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


SOURCES = {_module_name(path): path for package in PACKAGES for path in sorted((REPO / package).rglob("*.py"))}


def _layer_of(module: str) -> int | None:
    """The index of the layer that names ``module`` or the package holding it (the innermost)."""
    best, best_length = None, -1
    for index, (_, entries) in enumerate(LAYERS):
        for name, whole_package in entries:
            inside = module == name or (whole_package and module.startswith(name + "."))
            if inside and len(name) > best_length:
                best, best_length = index, len(name)
    return best


@functools.cache
def _tree(path: Path) -> ast.Module:
    return ast.parse(path.read_text(), str(path))


@functools.cache
def _imports(module: str, path: Path) -> tuple[tuple[str, int], ...]:
    return tuple(_each_import(module, path))


def _each_import(module: str, path: Path):
    """(imported module, line) for every import in ``path``, anywhere in the file."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(_tree(path)):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node.lineno
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_package else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module
            for alias in node.names:
                submodule = f"{target}.{alias.name}"
                yield (submodule if submodule in SOURCES else target), node.lineno


@functools.cache
def _upward_imports() -> dict[tuple[str, str], list[str]]:
    found: dict[tuple[str, str], list[str]] = {}
    for module, path in SOURCES.items():
        here = _layer_of(module)
        for target, line in _imports(module, path):
            if not target.startswith(PACKAGES) or target.split(".")[0] not in PACKAGES:
                continue
            there = _layer_of(target)
            if here is not None and there is not None and there > here:
                where = f"{path.relative_to(REPO)}:{line} ({LAYERS[here][0]} imports {LAYERS[there][0]})"
                if where not in found.setdefault((module, target), []):
                    found[(module, target)].append(where)
    return found


def test_the_docs_define_the_layers():
    names = [name for name, _ in LAYERS]
    assert names[0] == "core" and "ops" in names and "autograd" in names, names
    assert all(prefixes for _, prefixes in LAYERS), LAYERS


def test_every_module_has_a_layer():
    unplaced = sorted(module for module in SOURCES if _layer_of(module) is None)
    assert not unplaced, f"in no layer of docs/architecture.md (add their paths to its table): {unplaced}"


def test_no_module_imports_from_a_layer_above_its_own():
    found = _upward_imports()
    new = {edge: where for edge, where in found.items() if edge not in KNOWN_VIOLATIONS}
    assert not new, "imports from a higher layer (docs/architecture.md):\n" + "\n".join(
        f"  {a} -> {b}: " + "; ".join(where) for (a, b), where in sorted(new.items()))


def test_every_known_violation_still_exists():
    gone = sorted(set(KNOWN_VIOLATIONS) - set(_upward_imports()))
    assert not gone, f"fixed, so delete from KNOWN_VIOLATIONS: {gone}"


def _module_level_lines(tree: ast.Module) -> set[int]:
    """Lines of the imports that run when the module is imported (top level, or in a top-level
    ``if``/``try``), not those in function or class bodies."""
    lines = set()
    for statement in tree.body:
        if isinstance(statement, (ast.Import, ast.ImportFrom)):
            lines.add(statement.lineno)
        elif isinstance(statement, (ast.If, ast.Try)):
            lines.update(node.lineno for node in ast.walk(statement)
                         if isinstance(node, (ast.Import, ast.ImportFrom)))
    return lines


def _import_cycles() -> list[set[str]]:
    """The strongly connected groups (more than one module) of the module-level import graph."""
    graph: dict[str, set[str]] = {}
    for module, path in SOURCES.items():
        lines = _module_level_lines(_tree(path))
        graph[module] = {target for target, line in _imports(module, path)
                         if line in lines and target in SOURCES and target != module}
    # Tarjan's algorithm, iterative (no recursion limit to meet)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = low[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(sorted(graph[successor]))))
                    break
                if successor in on_stack:
                    low[node] = min(low[node], index[successor])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(group)
    return groups


def test_no_import_cycle_but_the_known_ones():
    cycles = _import_cycles()
    new = [sorted(group) for group in cycles if group not in KNOWN_CYCLES]
    gone = [sorted(group) for group in KNOWN_CYCLES if group not in cycles]
    assert not new, f"modules that import each other at module level: {new}"
    assert not gone, f"changed or fixed, so update KNOWN_CYCLES: {gone}"


# Modules that still import gradviz modules inside function bodies, and why. An import in a
# function body hides a dependency until the function runs; the rest are at module level.
# Fix one, delete its line; a module not listed here may not add one.
KNOWN_FUNCTION_IMPORTS = {
    # The op modules below ops/__init__ that sit in one cycle of helpers (a reduction's
    # backward needs pointwise ops, a pointwise op's broadcasting needs a reduction, in-place
    # writes need indexing, ...): each imports the other's helpers when called. Importing
    # the sibling module object at module level and calling through it is the fix.
    "gradviz.ops._reduction": "the ops helper cycle",
    "gradviz.ops._pointwise": "the ops helper cycle",
    "gradviz.ops._shape": "the ops helper cycle",
    "gradviz.ops._inplace": "the ops helper cycle",
    # The linear algebra modules call ops through the ops package, which imports them to
    # register their ops.
    "gradviz.ops._linalg_norms": "calls gradviz.ops, which registers it",
    "gradviz.ops._linalg_lu": "calls gradviz.ops, which registers it",
    "gradviz.ops._linalg_factor": "calls gradviz.ops, which registers it",
    "gradviz.ops._linalg_solvers": "calls gradviz.ops, which registers it",
    # A custom Function's ctx and the Function class refer to each other (ctx.apply's class).
    "gradviz.autograd.function._ctx": "the Function class of a ctx",
    # Forward-mode AD's jvp of a backward pass uses autograd.grad, which imports forward AD.
    "gradviz.autograd._forward_ad_impl": "autograd.grad inside a jvp",
    # The documented upward imports of KNOWN_VIOLATIONS (the widget, loaded when asked for).
    "gradviz.instrument._trace": "Trace.view/to_html delegate to the widget",
    "gradviz.debug._diff": "TraceDiff.show delegates to the widget",
    "gradviz.widget._html": "a page's replay session, made when a page is written",
    "gradviz": "the notebook display hooks load the widget when a session is displayed",
    "gradviz._config": "config() reports the widget bundle when asked",
    # The doctor reads a torch graph only for torch tensors (torch is optional).
    "gradviz.debug._doctor": "the torch graph adapter, for torch losses only",
}


def _function_level_imports() -> dict[str, list[str]]:
    """{module: ["path:line -> target", ...]} for imports of gradviz modules in function bodies."""
    found: dict[str, list[str]] = {}
    for module, path in SOURCES.items():
        if not module.startswith("gradviz.") and module != "gradviz":
            continue
        inner = set()
        for node in ast.walk(_tree(path)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                inner.update(sub.lineno for sub in ast.walk(node) if isinstance(sub, (ast.Import, ast.ImportFrom)))
        for target, line in _imports(module, path):
            if line in inner and target.split(".")[0] == "gradviz":
                found.setdefault(module, []).append(f"{path.relative_to(REPO)}:{line} -> {target}")
    return found


def test_function_level_imports_are_only_the_known_ones():
    found = _function_level_imports()
    unexpected = {module: where for module, where in found.items() if module not in KNOWN_FUNCTION_IMPORTS}
    assert not unexpected, f"move these imports to module level (or list the module, with why): {unexpected}"
    gone = sorted(set(KNOWN_FUNCTION_IMPORTS) - set(found))
    assert not gone, f"these modules import nothing in function bodies any more: delete them from the list: {gone}"
