"""What the whole-model doctor costs, against one training step, on gradviz and PyTorch.

A 2-block GPT (embedding 64, 4 heads, context 32, vocabulary 65, batch 8; written once
against ``lib``) built the same way in both libraries. One training step is forward +
backward + AdamW step; the doctor is ``gradviz.debug.doctor(loss, params=model)`` on a fresh
forward (its time includes its own backward pass and the model-level checks; there is no
custom Function, so no finite differences). Printed: median ms of each and the ratio
doctor / training step, per library (the issue's target: at most 3). Conventions as in
``chain.py``: one thread, alternating the libraries, medians of repeats.

    python bench/doctor_cost.py [--repeats 5] [--json out.json]
"""

from __future__ import annotations

import argparse  # noqa: E402
import json  # noqa: E402
import statistics  # noqa: E402
import time  # noqa: E402

import _common  # noqa: F401  (first: pins every math library to one thread)
import numpy as np  # noqa: E402
import torch  # noqa: E402
from _common import environment, interleaved  # noqa: E402

import gradviz  # noqa: E402

VOCAB, EMBED, HEADS, CONTEXT, BATCH, BLOCKS = 65, 64, 4, 32, 8, 2


def make_gpt(lib):
    nn, F = lib.nn, lib.nn.functional

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.ln1, self.ln2 = nn.LayerNorm(EMBED), nn.LayerNorm(EMBED)
            self.qkv, self.proj = nn.Linear(EMBED, 3 * EMBED), nn.Linear(EMBED, EMBED)
            self.fc, self.out = nn.Linear(EMBED, 4 * EMBED), nn.Linear(4 * EMBED, EMBED)

        def forward(self, x):
            batch, time_, _ = x.shape
            q, k, v = self.qkv(self.ln1(x)).split(EMBED, dim=2)
            shape = (batch, time_, HEADS, EMBED // HEADS)
            q, k, v = (t.reshape(shape).transpose(1, 2) for t in (q, k, v))
            scores = q @ k.transpose(-2, -1) / (EMBED // HEADS) ** 0.5
            mask = lib.tril(lib.ones(time_, time_)) == 0
            attention = F.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            y = (attention @ v).transpose(1, 2).reshape(batch, time_, EMBED)
            x = x + self.proj(y)
            return x + self.out(F.gelu(self.fc(self.ln2(x))))

    class GPT(nn.Module):
        def __init__(self):
            super().__init__()
            self.tokens, self.positions = nn.Embedding(VOCAB, EMBED), nn.Embedding(CONTEXT, EMBED)
            self.blocks = nn.ModuleList([Block() for _ in range(BLOCKS)])
            self.ln, self.head = nn.LayerNorm(EMBED), nn.Linear(EMBED, VOCAB)

        def forward(self, index, targets):
            x = self.tokens(index) + self.positions(lib.arange(index.shape[1]))
            for block in self.blocks:
                x = block(x)
            logits = self.head(self.ln(x))
            return F.cross_entropy(logits.reshape(-1, VOCAB), targets.reshape(-1))

    lib.manual_seed(0)
    return GPT()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--json")
    args = parser.parse_args()
    rng = np.random.default_rng(0)
    data = rng.integers(0, VOCAB, (BATCH, CONTEXT + 1))
    setups = {}
    for name, lib in (("gradviz", gradviz), ("torch", torch)):
        model = make_gpt(lib)
        index, targets = lib.tensor(data[:, :-1]), lib.tensor(data[:, 1:])
        setups[name] = (model, lib.optim.AdamW(model.parameters(), lr=1e-3), index, targets)

    def step(name, lib):
        model, optimizer, index, targets = setups[name]
        start = time.perf_counter()
        model(index, targets).backward()
        optimizer.step()
        optimizer.zero_grad()  # before the doctor's call, or it says .grad is stale
        trained = time.perf_counter()
        loss = model(index, targets)
        report = gradviz.debug.doctor(loss, params=model)
        done = time.perf_counter()
        assert not [f for f in report.findings if f.severity == "error"], str(report)
        return trained - start, done - trained

    runs = interleaved((("gradviz", gradviz), ("torch", torch)), args.repeats, step, step)
    results = {}
    print(f"2-block GPT (embedding {EMBED}, {HEADS} heads, context {CONTEXT}, batch {BATCH}), "
          f"gradviz {gradviz.config()['engine']} engine, torch {torch.__version__}, one thread")
    for name, values in runs.items():
        train = statistics.median(v[0] for v in values) * 1e3
        doctor = statistics.median(v[1] for v in values) * 1e3
        results[name] = {"train_step_ms": train, "doctor_ms": doctor, "ratio": doctor / train}
        print(f"  {name:8s} training step {train:8.1f} ms   doctor (forward + doctor) "
              f"{doctor:8.1f} ms   ratio {doctor / train:.2f}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"environment": environment(), "results": results}, f, indent=2)


if __name__ == "__main__":
    main()
