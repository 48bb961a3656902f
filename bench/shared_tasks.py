"""What an actor saves by computing a task once for all the workers it hosts that plan it.

    python bench/shared_tasks.py            # SR-SGC (2, 3, 23), n = 256, batch 4096
    python bench/shared_tasks.py --quick    # n = 64, batch 1024

One actor (``WorkerHost``, in this process) hosts half of the workers (128 of 256, as
gclab's default packing on 2 cores) and runs round 0: once as one call for all of them,
where a task several of them plan is computed once (``gclab/runtime/tasks.py``), and
once as one call per worker, where every worker computes its own tasks (what each
actor did before). Side by side: the tasks the workers plan and those computed, the
process's CPU seconds, and the compute time charged to the workers (their sum: the same
in both ways up to timing noise, since each worker is charged its own tasks either way).
Synthetic data, ``model=cnn``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
from common import compose_config, machine

import gclab.runtime.tasks as tasks_module
from gclab.app import build
from gclab.runtime.server import ParameterServer, worker_setup
from gclab.runtime.worker import WorkerHost, host_shards


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="n = 64, batch 1024")
    parser.add_argument("--scheme", nargs="+", default=["scheme=sr_sgc", "scheme.B=2",
                        "scheme.W=3", "scheme.lam=23"])  # fmt: skip
    args = parser.parse_args()
    n, batch = (64, 1024) if args.quick else (256, 4096)
    cfg = compose_config(
        ["data=synthetic", f"data.train_size={4 * batch}", "data.test_size=100", *args.scheme,
         f"cluster.workers={n}", f"train.batch_size={batch}", "train.rounds=4", "logger=none"]
    )  # fmt: skip
    plan, _ = build(cfg)
    spec, shards, _ = worker_setup(plan)
    group = list(range(n // 2))
    host = WorkerHost(spec, group, {j: shards[j] for j in host_shards(spec.scheme, group)})
    state = ParameterServer(plan).state()
    decoder = plan.scheme.decoder()  # symbolic: the plan is all it gives here
    decoder.begin_round(0)
    tasks = decoder.plan(0)
    plans = {w: tasks[w] for w in group}
    planned = sum(len(t) for t in plans.values())
    computed = count_gradients()
    print(f"# {machine()}")
    print(f"# {plan.scheme.describe()}, batch {batch}: one actor hosting workers 0-{n // 2 - 1}")
    print("| way | tasks planned | tasks computed | CPU s | charged compute s (sum) |")
    print("|---|---|---|---|---|")
    weights = {0: state}
    ways = {
        "one call, shared tasks": lambda: [host.run_round(0, weights, plans)],
        "one call per worker": lambda: [host.run_round(0, weights, {w: plans[w]}) for w in group],
    }
    for name, way in ways.items():
        computed.clear()
        cpu = time.process_time()
        reports = way()
        cpu = time.process_time() - cpu
        charged = float(np.sum([r.seconds.sum() for r in reports]))
        print(f"| {name} | {planned} | {len(computed)} | {cpu:.2f} | {charged:.2f} |", flush=True)


def count_gradients() -> list[None]:
    """A list that gets an entry for every partial gradient the actor computes from now on."""
    calls: list[None] = []
    compute = tasks_module.loss_and_gradient

    def counted(*args, **kwargs):
        calls.append(None)
        return compute(*args, **kwargs)

    tasks_module.loss_and_gradient = counted
    return calls


if __name__ == "__main__":
    main()
