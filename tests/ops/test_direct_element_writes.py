"""``N[i, j] += 1`` and friends: the fast paths for a key of ints (Note [Direct element writes]
in gradviz/ops/_inplace.py, ``in_range_ints`` in gradviz/ops/_shape.py) and for in-place
integer arithmetic (Note [Direct in-place arithmetic]) must leave everything as PyTorch does:
values, version counters, nodes and gradients, and every error of the cases they hand on."""

import numpy as np
import pytest
import torch

import gradviz

LIBS = (gradviz, torch)


def _error(fn):
    try:
        fn()
    except Exception as error:  # noqa: BLE001 - the error is what is compared
        return type(error), str(error).split("\n")[0]
    return None


@pytest.mark.parametrize("dtype", ["int32", "int64", "uint8", "float32", "float64"])
def test_counting_loop_matches_torch(dtype):
    pairs = np.random.default_rng(0).integers(-4, 4, (300, 2))
    results = []
    for lib in LIBS:
        counts = lib.zeros((4, 4), dtype=getattr(lib, dtype))
        held = counts[1]  # a live view sees every write and shares the version counter
        start = counts._version
        for i, j in pairs.tolist():
            counts[i, j] += 1
        results.append((counts.tolist(), held.tolist(), counts._version - start, held._version))
    assert results[0] == results[1]


def test_rows_and_elements_written_from_tensors_match_torch():
    results = []
    for lib in LIBS:
        x = lib.zeros((3, 4))
        row = lib.arange(4.0)
        x[1] = row
        x[2] = x[1]  # another row of the same tensor: no overlap
        x[0] = x[0]  # itself
        x[0, 3] = lib.tensor(7.0)
        x[-1, -2] = x[1, 1]
        y = x[2]
        y[0] = lib.tensor(5.0)  # through a view
        results.append((x.tolist(), x._version, row._version, y._version))
    assert results[0] == results[1]


@pytest.mark.parametrize("case", [
    "partial overlap", "value shape", "value dtype", "index out of range", "too many ints",
    "inference tensor", "integer division", "float into int",
])
def test_cases_handed_to_the_general_path_keep_torchs_behaviour(case):
    outcomes = []
    for lib in LIBS:
        x = lib.arange(12, dtype=lib.float32).reshape(3, 4)
        n = lib.zeros((3, 4), dtype=lib.int64)
        actions = {
            "partial overlap": lambda: x.__setitem__(0, x.view(-1)[1:5]),
            "value shape": lambda: x.__setitem__(0, lib.ones(3)),
            "value dtype": lambda: x.__setitem__((0, 1), lib.tensor(3, dtype=lib.int64)),
            "index out of range": lambda: x.__setitem__((3, 0), lib.tensor(1.0)),
            "too many ints": lambda: x.__setitem__((0, 0, 0), lib.tensor(1.0)),
            "inference tensor": None,
            "integer division": lambda: n[0].div_(2),
            "float into int": lambda: n[0].add_(1.5),
        }
        if case == "inference tensor":
            with lib.inference_mode():
                frozen = lib.zeros(3, 4)
            action = lambda: frozen.__setitem__((0, 0), lib.tensor(1.0))  # noqa: E731
        else:
            action = actions[case]
        outcomes.append((_error(action), x.tolist(), n.tolist(), x._version, n._version))
    assert outcomes[0] == outcomes[1]


def test_writes_that_need_a_graph_record_torchs_nodes_and_gradients():
    results = []
    for lib in LIBS:
        leaf = lib.arange(6.0).reshape(2, 3).requires_grad_()
        value = lib.tensor(10.0, requires_grad=True)
        y = leaf * 2
        y[0, 1] = value * 3  # CopySlices over y's history
        y[1, 2] += 1
        z = (y * lib.arange(6.0).reshape(2, 3)).sum()
        z.backward()
        results.append((y.grad_fn.name(), y.tolist(), leaf.grad.tolist(), value.grad.item()))
    assert results[0] == results[1]


def test_a_leaf_that_requires_grad_refuses_the_write_as_torch():
    errors = []
    for lib in LIBS:
        leaf = lib.zeros(2, 3, requires_grad=True)
        errors.append(_error(lambda: leaf.__setitem__((0, 1), lib.tensor(1.0))))
    assert errors[0] == errors[1] and errors[0] is not None


@pytest.mark.parametrize("key", [(1, 2), (0,), (1, 2, 3), (-1, -3, -4), (1, -1)], ids=str)
def test_int_keys_select_as_torch(key):
    results = []
    for lib in LIBS:
        x = lib.arange(24.0).reshape(2, 3, 4).requires_grad_()
        y = x[key]
        (y * 3).sum().backward()
        names, node = [], y.grad_fn
        while node is not None and node.name().endswith("SelectBackward0"):
            index = node._saved_index  # torch shows a negative int64 as unsigned: -1 as 2**64 - 1
            names.append((node.name(), index - 2 ** 64 if index >= 2 ** 63 else index))
            node = node.next_functions[0][0]
        results.append((tuple(y.shape), y.stride(), names, x.grad.tolist()))
    assert results[0] == results[1]


def test_integer_in_place_arithmetic_wraps_as_torch():
    results = []
    for lib in LIBS:
        for dtype in (lib.int8, lib.uint8, lib.int32, lib.int64):
            x = lib.tensor([1, 2, 100], dtype=dtype)
            start = x._version
            x += 100
            x.mul_(3)
            x -= lib.tensor([1, 1, 1], dtype=dtype)
            error = _error(lambda: x.add_(1000))  # beyond int8/uint8: torch's own handling
            results.append((x.tolist(), x._version - start, error))
    assert results[: len(results) // 2] == results[len(results) // 2:]


BASIC_KEYS = [(3,), (0, 4), (0, 0, 0), (Ellipsis, 4), (None, 5), (None, 0, None, 4),
              (0, None, -5), (slice(None), 9), 7, (0, slice(1, 2), 9), (-4, 0)]


@pytest.mark.parametrize("key", BASIC_KEYS, ids=str)
def test_basic_keys_out_of_range_are_torchs_errors(key):
    outcomes = []
    for lib in LIBS:
        x = lib.zeros(3, 4)
        outcomes.append((_error(lambda: x[key]), _error(lambda: x.__setitem__(key, 1.0)),
                         _error(lambda: x.__setitem__(key, lib.tensor(1.0)))))
    assert outcomes[0] == outcomes[1]
    assert all(error is not None for error in outcomes[0])


@pytest.mark.parametrize("key", [0, (0,), (None, 0), (Ellipsis, 0), (slice(None),), "tensor",
                                 (None,), Ellipsis, True], ids=str)
def test_indexing_a_0d_tensor_is_torchs(key):
    outcomes = []
    for lib in LIBS:
        s = lib.tensor(1.0)
        k = lib.tensor(0) if key == "tensor" else key
        try:
            outcomes.append(("ok", tuple(s[k].shape)))
        except IndexError as error:
            outcomes.append(("IndexError", str(error)))
    assert outcomes[0] == outcomes[1]
