"""What real tutorials call under ``import gradviz as torch`` (issue 18, item 7), with torch as
the oracle: makemore's endless ``RandomSampler``, ``set_default_device``, ``torch.accelerator``,
``torch.utils.benchmark`` and warnings that point at the user's line."""

from __future__ import annotations

import itertools
import tracemalloc
import warnings

import pytest
import torch
from torch.utils import benchmark as torch_benchmark

import gradviz
import gradviz.accelerator
from gradviz.utils.benchmark import Measurement, TaskSpec, Timer

# ---- makemore: RandomSampler(replacement=True, num_samples=int(1e10)) --------------------


@pytest.mark.parametrize("library", [torch, gradviz], ids=["torch", "gradviz"])
def test_an_endless_sampler_with_replacement_draws_lazily(library):
    data = library.utils.data
    dataset = data.TensorDataset(library.arange(50))
    sampler = data.RandomSampler(dataset, replacement=True, num_samples=int(1e10))
    assert len(sampler) == int(1e10)
    loader = data.DataLoader(dataset, batch_size=32, sampler=sampler)
    tracemalloc.start()
    try:
        batches = list(itertools.islice(iter(loader), 20))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 50 * 1024 * 1024  # all 1e10 indices at once would be 74.5 GiB
    assert [tuple(b[0].shape) for b in batches] == [(32,)] * 20
    values = library.cat([b[0] for b in batches])
    assert int(values.min()) >= 0 and int(values.max()) < 50


def test_sampling_with_replacement_draws_32_at_a_time_like_torch(monkeypatch):
    """The generator advances in torch's chunks: 70 samples are 32 + 32 + 6 draws."""
    sizes = []
    real = gradviz.ops.randint

    def spy(low, high, size, **kwargs):
        sizes.append(tuple(size))
        return real(low, high, size, **kwargs)

    monkeypatch.setattr(gradviz.utils.data._ops, "randint", spy)
    sampler = gradviz.utils.data.RandomSampler(range(10), replacement=True, num_samples=70)
    drawn = list(sampler)
    assert len(drawn) == 70 and set(drawn) <= set(range(10))
    assert sizes == [(32,), (32,), (6,)]
    torch_sizes = []
    real_torch = torch.randint

    def torch_spy(*args, **kwargs):
        torch_sizes.append(tuple(kwargs["size"]))
        return real_torch(*args, **kwargs)

    monkeypatch.setattr(torch, "randint", torch_spy)
    assert len(list(torch.utils.data.RandomSampler(range(10), replacement=True, num_samples=70))) == 70
    assert torch_sizes == sizes


# ---- devices -----------------------------------------------------------------------------

def test_default_device_is_the_cpu_like_torch():
    try:
        for value in ("cpu", None, "cpu"):
            gradviz.set_default_device(value)
            torch.set_default_device(value)
            assert str(gradviz.get_default_device()) == str(torch.get_default_device()) == "cpu"
            assert repr(gradviz.get_default_device()) == repr(torch.get_default_device())
    finally:
        torch.set_default_device(None)  # torch keeps a global mode while a device is set
    gradviz.set_default_device(gradviz.device("cpu"))
    assert gradviz.zeros(2).device == gradviz.get_default_device()


def test_set_default_device_refuses_unknown_and_unavailable_devices():
    with pytest.raises(RuntimeError) as expected:
        torch.set_default_device("banana")
    with pytest.raises(RuntimeError) as got:
        gradviz.set_default_device("banana")
    assert "device type at start of device string: banana" in str(expected.value)
    assert "device type at start of device string: banana" in str(got.value)
    with pytest.raises(AssertionError, match="Torch not compiled with CUDA enabled"):
        gradviz.set_default_device("cuda")  # torch raises the same at the first tensor
    assert str(gradviz.get_default_device()) == "cpu"


def test_accelerator_reports_none_like_torch_on_the_cpu():
    assert gradviz.accelerator.is_available() is torch.accelerator.is_available() is False
    assert gradviz.accelerator.current_accelerator() is torch.accelerator.current_accelerator()
    assert gradviz.accelerator.current_accelerator() is None
    assert gradviz.accelerator.device_count() == torch.accelerator.device_count() == 0
    device = gradviz.accelerator.current_accelerator() or "cpu"  # device-agnostic tutorials
    assert gradviz.ones(2, device=device).sum().item() == 2.0


# ---- torch.utils.benchmark ---------------------------------------------------------------

REPR_CASES = [
    dict(number=100, raw=[0.000293]),
    dict(number=1000, raw=[0.0021, 0.0020, 0.0023, 0.0022, 0.0021]),
    dict(number=10, raw=[1.5e-6, 9.0e-6, 1.6e-6, 1.4e-6]),  # a warning: IQR far above 25%
    dict(number=1, raw=[2.5, 2.6, 2.4, 2.5, 2.55]),
]


