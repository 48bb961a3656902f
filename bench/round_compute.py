"""What a worker's round of study v3's arms costs in compute, and why M-SGC's costs more
per partition.

    python bench/round_compute.py              # 40 rounds per arm, n = 8, the study's batches
    python bench/round_compute.py --rounds 10  # quicker

Study v3's runs record ``partition_seconds``: the median worker-round's compute time
over the partitions its load amounts to (``load · n``). M-SGC's runs measured 1.2–1.4×
the other arms' on the same machine. This script runs the study's arms (8 workers, batch 128,
``model=cnn``, 16 samples per shard, on synthetic data of CIFAR-10's shape) through the
code that charged them (``WorkerHost.run_round``: weight loads, tasks, encoding, on the
workers' CPU-time clock), with 8 workers in 2 hosts as the study's 2 actors, and prints
side by side per arm: the tasks (passes) and weight loads of a worker's round, its
samples, the median compute per worker-round, the seconds per partition and their ratio
to classic_fr's. Then the cost of one pass of each size the arms use and of one weight
load, measured alone, and what that cost model predicts for each arm's round (the rest
of a measured round is mostly encoding: M-SGC's packets are two gradients wide).
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from common import compose_config, machine

from gclab.app import build
from gclab.coding.contract import Part
from gclab.ml.gradients import loss_and_gradient
from gclab.runtime.server import ParameterServer, worker_setup
from gclab.runtime.worker import WorkerHost, host_shards

BASE = ["cluster.workers=8", "train.batch_size=128", "data=synthetic", "data.train_size=8192",
        "data.test_size=100", "logger=none"]  # fmt: skip
SGC = ["scheme.B=1", "scheme.W=2", "scheme.lam=2"]
ARMS = {
    "classic_fr (2 models in turn)": ["scheme=classic_fr", "scheme.s=1",
                                      "train.pipeline=interleaved", "train.models=2"],
    "sr_sgc (2 models in turn)": ["scheme=sr_sgc", *SGC, "train.pipeline=interleaved",
                                  "train.models=2"],
    "m_sgc (2 models in turn)": ["scheme=m_sgc", *SGC, "train.pipeline=interleaved",
                                 "train.models=2"],
    "m_sgc (stale)": ["scheme=m_sgc", *SGC, "train.pipeline=stale"],
    "uncoded": ["scheme=uncoded"],
}  # fmt: skip


def run_arm(overrides: list[str], rounds: int) -> dict:
    """The arm's worker-rounds, charged as in training: 2 hosts of 4 workers."""
    plan, _ = build(compose_config([*BASE, *overrides]))
    spec, shards, _ = worker_setup(plan)
    scheme, n = plan.scheme, plan.scheme.n
    groups = [list(range(n // 2)), list(range(n // 2, n))]
    hosts = [WorkerHost(spec, g, {j: shards[j] for j in host_shards(scheme, g)}) for g in groups]
    state = ParameterServer(plan).state()
    decoder = scheme.decoder()
    seconds, passes, loads, samples = [], [], [], []
    for r in range(rounds + 2):
        decoder.begin_round(r)
        tasks = decoder.plan(r)
        weights = {t: state for t in range(max(0, r - scheme.T), r + 1)}
        for host, group in zip(hosts, groups, strict=True):
            report = host.run_round(r, weights, {w: tasks[w] for w in group})
            if r >= 2:  # past the pipeline's fill, every slot holds a real job
                seconds.extend(report.seconds.tolist())
                samples.extend(report.samples.tolist())
        if r >= 2:
            for w in range(n):
                passes.append(len(tasks[w]))
                loads.append(len({t.job for t in tasks[w]}))
        for w in range(n):
            decoder.receive(r, w, None)
    per_shard = spec.plan.per_shard
    sizes = [round(per_shard * (scheme.parts[t.part].hi - scheme.parts[t.part].lo))
             for t in tasks[0]]  # fmt: skip
    partitions = scheme.load * n
    median = float(np.median(seconds))
    return {
        "host": hosts[0], "sizes": sizes,
        "passes": float(np.mean(passes)), "loads": float(np.mean(loads)),
        "samples": float(np.mean(samples)), "median": median,
        "partitions": partitions, "per_partition": median / partitions,
    }  # fmt: skip


def pass_seconds(host: WorkerHost, size: int, repeats: int) -> float:
    """Median CPU seconds of one task of ``size`` samples: batch, forward, backward."""
    per_shard = host.spec.plan.per_shard
    part = Part(next(iter(host.batches.shards)), 0.0, size / per_shard)
    times = []
    for job in range(repeats):
        start = time.thread_time()
        x, y = host.batches(job, part)
        loss_and_gradient(host.flat, x, y, host.spec.bf16)
        times.append(time.thread_time() - start)
    return float(np.median(times))


def load_seconds(host: WorkerHost, repeats: int) -> float:
    """Median CPU seconds of loading one model's weights into the worker's model."""
    state = host.flat.state_vector().detach().cpu().numpy().copy()
    times = []
    for _ in range(repeats):
        start = time.thread_time()
        host.flat.load_state_vector(state)
        times.append(time.thread_time() - start)
    return float(np.median(times))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds per arm, after 2 to fill")
    parser.add_argument("--repeats", type=int, default=60, help="timings per pass size")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"# {machine()}")
    results = {name: run_arm(overrides, args.rounds) for name, overrides in ARMS.items()}
    base = results["classic_fr (2 models in turn)"]["per_partition"]
    print(
        "\n| arm | passes per round | samples per pass (worker 0) | weight loads | samples | "
        "compute per worker-round (ms, median) | partitions (load · n) | ms per partition | "
        "× classic_fr |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['passes']:.2f} | {r['sizes']} | {r['loads']:.2f} | "
              f"{r['samples']:.1f} | {1e3 * r['median']:.2f} | {r['partitions']:.2f} | "
              f"{1e3 * r['per_partition']:.2f} | {r['per_partition'] / base:.2f} |")  # fmt: skip
    host = results["classic_fr (2 models in turn)"]["host"]
    sizes = sorted({s for r in results.values() for s in r["sizes"]})
    cost = {s: pass_seconds(host, s, args.repeats) for s in sizes}
    load = load_seconds(host, args.repeats)
    print("\n| pass of (samples) | ms | ms per sample |")
    print("|---|---|---|")
    for s, c in cost.items():
        print(f"| {s} | {1e3 * c:.2f} | {1e3 * c / s:.3f} |")
    print(f"| a weight load | {1e3 * load:.3f} | |")
    print(
        "\n| arm | predicted ms per worker-round (passes + loads) | measured ms | "
        "predicted per partition × classic_fr's |"
    )
    print("|---|---|---|---|")
    predicted = {name: sum(cost[s] for s in r["sizes"]) + r["loads"] * load
                 for name, r in results.items()}  # fmt: skip
    classic = (
        predicted["classic_fr (2 models in turn)"]
        / results["classic_fr (2 models in turn)"]["partitions"]
    )
    for name, r in results.items():
        ratio = predicted[name] / r["partitions"] / classic
        print(f"| {name} | {1e3 * predicted[name]:.2f} | {1e3 * r['median']:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
