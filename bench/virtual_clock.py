"""Does the virtual clock depend on how logical workers are packed into actors?

The same run (issue 15: ``scheme=cce_fr cluster.workers=16``, 20 rounds, shared
CIFAR-10) with one actor per worker and with 2 actors, once with each logical worker's
compute measured as wall time (``cluster.compute_time=wall``, how gclab measured it
before) and once as its thread's CPU time (``cpu``, the default with one torch thread).
With more actors than cores, wall time counts the waits for a core as compute.

    python bench/virtual_clock.py             # n = 16, 20 rounds, shared CIFAR-10
    python bench/virtual_clock.py --quick     # n = 8, 5 rounds, synthetic data
"""

from __future__ import annotations

import argparse

import numpy as np
from common import compose_config, data_overrides, machine, measured_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 8, 5 rounds, synthetic")
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--scheme", default="cce_fr")
    args = parser.parse_args()
    workers, rounds = (8, 5) if args.quick else (args.workers, args.rounds)
    base = [
        f"scheme={args.scheme}", f"cluster.workers={workers}", f"train.rounds={rounds}",
        "train.eval_every=0", "train.checkpoint_every=0", "logger=none",
        *data_overrides(args.quick),
    ]  # fmt: skip
    print(f"# {machine()}")
    print(f"# overrides: {' '.join(base)}")
    print(
        "| actors | compute_time | median compute per worker (s) | total virtual time (s) "
        "| start-up (s) | wall s per round |"
    )
    print("|---|---|---|---|---|---|")
    for measure in ("wall", "cpu"):
        for actors in (workers, 2):
            cfg = compose_config(
                [*base, f"cluster.actors={actors}", f"cluster.compute_time={measure}"]
            )
            run = measured_run(cfg, memory=False)
            compute = np.median([r["compute_s"] for r in run.rounds])
            print(
                f"| {actors} | {measure} | {compute:.3f} | {run.summary['total_virtual_time']:.2f} "
                f"| {run.startup:.1f} | {run.period:.2f} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
