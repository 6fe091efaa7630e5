"""Instrumentation cost: the chain backward with no observer, with a do-nothing observer and
with a ``Recorder``; the recorder's cost per event, and a bound on what the idle observer
points cost (what "compiling the instrumentation out" could save). See bench/README.md.

    python bench/instrument.py                   # table
    python bench/instrument.py --shape 16        # tensors of 16 entries instead of 1
    python bench/instrument.py --json out.json   # also the raw timings
    python bench/instrument.py --model gpt       # the debugger on the GPT step of models.py
    GRADVIZ_PURE_PYTHON=1 python bench/instrument.py
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import timeit  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
from _common import timed_region  # noqa: E402

import gradviz  # noqa: E402
from gradviz.autograd._functional import make_graph_task  # noqa: E402
from gradviz.instrument import Observer, Recorder  # noqa: E402
from gradviz_ext import engine as _engine  # noqa: E402


def chain(n, shape):
    x = gradviz.ones(shape, requires_grad=True)
    y = x
    for _ in range(n):
        y = y * 1.0001 + 0.0001
    return x, y


def backward_seconds(n, shape, make_observer, gc_on=True):
    """Time one backward of a fresh chain; returns (seconds, events recorded or None). The
    collector is on, as users run, or off as ``timeit`` has it (Note [GC on])."""
    x, y = chain(n, shape)
    observer = make_observer()
    task = make_graph_task(y, gradviz.ones(shape), observer=observer)
    with timed_region(gc_on):
        start = time.perf_counter()
        task.run()
        elapsed = time.perf_counter() - start
    expected = 1.0001 ** n
    got = float(x.grad.numpy().ravel()[0])
    if abs(got - expected) > 1e-3 * expected:
        raise AssertionError(f"d y / d x = {got}, expected {expected}")
    events = len(observer.events) if isinstance(observer, Recorder) else None
    return elapsed, events


class NoOp(Observer):
    """Overrides every backward callback with one that does nothing, so the engine calls it at
    every point (an ``Observer()`` that overrides nothing is told nothing: Note [Observer
    cost] in gradviz_ext/_task.py)."""


for _name in _engine.BACKWARD_CALLBACKS:
    setattr(NoOp, _name, lambda self, *args: None)


VARIANTS = (
    ("no observer", lambda: None),
    ("idle Observer()", Observer),
    ("no-op observer", NoOp),
    ("Recorder", Recorder),
)


def idle_point_seconds():
    """Interpreted cost of one idle observer point (``if observer is not None``), minus the
    loop's own cost: an upper bound for the compiled engine, where the point is one C pointer
    comparison (``__pyx_v_observer != Py_None``)."""
    number = 2_000_000
    test = min(timeit.repeat("if observer is not None: pass", setup="observer = None",
                             number=number, repeat=5))
    empty = min(timeit.repeat("pass", number=number, repeat=5))
    return max(test - empty, 0.0) / number


# ---- the debugger on a real model (--model gpt) ----------------------------------------

def _plain(loss):
    loss.backward()


def _idle_observer(loss):
    """An ``Observer()`` attached to the pass: it overrides nothing, so it is told nothing."""
    make_graph_task(loss, None, observer=Observer()).run()


def _noop_observer(loss):
    """A do-nothing observer attached to the pass that every engine point calls."""
    make_graph_task(loss, None, observer=NoOp()).run()


def _debug_session(loss):
    session = gradviz.debug.backward(loss)
    session.continue_()
    return session


MODEL_VARIANTS = (("plain backward", _plain), ("idle Observer()", _idle_observer),
                  ("no-op observer", _noop_observer),
                  ("debug.backward + continue_", _debug_session), ("record()", None))


def model_backward_seconds(workload, variant, gc_on):
    """One forward of the model (not timed), then its backward the way ``variant`` runs it
    (timed); ``record()`` covers forward and backward, as a user wraps a step, and its
    forward events (``node_created``) are timed separately. (forward seconds, backward
    seconds, and the seconds then spent reading every event: ``session.events`` or the trace's
    ``events`` and ``graph``, Note [Events when read]); the gradients are checked against a
    plain backward's by the caller."""
    model = workload.model
    model.zero_grad()
    recording = gradviz.record() if variant is None else None
    with timed_region(gc_on):
        start = time.perf_counter()
        if recording is not None:
            recording.__enter__()
        loss = workload.loss_fn(workload.fw, model, workload.x, workload.y)
        built = time.perf_counter()
        if variant is None:
            loss.backward()
            recording.__exit__(None, None, None)
            result = recording.trace
        else:
            result = variant(loss)
        done = time.perf_counter()
        if isinstance(result, gradviz.instrument.Trace):
            len(result.events), len(result.graph["nodes"])
        elif result is not None:
            len(result.events)
        read = time.perf_counter()
    return built - start, done - built, read - done


