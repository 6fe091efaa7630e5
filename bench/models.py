"""Model benchmark: training steps of small real models, gradviz against PyTorch, GC on.

Five workloads people run under ``import gradviz as torch``: LeNet-5 (batch 64, 28x28, SGD),
a 2-block GPT (embedding 64, 4 heads, T = 32, batch 16, Adam), an LSTM(32 -> 64) over 50
steps (batch 16, Adam), the character MLP of makemore part 2 (batch 32, SGD: small tensors,
where each op's fixed cost shows) and a small CNN with BatchNorm (batch 32, 3x32x32, SGD with
momentum).
Each is written once against the shared API and built in both frameworks from the same
initial parameters; gradviz and torch alternate within every repeat, one thread each, with
the garbage collector **on** (Note [GC on] in ``_common.py``); GC-off is the second column.
Each repeat's losses are checked against torch's, so a broken engine cannot be fast.
See bench/README.md.

    python bench/models.py                      # table
    python bench/models.py --json out.json      # table, and every timing as JSON
    python bench/models.py --models gpt --repeats 15
    python bench/models.py --profile gpt        # cProfile of 20 gradviz steps
"""

from __future__ import annotations

import argparse  # noqa: E402
import cProfile  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import pstats  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import GC_MODES, environment, timed_region  # noqa: E402

import gradviz  # noqa: E402

FRAMEWORKS = (("gradviz", gradviz), ("torch", torch))
LOSS_RTOL = 2e-3  # float32, different summation orders, a few optimizer steps


# ---- the models, written once against the shared API ------------------------------------------

def lenet(fw):
    nn = fw.nn
    return nn.Sequential(
        nn.Conv2d(1, 6, 5, padding=2), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(6, 16, 5), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
        nn.Linear(400, 120), nn.ReLU(), nn.Linear(120, 84), nn.ReLU(), nn.Linear(84, 10))


def small_cnn(fw):
    nn = fw.nn
    return nn.Sequential(
        nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(32 * 8 * 8, 10))


