"""``json_safe`` (the widget's and the offline page's JSON-ready copies of inspector data)."""

from __future__ import annotations

import collections

import numpy

from gradviz.widget._widget import MAX_INSPECTION_DEPTH, json_safe


def test_json_safe_shortcuts_match_the_general_path() -> None:
    """Exact floats, ints, bools and dicts take a shortcut (Note [Fast JSON-safe copy]); their
    subclasses (numpy scalars, OrderedDict) take the general path: the results agree."""
    values = [1.5, -0.0, float("nan"), float("inf"), -float("inf"), 7, True, False]
    general = [numpy.float64(1.5), numpy.float64(-0.0), numpy.float64("nan"), numpy.float64("inf"),
               numpy.float64("-inf"), numpy.int64(7), numpy.bool_(True), numpy.bool_(False)]
    assert [json_safe(value) for value in values] == [json_safe(value) for value in general]
    assert json_safe(values) == [1.5, -0.0, "nan", "inf", "-inf", 7, True, False]
    nested = {1: {"a": float("nan")}, "b": [2.0]}
    assert json_safe(nested) == json_safe(collections.OrderedDict(nested)) == {"1": {"a": "nan"}, "b": [2.0]}
    deep: object = 1.0
    for _ in range(MAX_INSPECTION_DEPTH + 1):
        deep = {"k": deep}
    inner = json_safe(deep)
    for _ in range(MAX_INSPECTION_DEPTH):
        inner = inner["k"]
    assert inner == "…", "a value below the depth limit is cut, number or not"
