"""Tensor summaries: the fast paths give exactly the reference's dict (Note [Summary cost] in
``gradviz/instrument/_summary.py``), and the recorder's cache never returns a stale one."""

from __future__ import annotations

import math
import types

import numpy as np
import pytest

import gradviz
from gradviz.autograd._functional import make_graph_task
from gradviz.instrument import Recorder
from gradviz.instrument._summary import SMALL_NUMEL, SummaryCache, _numpy_sum, summarize, summarize_reference
from gradviz_ext._ops import summary_stats

DTYPES = [np.float32, np.float64, np.float16, np.int64, np.int32, np.uint8, np.bool_]


def as_tensor(array):
    """What summarize() reads: ``_data`` and ``dtype.name`` (as the torch recorder passes)."""
    return types.SimpleNamespace(_data=array, dtype=types.SimpleNamespace(name=array.dtype.name))


def assert_same(fast, reference):
    assert fast.keys() == reference.keys()
    for key, expected in reference.items():
        got = fast[key]
        assert type(got) is type(expected), (key, got, expected)
        if key in ("min", "max") and isinstance(expected, float):
            assert got == expected, (key, got, expected)  # the sign of a zero may differ
        elif isinstance(expected, float):
            # bit-identical, including the sign of zero
            assert got == expected and math.copysign(1, got) == math.copysign(1, expected), (key, got, expected)
        else:
            assert got == expected, (key, got, expected)