def gpt(fw, vocab=65, embed=64, heads=4, blocks=2, context=32):
    nn, F = fw.nn, fw.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(embed), nn.LayerNorm(embed)
            self.qkv = nn.Linear(embed, 3 * embed)
            self.proj = nn.Linear(embed, embed)
            self.fc, self.out = nn.Linear(embed, 4 * embed), nn.Linear(4 * embed, embed)

        def forward(self, x):
            b, t, c = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(embed, dim=2)
            q, k, v = (z.view(b, t, heads, c // heads).transpose(1, 2) for z in (q, k, v))
            scores = q @ k.transpose(-2, -1) * (1.0 / math.sqrt(c // heads))
            mask = fw.ones(t, t, dtype=fw.bool).tril().logical_not()
            attention = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            y = (attention @ v).transpose(1, 2).contiguous().view(b, t, c)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.token, self.position = nn.Embedding(vocab, embed), nn.Embedding(context, embed)
            self.blocks = nn.Sequential(*[Block() for _ in range(blocks)])
            self.ln, self.head = nn.LayerNorm(embed), nn.Linear(embed, vocab)

        def forward(self, idx):
            x = self.token(idx) + self.position(fw.arange(idx.shape[1]))
            return self.head(self.ln(self.blocks(x)))

    return GPT()


def lstm(fw):
    nn = fw.nn

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.rnn, self.head = nn.LSTM(32, 64), nn.Linear(64, 1)

        def forward(self, x):
            out, _ = self.rnn(x)
            return self.head(out[-1])

    return Model()


def makemore(fw, vocab=27, block=3, embed=10, hidden=200):
    """The character-level MLP of makemore part 2, written as that notebook writes it: an
    embedding table indexed by the context, then raw ``@`` and ``+`` (no nn.Linear)."""
    nn = fw.nn

    class MLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.C = nn.Parameter(fw.randn(vocab, embed))
            self.W1 = nn.Parameter(fw.randn(block * embed, hidden) * 0.1)
            self.b1 = nn.Parameter(fw.randn(hidden) * 0.01)
            self.W2 = nn.Parameter(fw.randn(hidden, vocab) * 0.01)
            self.b2 = nn.Parameter(fw.zeros(vocab))

        def forward(self, x):
            emb = self.C[x]  # (batch, block, embed)
            h = fw.tanh(emb.view(-1, self.W1.shape[0]) @ self.W1 + self.b1)
            return h @ self.W2 + self.b2

    return MLP()


def classification_loss(fw, model, x, y):
    return fw.nn.functional.cross_entropy(model(x), y)


def gpt_loss(fw, model, x, y):
    logits = model(x)
    return fw.nn.functional.cross_entropy(logits.view(-1, logits.shape[-1]), y.view(-1))


def regression_loss(fw, model, x, y):
    return fw.nn.functional.mse_loss(model(x), y)


def make_data(name, rng):
    """Numpy input and target of one model's batch."""
    if name == "lenet":
        return rng.standard_normal((64, 1, 28, 28), dtype=np.float32), rng.integers(0, 10, 64)
    if name == "cnn_bn":
        return rng.standard_normal((32, 3, 32, 32), dtype=np.float32), rng.integers(0, 10, 32)
    if name == "gpt":
        return rng.integers(0, 65, (16, 32)), rng.integers(0, 65, (16, 32))
    if name == "makemore":
        return rng.integers(0, 27, (32, 3)), rng.integers(0, 27, 32)
    return (rng.standard_normal((50, 16, 32), dtype=np.float32),
            rng.standard_normal((16, 1), dtype=np.float32))


# name: (builder, loss, optimizer, description)
MODELS = {
    "lenet": (lenet, classification_loss, lambda fw, p: fw.optim.SGD(p, lr=0.01),
              "LeNet-5 step, batch 64, 28x28, SGD"),
    "gpt": (gpt, gpt_loss, lambda fw, p: fw.optim.Adam(p, lr=1e-3),
            "2-block GPT step (emb 64, 4 heads, T=32, batch 16, Adam)"),
    "lstm": (lstm, regression_loss, lambda fw, p: fw.optim.Adam(p, lr=1e-3),
             "LSTM(32->64) over 50 steps, batch 16, Adam"),
    "makemore": (makemore, classification_loss, lambda fw, p: fw.optim.SGD(p, lr=0.1),
                 "makemore MLP step (context 3, emb 10, hidden 200, batch 32, SGD)"),
    "cnn_bn": (small_cnn, classification_loss,
               lambda fw, p: fw.optim.SGD(p, lr=0.01, momentum=0.9),
               "small CNN with BatchNorm, batch 32, 3x32x32, SGD momentum"),
}


class Workload:
    """One model in one framework: the initial parameters kept, reset before each repeat."""

    def __init__(self, name, fw, initial, data):
        builder, self.loss_fn, self.make_optimizer, _ = MODELS[name]
        torch.manual_seed(0)
        self.fw, self.model = fw, builder(fw)
        self.initial = initial
        x, y = data
        self.x, self.y = fw.tensor(x), fw.tensor(y)

    def reset(self):
        with self.fw.no_grad():
            for parameter, value in zip(self.model.parameters(), self.initial):
                parameter.copy_(self.fw.tensor(value))
            for buffer in self.model.buffers():  # BatchNorm running statistics
                buffer.zero_() if buffer.dtype.is_floating_point else buffer.zero_()
            for module in self.model.modules():
                if hasattr(module, "running_var") and module.running_var is not None:
                    module.running_var.fill_(1.0)
        self.model.train()
        self.optimizer = self.make_optimizer(self.fw, self.model.parameters())

    def step(self):
        self.optimizer.zero_grad()
        loss = self.loss_fn(self.fw, self.model, self.x, self.y)
        loss.backward()
        self.optimizer.step()
        return loss.item()


def make_workloads(name):
    torch.manual_seed(0)
    reference = MODELS[name][0](torch)
    initial = [p.detach().numpy().copy() for p in reference.parameters()]
    data = make_data(name, np.random.default_rng(0))
    return {fw_name: Workload(name, fw, initial, data) for fw_name, fw in FRAMEWORKS}


def run_repeat(workload, steps, gc_on):
    """Reset, then time ``steps`` consecutive steps; (seconds per step, the losses)."""
    workload.reset()
    losses = []
    with timed_region(gc_on):
        start = time.perf_counter()
        for _ in range(steps):
            losses.append(workload.step())
        elapsed = time.perf_counter() - start
    return elapsed / steps, losses


def check(name, losses, reference):
    if not np.allclose(losses, reference, rtol=LOSS_RTOL, atol=1e-5):
        raise AssertionError(f"{name}: gradviz's losses {losses} differ from torch's {reference} "
                             f"beyond rtol {LOSS_RTOL}")


def measure(name, steps, repeats, modes):
    workloads = make_workloads(name)
    row = {"model": name, "description": MODELS[name][3], "steps": steps, "repeats": repeats}
    for fw_name, _ in FRAMEWORKS:  # warm-up, and the first check
        _, losses = run_repeat(workloads[fw_name], steps, True)
        row.setdefault("warm_losses", {})[fw_name] = losses
    check(name, row["warm_losses"]["gradviz"], row["warm_losses"]["torch"])
    times = {(mode, fw_name): [] for mode in modes for fw_name, _ in FRAMEWORKS}
    for _ in range(repeats):
        for mode in modes:
            losses = {}
            for fw_name, _ in FRAMEWORKS:
                seconds, losses[fw_name] = run_repeat(workloads[fw_name], steps, mode == "on")
                times[mode, fw_name].append(seconds)
            check(name, losses["gradviz"], losses["torch"])
    for mode in modes:
        entry = {fw_name: statistics.median(times[mode, fw_name]) * 1e3 for fw_name, _ in FRAMEWORKS}
        entry["ratio"] = entry["gradviz"] / entry["torch"]
        entry["ratios"] = [g / t for g, t in zip(times[mode, "gradviz"], times[mode, "torch"])]
        entry["gradviz_s"], entry["torch_s"] = times[mode, "gradviz"], times[mode, "torch"]
        row[f"gc_{mode}"] = entry
    return row


def print_table(rows, env, modes):
    print(f"model steps: gradviz {env['gradviz']} ({env['gradviz_engine']} engine), torch "
          f"{env['torch']}, one thread, ms per step (median of repeats), interleaved; load "
          f"average {env['load_average'][0]:.2f} at start")
    header = f"{'model':>8} |"
    for mode in modes:
        header += f" {'GC ' + mode + ' gradviz':>14} {'torch':>7} {'ratio':>6} |"
    print(header)
    print("-" * len(header))
    for r in rows:
        line = f"{r['model']:>8} |"
        for mode in modes:
            e = r[f"gc_{mode}"]
            line += f" {e['gradviz']:>14.2f} {e['torch']:>7.2f} {e['ratio']:>6.2f} |"
        print(line + f"  {r['description']}")


def profile(name, steps, limit=30):
    workload = make_workloads(name)["gradviz"]
    workload.reset()
    workload.step()
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(steps):
        workload.step()
    profiler.disable()
    pstats.Stats(profiler).sort_stats("tottime").print_stats(limit)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--json", metavar="PATH", help="also write the results to PATH as JSON")
    parser.add_argument("--models", nargs="+", choices=list(MODELS), default=list(MODELS))
    parser.add_argument("--repeats", type=int, default=7, help="timed repeats (default 7)")
    parser.add_argument("--steps", type=int, default=3, help="steps per repeat (default 3)")
    parser.add_argument("--gc", nargs="+", choices=GC_MODES, default=list(GC_MODES),
                        help="collector modes to time (default: on, then off)")
    parser.add_argument("--profile", choices=list(MODELS),
                        help="only print a cProfile of 20 gradviz steps of this model")
    args = parser.parse_args(argv)
    if args.profile:
        profile(args.profile, 20)
        return 0
    env = environment()
    rows = [measure(name, args.steps, args.repeats, args.gc) for name in args.models]
    env["load_average_end"] = list(__import__("os").getloadavg())
    print_table(rows, env, args.gc)
    print(f"load average at end {env['load_average_end'][0]:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": env, "results": rows}, f, indent=2)
        print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
