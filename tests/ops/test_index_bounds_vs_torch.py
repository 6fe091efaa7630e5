"""Out-of-range and negative positions in the index ops: the same result, or the same error type
and message, as torch. Unlike indexing with ``[]``, most of these ops take no negative position
(``index_fill`` and ``take``/``put`` do, counting from the end)."""

import pytest
import torch

import gradviz

CASES = {
    "index_select": lambda lib, a, i: lib.index_select(a, 0, lib.tensor(i)),
    "index_add": lambda lib, a, i: lib.index_add(a, 0, lib.tensor(i), lib.ones(len(i), 3)),
    "index_add dim 1": lambda lib, a, i: a.t().index_add(1, lib.tensor(i), lib.ones(3, len(i))),
    "index_copy": lambda lib, a, i: a.index_copy(0, lib.tensor(i), lib.ones(len(i), 3)),
    "index_fill": lambda lib, a, i: a.index_fill(0, lib.tensor(i), 1.0),
    "gather": lambda lib, a, i: a.gather(0, lib.tensor([i] * 3).T),
    "scatter": lambda lib, a, i: a.scatter(0, lib.tensor([i] * 3).T, 1.0),
    "scatter_add": lambda lib, a, i: a.scatter_add(0, lib.tensor([i] * 3).T, lib.ones(len(i), 3)),
    "scatter_reduce": lambda lib, a, i: a.scatter_reduce(0, lib.tensor([i] * 3).T, lib.ones(len(i), 3), "sum"),
    "take": lambda lib, a, i: a.take(lib.tensor(i)),
    "embedding": lambda lib, a, i: lib.nn.functional.embedding(lib.tensor(i), a),
}
POSITIONS = [[-1], [5], [-6], [20], [1, -7, 3], [0, 4, 4]]


def _outcome(lib, name, positions):
    base = lib.arange(15.0).reshape(5, 3)
    try:
        return "value", CASES[name](lib, base, positions).tolist()
    except Exception as error:  # compared with torch's, type and text
        return type(error).__name__, str(error).splitlines()[0]


@pytest.mark.parametrize("positions", POSITIONS, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_index_positions_match_torch(name, positions):
    assert _outcome(gradviz, name, positions) == _outcome(torch, name, positions)