def random_arrays(count, seed=0):
    rng = np.random.default_rng(seed)
    for trial in range(count):
        n = int(rng.integers(0, 3 * SMALL_NUMEL)) if trial % 4 else int(rng.integers(0, 400))
        values = rng.standard_normal(n) * 10.0 ** rng.integers(-6, 7)
        if trial % 5 == 0:
            values = np.round(values)  # zeros and exact integers
        for every, special in ((7, np.nan), (11, np.inf), (13, -np.inf), (17, -0.0)):
            if trial % every == 0:
                values[rng.random(n) < 0.3] = special
        if trial % 19 == 0:
            with np.errstate(over="ignore"):
                values = values * 1e305  # sums and squares overflow
        dtype = DTYPES[trial % len(DTYPES)]
        with np.errstate(all="ignore"):
            array = values.astype(dtype)
        if trial % 3 == 0 and n % 4 == 0 and n:
            array = array.reshape(n // 4, 4)
            if trial % 2:
                array = array.T  # not C-contiguous
        yield array


def test_summarize_equals_the_reference_on_many_arrays():
    for array in random_arrays(6000):
        tensor = as_tensor(array)
        with np.errstate(all="ignore"):
            assert_same(summarize(tensor), summarize_reference(tensor))


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_strided_gradients_are_summarized_in_c_order(dtype):
    """A transposed, permuted or sliced gradient (the debugger sees many: a product's weight
    gradient, attention's heads) is summarized as numpy sums its ravel, block edges included."""
    rng = np.random.default_rng(7)
    base = (rng.standard_normal((6, 33, 4, 17)) * 100).astype(dtype)
    views = [base.transpose(0, 2, 1, 3), base.transpose(3, 2, 1, 0), base[:, ::2], base[..., 1:],
             np.asfortranarray(base[0]), base.reshape(198, 68).T, base[:, :, :, ::3]]
    for view in views:
        assert not view.flags.c_contiguous
        assert_same(summarize(as_tensor(view)), summarize_reference(as_tensor(view)))


@pytest.mark.parametrize("values", [
    [], [0.0], [-0.0], [-0.0, -0.0], [0.0, -0.0], [1e308, 1e308], [math.nan], [math.inf, -math.inf],
    [math.nan, 1.0, -2.0], [3.0] * (SMALL_NUMEL + 1), [5e-324, -5e-324], [1e200], [-1e-200],
])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_edge_cases_equal_the_reference(values, dtype):
    with np.errstate(all="ignore"):
        array = np.array(values, dtype=dtype)
        assert_same(summarize(as_tensor(array)), summarize_reference(as_tensor(array)))
        scalar = np.array(values[0], dtype=dtype) if values else None
        if scalar is not None:  # a 0-d tensor
            assert_same(summarize(as_tensor(scalar)), summarize_reference(as_tensor(scalar)))


def test_python_sums_replay_numpy_bit_for_bit():
    rng = np.random.default_rng(1)
    for n in range(1, 129):
        for _ in range(20):
            values = rng.standard_normal(n) * 10.0 ** rng.integers(-8, 9, size=n)
            assert _numpy_sum(values.tolist()) == float(np.add.reduce(values)), n


def test_the_summary_of_a_gradviz_tensor():
    summary = summarize(gradviz.tensor([[3.0, float("nan")], [-4.0, float("inf")]]))
    assert summary == {"shape": [2, 2], "dtype": "float32", "numel": 4, "nan": 1, "inf": 1,
                       "min": -4.0, "max": 3.0, "mean": -0.5, "norm": 5.0,
                       "values": [3.0, "nan", -4.0, "inf"]}


# ---- the recorder's cache -----------------------------------------------------------------


def test_the_cache_answers_for_the_same_tensor_version_and_epoch():
    cache = SummaryCache()
    grad = gradviz.tensor([1.0, 2.0, 3.0])
    first = cache.summarize(grad)
    second = cache.summarize(grad)
    assert second == first and cache.hits == 1
    assert second is first  # Note [Shared summaries]: a hit is the same (read-only) dict
    with gradviz.no_grad():
        grad.add_(1.0)  # the version counter moves: summarized again
    assert cache.summarize(grad)["min"] == 2.0 and cache.hits == 1
    grad.numpy()[0] = 10.0  # a write the version counter does not see: the caller knows user
    cache.new_epoch()       # code ran (Note [Summary epochs]) and starts a new epoch
    assert cache.summarize(grad)["max"] == 10.0 and cache.hits == 1
    grad.data = gradviz.tensor([5.0, 6.0, 7.0])  # another array under the same tensor
    assert cache.summarize(grad)["min"] == 5.0 and cache.hits == 1
    other = gradviz.tensor([5.0, 6.0, 7.0])  # equal bytes, other memory: computed, not cached
    assert cache.summarize(other)["max"] == 7.0 and cache.hits == 1
    assert cache.summarize(None) is None


def test_the_same_memory_under_another_tensor_reuses_the_summary_with_its_shape():
    cache = SummaryCache()
    grad = gradviz.arange(64.0)
    first = cache.summarize(grad)
    view = grad.view(8, 8)  # the same bytes in the same order
    summary = cache.summarize(view)
    assert cache.hits == 1 and summary == summarize_reference(view) and summary["shape"] == [8, 8]
    assert first["shape"] == [64]
    transposed = view.t()  # the same memory, another order: not C-contiguous, computed
    assert cache.summarize(transposed) == summarize_reference(transposed) and cache.hits == 1
    with gradviz.no_grad():
        grad.mul_(2)  # the source's version moved: the memory's entry is stale
    fresh = view.view(64)
    assert cache.summarize(fresh) == summarize_reference(fresh) and cache.hits == 1


def test_the_cache_is_bounded_and_skips_large_tensors():
    cache = SummaryCache(size=4, max_bytes=4 * 100)
    tensors = [gradviz.tensor([float(i)]) for i in range(10)]
    for tensor in tensors:
        cache.summarize(tensor)
    assert len(cache._entries) <= 4
    big = gradviz.ones(101)  # float32: 404 bytes
    cache.summarize(big)
    cache.summarize(big)
    assert cache.hits == 0 and all(entry[0] is not big for entry in cache._entries.values())
    medium = gradviz.ones(100)  # larger than SMALL_NUMEL, within max_bytes: cached
    medium.numpy()[7] = float("nan")
    first = cache.summarize(medium)
    assert cache.summarize(medium) == first == summarize_reference(medium) and cache.hits == 1


def test_the_cache_holds_references_within_its_byte_budget():
    """Entries hold the arrays (no copies), and never more bytes of them than the budget."""
    cache = SummaryCache(size=64, max_bytes=1 << 20, budget=3 * (1 << 17))
    grads = [gradviz.full((16, 32, 64), float(i + 1)) for i in range(5)]  # 128 KiB each
    for grad in grads:
        first = cache.summarize(grad)
        assert cache.summarize(grad) == first == summarize_reference(grad)
        assert cache._held <= 3 * (1 << 17)
        assert cache._held == sum(entry[1].nbytes for entry in cache._entries.values())
    assert cache.hits == 5
    cache.clear()
    assert cache._held == 0 and not cache._entries and not cache._memory


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_summary_kernel_gives_numpys_sums_bit_for_bit(dtype):
    """Note [Summary kernel]: every length around numpy's pairwise block edges, and large ones."""
    rng = np.random.default_rng(3)
    for n in [*range(1, 300), 1000, 4095, 8192, 8193, 100_003]:
        data = (rng.standard_normal(n) * 10 ** rng.uniform(-3, 3)).astype(dtype)
        as64 = data.astype(np.float64)
        expected = (float(np.add.reduce(as64)), float(np.add.reduce(as64 * as64)),
                    float(as64.min()), float(as64.max()))
        got = summary_stats(data)
        if got is not None:  # None interpreted: summarize takes numpy's path
            assert got == expected, n


def test_a_gradient_changed_in_place_by_a_backward_is_summarized_again():
    """The node_started summary of a gradient is reused at node_finished only if the bytes did
    not change; a custom backward that scribbles on its grad_output is seen."""

    class Scribble(gradviz.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, grad):
            grad.numpy()[...] = 7.0  # behind the version counter's back
            return grad * 2

    x = gradviz.tensor([1.0, 2.0], requires_grad=True)
    recorder = Recorder()
    make_graph_task(Scribble.apply(x), gradviz.tensor([1.0, 1.0]), observer=recorder).run()
    node = next(e["node"] for e in recorder.events if e["kind"] == "node_started" and e["name"] == "ScribbleBackward")
    started = next(e for e in recorder.events if e["kind"] == "node_started" and e["node"] == node)
    finished = next(e for e in recorder.events if e["kind"] == "node_finished" and e["node"] == node)
    assert started["grads_in"][0]["values"] == [1.0, 1.0]
    assert finished["grads_in"][0]["values"] == [7.0, 7.0]
    assert finished["grads_out"][0]["values"] == [14.0, 14.0]
    assert recorder._summary_cache._entries == {}, "the cache is emptied when the pass ends"
