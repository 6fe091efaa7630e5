"""``from torch.nn.functional import *`` gives every functional form, so under ``import gradviz
as torch`` it must give gradviz's: ``nn.functional.__all__`` names every public form, and each
form torch's namespace has and gradviz implements is in it (``conv2d`` and ``max_pool2d``
were once missing)."""

from __future__ import annotations

import inspect

import torch.nn.functional as torch_F

import gradviz.nn.functional as F


def _public_forms(module):
    return {name for name, value in vars(module).items()
            if not name.startswith("_") and inspect.isroutine(value)}


def test_every_public_form_is_in_all():
    missing = sorted(_public_forms(F) - set(F.__all__))
    assert missing == [], f"add to __all__ (a star import misses them): {missing}"


def test_all_names_only_what_exists_once():
    assert len(F.__all__) == len(set(F.__all__)), sorted(
        name for name in F.__all__ if F.__all__.count(name) > 1)
    assert [name for name in F.__all__ if not hasattr(F, name)] == []


def test_star_import_gives_the_forms_torch_gives():
    ours, theirs = {}, {}
    exec("from gradviz.nn.functional import *", ours)  # noqa: S102 - the statement under test
    exec("from torch.nn.functional import *", theirs)  # noqa: S102
    shared = {name for name in _public_forms(torch_F) if hasattr(F, name)}
    assert sorted(name for name in shared if name in theirs and name not in ours) == []
