"""What every benchmark here shares. Import it before numpy, torch or gradviz.

Every math library is pinned to one thread *before* numpy or torch is imported: thread pools
are sized at import, and a pool spinning up inside a timed region is noise, not overhead.
``environment()`` is the record each script writes next to its timings.

Note [GC on]: users run with Python's garbage collector on, and with torch imported a full
collection walks about 180,000 objects; a framework that allocates many GC-tracked objects
per op pays for it in collections that ``timeit``-style GC-off timing never shows. Every
benchmark therefore times with the collector **on** (as the user has it) and reports GC-off
figures only as a second column. ``timed_region(gc_on)`` is the one place that decides, and
restores the collector's previous state afterwards. A GC-on region does not collect first: the
garbage earlier steps left behind, and the collections it triggers inside the region, are
what a user's notebook pays too (collecting first hid most of a debugged backward's
collections). A GC-off region collects first, so that garbage does not pile up while off.
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _var in THREAD_VARIABLES:
    os.environ[_var] = "1"

import contextlib  # noqa: E402
import gc  # noqa: E402
import platform  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gradviz  # noqa: E402

torch.set_num_threads(1)

try:  # the pools that were loaded by the imports above, pinned once more at run time
    import threadpoolctl  # noqa: E402
except ImportError:  # the environment variables above still pin them
    threadpoolctl = None
_THREADPOOL_LIMITS = threadpoolctl.threadpool_limits(limits=1) if threadpoolctl else None

GC_MODES = ("on", "off")


def environment() -> dict:
    """Versions, engine mode and thread settings of this run."""
    return {
        "gradviz": gradviz.__version__,
        "gradviz_engine": gradviz.config()["engine"],
        "torch": torch.__version__,
        "torch_threads": torch.get_num_threads(),
        "numpy": np.__version__,
        "python": platform.python_version(),
        "machine": platform.machine(),
        "processor": platform.processor() or platform.machine(),
        "threads_env": {v: os.environ.get(v) for v in THREAD_VARIABLES},
        "threadpools": ([{k: pool[k] for k in ("internal_api", "num_threads")}
                         for pool in threadpoolctl.threadpool_info()] if threadpoolctl else None),
        "load_average": list(os.getloadavg()),
        "gc_thresholds": list(gc.get_threshold()),
    }


@contextlib.contextmanager
def timed_region(gc_on):
    """Run the block with the garbage collector on (``gc_on``, as users run, with whatever
    garbage is there) or off after a collection (as ``timeit`` does); the collector's previous
    state is restored afterwards. Note [GC on]."""
    was_enabled = gc.isenabled()
    if gc_on:
        gc.enable()
    else:
        gc.collect()
        gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
        else:
            gc.disable()


def interleaved(frameworks, repeats, run, warm_up):
    """``{name: [run(name, module) for each repeat]}``, after one ``warm_up(name, module)``
    each, alternating the frameworks within every repeat: a shared VM's speed drifts by up to
    2x within minutes, and measuring one framework after the other turns that into ratio
    errors. ``frameworks`` is a sequence of (name, module)."""
    for name, module in frameworks:
        warm_up(name, module)
    runs = {name: [] for name, _ in frameworks}
    for _ in range(repeats):
        for name, module in frameworks:
            runs[name].append(run(name, module))
    return runs
