"""Memory benchmark: bytes and GC-tracked objects per recorded op of a long forward graph.

A chain of N ops on a ``(1,)`` tensor that requires grad (``y = y * 1.00001`` or
``y = y + 1``), built and kept alive; what the process grew by, divided by N, is what one
recorded op costs in memory. Every case runs in its own fresh child process (gradviz and
torch alike), so allocator state from one case cannot hide another's growth. See
bench/README.md.

    python bench/memory.py                      # N = 1,000,000, both forms, both frameworks
    python bench/memory.py --n 200000 --json memory.json
    python bench/memory.py --breakdown          # also: what one gradviz op allocates, by object
    GRADVIZ_PURE_PYTHON=1 python bench/memory.py  # the interpreted engine
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import subprocess
import sys
import tracemalloc

FORMS = ("mul", "add")
FRAMEWORKS = ("gradviz", "torch")


def _rss_bytes() -> int:
    """The process's resident set size, from /proc (Linux)."""
    with open("/proc/self/statm") as stats:
        return int(stats.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _step(form):
    if form == "mul":
        return lambda y: y * 1.00001  # 1.00001 ** 1e6 ~ 22026: float32 does not overflow
    return lambda y: y + 1


def _chain(module, form, n):
    step = _step(form)
    x = module.ones((1,), requires_grad=True)
    y = x
    for _ in range(n):
        y = step(y)
    return x, y


def child(framework: str, form: str, n: int, trace: bool) -> dict:
    """Build the chain in this (fresh) process; report growth per op. GC stays on."""
    import _common  # noqa: F401  (one thread, as every bench here)
    import numpy as np
    import torch

    import gradviz
    module = gradviz if framework == "gradviz" else torch
    _chain(module, form, 1000)  # warm-up: imports, caches, first nodes
    gc.collect()
    collections_before = sum(stats["collections"] for stats in gc.get_stats())
    tracked_before = len(gc.get_objects())
    if trace:
        tracemalloc.start()
    rss_before = _rss_bytes()
    x, y = _chain(module, form, n)
    rss_after = _rss_bytes()
    traced = tracemalloc.get_traced_memory()[0] if trace else None
    if trace:
        tracemalloc.stop()
    collections = sum(stats["collections"] for stats in gc.get_stats()) - collections_before
    tracked = len(gc.get_objects()) - tracked_before
    y.backward(module.ones((1,)))  # the graph is a working graph
    # float32 rounds 1.0001 and every product: a loose check that the graph is the chain
    expected = float(np.float32(1.00001)) ** n if form == "mul" else 1.0
    got = float(x.grad.numpy().ravel()[0])
    if abs(got - expected) > 5e-2 * expected:
        raise AssertionError(f"{framework} {form}: d y / d x = {got}, expected {expected}")
    return {"framework": framework, "form": form, "n": n,
            "rss_bytes_per_op": (rss_after - rss_before) / n,
            "traced_bytes_per_op": None if traced is None else traced / n,
            "gc_tracked_per_op": tracked / n,
            "gc_collections": collections}


def _parts(y):
    """(label, object, kept by the graph) for what one op made: its output Tensor and array
    (freed in a chain once the next op replaces ``y``), its node and what the node holds."""
    node = y.grad_fn
    parts = [("Tensor", y, False), ("ndarray (+ its data)", y._data, False),
             ("VersionCounter", y._version_counter, False), ("node", node, True)]
    if node.next_functions is node.next_functions:  # kept as a tuple (more than two edges)
        parts += [("node.next_functions", node.next_functions, True)]
        parts += [(f"edge {i}", edge, True) for i, edge in enumerate(node.next_functions)]
    # else the node keeps its edges in its own fields (Note [Inline edges], _engine.py)
    parts += [("node._input_metadata", node._input_metadata, True)]
    parts += [(f"InputMeta {i}", meta, True) for i, meta in enumerate(node._input_metadata)]
    parts += [("node.needs_input_grad", node.needs_input_grad, True),
              ("node.attrs", node.attrs, True)]
    for name in ("_kept_inputs", "_saved_inputs"):  # the tuple of this version, or the dict
        kept = getattr(node, name, None)
        if kept is not None:
            parts.append((f"node.{name}", kept, True))
            break
    parts += [("node._saved_output", node._saved_output, True)]
    return [part for part in parts if part[1] is not None]


def breakdown(form: str) -> list:
    """What one op of a gradviz chain allocates, object by object (``sys.getsizeof``, GC
    header included): an object is ``shared`` when the op before it holds the same one."""
    import gradviz
    _, previous = _chain(gradviz, form, 10)
    y = _step(form)(previous)
    before = [obj for _, obj, _ in _parts(previous)] + [previous, previous.grad_fn]
    rows = []
    for label, obj, kept in _parts(y):
        shared = any(obj is other for other in before)
        rows.append({"part": label, "type": type(obj).__name__, "bytes": sys.getsizeof(obj),
                     "shared": shared, "gc_tracked": gc.is_tracked(obj), "kept": kept})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=1_000_000)
    parser.add_argument("--forms", nargs="+", choices=FORMS, default=list(FORMS))
    parser.add_argument("--frameworks", nargs="+", choices=FRAMEWORKS, default=list(FRAMEWORKS))
    parser.add_argument("--trace", action="store_true",
                        help="also the tracemalloc total (slower; numpy's blocks included)")
    parser.add_argument("--breakdown", action="store_true")
    parser.add_argument("--json")
    parser.add_argument("--child", nargs=3, metavar=("FRAMEWORK", "FORM", "N"),
                        help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        framework, form, n = args.child
        print(json.dumps(child(framework, form, int(n), args.trace)))
        return

    import _common
    results = []
    for form in args.forms:
        for framework in args.frameworks:
            command = [sys.executable, __file__, "--child", framework, form, str(args.n)]
            if args.trace and framework == "gradviz":
                command.append("--trace")
            output = subprocess.run(command, check=True, capture_output=True, text=True).stdout
            results.append(json.loads(output.strip().splitlines()[-1]))
    print(f"engine: {_common.environment()['gradviz_engine']}, N = {args.n:,}, shape (1,), GC on")
    print(f"{'form':<6}{'framework':<10}{'RSS B/op':>10}{'traced B/op':>13}{'GC objs/op':>12}"
          f"{'collections':>13}")
    by_key = {(r["form"], r["framework"]): r for r in results}
    for r in results:
        traced = "" if r["traced_bytes_per_op"] is None else f"{r['traced_bytes_per_op']:.0f}"
        print(f"{r['form']:<6}{r['framework']:<10}{r['rss_bytes_per_op']:>10.0f}{traced:>13}"
              f"{r['gc_tracked_per_op']:>12.2f}{r['gc_collections']:>13}")
    for form in args.forms:
        if (form, "gradviz") in by_key and (form, "torch") in by_key:
            ratio = by_key[form, "gradviz"]["rss_bytes_per_op"] / by_key[form, "torch"]["rss_bytes_per_op"]
            print(f"{form}: gradviz / torch RSS per op = {ratio:.2f}")
    report = {"environment": _common.environment(), "results": results}
    if args.breakdown:
        for form in args.forms:
            rows = breakdown(form)
            report[f"breakdown_{form}"] = rows
            kept = sum(r["bytes"] for r in rows if r["kept"] and not r["shared"])
            print(f"\none gradviz op ({form}): {kept} bytes of new objects the graph keeps "
                  "(getsizeof; allocator overhead not included)")
            for r in rows:
                flags = ", ".join(flag for flag, on in (("shared", r["shared"]),
                                                        ("GC-tracked", r["gc_tracked"]),
                                                        ("freed with y", not r["kept"])) if on)
                print(f"  {r['part']:<24}{r['type']:<16}{r['bytes']:>6}  {flags}")
    if args.json:
        with open(args.json, "w") as out:
            json.dump(report, out, indent=1)


if __name__ == "__main__":
    main()
