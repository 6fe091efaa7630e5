"""Kernel benchmark: the NN kernels a training step spends its non-BLAS time in, gradviz
against PyTorch, one thread, GC on.

Each case is one op at the shape the model benchmark (``models.py``) runs it at: batch norm
(train and eval) as in the BatchNorm CNN, max pooling as in LeNet, layer norm, softmax,
log_softmax and GELU (exact and tanh) as in the GPT's blocks, group norm beside them. Each is
timed forward only and forward + backward (``out.backward(grad)``), gradviz and torch
alternating within every repeat (``interleaved`` in ``_common.py``), with the garbage
collector **on** (Note [GC on] in ``_common.py``). Before timing, each case's forward and
gradients are checked against torch's, so a broken kernel cannot be fast. See
bench/README.md.

    python bench/kernels.py                       # table
    python bench/kernels.py --json out.json       # table, and every timing as JSON
    python bench/kernels.py --cases gelu max_pool2d --repeats 15
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

FRAMEWORKS = (("gradviz", gradviz), ("torch", torch))
RTOL, ATOL = 1e-4, 1e-5  # float32, different summation orders


def _batch_norm_train(fw, x, w, b):
    return fw.nn.functional.batch_norm(x, None, None, w, b, True)


def _batch_norm_eval(fw, x, w, b):
    channels = x.shape[1]
    return fw.nn.functional.batch_norm(x, fw.zeros(channels) + 0.1, fw.ones(channels) * 2, w, b,
                                       False)


# name -> (input shapes (the first requires grad, and so do the rest: parameters), the op,
# what the shape is)
CASES = {
    "batch_norm_train": ([(32, 16, 32, 32), (16,), (16,)], _batch_norm_train,
                         "BatchNorm2d(16), 32x16x32x32"),
    "batch_norm_eval": ([(32, 16, 32, 32), (16,), (16,)], _batch_norm_eval,
                        "BatchNorm2d(16) eval, 32x16x32x32"),
    "layer_norm": ([(16, 32, 64), (64,), (64,)],
                   lambda fw, x, w, b: fw.nn.functional.layer_norm(x, (64,), w, b),
                   "LayerNorm(64), 16x32x64"),
    "group_norm": ([(32, 16, 16, 16), (16,), (16,)],
                   lambda fw, x, w, b: fw.nn.functional.group_norm(x, 4, w, b),
                   "GroupNorm(4, 16), 32x16x16x16"),
    "softmax": ([(16, 4, 32, 32)], lambda fw, x: fw.softmax(x, -1),
                "attention softmax, 16x4x32x32"),
    "log_softmax": ([(512, 65)], lambda fw, x: fw.log_softmax(x, -1),
                    "logits log_softmax, 512x65"),
    "max_pool2d": ([(64, 6, 28, 28)], lambda fw, x: fw.nn.functional.max_pool2d(x, 2),
                   "MaxPool2d(2), 64x6x28x28"),
    "max_pool2d_overlap": ([(64, 6, 28, 28)],
                           lambda fw, x: fw.nn.functional.max_pool2d(x, 3, 2, 1),
                           "MaxPool2d(3, 2, 1), 64x6x28x28"),
    "gelu": ([(16, 32, 256)], lambda fw, x: fw.nn.functional.gelu(x), "GELU, 16x32x256"),
    "gelu_tanh": ([(16, 32, 256)], lambda fw, x: fw.nn.functional.gelu(x, approximate="tanh"),
                  "GELU(tanh), 16x32x256"),
}


class Case:
    """One kernel's inputs in one framework, and its forward and forward + backward runs."""

    def __init__(self, name, fw, arrays):
        self.fw = fw
        self.op = CASES[name][1]
        self.inputs = [fw.tensor(a, requires_grad=True) for a in arrays]
        out = self.op(fw, *self.inputs)
        rng = np.random.default_rng(1)
        self.grad = fw.tensor(rng.standard_normal(tuple(out.shape)).astype(np.float32))

    def forward(self):
        return self.op(self.fw, *self.inputs)

    def forward_backward(self):
        for t in self.inputs:
            t.grad = None
        self.op(self.fw, *self.inputs).backward(self.grad)

    def results(self):
        """The forward output and the gradients, as numpy arrays."""
        self.forward_backward()
        out = self.forward().detach().numpy()
        return [out] + [t.grad.numpy() for t in self.inputs]


def make_cases(name):
    rng = np.random.default_rng(0)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in CASES[name][0]]
    return {fw_name: Case(name, fw, arrays) for fw_name, fw in FRAMEWORKS}


def check(name, cases):
    for ours, theirs in zip(cases["gradviz"].results(), cases["torch"].results()):
        if not np.allclose(ours, theirs, rtol=RTOL, atol=ATOL):
            raise AssertionError(f"{name}: gradviz differs from torch by "
                                 f"{np.abs(ours - theirs).max():.3g}")


def timed(run, calls):
    with timed_region(True):
        start = time.perf_counter()
        for _ in range(calls):
            run()
        return (time.perf_counter() - start) / calls


def measure(name, repeats, calls):
    cases = make_cases(name)
    check(name, cases)
    rows = {}
    for phase in ("forward", "forward_backward"):
        runs = interleaved(FRAMEWORKS, repeats,
                           lambda fw_name, fw: timed(getattr(cases[fw_name], phase), calls),
                           lambda fw_name, fw: timed(getattr(cases[fw_name], phase), 2))
        rows[phase] = {fw_name: runs[fw_name] for fw_name, _ in FRAMEWORKS}
    return rows


def print_table(results, env):
    print(f"NN kernels: gradviz {env['gradviz']} ({env['gradviz_engine']} engine), torch "
          f"{env['torch']}, one thread, GC on, ms per call (median of repeats), interleaved; "
          f"load average {env['load_average'][0]:.2f} at start")
    header = (f"{'kernel':>19} | {'forward gradviz':>15} {'torch':>7} {'ratio':>6} | "
              f"{'fwd+bwd gradviz':>15} {'torch':>7} {'ratio':>6} |")
    print(header)
    print("-" * len(header))
    for name, rows in results.items():
        cells = []
        for phase in ("forward", "forward_backward"):
            ours = statistics.median(rows[phase]["gradviz"]) * 1e3
            theirs = statistics.median(rows[phase]["torch"]) * 1e3
            cells.append(f"{ours:15.3f} {theirs:7.3f} {ours / theirs:6.2f}")
        print(f"{name:>19} | {cells[0]} | {cells[1]} |  {CASES[name][2]}")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", nargs="+", choices=sorted(CASES), default=list(CASES))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--calls", type=int, default=10, help="calls per timed repeat")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    env = environment()
    results = {name: measure(name, args.repeats, args.calls) for name in args.cases}
    print_table(results, env)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": results}, f, indent=1)


if __name__ == "__main__":
    main()
