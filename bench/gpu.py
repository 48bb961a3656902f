"""GPU throughput: gclab's logical workers sharing one GPU against a plain one-GPU loop.

ResNet-18 on the shared CIFAR-10, global batch 512, SGD, no delays. gclab runs 1 and 4
logical workers on one GPU, ``uncoded`` and ``classic_cr`` s=1 (4 workers only: s < n),
with the 4 workers either in one actor (taking turns on the GPU, the default packing)
or in 4 actors of a quarter GPU each; the server steps on the GPU too. The plain loop
(``gclab.ml.reference.train_single_process`` on the GPU) trains on the same global
batches just before and just after each gclab run; ratios are gclab's samples/s over
the mean of the two. Times are the steady-state period between optimizer steps, the
first step and start-up excluded (the plain loop synchronises the GPU at every step).
Target: >= 0.7x the plain loop with 4 workers on one GPU at batch 512.

    python bench/gpu.py                 # needs a CUDA GPU; 20 rounds per run
    python bench/gpu.py --bf16          # also every gclab run with bfloat16 autocast
    python bench/gpu.py --smoke         # the same code on the CPU: tiny CNN, synthetic
                                        # data, 3 rounds; checks the script, measures nothing
"""

from __future__ import annotations

import argparse
import sys

import torch
from common import (
    StepClock,
    compose_config,
    data_overrides,
    machine,
    measured_run,
    plain_run,
)

from gclab.app import build
from gclab.runtime.server import TrainingPlan


class SyncedStepClock(StepClock):
    """A step clock that waits for the GPU first: the loop would otherwise run ahead."""

    def record(self) -> None:
        if torch.cuda.is_available():
            torch.cuda.synchronize()
        super().record()


def plain_rate(plan: TrainingPlan, device: str, batch: int) -> float:
    """Samples/s of single-process SGD on ``device`` over ``plan``'s global batches."""
    clock = SyncedStepClock()
    plain_run(plan, clock, device)
    return batch / clock.seconds_per_step()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--smoke", action="store_true", help="CPU, tiny model, 3 rounds")
    parser.add_argument("--bf16", action="store_true", help="also gclab with bf16 autocast")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--batch", type=int, default=512)
    args = parser.parse_args()
    if not args.smoke and not torch.cuda.is_available():
        print(
            "bench/gpu.py: no CUDA GPU is visible (torch.cuda.is_available() is False); run "
            "it on a GPU machine, or with --smoke to check its code path on the CPU.",
            file=sys.stderr,
        )
        sys.exit(2)
    device = "cpu" if args.smoke else "cuda"
    if args.smoke:
        args.rounds, args.batch = 3, 64
        base = [*data_overrides(quick=True), "model=cnn", "model.width=8"]
    else:
        base = [*data_overrides(quick=False), "model=resnet18"]
    base += [
        "scheme=uncoded", "delay=none", "network.policy=all", "logger=none",
        f"train.batch_size={args.batch}", f"train.rounds={args.rounds}",
        "train.eval_every=0", "train.checkpoint_every=0", f"cluster.device={device}",
        f"cluster.server_device={device}",
    ]  # fmt: skip
    gpus = 0 if args.smoke else 1  # the GPU, as a whole or a quarter per actor
    runs = [  # (label, overrides)
        ("uncoded, 1 worker", ["cluster.workers=1", f"cluster.worker_gpus={gpus}"]),
        ("uncoded, 4 workers, 1 actor",
         ["cluster.workers=4", "cluster.actors=1", f"cluster.worker_gpus={gpus}"]),
        ("uncoded, 4 workers, 4 actors",
         ["cluster.workers=4", "cluster.actors=4", f"cluster.worker_gpus={gpus / 4}"]),
        ("classic_cr s=1, 4 workers, 1 actor",
         ["scheme=classic_cr", "scheme.s=1", "cluster.workers=4", "cluster.actors=1",
          f"cluster.worker_gpus={gpus}"]),
    ]  # fmt: skip
    if args.bf16:
        runs += [(f"{label}, bf16", [*extra, "cluster.bf16=true"]) for label, extra in runs]
    print(f"# {machine()}")
    if args.smoke:
        print("# --smoke: CPU, tiny CNN, synthetic data: a check of the script, not GPU numbers")
    else:
        print(f"# GPU: {torch.cuda.get_device_name(0)}")
    print(f"# overrides: {' '.join(base)}")
    print(
        "| run | plain samples/s before / after | gclab samples/s | ratio to plain "
        "| gclab start-up (s) |"
    )
    print("|---|---|---|---|---|", flush=True)
    plan_of = {}  # global batches depend on the number of shards: one plain plan per n
    for label, extra in runs:
        cfg = compose_config([*base, *extra])
        n = cfg.cluster.workers
        if n not in plan_of:
            plan_of[n] = build(cfg)[0]
        before = plain_rate(plan_of[n], device, args.batch)
        run = measured_run(cfg, memory=False)
        rate = args.batch / run.period
        after = plain_rate(plan_of[n], device, args.batch)
        print(
            f"| {label} | {before:.0f} / {after:.0f} | {rate:.0f} "
            f"| **{2 * rate / (before + after):.2f}** | {run.startup:.1f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
