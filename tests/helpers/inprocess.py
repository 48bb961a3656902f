"""A worker pool without Ray: the same WorkerHost code computes real gradients in this process.

:func:`in_process` has the signature of :func:`gclab.runtime.server.ray_pool`, so
``run(cfg, run_dir, start_pool=in_process)`` trains through the whole loop (coding,
protocol, decoding, optimizer, checkpoints) in seconds. It has no failures to handle:
injected crashes and stalls need real processes, and stay with the Ray tests.
"""

from __future__ import annotations

import os
import time

import numpy as np

from gclab.coding.contract import Plan, Scheme
from gclab.network.rounds import RecoveryError
from gclab.runtime.pool import Weights
from gclab.runtime.server import TrainingPlan
from gclab.runtime.worker import Shard, WorkerHost, WorkerReport, WorkerSpec, host_shards


class InProcessPool:
    """:class:`gclab.runtime.pool.WorkerPool`'s interface; one :class:`WorkerHost` per actor."""

    def __init__(self, spec: WorkerSpec, groups: list[list[int]], shards: list[Shard]) -> None:
        if spec.faults.plan:
            raise ValueError("injected faults need real actor processes: use the Ray pool")
        self.groups = groups
        self.shards = shards
        self.nodes = ["this process"]  # one machine: the summary records nodes=1
        self.hosts = [
            WorkerHost(spec, group, {j: shards[j] for j in host_shards(spec.scheme, group)})
            for group in groups
        ]
        self.processors = sorted({host.processor() for host in self.hosts})
        self.n = spec.scheme.n
        self.failures = 0

    def broadcast(self, state: np.ndarray) -> np.ndarray:
        return state

    def submit(self, r: int, weights: Weights, tasks: Plan) -> InProcessRound:
        return InProcessRound(self, r, weights, tasks)

    def refetch(self, r: int, w: int, weights: Weights, tasks: Plan) -> np.ndarray:
        raise RecoveryError(f"round {r}: worker {w}'s packet never failed in process.")

    def state_dict(self) -> dict:
        return {
            "encoders": {w: s for host in self.hosts for w, s in host.encoder_states().items()},
            "unusable_until": np.full(self.n, -1),
            "failures": 0,
            "nonfinite": 0,
        }

    def load_state_dict(self, state: dict) -> None:
        for host in self.hosts:
            host.load_encoder_states(state["encoders"])

    def switch(self, scheme: Scheme) -> None:
        for host, group in zip(self.hosts, self.groups):
            host.hold(scheme, {j: self.shards[j] for j in host_shards(scheme, group)})

    def close(self) -> None:
        self.hosts.clear()


class InProcessRound:
    """:class:`gclab.runtime.pool.PendingRound`'s interface: hosts compute when waited for."""

    def __init__(self, pool: InProcessPool, r: int, weights: Weights, tasks: Plan) -> None:
        self.pool, self.r, self.weights, self.tasks = pool, r, weights, tasks
        self.sent = time.monotonic()
        self.todo = list(range(len(pool.hosts)))
        self.reports: dict[int, WorkerReport] = {}
        self.failed = np.zeros(pool.n, dtype=bool)

    def pending(self) -> bool:
        return bool(self.todo)

    def wait(self, timeout: float | None) -> list[int]:
        i = self.todo.pop(0)
        group = self.pool.groups[i]
        plans = {w: self.tasks[w] for w in group}
        report = self.pool.hosts[i].run_round(self.r, self.weights, plans)
        report.times["back"] = time.monotonic()
        self.reports.update(report.reports())
        return group

    def seconds(self, workers: np.ndarray) -> np.ndarray:
        return np.array([self.reports[w].seconds for w in workers])


def in_process(plan: TrainingPlan, spec: WorkerSpec, shards: list[Shard]) -> InProcessPool:
    """Start a run's workers in this process (the ``start_pool`` of :func:`gclab.app.run`)."""
    return InProcessPool(spec, plan.cluster.groups(resources={"CPU": os.cpu_count() or 1}), shards)


class Stopped(RuntimeError):
    """The driver's end, in process."""


def stopping_at(r_stop: int):
    """An in-process pool whose round ``r_stop`` never starts (the driver stops there)."""

    def start(plan: TrainingPlan, spec: WorkerSpec, shards: list[Shard]) -> InProcessPool:
        pool = in_process(plan, spec, shards)
        submit = pool.submit

        def stop_or_submit(r, *args):
            if r == r_stop:
                raise Stopped(f"round {r}")
            return submit(r, *args)

        pool.submit = stop_or_submit
        return pool

    return start