def consecutive_backward_seconds(workload, steps):
    """``{variant: [backward seconds]}`` of ``steps`` forward + backward steps per variant run
    back to back with the collector on and no collection before any of them: the garbage a
    debugged pass leaves (events that outlive a collection or two are promoted to the oldest
    generation) then triggers the full collections a user's loop pays for, which the
    alternating repeats above, each GC-off run starting from a collection, hide. The variants
    take turns in blocks of ``steps``, three rounds; the first round is a warm-up."""
    times: dict[str, list] = {name: [] for name, _ in MODEL_VARIANTS}
    for round_ in range(3):
        for name, variant in MODEL_VARIANTS:
            for _ in range(steps):
                _, backward, _ = model_backward_seconds(workload, variant, gc_on=True)
                if round_:
                    times[name].append(backward)
    return times


def model_main(args):
    import models  # the GPT step of bench/models.py (same model, data, initial parameters)

    workload = models.make_workloads(args.model)["gradviz"]
    workload.reset()
    reference = None
    rows = {name: {"forward": [], "backward": [], "backward_gc_off": [], "read": []}
            for name, _ in MODEL_VARIANTS}
    for repeat in range(args.repeats + 1):  # the first is a warm-up
        for name, variant in MODEL_VARIANTS:
            for gc_on in (True, False):
                forward, backward, read = model_backward_seconds(workload, variant, gc_on)
                grads = [p.grad.numpy().copy() for p in workload.model.parameters()]
                if reference is None:
                    reference = grads
                for got, want in zip(grads, reference):
                    if not (got == want).all():
                        raise AssertionError(f"{name}: gradients differ from a plain backward")
                if repeat:
                    rows[name]["backward" if gc_on else "backward_gc_off"].append(backward)
                    if gc_on:
                        rows[name]["forward"].append(forward)
                        rows[name]["read"].append(read)
    base = statistics.median(rows["plain backward"]["backward"])
    base_off = statistics.median(rows["plain backward"]["backward_gc_off"])
    base_forward = statistics.median(rows["plain backward"]["forward"])
    print(f"the debugger on the {args.model} step of bench/models.py (forward + loss, then "
          f"backward), {gradviz.config()['engine']} engine, median of {args.repeats}, GC on "
          f"(last column: GC off); load average {_common.os.getloadavg()[0]:.2f}")
    # the mean as well: a full collection lands in few repeats, so the median hides its cost
    base_mean = statistics.mean(rows["plain backward"]["backward"])
    print(f"{'variant':>28} | {'bwd ms':>7} | {'vs plain':>8} | {'mean vs plain':>13} | "
          f"{'fwd vs plain':>12} | {'GC off vs plain':>15} | {'then read ms':>12}")
    for name, row in rows.items():
        backward = statistics.median(row["backward"])
        print(f"{name:>28} | {backward * 1e3:>7.2f} | {backward / base:>7.2f}x | "
              f"{statistics.mean(row['backward']) / base_mean:>12.2f}x | "
              f"{statistics.median(row['forward']) / base_forward:>11.2f}x | "
              f"{statistics.median(row['backward_gc_off']) / base_off:>14.2f}x | "
              f"{statistics.median(row['read']) * 1e3:>12.2f}")
    in_a_row = consecutive_backward_seconds(workload, args.consecutive)
    base_row = statistics.mean(in_a_row["plain backward"])
    print(f"{args.consecutive} steps in a row per variant, GC on, no collection between them (as "
          f"a notebook's training loop runs), mean backward ms (vs plain): " + ", ".join(
              f"{name} {statistics.mean(times) * 1e3:.2f} ({statistics.mean(times) / base_row:.2f}x)"
              for name, times in in_a_row.items()))
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"model": args.model, "variants": rows, "in_a_row": in_a_row,
                       "environment": _common.environment()}, handle, indent=2)
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model", choices=("gpt", "lenet", "lstm", "cnn_bn"),
                        help="time the debugger on this step of bench/models.py instead")
    parser.add_argument("--n", type=int, default=10_000, help="chain length (2 n + 1 nodes)")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--shape", type=int, nargs="+", default=[1],
                        help="shape of x and of every gradient (default: 1)")
    parser.add_argument("--json", metavar="PATH")
    parser.add_argument("--consecutive", type=int, default=20,
                        help="--model: also time this many steps in a row per variant (GC on, "
                             "no collection between them) and report their mean")
    args = parser.parse_args(argv)
    if args.model:
        return model_main(args)
    shape = tuple(args.shape)
    nodes = 2 * args.n + 1
    rows = {}
    for name, make in VARIANTS:
        backward_seconds(min(args.n, 200), shape, make)  # warm-up
        runs, runs_off = [], []
        for _ in range(args.repeats):  # GC on (the figures) and off, alternating
            runs.append(backward_seconds(args.n, shape, make, gc_on=True))
            runs_off.append(backward_seconds(args.n, shape, make, gc_on=False))
        rows[name] = {"seconds": [r[0] for r in runs], "median": statistics.median(r[0] for r in runs),
                      "events": runs[0][1],
                      "seconds_gc_off": [r[0] for r in runs_off],
                      "median_gc_off": statistics.median(r[0] for r in runs_off)}
    base = rows["no observer"]["median"]
    base_off = rows["no observer"]["median_gc_off"]
    events = rows["Recorder"]["events"]
    points_per_node = events / nodes  # the points an observer is called at are the idle ones
    idle = idle_point_seconds()
    print(f"instrumentation cost: chain of {args.n} iterations ({nodes} nodes), shape {shape}, "
          f"{gradviz.config()['engine']} engine, median of {args.repeats}, GC on (last "
          f"columns: GC off); load average {_common.os.getloadavg()[0]:.2f}")
    print(f"{'variant':>16} | {'µs/node':>8} | {'vs none':>8} | {'GC off: µs':>10} {'vs none':>8}")
    for name, row in rows.items():
        print(f"{name:>16} | {row['median'] / nodes * 1e6:>8.2f} | {row['median'] / base:>7.2f}x | "
              f"{row['median_gc_off'] / nodes * 1e6:>10.2f} {row['median_gc_off'] / base_off:>7.2f}x")
    recorder_cost = (rows["Recorder"]["median"] - base) / events
    dispatch_cost = (rows["no-op observer"]["median"] - base) / events
    print(f"recorder: {events} events ({points_per_node:.1f} per node); "
          f"{recorder_cost * 1e6:.2f} µs per event, of which {dispatch_cost * 1e6:.2f} µs is "
          "calling the observer")
    bound = points_per_node * idle / (base / nodes)
    print(f"idle observer points: {points_per_node:.1f} per node x at most {idle * 1e9:.1f} ns "
          f"(interpreted 'is not None' test) = at most {bound:.2%} of the no-observer backward")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"n": args.n, "shape": list(shape), "nodes": nodes, "variants": rows,
                       "recorder_us_per_event": recorder_cost * 1e6,
                       "idle_point_ns_upper_bound": idle * 1e9,
                       "idle_fraction_upper_bound": bound}, handle, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
