"""Index ops that used to scatter with ``np.add.at``, and adaptive max pooling: gradviz and
PyTorch in one process, one thread, GC on, alternating within every repeat.

Cases (forward + backward, µs per step):

- ``embedding``: a (65, 64) table, (16, 32) tokens (the GPT step's token embedding);
- ``index_add``: 4,096 rows of 32 added into a (1000, 32) tensor, then backward;
- ``adaptive_max_pool2d even``: (16, 16, 32, 32) to (4, 4) and to (16, 16);
- ``adaptive_max_pool2d uneven``: (16, 16, 30, 30) to (7, 7) (the general loop);
- ``C[X]``: makemore's character embedding by advanced indexing, a (27, 10) table and (320, 3)
  indices (the backward scatters rows of 10 with repeats);
- ``gather``: (64, 1000) along dim 1 at (64, 500) indices (the backward is a scatter_add).

    python bench/index_ops.py [--repeats 15] [--json out.json]
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import environment, interleaved, timed_region  # noqa: E402

import gradviz  # noqa: E402

rng = np.random.default_rng(0)
TABLE = rng.standard_normal((65, 64)).astype(np.float32)
TOKENS = rng.integers(0, 65, (16, 32))
BASE = rng.standard_normal((1000, 32)).astype(np.float32)
ROWS = rng.integers(0, 1000, 4096)
SOURCE = rng.standard_normal((4096, 32)).astype(np.float32)
IMAGES_EVEN = rng.standard_normal((16, 16, 32, 32)).astype(np.float32)
IMAGES_UNEVEN = rng.standard_normal((16, 16, 30, 30)).astype(np.float32)
CHARACTERS = rng.standard_normal((27, 10)).astype(np.float32)
CONTEXTS = rng.integers(0, 27, (320, 3))
SCORES = rng.standard_normal((64, 1000)).astype(np.float32)
PICKS = rng.integers(0, 1000, (64, 500))


def embedding_step(module):
    weight = module.tensor(TABLE, requires_grad=True)
    tokens = module.tensor(TOKENS)
    return lambda: module.nn.functional.embedding(tokens, weight).sum().backward()


def index_add_step(module):
    base = module.tensor(BASE, requires_grad=True)
    rows = module.tensor(ROWS)
    source = module.tensor(SOURCE, requires_grad=True)
    return lambda: base.index_add(0, rows, source).sum().backward()


def pool_step(images, output_size):
    def make(module):
        x = module.tensor(images, requires_grad=True)
        return lambda: module.nn.functional.adaptive_max_pool2d(x, output_size).sum().backward()
    return make


def advanced_index_step(module):
    table = module.tensor(CHARACTERS, requires_grad=True)
    contexts = module.tensor(CONTEXTS)
    return lambda: table[contexts].sum().backward()


def gather_step(module):
    scores = module.tensor(SCORES, requires_grad=True)
    picks = module.tensor(PICKS)
    return lambda: module.gather(scores, 1, picks).sum().backward()


CASES = {
    "embedding (65,64)[16,32]": embedding_step,
    "index_add 4096 rows of 32": index_add_step,
    "adaptive_max_pool2d even 32->4": pool_step(IMAGES_EVEN, 4),
    "adaptive_max_pool2d even 32->16": pool_step(IMAGES_EVEN, 16),
    "adaptive_max_pool2d uneven 30->7": pool_step(IMAGES_UNEVEN, 7),
    "C[X]: (27,10)[320,3]": advanced_index_step,
    "gather (64,1000) dim 1 at (64,500)": gather_step,
}


def measure(make, repeats, inner=5):
    frameworks = (("gradviz", gradviz), ("torch", torch))
    steps = {name: make(module) for name, module in frameworks}

    def run(name, _module):
        with timed_region(True):  # GC on, as users run (Note [GC on] in _common.py)
            start = time.perf_counter()
            for _ in range(inner):
                steps[name]()
            return (time.perf_counter() - start) / inner * 1e6

    return interleaved(frameworks, repeats, run, lambda name, module: steps[name]())


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--json")
    args = parser.parse_args()
    results = {}
    print(f"{'case':34} {'gradviz µs':>11} {'torch µs':>9} {'ratio':>6}   (GC on, one thread)")
    for label, make in CASES.items():
        runs = measure(make, args.repeats)
        ours, theirs = statistics.median(runs["gradviz"]), statistics.median(runs["torch"])
        results[label] = {"runs": runs, "ratio": ours / theirs}
        print(f"{label:34} {ours:11.1f} {theirs:9.1f} {ours / theirs:6.2f}")
    if args.json:
        with open(args.json, "w") as handle:
            json.dump({"environment": environment(), "cases": results}, handle, indent=1)


if __name__ == "__main__":
    main()
