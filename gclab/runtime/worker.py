"""Worker actors: each hosts one or more logical workers of the scheme.

An actor holds only the data shards its logical workers' placement names (fetched
once from the object store), keeps one encoder per logical worker, and per round
answers with one :class:`HostReport`: a packet per logical worker, with that worker's
own compute time, measured so that neither the packing nor the machine's load changes
it (:mod:`gclab.runtime.timing`), and when the actor reached each phase of the call
(:data:`PHASES`), which the wall clock's round records keep. A task several of its
workers plan is computed once (:mod:`gclab.runtime.tasks`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
import ray
import torch
from hydra.utils import instantiate

from gclab.coding.contract import Part, Scheme, Task
from gclab.ml.batches import BatchPlan, Normalizer
from gclab.ml.gradients import BatchMaker, FlatModel, loss_and_gradient
from gclab.runtime.faults import Faults
from gclab.runtime.placement import Placement
from gclab.runtime.tasks import RoundTasks
from gclab.runtime.timing import ComputeTime, Stopwatch, processor


@dataclass
class WorkerSpec:
    """What every actor needs to build its model and batches (small, pickled once)."""

    scheme: Scheme
    model: dict
    plan: BatchPlan
    mean: torch.Tensor
    std: torch.Tensor
    augment: bool
    threads: int
    num_jobs: int
    faults: Faults
    models: int  # 1, or T+1 with train.pipeline=interleaved
    compute_time: ComputeTime  # how each logical worker's compute is measured
    device: str  # "cpu" or "cuda": model, shards, batches and gradients live there
    bf16: bool  # bfloat16 autocast for the forward pass


#: The phases of an actor's call it stamps (``time.monotonic()``: CLOCK_MONOTONIC, one
#: clock for every process and network namespace of a host, so the driver's stamps and
#: the actors' compare): the call started running, the broadcast weights were in hand,
#: the first task started, the last packet was encoded, the report was handed to Ray.
#: Ray's actors stamp all five; a host run in the driver's process the middle two.
PHASES = ("called", "fetched", "computing", "computed", "returned")


@dataclass
class WorkerReport:
    """One logical worker's result for one round."""

    round: int
    packet: np.ndarray
    seconds: float
    loss_sum: float
    samples: int
    buffers: np.ndarray | None  # float buffers (batch norm) after the tasks, if any ran
    model: int | None  # which model those buffers belong to
    #: when its actor reached each phase of the call (:data:`PHASES`), shared by the
    #: actor's workers; the driver adds ``back``, when the report was in its hand
    times: dict[str, float]


@dataclass
class HostReport:
    """One actor's results for one round: row i of each array is logical worker
    ``workers[i]``'s.

    An actor sends this one object per round, whatever the number of workers it hosts:
    the packets travel as one array (one buffer through Ray's object store, read
    zero-copy by the driver), not as one object per worker.
    """

    round: int
    workers: list[int]
    packets: np.ndarray  # [workers, packet length]
    seconds: np.ndarray  # each worker's compute time
    loss_sum: np.ndarray
    samples: np.ndarray
    buffers: np.ndarray  # [workers, float buffers] after each worker's tasks
    models: np.ndarray  # the model of each worker's buffers; -1: it ran no task
    times: dict[str, float]  # when the actor reached each phase of the call (PHASES)

    def finite(self) -> np.ndarray:
        """Whether each packet is finite: one float64-accumulated pass per row, in which
        NaN or Inf anywhere makes the row's sum non-finite."""
        return np.isfinite(self.packets.sum(axis=1, dtype=np.float64))

    def reports(self) -> dict[int, WorkerReport]:
        """The same results per logical worker (the packets are views of the rows)."""
        reports = {}
        for i, w in enumerate(self.workers):
            ran = self.models[i] >= 0
            reports[w] = WorkerReport(
                self.round, self.packets[i], float(self.seconds[i]), float(self.loss_sum[i]),
                int(self.samples[i]), self.buffers[i] if ran else None,
                int(self.models[i]) if ran else None, self.times,
            )  # fmt: skip
        return reports


#: One data shard: its images and labels.
Shard = tuple[torch.Tensor, torch.Tensor]


