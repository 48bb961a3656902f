"""Memory: peak resident memory of an n=16 ResNet-18 pipelined_cr (T=2) run vs its bound.

The bound is 2x what the scheme and training need to hold at once, computed from the
parameter count P, the float buffers B and the packet length l = packet_fraction·P,
all float32 unless said (see ``required``): the server's weights, gradient, momentum
and broadcast copy, the packets of the last T+1 rounds it keeps for decoding and the
decoder's float64 values; every logical worker's T+1 accumulators (its encoder state);
every actor process's model, gradients and one worker's partial gradients at a time.

What the bound leaves out is the runtime itself: each process that imports torch
(the driver and every actor) costs a few hundred MB before it holds any tensor, and
Ray runs its own daemons. That baseline is measured here, in the same Ray session the
run then uses, as the driver + Ray + ``cluster.actors`` idle actors that import what a
worker imports; the peak is reported raw and with the baseline taken off.

Memory is the peak over the run of Σ RSS and Σ PSS of the driver and all its
descendant processes, sampled every 0.25 s. Σ RSS counts shared pages (the Ray object
store, torch's libraries) once per process that maps them; Σ PSS shares them out, so
it is the machine's real footprint and the number compared with the bound.

    python bench/memory.py            # n=16, resnet18, pipelined_cr s=1 T=2, 3 jobs
    python bench/memory.py --quick    # n=8 in 2 actors, 2 jobs (< 1 min)
"""

from __future__ import annotations

import argparse
import math
import os

import ray
from common import MemorySampler, compose_config, machine, measured_run
from hydra.utils import instantiate
from omegaconf import OmegaConf

from gclab.ml.gradients import FlatModel

GIB = 2**30


class IdleWorker:
    """An actor with a worker's imports and nothing else: a process's fixed cost."""

    def ready(self) -> int:
        import torchvision.models  # noqa: F401  (what resnet18_cifar imports in a worker)

        import gclab.runtime.worker  # noqa: F401

        return os.getpid()


def required(P: int, B: int, l: int, n: int, actors: int, T: int, parts: int) -> list:
    """(what, formula, bytes) of everything the scheme and training hold at once."""
    f32, f64 = 4, 8
    return [
        ("server: weights, gradient, momentum", "3·4P", 3 * f32 * P),
        ("server: broadcast state + its object-store copy", "2·4(P+B)", 2 * f32 * (P + B)),
        ("server: packets of the last T+1 rounds", "(T+1)·n·4l", (T + 1) * n * f32 * l),
        (
            "server: decoder's T+1 job values (float64) + the gradient scaled for the step",
            "(T+1)·8l + 8P + 4P",
            (T + 1) * f64 * l + f64 * P + f32 * P,
        ),
        ("workers: T+1 accumulators each", "n·(T+1)·4l", n * (T + 1) * f32 * l),
        (
            "actors: model, gradients, one worker's partials each",
            "A·(4(P+B) + 4P + parts·4l)",
            actors * (f32 * (P + B) + f32 * P + parts * f32 * l),
        ),
    ]  # fmt: skip


def baseline(actors: int, cpus: float) -> MemorySampler:
    """Σ memory of this process, Ray's daemons and ``actors`` idle torch actors."""
    cls = ray.remote(IdleWorker).options(num_cpus=cpus)
    idle = [cls.remote() for _ in range(actors)]
    ray.get([a.ready.remote() for a in idle])
    sampler = MemorySampler()
    sampler.sample()
    for a in idle:
        ray.kill(a)
    return sampler


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=16)
    parser.add_argument("--actors", type=int, default=4, help="processes hosting the workers")
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=3, help="jobs (up to T rounds follow)")
    parser.add_argument("--quick", action="store_true", help="n=8 in 2 actors, batch 16, 2 jobs")
    args = parser.parse_args()
    if args.quick:
        args.workers, args.actors, args.batch, args.rounds = 8, 2, 16, 2
    cfg = compose_config(
        [
            "data=synthetic", "model=resnet18", "scheme=pipelined_cr", "scheme.s=1",
            "scheme.T=2", "logger=none", "delay=none", f"cluster.workers={args.workers}",
            f"cluster.actors={args.actors}", "cluster.worker_cpus=0.25",
            "cluster.threads_per_actor=1", f"train.batch_size={args.batch}",
            f"train.rounds={args.rounds}", "train.eval_every=0", "train.checkpoint_every=0",
        ]
    )  # fmt: skip
    scheme = instantiate(cfg.scheme, n=args.workers)
    model_cfg = OmegaConf.to_container(cfg.model, resolve=True)
    model_cfg["num_classes"] = 10  # the synthetic data's (null follows the data)
    flat = FlatModel(instantiate(model_cfg))
    P, B = flat.num_params, flat.num_buffers
    length = math.ceil(P * scheme.packet_fraction)
    parts = max(len(p) for p in scheme.placement)
    rows = required(P, B, length, args.workers, args.actors, scheme.T, parts)
    need = sum(b for _, _, b in rows)
    print(f"# {machine()}")
    print(
        f"# {scheme.describe()}, resnet18 P={P:,} parameters, B={B:,} float buffers, "
        f"packet length l={length:,}, {args.workers} workers in A={args.actors} actors, "
        f"{parts} parts per worker, batch {args.batch}, {args.rounds} jobs"
    )
    print("| held | formula | GiB |\n|---|---|---|")
    for what, formula, size in rows:
        print(f"| {what} | {formula} | {size / GIB:.2f} |")
    print(f"| **required** | | **{need / GIB:.2f}** |")
    print(f"| **bound = 2 × required** | | **{2 * need / GIB:.2f}** |", flush=True)

    instantiate(cfg.cluster).connect()  # the run reuses this Ray session
    base = baseline(args.actors, 0.25).peak
    run = measured_run(cfg)
    peak = run.memory
    print()
    print(
        "| measure | Σ RSS GiB | Σ PSS GiB | processes |\n|---|---|---|---|\n"
        f"| baseline: driver + Ray + {args.actors} idle torch actors | {base.rss_gib:.2f} | "
        f"{base.pss_gib:.2f} | {base.processes} |\n"
        f"| peak of the run | {peak.rss_gib:.2f} | {peak.pss_gib:.2f} | {peak.processes} |\n"
        f"| peak − baseline | {peak.rss_gib - base.rss_gib:.2f} | "
        f"{peak.pss_gib - base.pss_gib:.2f} | |"
    )
    bound = 2 * need / GIB
    print(
        f"# bound {bound:.2f} GiB; peak Σ PSS {peak.pss_gib:.2f} GiB = "
        f"{peak.pss_gib / bound:.2f}x the bound ({'within' if peak.pss_gib <= bound else 'OVER'}"
        f"); without the baseline {(peak.pss_gib - base.pss_gib) / bound:.2f}x; "
        f"{len(run.rounds)} rounds (none after the last job is decoded) in "
        f"{run.summary['total_wall_time']:.1f} s"
    )


if __name__ == "__main__":
    main()
