"""What every benchmark here shares. Import it before numpy, torch or gradviz.

Every math library is pinned to one thread *before* numpy or torch is imported: thread pools
are sized at import, and a pool spinning up inside a timed region is noise, not overhead.
``environment()`` is the record each script writes next to its timings.
"""

from __future__ import annotations

import os

THREAD_VARIABLES = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
for _var in THREAD_VARIABLES:
    os.environ[_var] = "1"

import platform  # noqa: E402

import numpy as np  # noqa: E402
import torch  # noqa: E402

import gradviz  # noqa: E402

torch.set_num_threads(1)


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
    }


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
