"""Framework overhead: gclab (uncoded, Ray) against a plain single-process PyTorch loop.

Both train the same model on the same global batches with the same optimizer and the
same total number of torch threads (the plain run after each gclab run uses its global
batches, so their test accuracies agree up to float summation order). Time is the
steady-state period between optimizer steps (``StepClock``): start-up (data loading,
Ray, actors) and the first, warm-up step are left out of both and reported apart. Other
jobs share this machine, so every gclab run is measured between two plain runs (plain,
gclab, plain) and its ratio is taken against their mean: drift of the machine's load
during the three runs cancels to first order, and the two plain rates show how large it
was. Each plain block also runs with one thread: on a loaded machine a multi-threaded
torch process waits for its slowest thread at every operation, while gclab's actors (one
thread each from 2 workers on 2 cores) do not, so the one-thread loop is the other bound
worth comparing with.

Wall-clock ratios swing with the other jobs' load; the CPU seconds per step of the
whole process tree (the plain process; gclab's driver and every Ray process) hardly
do, so the CPU ratio (samples per CPU second, gclab over plain) is the stable measure
of the work the framework adds. It cannot see idle cores: time the driver waits for the
actors or the actors for the driver costs wall time on a dedicated machine, not CPU.

For gclab, ``actor compute`` is the slowest actor's measured compute per round (its
logical workers' seconds summed) and ``framework`` is the rest of the period: broadcast,
calls, collecting, decoding, the optimizer step, recording; ``decode ms`` is the runs'
mean ``decode_ms`` (coefficient lookup + combine; it included the optimizer step before
commit 1eeee40).

    python bench/overhead.py                       # CIFAR-10, cnn, batch 512, n=1,2,4,8, 20 rounds
    python bench/overhead.py --batch 128 --workers 4 --rounds 0 --plain-threads 2  # 1 epoch
    python bench/overhead.py --server-threads 1    # the parameter server on one thread
    python bench/overhead.py --workers 4 8 --actors 2   # 2 processes, several workers each
    python bench/overhead.py --quick               # < 1 min (synthetic data)
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import dataclass

import numpy as np
import torch
from common import (
    StepClock,
    compose_config,
    data_overrides,
    machine,
    measured_run,
    plain_run,
)
from hydra.utils import instantiate
from omegaconf import DictConfig

from gclab.app import build
from gclab.ml.batches import Normalizer
from gclab.ml.gradients import evaluate
from gclab.runtime.server import TrainingPlan


@dataclass
class Result:
    """One row of the table: steady-state step period and what surrounds it."""

    workers: int
    actors: int
    threads: int  # per actor
    steps: int
    period: float  # seconds per step, after the first
    cpu: float  # CPU seconds per step of the process tree (driver + Ray), likewise
    startup: float  # seconds from the call to the first step (includes that step)
    accuracy: float
    compute_ms: float = 0.0  # gclab: slowest actor's compute per round
    decode_ms: float = 0.0  # gclab: metrics.jsonl decode_ms (with the step before 1eeee40)


def plain_loop(plan: TrainingPlan, threads: int, clock: StepClock) -> Result:
    """Single-process SGD on the same batches, with ``threads`` torch threads."""
    torch.set_num_threads(threads)
    start = time.perf_counter()
    model = plain_run(plan, clock)
    acc, _ = evaluate(
        model, plan.data.test_x, plan.data.test_y, Normalizer(*plan.data.channel_stats())
    )
    return Result(
        1, 1, threads, clock.steps, clock.seconds_per_step(), clock.cpu_seconds_per_step(),
        clock.times[0] - start, acc,
    )  # fmt: skip


def gclab_run(cfg: DictConfig, actors: int, threads: int) -> Result:
    """A gclab run in a fresh local Ray; per-round compute and decode from metrics.jsonl."""
    groups = instantiate(cfg.cluster).groups()
    run = measured_run(cfg, memory=False)
    rounds = run.rounds[1:]  # after warm-up, as the step period
    compute = [max(sum(r["compute_s"][w] for w in g) for g in groups) for r in rounds]
    return Result(
        cfg.cluster.workers, actors, threads, run.steps, run.period, run.cpu, run.startup,
        run.summary["test_accuracy"], 1e3 * float(np.mean(compute)),
        float(np.mean([r["decode_ms"] for r in rounds])),
    )  # fmt: skip


def print_row(run: Result, before: list[Result], after: list[Result], batch: int) -> None:
    """One markdown row: the gclab run beside the plain runs just before and after it.

    ``before``/``after`` hold the plain runs, one per ``--plain-threads`` value.
    """
    rate = batch / run.period
    cells: list[object] = [run.workers, run.actors, run.threads, run.steps]
    ratios, cpu = [], []
    for b, a in zip(before, after):
        cells.append(f"{batch / b.period:.0f} / {batch / a.period:.0f}")
        ratios.append(f"**{float(np.mean([b.period, a.period])) / run.period:.2f}**")
        cpu.append(f"{float(np.mean([b.cpu, a.cpu])) / run.cpu:.2f}")
    framework = 1e3 * run.period - run.compute_ms
    cells += [
        f"{rate:.0f}", f"{1 / run.period:.2f}", *ratios, f"{1e3 * run.cpu:.0f}", *cpu,
        f"{run.compute_ms:.0f}", f"{framework:.0f}", f"{run.decode_ms:.1f}",
        f"{run.startup:.1f}", f"{run.accuracy:.4f}", f"{after[0].accuracy:.4f}",
    ]  # fmt: skip
    print("| " + " | ".join(map(str, cells)) + " |", flush=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2, 4, 8])
    parser.add_argument("--batch", type=int, default=512)
    parser.add_argument("--epochs", type=float, default=1.0)
    parser.add_argument("--rounds", type=int, default=20, help="0: use --epochs")
    parser.add_argument("--model", default="cnn")
    parser.add_argument(
        "--plain-threads", type=int, nargs="+", default=None,
        help="thread counts of the plain runs around each gclab run (default: all, 1)",
    )  # fmt: skip
    parser.add_argument(
        "--actors", type=int, default=None,
        help="pack the workers into at most this many actor processes (default: one each)",
    )  # fmt: skip
    parser.add_argument(
        "--server-threads", type=int, default=None,
        help="torch threads of the driver (parameter server); default: torch's default",
    )  # fmt: skip
    parser.add_argument(
        "--quick", action="store_true", help="synthetic data, batch 128, 5 rounds, 2 workers"
    )
    args = parser.parse_args()
    if args.quick:
        args.batch, args.rounds, args.workers = 128, 5, [2]
    threads = os.cpu_count() or 1
    server_threads = args.server_threads or torch.get_num_threads()
    plain_threads = args.plain_threads or list(dict.fromkeys([threads, 1]))
    base = [
        *data_overrides(args.quick), f"model={args.model}", "scheme=uncoded", "logger=none",
        "delay=none", "network.policy=all", f"train.batch_size={args.batch}",
        f"train.epochs={args.epochs}", "train.eval_every=0", "train.checkpoint_every=0",
    ]  # fmt: skip
    if args.rounds:
        base.append(f"train.rounds={args.rounds}")
    print(f"# {machine()}")
    print(
        f"# model={args.model}; global batch {args.batch}; gclab's parameter server: "
        f"{server_threads} torch thread(s); steady-state times (after the first step)"
    )
    columns = [
        "workers", "actors", "threads/actor", "steps",
        *(f"plain {t}-thread samples/s before / after" for t in plain_threads),
        "gclab samples/s", "gclab steps/s",
        *(f"ratio to plain {t}-thread" for t in plain_threads), "gclab CPU ms/step",
        *(f"CPU ratio to plain {t}-thread" for t in plain_threads), "actor compute ms",
        "framework ms", "decode ms", "gclab start-up s", "gclab test acc",
        "plain test acc",
    ]  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|---" * len(columns) + "|", flush=True)
    clock = StepClock()

    def plain_runs(n: int) -> list[Result]:
        """Plain runs on the global batches of n shards (those of the gclab run with n)."""
        plan, _ = build(compose_config([*base, f"cluster.workers={n}"]))
        return [plain_loop(plan, t, clock) for t in plain_threads]

    before = plain_runs(args.workers[0])
    for n in args.workers:
        actors = min(n, args.actors or n)
        per = max(1, threads // actors)
        cfg = compose_config(
            [*base, f"cluster.workers={n}", f"cluster.actors={actors}",
             f"cluster.threads_per_actor={per}", "cluster.worker_cpus=0.25",
             "train.eval_every=1000000"]
        )  # fmt: skip
        torch.set_num_threads(server_threads)
        result = gclab_run(cfg, actors, per)
        after = plain_runs(n)
        print_row(result, before, after, args.batch)
        before = after
    print(
        "# ratio: gclab samples/s over the mean of the plain runs just before and after it "
        "(the machine is shared: their difference shows the drift). CPU ratio: plain CPU "
        "seconds per step over gclab's (driver + every Ray process), i.e. samples per CPU "
        "second relative to plain; it hardly depends on the other jobs"
    )


if __name__ == "__main__":
    main()