class WorkerHost:
    """Hosts logical workers ``workers`` with the data ``shards`` their placement names.

    In a run it is a Ray actor process (:class:`RayWorkerHost`, see :func:`start_hosts`);
    the class itself needs no Ray, so tests can run the same code in one process.
    """

    def __init__(
        self, spec: WorkerSpec, workers: Sequence[int], shards: Mapping[int, Shard]
    ) -> None:
        torch.set_num_threads(spec.threads)
        self.spec = spec
        self.workers = list(workers)
        device = torch.device(spec.device)  # cuda: the GPU Ray gave this actor
        self.flat = FlatModel(instantiate(spec.model).to(device))
        self.hold(spec.scheme, shards)
        self.stopwatch = Stopwatch(spec.compute_time)
        self._warm_up(next(iter(self.batches.shards)))

    def hold(self, scheme: Scheme, shards: Mapping[int, Shard]) -> None:
        """Hold ``shards`` (those ``scheme``'s placement names for the hosted workers) and
        fresh encoders of ``scheme``: at the start, and when an adaptive run switches."""
        device = torch.device(self.spec.device)
        self.spec = replace(self.spec, scheme=scheme)
        local = {j: (x.to(device), y.to(device)) for j, (x, y) in shards.items()}
        normalizer = Normalizer(self.spec.mean, self.spec.std, device)
        self.batches = BatchMaker(local, self.spec.plan, normalizer, self.spec.augment)
        self.encoders = {w: scheme.encoder(w) for w in self.workers}

    def processor(self) -> str:
        """What this actor's compute times are measured on (:func:`timing.processor`)."""
        return processor(self.spec.device)

    def _warm_up(self, shard: int) -> None:
        """One untimed pass, so that one-time costs (allocations, kernel selection) are not
        counted as round 0's compute of whichever logical worker an actor runs first.

        The weights and batch-norm buffers it touches are overwritten by every round's
        broadcast state before they are used.
        """
        x, y = self.batches(0, Part(shard))
        loss_and_gradient(self.flat, x, y, self.spec.bf16)

    def run_round(
        self,
        round: int,
        weights: Mapping[int, np.ndarray],
        plans: Mapping[int, tuple[Task, ...]],
        retry: bool = False,
    ) -> HostReport:
        """Compute and encode the tasks of ``round`` for the hosted workers ``plans`` names.

        ``weights[t]`` is the state broadcast in round t: every task of job t is computed
        on it, also in a later round (SR-SGC's redone tasks, M-SGC's later slots), as
        the job's own weights. A task several hosted workers plan is computed once and
        charged to each (:class:`gclab.runtime.tasks.RoundTasks`); each worker encodes
        its own packet, timed as its own. ``retry`` marks a recomputation the server
        asked for during recovery: injected faults (``faults=...``) only hit first
        attempts. The report's ``times`` hold when the tasks started and the last packet
        was encoded.
        """
        computing = time.monotonic()
        spec = self.spec
        tasks = RoundTasks(
            self.flat, self.batches, spec.scheme.parts, self.stopwatch, weights, plans,
            spec.models, spec.num_jobs, spec.bf16,
        )  # fmt: skip
        workers = list(plans)
        m = len(workers)
        seconds, loss_sum = np.zeros(m), np.zeros(m)
        samples, models = np.zeros(m, dtype=np.int64), np.full(m, -1, dtype=np.int64)
        buffers = np.zeros((m, self.flat.num_buffers), dtype=np.float32)
        packets = None
        for i, w in enumerate(workers):
            fault = None if retry else spec.faults.at(round, w)
            if fault is not None and fault.kind == "crash":
                os._exit(1)  # the process dies mid-call, as a machine failure would
            if fault is not None and fault.kind == "stall":
                time.sleep(fault.seconds)
            charged = tasks.take(w, plans[w])
            self.stopwatch.start()
            packet = self.encoders[w].encode(round, charged.partials)
            self.stopwatch.host_part()
            seconds[i] = charged.seconds + self.stopwatch.stop()
            tasks.release(w, plans[w])
            if packets is None:  # every packet of a scheme has one length
                packets = np.empty((m, packet.size), dtype=packet.dtype)
            packets[i] = np.nan if fault is not None and fault.kind == "nan" else packet
            loss_sum[i], samples[i] = charged.loss_sum, charged.samples
            if charged.model is not None:
                models[i] = charged.model
                buffers[i] = self.flat.buffer_vector().cpu().numpy()
        times = {"computing": computing, "computed": time.monotonic()}
        return HostReport(
            round, workers, packets, seconds, loss_sum, samples, buffers, models, times
        )

    def ready(self) -> int:
        """The actor's process id, once ``__init__`` is done (restarts change it)."""
        return os.getpid()

    def encoder_states(self) -> dict[int, dict]:
        """Each hosted worker's encoder state (a checkpoint stores it between rounds)."""
        return {w: encoder.state_dict() for w, encoder in self.encoders.items()}

    def load_encoder_states(self, states: Mapping[int, Mapping]) -> None:
        """Continue every hosted worker's encoder from ``states`` (a resumed run)."""
        for w in self.workers:
            self.encoders[w].load_state_dict(states[w])


