"""What a worker's round of study v3's arms costs in compute, and why M-SGC's costs more
per partition.

    python bench/round_compute.py              # 40 rounds per arm
    python bench/round_compute.py --rounds 10  # quicker

Study v3's runs record ``partition_seconds``: the median worker-round's compute time
over the partitions its load amounts to (``load · n``). M-SGC's runs measured 1.2–1.4×
the other arms' on the same machine. This script runs the study's arms (8 workers,
batch 128: 16 samples per shard, ``model=cnn``, synthetic data of CIFAR-10's shape)
through the code that charged them (``WorkerHost.run_round``: weight loads, tasks and
encoding on the workers' CPU-time clock), 8 workers in 2 hosts as the study's 2 actors.
Per arm, side by side: a worker's passes (tasks), their sizes and its weight loads in a
round, the median compute per worker-round, the seconds per partition and their ratio to
classic_fr's. Then every pass the hosts timed in those rounds, by size, and the line
``seconds = fixed + per_sample · samples`` fitted to them, with what it predicts for
each arm's ratio.
"""

from __future__ import annotations

import argparse
from collections import defaultdict

import numpy as np
import torch
from common import compose_config, machine

import gclab.runtime.tasks as tasks_module
from gclab.app import build
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
BASELINE = "classic_fr (2 models in turn)"


def timed_passes() -> list[tuple[int, float]]:
    """A list that gets ``(samples, seconds)`` of every pass the hosts compute from now on."""
    passes: list[tuple[int, float]] = []
    compute = tasks_module.RoundTasks._compute

    def recorded(self, owner, task):
        result = compute(self, owner, task)
        passes.append((result.samples, result.seconds))
        return result

    tasks_module.RoundTasks._compute = recorded
    return passes


def run_arm(overrides: list[str], rounds: int, passes: list[tuple[int, float]]) -> dict:
    """The arm's worker-rounds past the pipeline's fill, charged as in training."""
    plan, _ = build(compose_config([*BASE, *overrides]))
    spec, shards, _ = worker_setup(plan)
    scheme, n = plan.scheme, plan.scheme.n
    groups = [list(range(n // 2)), list(range(n // 2, n))]
    hosts = [WorkerHost(spec, g, {j: shards[j] for j in host_shards(scheme, g)}) for g in groups]
    state = ParameterServer(plan).state()
    decoder = scheme.decoder()
    seconds, loads = [], []
    for r in range(rounds + 2):
        decoder.begin_round(r)
        tasks = decoder.plan(r)
        weights = {t: state for t in range(max(0, r - scheme.T), r + 1)}
        if r == 2:  # from here every slot holds a real job
            passes.clear()
        for host, group in zip(hosts, groups, strict=True):
            report = host.run_round(r, weights, {w: tasks[w] for w in group})
            if r >= 2:
                seconds.extend(report.seconds.tolist())
                loads.extend(len({t.job for t in tasks[w]}) for w in group)
        for w in range(n):
            decoder.receive(r, w, None)
    per_shard = spec.plan.per_shard
    sizes = [round(per_shard * (scheme.parts[t.part].hi - scheme.parts[t.part].lo))
             for t in tasks[0]]  # fmt: skip
    median = float(np.median(seconds))
    return {
        "sizes": sizes, "loads": float(np.mean(loads)), "median": median,
        "partitions": scheme.load * n, "per_partition": median / (scheme.load * n),
        "passes": list(passes),
    }  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40, help="rounds per arm, after 2 to fill")
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"# {machine()}")
    passes = timed_passes()
    results = {name: run_arm(overrides, args.rounds, passes) for name, overrides in ARMS.items()}
    base = results[BASELINE]["per_partition"]
    print(
        "\n| arm | samples per pass (worker 0) | weight loads | compute per worker-round "
        "(ms, median) | partitions (load · n) | ms per partition | × classic_fr |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(f"| {name} | {r['sizes']} | {r['loads']:.2f} | {1e3 * r['median']:.2f} | "
              f"{r['partitions']:.2f} | {1e3 * r['per_partition']:.2f} | "
              f"{r['per_partition'] / base:.2f} |")  # fmt: skip
    by_size: dict[int, list[float]] = defaultdict(list)
    for r in results.values():
        for size, secs in r["passes"]:
            by_size[size].append(secs)
    print(
        "\n| pass of (samples), in the rounds above | passes timed | ms, median | ms per sample |"
    )
    print("|---|---|---|---|")
    for size in sorted(by_size):
        ms = 1e3 * float(np.median(by_size[size]))
        print(f"| {size} | {len(by_size[size])} | {ms:.2f} | {ms / size:.3f} |")
    sizes = np.array([s for r in results.values() for s, _ in r["passes"]], dtype=float)
    secs = np.array([t for r in results.values() for _, t in r["passes"]])
    per_sample, fixed = np.polyfit(sizes, secs, 1)
    print(f"\nfitted over every pass: {1e3 * fixed:.2f} ms per pass + "
          f"{1e3 * per_sample:.3f} ms per sample")  # fmt: skip
    print("\n| arm | its passes by the fit (ms per round) | per partition × classic_fr's |")
    print("|---|---|---|")
    fitted = {name: sum(fixed + per_sample * s for s in r["sizes"]) for name, r in results.items()}
    unit = fitted[BASELINE] / results[BASELINE]["partitions"]
    for name, r in results.items():
        ratio = fitted[name] / r["partitions"] / unit
        print(f"| {name} | {1e3 * fitted[name]:.2f} | {ratio:.2f} |")


if __name__ == "__main__":
    main()
