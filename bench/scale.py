"""Scale of the real runtime: n = 32 and 64 logical workers with model=cnn on this machine.

A torch process costs about 0.5 GB, so the logical workers are packed into
``cluster.actors`` processes (default n/4); every logical worker still computes and
encodes its own packet and is timed on its own. Each run starts its own local Ray and
reports steady-state rounds/s (after the first round), start-up time, the peak of
Σ RSS and Σ PSS over the driver and every Ray process (sampled every 0.25 s from
/proc), and the failures the runtime saw (any failure fails the benchmark).

    python bench/scale.py                 # n = 32, 64; classic_cr s=1; 10 rounds
    python bench/scale.py --actors 8      # a fixed number of actor processes
    python bench/scale.py --quick         # n = 32, 3 rounds, synthetic data (< 1 min)
"""

from __future__ import annotations

import argparse

from common import compose_config, data_overrides, machine, measured_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, nargs="+", default=[32, 64])
    parser.add_argument("--actors", type=int, default=None, help="default: workers / 4")
    parser.add_argument("--scheme", nargs="+", default=["scheme=classic_cr", "scheme.s=1"])
    parser.add_argument("--per-shard", type=int, default=16, help="samples per shard per job")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--quick", action="store_true", help="n = 32, 3 rounds, synthetic")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.rounds = [32], 3
    print(f"# {machine()}")
    print(f"# model=cnn; {' '.join(args.scheme)}; {args.per_shard} samples per shard per job")
    columns = [
        "workers", "actors", "global batch", "rounds", "rounds/s", "start-up s",
        "peak Σ RSS GiB", "peak Σ PSS GiB", "processes at peak", "failed packets", "final loss",
    ]  # fmt: skip
    print("| " + " | ".join(columns) + " |")
    print("|---" * len(columns) + "|", flush=True)
    for n in args.workers:
        actors = args.actors or max(1, n // 4)
        cfg = compose_config(
            [
                *data_overrides(args.quick), "model=cnn", *args.scheme, "logger=none",
                "delay=none", f"cluster.workers={n}", f"cluster.actors={actors}",
                "cluster.worker_cpus=0.1", "cluster.threads_per_actor=1",
                f"train.batch_size={n * args.per_shard}", f"train.rounds={args.rounds}",
                "train.eval_every=0", "train.checkpoint_every=0",
            ]
        )  # fmt: skip
        run = measured_run(cfg)
        failures = sum(r["failed"] for r in run.rounds)  # packets of dead/stuck/NaN workers
        mem = run.memory
        cells = [
            n, actors, n * args.per_shard, len(run.rounds), f"{1 / run.period:.2f}",
            f"{run.startup:.1f}", f"{mem.rss_gib:.2f}", f"{mem.pss_gib:.2f}", mem.processes,
            failures, f"{run.rounds[-1]['train_loss']:.3f}",
        ]  # fmt: skip
        print("| " + " | ".join(map(str, cells)) + " |", flush=True)
        if failures or run.summary["jobs"] != args.rounds:
            jobs = run.summary["jobs"]
            raise SystemExit(f"n={n}: {failures} failed packets, {jobs} jobs applied")


if __name__ == "__main__":
    main()
