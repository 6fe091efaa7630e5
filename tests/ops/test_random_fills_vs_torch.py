"""The in-place random fills torch code calls (exponential_, geometric_, log_normal_, cauchy_,
random_): the distribution's support and moments (gradviz draws from its own generator, so the
values differ from torch's, the law does not), dtypes kept, and torch's errors."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import gradviz

N = 40_000


def draws(lib, fill, dtype="float64"):
    lib.manual_seed(0)
    return fill(lib.zeros(N, dtype=getattr(lib, dtype))).numpy().astype(np.float64)


@pytest.mark.parametrize("name,fill,check", [
    ("exponential", lambda t: t.exponential_(2.0), lambda a: (a.min() >= 0, a.mean(), np.median(a))),
    ("geometric", lambda t: t.geometric_(0.25), lambda a: (a.min() >= 1, (a == a.round()).all(), a.mean())),
    ("log_normal", lambda t: t.log_normal_(0.5, 0.3), lambda a: (a.min() > 0, np.log(a).mean(), np.log(a).std())),
    ("cauchy", lambda t: t.cauchy_(1.0, 2.0), lambda a: (np.median(a), np.percentile(a, 75) - np.percentile(a, 25))),
    ("random range", lambda t: t.random_(3, 9), lambda a: (a.min(), a.max(), (a == a.round()).all(), a.mean())),
    ("random to", lambda t: t.random_(4), lambda a: (a.min(), a.max(), a.mean())),
])
def test_fills_follow_torchs_distributions(name, fill, check):
    ours, theirs = check(draws(gradviz, fill)), check(draws(torch, fill))
    for mine, reference in zip(ours, theirs):
        if isinstance(reference, (bool, np.bool_)):
            assert bool(mine) == bool(reference), name
        else:
            assert mine == pytest.approx(reference, rel=0.05, abs=0.05), name


@pytest.mark.parametrize("dtype", ["float32", "float64", "int64", "int16", "uint8", "bool"])
def test_random_without_bounds_stays_in_the_dtypes_range(dtype):
    ours = gradviz.zeros(2000, dtype=getattr(gradviz, dtype)).random_()
    assert ours.dtype is getattr(gradviz, dtype)
    values = ours.numpy().astype(np.float64)
    known = {"float32": 2 ** 24, "float64": 2 ** 53, "bool": 1}
    high = known[dtype] if dtype in known else np.iinfo(getattr(np, dtype)).max
    assert values.min() >= 0 and values.max() <= high and len(np.unique(values)) > 1


@pytest.mark.parametrize("bad", ["exponential 0", "exponential -1", "geometric 0", "geometric 1", "geometric 1.5",
                                 "log_normal std 0", "cauchy sigma 0", "random from >= to", "random uint8 from -1",
                                 "leaf requiring grad"])
def test_bad_arguments_raise_torchs_errors(bad):
    def run(lib):
        x = lib.zeros(4)
        call = {"exponential 0": lambda: x.exponential_(0), "exponential -1": lambda: x.exponential_(-1),
                "geometric 0": lambda: x.geometric_(0), "geometric 1": lambda: x.geometric_(1.0),
                "geometric 1.5": lambda: x.geometric_(1.5), "log_normal std 0": lambda: x.log_normal_(1, 0),
                "cauchy sigma 0": lambda: x.cauchy_(0, 0), "random from >= to": lambda: x.random_(5, 3),
                "random uint8 from -1": lambda: lib.zeros(2, dtype=lib.uint8).random_(-1, 3),
                "leaf requiring grad": lambda: lib.zeros(3, requires_grad=True).exponential_()}[bad]
        try:
            call()
        except Exception as error:  # compared with torch's
            return type(error).__name__, str(error)
        return "accepted"

    assert run(gradviz) == run(torch) != "accepted"


CREATION_ERRORS = {
    "rand long": lambda m: m.rand(2, dtype=m.long),
    "rand long empty": lambda m: m.rand(0, dtype=m.long),
    "rand_like int": lambda m: m.rand_like(m.zeros(2, dtype=m.int32)),
    "randn bool": lambda m: m.randn(3, dtype=m.bool),
    "randn_like uint8": lambda m: m.randn_like(m.zeros(2, dtype=m.uint8)),
    "bernoulli of long": lambda m: m.bernoulli(m.zeros(2, dtype=m.long)),
    "randint low == high": lambda m: m.randint(3, 3, (1,)),
    "randint low > high": lambda m: m.randint(3, 2, (1,)),
    "randint bool to 3": lambda m: m.randint(0, 3, (2,), dtype=m.bool),
    "randint_like bool 3": lambda m: m.randint_like(m.zeros(2, dtype=m.bool), 3),
    "randint uint8 300": lambda m: m.randint(0, 300, (2,), dtype=m.uint8),
    "randint uint8 from -1": lambda m: m.randint(-1, 3, (2,), dtype=m.uint8),
    "randint int8 257": lambda m: m.randint(0, 257, (1,), dtype=m.int8),
    "randint int32 below": lambda m: m.randint(-2**31 - 1, 0, (2,), dtype=m.int32),
    "rrelu long training": lambda m: m.nn.functional.rrelu(m.ones(3, dtype=m.long), training=True),
    "rrelu bool eval": lambda m: m.nn.functional.rrelu(m.ones(3, dtype=m.bool)),
}
CREATION_ACCEPTED = {
    "randn long empty": lambda m: m.randn(0, dtype=m.long).shape,
    "bernoulli of long empty": lambda m: m.bernoulli(m.zeros(0, dtype=m.long)).dtype,
    "bernoulli of long with p": lambda m: m.bernoulli(m.zeros(3, dtype=m.long), 0.5).dtype,
    "randint bool to 2": lambda m: m.randint(0, 2, (3,), dtype=m.bool).dtype,
    "randint_like bool 2": lambda m: m.randint_like(m.zeros(2, dtype=m.bool), 2).dtype,
    "randint int32 full range": lambda m: m.randint(0, 2**31, (2,), dtype=m.int32).dtype,
    "rand float16": lambda m: m.rand(2, dtype=m.float16).dtype,
}


@pytest.mark.parametrize("case", sorted(CREATION_ERRORS))
def test_random_creation_dtype_and_bound_errors_match_torch(case):
    def run(lib):
        try:
            CREATION_ERRORS[case](lib)
        except Exception as error:  # compared with torch's
            return type(error).__name__, str(error)
        return "accepted"

    assert run(gradviz) == run(torch) != "accepted"


@pytest.mark.parametrize("case", sorted(CREATION_ACCEPTED))
def test_random_creation_torch_accepts(case):
    got, want = CREATION_ACCEPTED[case](gradviz), CREATION_ACCEPTED[case](torch)
    assert str(got).replace("gradviz", "torch") == str(want)