class RayWorkerHost(WorkerHost):
    """The actor: fetches its shards from the object store first (again after a restart)."""

    def __init__(
        self, spec: WorkerSpec, workers: Sequence[int], shards: Mapping[int, ray.ObjectRef]
    ) -> None:
        super().__init__(spec, workers, dict(zip(shards, ray.get(list(shards.values())))))
        #: ``(round, report)`` of the last round's call (recomputations aside): sent again
        #: by :meth:`answer` when Ray loses the reply on its way back. It holds one round's
        #: packets of the hosted workers until the next round replaces them.
        self.answered: tuple[int, HostReport] | None = None

    def run_round(
        self,
        round: int,
        weights: Mapping[int, ray.ObjectRef],
        plans: Mapping[int, tuple[Task, ...]],
        retry: bool = False,
    ) -> HostReport:
        """:meth:`WorkerHost.run_round`, each distinct broadcast fetched once from the
        object store; the report's ``times`` hold every phase of :data:`PHASES`."""
        called = time.monotonic()
        refs = list(set(weights.values()))
        fetched = dict(zip(refs, ray.get(refs)))
        times = {"called": called, "fetched": time.monotonic()}
        report = super().run_round(round, {j: fetched[r] for j, r in weights.items()}, plans, retry)
        report.times.update(times, returned=time.monotonic())
        if not retry:
            self.answered = (round, report)
        return report

    def answer(self, round: int) -> HostReport | None:
        """The report of ``round``'s call again, for a server whose connection to this
        actor broke before the reply came (Ray's ``ActorUnavailableError``: the call may
        or may not have run); ``None`` if it did not run here. Calls run one at a time,
        so a call still running when this one is sent finishes first."""
        if self.answered is not None and self.answered[0] == round:
            return self.answered[1]
        return None

    def switch(self, scheme: Scheme, shards: Mapping[int, ray.ObjectRef]) -> None:
        """:meth:`WorkerHost.hold` the shards ``scheme`` names, fetched from the object store."""
        self.hold(scheme, dict(zip(shards, ray.get(list(shards.values())))))

    def node(self) -> str:
        """The id of the Ray node this actor runs on."""
        return ray.get_runtime_context().get_node_id()


def host_shards(scheme: Scheme, workers: Sequence[int]) -> list[int]:
    """The shards an actor hosting ``workers`` needs: those their placement names."""
    return sorted({j for w in workers for j in scheme.placement[w]})


def start_hosts(
    spec: WorkerSpec,
    groups: Sequence[Sequence[int]],
    shard_refs: Sequence[ray.ObjectRef],
    placement: Placement,
    name: str,
) -> list:
    """Start one named actor per group of logical workers, each with only its shards.

    Actor ``i`` takes bundle ``i`` of ``placement`` (granted before this is called).
    Returns at once: the caller waits, with a deadline, for the actors to come up
    (:class:`gclab.runtime.pool.WorkerPool`). Ray restarts a dead actor
    (``max_restarts``) by running ``__init__`` again: it fetches its shards from the
    object store and starts with fresh encoders.
    """
    actor_cls = ray.remote(RayWorkerHost)
    hosts = []
    for i, group in enumerate(groups):
        needed = host_shards(spec.scheme, group)
        actor = actor_cls.options(
            name=f"{name}-host{i}",
            **placement.options(i),
            max_restarts=MAX_RESTARTS,
            max_task_retries=0,
        )
        hosts.append(actor.remote(spec, list(group), {j: shard_refs[j] for j in needed}))
    return hosts


#: Restarts of one worker actor before the run gives up on it.
MAX_RESTARTS = 100