@pytest.mark.parametrize("case", range(len(REPR_CASES)))
@pytest.mark.parametrize("spec", [dict(stmt="x * 2", setup="x = torch.ones(3)"),
                                  dict(stmt="f(x)\ng(x)", setup="pass", label="two calls",
                                       sub_label="small", description="fp32")],
                         ids=["one-line", "labelled"])
def test_measurement_statistics_and_repr_equal_torchs(case, spec):
    number, raw = REPR_CASES[case]["number"], REPR_CASES[case]["raw"]
    expected = torch_benchmark.Measurement(number, list(raw), torch_benchmark.utils.common.TaskSpec(**spec))
    got = Measurement(number, list(raw), TaskSpec(**spec))
    assert got.times == pytest.approx(expected.times, rel=1e-12)
    assert got.mean == pytest.approx(expected.mean, rel=1e-12)
    assert got.median == pytest.approx(expected.median, rel=1e-12)
    assert got.iqr == pytest.approx(expected.iqr, rel=1e-9)
    assert got.has_warnings == expected.has_warnings
    # everything but the first line, which names the class and its address
    assert repr(got).splitlines()[1:] == repr(expected).splitlines()[1:]
    assert repr(got).splitlines()[0].startswith("<gradviz.utils.benchmark.Measurement object at")


def test_timer_runs_the_statement_in_the_given_globals():
    calls = []

    def work(x):
        calls.append(x)
        return x * 2

    timer = Timer(stmt="work(x)", setup="x = torch.ones(2)", globals={"work": work})
    measurement = timer.timeit(7)
    # a warm-up of max(7 // 100, 2) runs, then the 7 timed ones, as torch does
    assert len(calls) == 9 and isinstance(calls[0], gradviz.Tensor)
    assert measurement.number_per_run == 7 and len(measurement.raw_times) == 1
    assert measurement.times == [measurement.raw_times[0] / 7]

    torch_calls = []
    torch_timer = torch_benchmark.Timer(stmt="work(x)", setup="x = torch.ones(2)",
                                        globals={"work": lambda x: torch_calls.append(x)})
    torch_timer.timeit(7)
    assert len(torch_calls) == len(calls)


def test_blocked_autorange_measures_blocks_for_at_least_min_run_time():
    seen = []
    measurement = Timer("sum(range(50))").blocked_autorange(
        callback=lambda number, seconds: seen.append((number, seconds)), min_run_time=0.05)
    assert sum(measurement.raw_times) >= 0.05
    assert [n for n, _ in seen] == [measurement.number_per_run] * len(measurement.raw_times)
    assert measurement.median > 0 and measurement.mean > 0
    assert "measurement" in repr(measurement) and "sum(range(50))" in repr(measurement)


def test_timer_leaves_the_garbage_collector_as_the_user_set_it():
    import gc

    states = []
    Timer("states.append(gc.isenabled())", globals={"states": states, "gc": gc}).timeit(3)
    assert all(states) and gc.isenabled()


# ---- warnings inside a Module's forward point at the user's line -------------------------

class ImplicitDim:
    """A user's module whose forward calls log_softmax without ``dim``."""

    @staticmethod
    def build(library):
        class Net(library.nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = library.nn.Linear(3, 2)

            def forward(self, x):
                return library.nn.functional.log_softmax(self.fc(x))  # the user's line

        return Net()


def caught(call):
    with warnings.catch_warnings(record=True) as records:
        warnings.simplefilter("always")
        call()
    return [(r.filename, r.lineno, str(r.message)) for r in records]


def test_a_warning_in_a_modules_forward_points_at_the_users_line_like_torch():
    expected = caught(lambda: ImplicitDim.build(torch)(torch.randn(4, 3)))
    got = caught(lambda: ImplicitDim.build(gradviz)(gradviz.randn(4, 3)))
    assert len(got) == len(expected) == 1
    assert got[0][:2] == expected[0][:2]
    assert got[0][0] == __file__
    assert got[0][2] == expected[0][2]


def test_warnings_of_gradviz_layers_never_blame_gradviz_files():
    def call_layers():
        layers = [gradviz.nn.Softmax(), gradviz.nn.LogSoftmax(), gradviz.nn.Softmin(),
                  gradviz.nn.Dropout2d(0.5)]
        for layer in layers:
            layer(gradviz.randn(3, 4, 5))

    records = caught(call_layers)
    assert len(records) >= 4
    assert all(filename == __file__ for filename, _, _ in records), records
    direct = caught(lambda: gradviz.nn.functional.softmax(gradviz.randn(2, 3)))
    assert direct[0][0] == __file__
