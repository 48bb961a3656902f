"""Scale of the real runtime: n = 8, 64 and 256 logical workers on this machine, side by
side with a plain single-process PyTorch loop over the same global batches.

Every n trains the same global batch (default 4096, the SGC papers' 16 samples per
worker at n = 256), so the plain loop's work per step is the same in every row and only
gclab's cost of spreading it over n workers grows. The logical workers are packed into
as many actor processes as the machine has cores (gclab's default); every worker still
computes its own tasks and encodes its own packet, timed on its own thread's CPU time
(a task several workers of one actor plan is computed once and charged to each:
``gclab/runtime/tasks.py``). Each gclab run starts its own local Ray and sits between
two plain runs (plain, gclab, plain), whose mean its ratio is taken against: the machine
is shared, and the two plain periods show how far its load drifted meanwhile.

Per row: seconds per job (the steady-state period between optimizer steps, the first
step excluded, for both), speed ratio (plain period over gclab's, so >= 1 means gclab
is faster), CPU ratio (plain CPU seconds per step over those of gclab's whole process
tree: barely moved by other jobs on the machine), gclab's start-up, the peaks over the
run of Σ RSS of the driver and the worker actors, of Σ RSS and Σ PSS of every process
(Ray's daemons included; Σ RSS counts a shared page once per process that maps it,
Σ PSS shares it out), sampled every 0.25 s from /proc, the decode time per round (mean
and 95th percentile after round 0; round 0's apart: it includes compiling the decoder's
kernels and first solves), and the failed packets (any failure fails the benchmark).

    python bench/scale.py                        # n = 8, 64, 256; uncoded; batch 4096; 6 rounds
    python bench/scale.py --workers 256 --scheme scheme=sr_sgc scheme.B=2 scheme.W=3 \\
        scheme.lam=23 --extra train.pipeline=interleaved delay=trace network.policy=deadline \\
        delay.path=../shared/traces/lambda-tokyo-cnn-w256-r10-load000.npz
    python bench/scale.py --quick                # n = 8, 64; batch 512; 3 rounds; synthetic
"""

from __future__ import annotations

import argparse
import os

import numpy as np
import torch
from common import (
    Measured,
    StepClock,
    compose_config,
    data_overrides,
    machine,
    measured_run,
    plain_run,
)

from gclab.app import build

COLUMNS = [
    "workers", "actors", "global batch", "rounds", "plain s/job before / after",
    "gclab s/job", "speed ratio", "CPU ratio", "start-up s", "peak Σ RSS driver+actors GiB",
    "peak Σ RSS all GiB", "peak Σ PSS all GiB", "decode ms mean / p95",
    "decode ms round 0", "failed packets",
]  # fmt: skip


def row(n: int, run: Measured, before: StepClock, after: StepClock, batch: int) -> list:
    """The table's cells for the gclab run ``run`` between the plain runs ``before``/``after``."""
    plain = [before.seconds_per_step(), after.seconds_per_step()]
    plain_cpu = np.mean([before.cpu_seconds_per_step(), after.cpu_seconds_per_step()])
    decode = [r["decode_ms"] for r in run.rounds[1:]]
    mem = run.memory
    return [
        n, run.summary["actors"], batch, len(run.rounds), f"{plain[0]:.2f} / {plain[1]:.2f}",
        f"{run.period:.2f}", f"**{np.mean(plain) / run.period:.2f}**",
        f"{plain_cpu / run.cpu:.2f}", f"{run.startup:.1f}", f"{mem.workers_rss_gib:.2f}",
        f"{mem.rss_gib:.2f}", f"{mem.pss_gib:.2f}",
        f"{np.mean(decode):.0f} / {np.percentile(decode, 95):.0f}",
        f"{run.rounds[0]['decode_ms']:.0f}", sum(r["failed"] for r in run.rounds),
    ]  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[8, 64, 256])
    parser.add_argument("--batch", type=int, default=4096, help="global batch of every run")
    parser.add_argument("--scheme", nargs="+", default=["scheme=uncoded"])
    parser.add_argument(
        "--extra", nargs="*", default=[], help="overrides of the gclab runs (default: no delays)"
    )
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument(
        "--plain-threads", type=int, default=os.cpu_count() or 1,
        help="torch threads of the plain loop (default: the cores, as many as gclab's actors)",
    )  # fmt: skip
    parser.add_argument("--quick", action="store_true", help="n = 8, 64; batch 512; 3 rounds")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.batch, args.rounds = [8, 64], 512, 3
    base = [
        *data_overrides(args.quick), "model=cnn", *args.scheme, "logger=none",
        f"train.batch_size={args.batch}", f"train.rounds={args.rounds}",
        "train.eval_every=0", "train.checkpoint_every=0",
    ]  # fmt: skip
    print(f"# {machine()}")
    print(
        f"# model=cnn; {' '.join(args.scheme + args.extra)}; plain loop: "
        f"{args.plain_threads} torch thread(s); gclab's actors: 1 thread each"
    )
    print("| " + " | ".join(COLUMNS) + " |")
    print("|---" * len(COLUMNS) + "|", flush=True)

    def plain(n: int) -> StepClock:
        """The plain loop on the global batches of the run with n workers (n shards)."""
        torch.set_num_threads(args.plain_threads)
        clock = StepClock()
        plain_run(build(compose_config([*base, f"cluster.workers={n}"]))[0], clock)
        return clock

    before = plain(args.workers[0])
    for n in args.workers:
        cfg = compose_config([*base, *args.extra, f"cluster.workers={n}"])
        run = measured_run(cfg)
        after = plain(n)
        cells = row(n, run, before, after, args.batch)
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)
        if cells[-1] or run.summary["jobs"] != args.rounds:
            jobs = run.summary["jobs"]
            raise SystemExit(f"n={n}: {cells[-1]} failed packets, {jobs} jobs applied")
        before = after


if __name__ == "__main__":
    main()
