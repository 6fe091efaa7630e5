"""Module-call benchmark: the forward of many tiny modules, where ``Module.__call__`` dominates.

A ``Sequential`` of N blocks, each ``Linear(4, 4)`` then ``Tanh`` inside a small container
module, on a (1, 4) input: three module calls and three ops per block, so the time is the
framework's overhead per module call and per op (the module path bookkeeping of Note [Module
paths] in ``gradviz/autograd/_scopes.py`` is part of every call). Prints the forward time per
module call for gradviz and torch and their ratio, one thread each, interleaved.

    python bench/modules.py
    python bench/modules.py --blocks 200 --repeats 21
"""

from __future__ import annotations

import argparse  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import environment, interleaved  # noqa: E402

import gradviz  # noqa: E402

FRAMEWORKS = (("gradviz", gradviz), ("torch", torch))


def make_model(module, blocks: int, weights):
    nn = module.nn

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = nn.Linear(4, 4)
            self.act = nn.Tanh()

        def forward(self, x):
            return self.act(self.linear(x))

    model = nn.Sequential(*[Block() for _ in range(blocks)])
    with module.no_grad():
        for parameter, value in zip(model.parameters(), weights):
            parameter.copy_(module.tensor(value))
    return model


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--blocks", type=int, default=100)
    parser.add_argument("--repeats", type=int, default=21)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    weights = [rng.standard_normal(shape).astype(np.float32) * 0.5
               for _ in range(args.blocks) for shape in ((4, 4), (4,))]
    models = {name: make_model(module, args.blocks, weights) for name, module in FRAMEWORKS}
    inputs = {name: module.ones(1, 4, requires_grad=True) for name, module in FRAMEWORKS}

    def run(name, module):
        start = time.perf_counter()
        models[name](inputs[name])
        return time.perf_counter() - start

    runs = interleaved(FRAMEWORKS, args.repeats, run, run)
    calls = 1 + 3 * args.blocks  # the Sequential, and per block: Block, Linear, Tanh
    medians = {name: statistics.median(times) for name, times in runs.items()}
    env = environment()
    print(f"modules benchmark: Sequential of {args.blocks} x Block(Linear(4, 4), Tanh), "
          f"input (1, 4); gradviz {env['gradviz']} ({env['gradviz_engine']} engine), torch "
          f"{env['torch']}, one thread, median of {args.repeats}")
    for name, median in medians.items():
        print(f"{name:8} forward {median * 1e3:7.3f} ms  {median / calls * 1e6:6.2f} us per "
              "module call")
    print(f"gradviz / torch: {medians['gradviz'] / medians['torch']:.3f}")


if __name__ == "__main__":
    main()
