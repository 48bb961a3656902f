"""A finished ``train.pipeline=stale`` run against its single-process stale reference.

The reference (:func:`gclab.ml.reference.train_stale`) trains one model in this process
on the run's global batches, computing job t's gradient on the weights it holds when
round t starts and applying jobs in job order, each in the round the run's
metrics.jsonl says it was decoded (``train.stale_lr`` as the run had it). It is
evaluated where the run evaluated. Early evaluations agree to a test image or so;
later ones drift apart as rounding differences (summation order, decoding) grow through
training, as they do for an exact scheme against plain SGD, so compare the level, not
the digits. For a run that decodes every job in its own round (any run without
decode delays) the reference is plain single-process SGD, the yardstick of exact
schemes. The run must have been started from the command line (it reads
``.hydra/overrides.yaml``).

    python bench/stale_reference.py outputs/<date>/<time> 39 79 159 1171
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import torch
from common import compose_config, machine
from hydra.utils import instantiate
from omegaconf import OmegaConf

from gclab.app import build
from gclab.ml.batches import Normalizer
from gclab.ml.gradients import evaluate
from gclab.ml.optim import StaleLR
from gclab.ml.reference import train_stale


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="the stale run's directory")
    parser.add_argument("rounds", type=int, nargs="+", help="rounds the run evaluated after")
    args = parser.parse_args()
    cfg = compose_config(list(OmegaConf.load(args.run / ".hydra" / "overrides.yaml")))
    records = [json.loads(line) for line in (args.run / "metrics.jsonl").open()]
    rounds = [r for r in records if r["kind"] == "round"]
    decoded = [[r["round"] - d for d in r["decode_delays"]] for r in rounds]
    evals = {r["round"]: r["test_accuracy"] for r in records if r["kind"] == "eval"}
    plan, _ = build(cfg)
    torch.set_num_threads(1)
    normalizer = Normalizer(*plan.data.channel_stats())
    print(f"# {args.run}  ({machine()})")
    print("| round | jobs decoded late | run accuracy | reference accuracy | reference s |")
    print("|---|---|---|---|---|")
    for stop in args.rounds:
        start = time.perf_counter()
        torch.manual_seed(plan.seed)
        flat = train_stale(
            instantiate(plan.model_cfg), plan.data, plan.scheme.k, plan.batch_size, plan.seed,
            plan.augment, plan.build_optimizer, decoded[: stop + 1],
            scaled=cfg.train.stale_lr is StaleLR.scaled,
        )  # fmt: skip
        accuracy, _ = evaluate(flat.model, plan.data.test_x, plan.data.test_y, normalizer)
        late = sum(j < r for r, jobs in enumerate(decoded[: stop + 1]) for j in jobs)
        seconds = time.perf_counter() - start
        print(f"| {stop} | {late} | {evals[stop]:.4f} | {accuracy:.4f} | {seconds:.0f} |")


if __name__ == "__main__":
    main()
