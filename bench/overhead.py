"""Framework overhead: gclab (uncoded, Ray) against a plain single-process PyTorch loop.

Both train the same model on the same global batches with the same optimizer and the
same total number of torch threads, measured side by side in one run. Prints samples/s,
rounds/s, the ratio, and test accuracy after training.

    python bench/overhead.py                       # CIFAR-10, cnn, batch 512, workers 1 2 4 8
    python bench/overhead.py --batch 128 --workers 4 --epochs 1   # the foundation check
    python bench/overhead.py --quick               # < 1 min
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import torch
from common import compose_config, data_overrides
from hydra.utils import instantiate

from gclab.app import build, run
from gclab.ml.batches import Normalizer
from gclab.ml.gradients import evaluate
from gclab.ml.reference import train_single_process


def plain_loop(cfg, threads: int) -> tuple[float, float, int, int]:
    """(seconds, test accuracy, jobs, batch) of single-process SGD on the same batches."""
    plan, _ = build(cfg)
    torch.set_num_threads(threads)
    torch.manual_seed(plan.seed)
    model = instantiate(plan.model_cfg)
    start = time.perf_counter()
    train_single_process(
        model, plan.data, plan.scheme.k, plan.batch_size, plan.num_jobs, plan.seed,
        plan.augment, plan.build_optimizer,
    )  # fmt: skip
    seconds = time.perf_counter() - start
    acc, _ = evaluate(
        model, plan.data.test_x, plan.data.test_y, Normalizer(*plan.data.channel_stats())
    )
    return seconds, acc, plan.num_jobs, plan.batch_size


def gclab_run(cfg) -> tuple[float, float]:
    """(summed per-round wall seconds, final test accuracy) of a gclab run."""
    with tempfile.TemporaryDirectory() as tmp:
        summary = run(cfg, Path(tmp))
    return summary["total_wall_time"], summary["test_accuracy"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=None, help="overrides --epochs")
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--quick", action="store_true", help="30 rounds, workers 1 and 4")
    args = parser.parse_args()
    if args.quick:
        args.rounds, args.workers = 30, [1, 4]
    threads = os.cpu_count() or 1
    base = [
        *data_overrides(args.quick), f"model={args.model}", "scheme=uncoded", "logger=none",
        "delay=none", "network.policy=all", f"train.batch_size={args.batch}",
        f"train.epochs={args.epochs}", "train.eval_every=0", "train.checkpoint_every=0",
    ]  # fmt: skip
    if args.rounds:
        base.append(f"train.rounds={args.rounds}")
    print(f"# {threads} cores; model={args.model}; global batch {args.batch}")
    columns = ["run", "workers", "threads/worker", "jobs", "seconds", "samples/s", "rounds/s"]
    print("| " + " | ".join([*columns, "ratio to plain", "test acc"]) + " |")
    print("|---" * (len(columns) + 2) + "|")
    plain_s, plain_acc, jobs, batch = plain_loop(compose_config(base), threads)
    plain_rate = jobs * batch / plain_s

    def row(name: str, workers: int, per: int, seconds: float, acc: float) -> None:
        rate = jobs * batch / seconds
        cells = [name, workers, per, jobs, f"{seconds:.1f}", f"{rate:.0f}", f"{jobs / seconds:.2f}"]
        cells += [f"{rate / plain_rate:.2f}", f"{acc:.4f}"]
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)

    row("plain PyTorch", 1, threads, plain_s, plain_acc)
    for n in args.workers:
        per = max(1, threads // n)
        cfg = compose_config(
            [*base, f"cluster.workers={n}", f"cluster.threads_per_actor={per}",
             "cluster.worker_cpus=0.25", "train.eval_every=1000000"]
        )  # fmt: skip
        row("gclab uncoded", n, per, *gclab_run(cfg))


if __name__ == "__main__":
    main()
