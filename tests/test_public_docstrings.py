"""Every public name of the packages a user reads about has a docstring (the API reference
on the documentation site is generated from them). Names that mirror PyTorch may be one line
that says what they compute and which torch name they mirror."""

from __future__ import annotations

import importlib
import inspect

import pytest

#: The packages whose ``__all__`` is the documented API (docs/api.md lists the same ones).
PACKAGES = ["gradviz", "gradviz.autograd", "gradviz.debug", "gradviz.nn", "gradviz.nn.functional",
            "gradviz.nn.init", "gradviz.nn.modules", "gradviz.optim", "gradviz.func"]


def _own_docstring(value) -> str | None:
    # A class's docstring is not inherited, so ``__dict__`` is what autodoc shows; a function's
    # ``__doc__`` is its own.
    if inspect.isclass(value):
        return value.__dict__.get("__doc__")
    return value.__doc__


def undocumented(package_name: str) -> list[str]:
    """The public callables, classes and modules of ``package_name`` without a docstring."""
    package = importlib.import_module(package_name)
    missing = []
    for name in package.__all__:
        value = getattr(package, name)
        if not (callable(value) or inspect.ismodule(value)):
            continue  # dtypes, constants and tuples are described on their package's page
        doc = _own_docstring(value)
        if not doc or not doc.strip():
            where = getattr(value, "__module__", None) or package_name
            missing.append(f"{package_name}.{name} (defined in {where})")
    return missing


@pytest.mark.parametrize("package_name", PACKAGES)
def test_every_public_name_has_a_docstring(package_name):
    missing = undocumented(package_name)
    assert not missing, (f"{len(missing)} public name(s) without a docstring; write one (a line "
                         "saying what it computes and 'Mirrors ``torch.X``.' is enough for a "
                         "torch name): " + ", ".join(missing))


def test_the_check_sees_a_missing_docstring(monkeypatch):
    """The check can fail: a public function without a docstring is reported by name."""
    import gradviz.func

    def undocumented_function():
        pass

    monkeypatch.setattr(gradviz.func, "undocumented_function", undocumented_function, raising=False)
    monkeypatch.setattr(gradviz.func, "__all__", [*gradviz.func.__all__, "undocumented_function"])
    assert undocumented("gradviz.func") == [
        f"gradviz.func.undocumented_function (defined in {__name__})"]
