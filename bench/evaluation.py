"""Test-set evaluation on the CPU: the driver's evaluation against the same on one thread
in batches of 1000, side by side in one process.

The study's runs (docs/study.md) evaluate 10 000 CIFAR-10 images every 40 rounds, one
model or T+1 interleaved ones, while the workers wait. This times
:func:`gclab.ml.gradients.evaluate` (batches of 250) as
:meth:`gclab.runtime.server.ParameterServer.evaluate` runs it (every usable core)
against one thread in batches of 1000, alternating the two ``--repeats`` times so that
drift of the machine's load falls on both, and checks that both give the same accuracy
and loss (the logits of the two batchings are compared bit for bit).

    python bench/evaluation.py                  # the small CNN (width 32), 10 000 images, 3 repeats
    python bench/evaluation.py --models 3       # T + 1 = 3 interleaved models
    python bench/evaluation.py --quick          # 2 000 images, 1 repeat (a few seconds)
"""

from __future__ import annotations

import argparse
import time

import torch

from gclab.ml.batches import Normalizer
from gclab.ml.gradients import evaluate
from gclab.ml.models import SmallCNN
from gclab.runtime.server import usable_cores


def timed(threads: int, batch: int, models: list[SmallCNN], x, y, normalizer) -> tuple:
    torch.set_num_threads(threads)
    start = time.perf_counter()
    results = [evaluate(m, x, y, normalizer, batch) for m in models]
    return time.perf_counter() - start, results


def logits(model: SmallCNN, x: torch.Tensor, normalizer: Normalizer, batch: int) -> torch.Tensor:
    with torch.no_grad():
        return torch.cat([model(normalizer(x[i : i + batch])) for i in range(0, len(x), batch)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--images", type=int, default=10_000)
    parser.add_argument("--models", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    images, repeats = (2_000, 1) if args.quick else (args.images, args.repeats)
    torch.manual_seed(0)
    x = torch.randint(0, 256, (images, 3, 32, 32), dtype=torch.uint8)
    y = torch.randint(0, 10, (images,))
    normalizer = Normalizer(torch.full((3,), 0.5), torch.full((3,), 0.25))
    models = [SmallCNN().eval() for _ in range(args.models)]
    cores = usable_cores()
    print(f"{images} images, {args.models} model(s), {cores} usable cores, {repeats} repeats")
    print("| repeat | 1 thread, batch 1000 (s) | gclab: {cores} threads, batch 250 (s) | ratio |"
          .replace("{cores}", str(cores)))  # fmt: skip
    print("|---|---|---|---|")
    old_total = new_total = 0.0
    for r in range(repeats):
        old, old_results = timed(1, 1000, models, x, y, normalizer)
        new, new_results = timed(cores, 250, models, x, y, normalizer)
        old_total, new_total = old_total + old, new_total + new
        print(f"| {r + 1} | {old:.2f} | {new:.2f} | {old / new:.2f}× |")
        assert [a for a, _ in old_results] == [a for a, _ in new_results], "accuracy differs"
    torch.set_num_threads(1)
    same = all(
        torch.equal(logits(m, x, normalizer, 1000), logits(m, x, normalizer, 250)) for m in models
    )
    gap = max(abs(a[1] - b[1]) / a[1] for a, b in zip(old_results, new_results))
    print(f"all repeats: {old_total / new_total:.2f}× faster; same accuracy; largest relative "
          f"loss difference {gap:.1e}; logits bit-identical in both batchings: {same}")  # fmt: skip


if __name__ == "__main__":
    main()
