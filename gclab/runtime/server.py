"""The parameter server: the whole distributed training loop.

Per round: broadcast the weights once (``ray.put``), every actor computes and encodes
its logical workers' tasks (those of job t on round t's broadcast, kept T rounds), the
round protocol decides which packets arrive in time, the scheme's decoder turns them into
gradients, the optimizer steps in job order, and the protocol charges that server work
to the clock (``network.server_time``).
The protocol takes the round's actor calls as its arrival source: with
``network.clock=virtual`` it waits for every actor and runs on their measured compute
times plus the modelled delays and losses; with ``network.clock=wall`` it runs while
they answer, as a real delay line (:mod:`gclab.network.clock`).
"""

from __future__ import annotations

import logging
import os
import time
import uuid
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any

import numpy as np
import ray
import scipy.linalg.cython_blas  # noqa: F401  (numba's compiled BLAS calls: see train)
import torch
from threadpoolctl import threadpool_limits
from tqdm import tqdm

from gclab.coding.contract import Decoder, Scheme
from gclab.errors import DivergedError, under
from gclab.ml.batches import BatchPlan, Normalizer, shard_indices
from gclab.ml.data import ImageData
from gclab.ml.gradients import FlatModel, evaluate
from gclab.ml.models import init_seed
from gclab.ml.optim import StaleLR, stale_weight
from gclab.network.protocol import RoundProtocol
from gclab.runtime.cluster import Cluster
from gclab.runtime.faults import Faults
from gclab.runtime.placement import Placement
from gclab.runtime.pool import Pool, WorkerPool
from gclab.runtime.switch import switch
from gclab.runtime.timeline import round_timeline
from gclab.runtime.timing import Stopwatch, resolve
from gclab.runtime.worker import Shard, WorkerSpec
from gclab.tracking.run import RunRecorder

log = logging.getLogger(__name__)


@dataclass
class TrainingPlan:
    """Everything the loop needs, built and validated before Ray starts."""

    scheme: Scheme
    model_cfg: dict
    build_optimizer: Callable[[FlatModel], tuple[torch.optim.Optimizer, object]]
    data: ImageData
    augment: bool
    batch_size: int
    num_jobs: int
    eval_every: int
    stop_at_target: bool  # end at the first evaluation that reaches the target accuracy
    time_budget: float | None  # virtual seconds: end once the clock reaches them (None: no end)
    eval_subset: torch.Tensor | None  # test images of the periodic evaluations (None: all)
    checkpoint_every: int
    seed: int
    cluster: Cluster
    protocol: RoundProtocol
    faults: Faults
    resume: bool
    models: int  # 1 (pipeline=stale) or train.models (pipeline=interleaved, >= T+1)
    stale_lr: StaleLR  # weight of a stale gradient
    lrs: list[float] | None = None  # each model's learning rate (None: the optimizer's own)
    #: a subset evaluation at or above the target is repeated on the whole test set, and
    #: only whole-set evaluations mark the target reached (train.confirm_target)
    confirm_target: bool = False
    #: re-chooses the scheme online (adapt=search, gclab/adapt/decide.py); None: adapt=off
    adapt: Any = None


class ParameterServer:
    """Holds the model(s) and optimizers; applies decoded gradients strictly in job order.

    ``pipeline=stale`` trains one model: job t is computed on the newest weights, so its
    gradient is up to T steps stale. ``pipeline=interleaved`` trains M >= T+1 models,
    model i from the initial weights of :func:`~gclab.ml.models.init_seed` at its own
    learning rate, job t on model t mod M: each model then gets exact synchronous SGD on
    its own jobs (its previous job is due before its next starts).

    A job's *staleness* is the number of updates its model received between the round
    that computed its gradient (:meth:`start`) and the update that applies it: at most
    T with ``stale``, always 0 with ``interleaved``. ``stale_lr`` weighs the gradient by it.
    """

    def __init__(self, plan: TrainingPlan) -> None:
        from hydra.utils import instantiate

        self.device = torch.device(plan.cluster.server_device)
        self.models: list[FlatModel] = []
        self.optimizers, self.schedulers = [], []
        lrs = plan.lrs or [None] * plan.models
        for i in range(plan.models):
            torch.manual_seed(init_seed(plan.seed, i))
            flat = FlatModel(instantiate(plan.model_cfg).to(self.device))
            optimizer, scheduler = plan.build_optimizer(flat, lrs[i])
            self.models.append(flat)
            self.optimizers.append(optimizer)
            self.schedulers.append(scheduler)
        self.num_params = self.models[0].num_params
        self.batch_size = plan.batch_size
        self.stale_lr = plan.stale_lr
        self.next_job = 0
        self._pending: dict[int, np.ndarray] = {}
        self._started: dict[int, int] = {}  # job -> next_job when its round broadcast

    def start(self, job: int) -> None:
        """Job's gradient is computed on the weights broadcast now: note how fresh they are."""
        self._started[job] = self.next_job

    def staleness(self, job: int) -> int:
        """Updates job's model got since its weights were broadcast (job is the next to apply)."""
        return (job - self._started[job]) // len(self.models)

    def state(self) -> np.ndarray:
        """Every model's parameters and buffers, concatenated: one broadcast per round."""
        return torch.cat([m.state_vector() for m in self.models]).cpu().numpy()

    def submit(self, job: int, gradient_sum: np.ndarray | None) -> list[int]:
        """Queue job's decoded gradient sum; apply every job now in order. Returns applied.

        ``None`` (a partial job that covers nothing) applies no step; the schedule still
        advances, so later jobs get the learning rate of an exact run.
        """
        self._pending[job] = gradient_sum
        applied = []
        while self.next_job in self._pending:
            grad = self._pending.pop(self.next_job)
            i = self.next_job % len(self.models)
            weight = stale_weight(self.stale_lr, self.staleness(self.next_job))
            del self._started[self.next_job]
            if grad is not None:
                grad = torch.from_numpy(grad * weight / self.batch_size).float().to(self.device)
                self.models[i].set_grad(grad)
                self.optimizers[i].step()
            if self.schedulers[i] is not None:
                self.schedulers[i].step()
            applied.append(self.next_job)
            self.next_job += 1
        return applied

    def set_buffers(self, reports: list) -> None:
        """Average the float buffers (batch-norm statistics) workers report, per model."""
        for i, flat in enumerate(self.models):
            buffers = [rep.buffers for rep in reports if rep.model == i]
            if buffers and flat.num_buffers:
                state = flat.state_vector()
                state[flat.num_params :] = torch.from_numpy(np.mean(buffers, axis=0)).to(state)
                flat.load_state_vector(state)

    def state_dict(self) -> dict:
        """Models, optimizers and schedules for the checkpoint.

        ``model``/``optimizer`` are model 0's (the only one unless interleaved), the keys
        docs/design.md (architecture) names; ``models``/``optimizers``/``schedulers`` hold
        all of them;
        ``pending`` the decoded gradients still waiting for an earlier job (T > 0).
        """
        return {
            "model": self.models[0].model.state_dict(),
            "optimizer": self.optimizers[0].state_dict(),
            "models": [m.model.state_dict() for m in self.models],
            "optimizers": [o.state_dict() for o in self.optimizers],
            "schedulers": [s.state_dict() if s else None for s in self.schedulers],
            "next_job": self.next_job,
            "started": dict(self._started),
            "pending": {job: torch.from_numpy(g) for job, g in self._pending.items()},
        }

    def load_state_dict(self, state: dict) -> None:
        for flat, weights in zip(self.models, state["models"]):
            flat.model.load_state_dict(weights)
        for optimizer, saved in zip(self.optimizers, state["optimizers"]):
            optimizer.load_state_dict(saved)
        for scheduler, saved in zip(self.schedulers, state["schedulers"]):
            if scheduler is not None:
                scheduler.load_state_dict(saved)
        self.next_job = state["next_job"]
        # checkpoints from before train.stale_lr lack it; they hold no job in flight (T = 0)
        self._started = dict(state.get("started", {}))
        self._pending = {job: g.numpy() for job, g in state["pending"].items()}

    def evaluate(
        self, data: ImageData, normalizer: Normalizer, subset: torch.Tensor | None = None
    ) -> list[tuple[float, float]]:
        """Each model's test accuracy and loss on the test images ``subset`` indexes
        (None: all).

        On every core this process may use: the workers wait for the evaluation, and a
        CPU forward pass gives the numbers of one thread (tests/runtime/test_server.py).
        """
        threads = torch.get_num_threads()
        torch.set_num_threads(max(threads, usable_cores()))
        try:
            x, y = data.test_x, data.test_y
            if subset is not None:
                x, y = x[subset], y[subset]
            return [evaluate(m.model, x, y, normalizer) for m in self.models]
        finally:
            torch.set_num_threads(threads)


def usable_cores() -> int:
    """Cores this process may run on (its affinity mask where the OS has one)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS, Windows
        return os.cpu_count() or 1


#: Starts a run's workers from its plan, the workers' spec and the data shards.
PoolFactory = Callable[[TrainingPlan, WorkerSpec, list[Shard]], Pool]


def train(
    plan: TrainingPlan, record: Callable[[], RunRecorder], start_pool: PoolFactory | None = None
) -> dict:
    """Start the workers, open the run's record (``record()``), run every round, and
    return the run summary; the record is closed however the run ends.

    The record opens once the workers are up, so a run refused for want of a cluster or
    of room on it (:class:`~gclab.errors.ConfigError`) writes none. ``start_pool``
    defaults to :func:`ray_pool`: one Ray actor per group of logical workers. Tests pass
    pools with the same interface that run in this process.
    """
    torch.set_num_threads(plan.cluster.server_threads)
    spec, shards, normalizer = worker_setup(plan)
    cluster = plan.cluster
    recorder, summary = None, None
    with ExitStack() as stack:
        if start_pool is None:  # Ray's: where it runs is the cluster's (cluster=netns: a box)
            stack.enter_context(cluster.running())
        pool = (start_pool or ray_pool)(plan, spec, shards)
        try:
            recorder = record()
            recorder.extra.update(
                actors=len(pool.groups), compute_time=cluster.compute_time.value,
                device=cluster.device, nodes=len(set(pool.nodes)), processors=pool.processors,
            )  # fmt: skip
            recorder.extra.update(cluster.layout(pool.nodes, pool.groups))
            # BLAS gets the driver's threads too: a pool of idle BLAS threads spin-waits, and
            # under load that waiting lands on the clock. The limit reaches the libraries
            # loaded now: numpy's, and scipy's that numba-compiled code calls (imported above)
            with threadpool_limits(limits=cluster.server_threads, user_api="blas"):
                summary = _loop(plan, recorder, pool, normalizer)
            traffic = cluster.traffic()
            if traffic:
                recorder.extra.update(traffic)
                summary = recorder.summary()
            return summary
        finally:
            try:
                pool.close()
            finally:
                if recorder is not None:
                    recorder.close(summary, failed=summary is None)


def _loop(plan: TrainingPlan, recorder: RunRecorder, pool: Pool, normalizer: Normalizer) -> dict:
    """The distributed loop: broadcast, compute, collect, protocol, decode, step."""
    scheme = plan.scheme
    server = ParameterServer(plan)
    decoder = scheme.decoder(server.num_params)
    packets: dict[tuple[int, int], np.ndarray] = {}  # (round, worker), kept T+1 rounds
    # round -> (the weights broadcast then, their handle), kept T+1 rounds: every task of
    # job t is computed on round t's, as the SGC papers' workers keep job t's model
    broadcasts: dict[int, tuple[np.ndarray, Any]] = {}
    # the server's work, measured as a worker's compute is (CPU time of this thread with one
    # torch thread), so other load on the machine does not inflate network.server_time
    cluster = plan.cluster
    server_watch = Stopwatch(resolve("auto", cluster.server_device, cluster.server_threads))
    start = 0
    if plan.resume:
        start, coding = recorder.resume(server, plan.protocol)
        if coding is not None:  # None: the run had finished, nothing is left to run
            if plan.adapt is not None and (chosen := plan.adapt.load_state_dict(coding["adapt"])):
                scheme = chosen  # the scheme it had switched to
                decoder, plan.protocol = switch(scheme, pool, plan.protocol, server.num_params)
            decoder.load_state_dict(coding["decoder"])
            packets.update(coding["packets"])
            pool.load_state_dict(coding["pool"])
            broadcasts.update({t: (a, pool.broadcast(a)) for t, a in coding["broadcasts"].items()})
    rounds = plan.num_jobs + scheme.T
    progress = tqdm(range(start, rounds), desc=scheme.describe(), unit="round", initial=start)
    done = server.next_job >= plan.num_jobs
    for r in progress:
        if plan.adapt is not None and r < plan.num_jobs and plan.adapt.due(r):
            chosen = plan.adapt.decide(r, plan.protocol.clock)  # job r - 1 is decoded (T = 0)
            if chosen is not None:
                scheme = chosen
                decoder, plan.protocol = switch(scheme, pool, plan.protocol, server.num_params)
                packets.clear()
        decoder.begin_round(r)  # the round hook: a dynamic plan is fixed now
        if not plan.protocol.runs(r, plan.num_jobs, decoder):  # e.g. nothing left to do
            continue
        wall_start = time.perf_counter()
        stamps = {"top": time.monotonic()}  # the driver's phases (wall clock: recorded)
        state = server.state()
        if not np.isfinite(state).all():  # every worker would send non-finite packets
            rates = ", ".join(f"{lr:g}" for lr in plan.lrs or [])
            raise DivergedError(
                f"training diverged: after {server.next_job} jobs (round {r}) the weights hold "
                f"non-finite values; lower the learning rate (train.lr{'s' if ',' in rates else ''}"
                f"{' ' + rates if rates else ''})."
            )
        stamps["put"] = time.monotonic()
        broadcasts[r] = state, pool.broadcast(state)  # once: every worker reads this copy
        if r < plan.num_jobs:
            server.start(r)
        tasks = decoder.plan(r)
        jobs = {t.job for worker in tasks for t in worker if t.job < plan.num_jobs}
        weights = {job: broadcasts[job][1] for job in jobs}
        calls = pool.submit(r, weights, tasks)
        for key in [key for key in packets if key[0] < r - scheme.T]:
            del packets[key]
        for old in [t for t in broadcasts if t < r - scheme.T]:
            del broadcasts[old]

        def payload(rr: int, w: int, r=r, weights=weights, tasks=tasks, calls=calls) -> np.ndarray:
            if (rr, w) not in packets:
                if rr == r and w in calls.reports and not calls.failed[w]:  # just came back
                    packets[rr, w] = calls.reports[w].packet
                else:  # a failed packet that recovery needs
                    packets[rr, w] = pool.refetch(rr, w, weights, tasks)
            return packets[rr, w]

        outcome = plan.protocol.run_round(r, calls, decoder, payload)
        stamps["closed"] = time.monotonic()
        reports, failed = calls.reports, calls.failed
        packets.update({(r, w): rep.packet for w, rep in reports.items() if not failed[w]})
        # decode latency: coefficient lookup + combine, not the optimizer step
        decode_start = time.perf_counter()
        server_watch.start()
        # drain rounds (r >= num_jobs) start jobs that do not exist: never decode them
        decoded = [j for j in decoder.decodable() if j < plan.num_jobs]
        gradients = [decoder.decode(job) for job in decoded]
        coverage = [scheme.decoded_coverage] * len(decoded)
        for job in outcome.partial:  # recovery=partial: what arrived, rescaled
            gradient, covered = decoder.decode_partial(job)
            decoded.append(job)
            gradients.append(gradient)
            coverage.append(covered)
        decode_ms = 1e3 * (time.perf_counter() - decode_start)
        applied = [a for job, g in zip(decoded, gradients) for a in server.submit(job, g)]
        # the server's work on the clock (network.server_time): decode and optimizer steps
        server_watch.host_part()
        server_seconds = server_watch.stop()
        outcome = plan.protocol.charge(outcome, server_seconds)
        stamps["served"] = time.monotonic()
        if plan.adapt is not None:
            plan.adapt.observe(outcome, plan.protocol, scheme)
        server.set_buffers([rep for w, rep in reports.items() if not outcome.erased[w]])
        samples = sum(rep.samples for rep in reports.values())
        loss = sum(rep.loss_sum for rep in reports.values()) / max(samples, 1)
        wall = time.perf_counter() - wall_start
        faults = {"failed": int(failed.sum()), "failures_total": pool.failures}
        # the wall clock's compute_s is when results came back; keep what workers measured,
        # and when each piece of the round happened
        wall_clock = plan.protocol.network.clock == "wall"
        worker = calls.seconds(np.arange(scheme.n)).tolist() if wall_clock else None
        timeline = round_timeline(calls.sent, stamps, reports, scheme.n) if wall_clock else None
        record = recorder.round(
            r, outcome, decoded, applied, decode_ms, loss, wall, outcome.compute.tolist(), faults,
            1e3 * server_seconds, float(np.mean(coverage)) if coverage else scheme.decoded_coverage,
            worker, timeline,
        )  # fmt: skip
        postfix = {"loss": f"{record['train_loss']:.3f}"}
        finished = not done and server.next_job >= plan.num_jobs  # the last job is applied
        done = done or finished
        whole = None  # whether this round's evaluation, if any, used the whole test set
        if plan.eval_every and ((r + 1) % plan.eval_every == 0 or finished):
            whole = finished or plan.eval_subset is None
            accuracy = _evaluate(r, whole, plan, server, normalizer, recorder)
            if not whole and plan.confirm_target and recorder.unconfirmed(accuracy):
                whole = True  # the subset says a model crossed: the whole test set decides
                accuracy = _evaluate(r, whole, plan, server, normalizer, recorder)
            postfix["acc"] = f"{np.mean(accuracy):.3f}"
        progress.set_postfix(postfix, refresh=False)  # redrawn at tqdm's own interval
        budget = plan.time_budget is not None and recorder.virtual_time >= plan.time_budget
        stop = budget or (plan.stop_at_target and recorder.time_to_target is not None)
        if stop and plan.eval_every and not whole:  # the last evaluation takes every image
            _evaluate(r, True, plan, server, normalizer, recorder)
        last = finished or stop
        if plan.checkpoint_every and ((r + 1) % plan.checkpoint_every == 0 or last):
            _checkpoint(r, last, recorder, server, plan, decoder, packets, broadcasts, pool)
        if stop:
            break
    if plan.adapt is not None:
        recorder.extra.update(plan.adapt.summary())
    return recorder.summary()


def _evaluate(
    r: int,
    whole: bool,
    plan: TrainingPlan,
    server: ParameterServer,
    normalizer: Normalizer,
    recorder: RunRecorder,
) -> list[float]:
    """Evaluate every model after round ``r`` on the whole test set or on
    ``plan.eval_subset``, and record it; returns each model's test accuracy. With
    ``plan.confirm_target`` only a whole-set evaluation can mark the target reached."""
    subset = None if whole else plan.eval_subset
    results = server.evaluate(plan.data, normalizer, subset)
    images = len(plan.data.test_y) if subset is None else len(subset)
    counts = whole or not plan.confirm_target
    recorder.evaluation(r, [a for a, _ in results], [loss for _, loss in results], images, counts)
    return [a for a, _ in results]


def _checkpoint(
    r: int,
    last: bool,
    recorder: RunRecorder,
    server: ParameterServer,
    plan: TrainingPlan,
    decoder: Decoder,
    packets: dict[tuple[int, int], np.ndarray],
    broadcasts: dict[int, tuple[np.ndarray, Any]],
    pool: Pool,
) -> None:
    """Write the checkpoint after round ``r``, with what the later rounds need to resume.

    That is the decoder's state, the packets recovery may still ask for (those of rounds
    >= the oldest job not applied: ``wanted`` names no earlier round), the weights of
    the rounds whose jobs later rounds still compute, the workers' encoder states and,
    with ``adapt=search``, the controller's state (window and switches); after the last
    round nothing (``coding=None``).
    """
    coding = None
    if not last:
        pool_state = pool.state_dict()
        if pool_state is None:
            return  # an actor did not answer in time: the previous checkpoint stays
        keep = {key: p for key, p in packets.items() if key[0] >= server.next_job}
        weights = {t: a for t, (a, _) in broadcasts.items()}
        coding = {
            "decoder": decoder.state_dict(), "packets": keep, "pool": pool_state,
            "broadcasts": weights,
        }  # fmt: skip
        if plan.adapt is not None:
            coding["adapt"] = plan.adapt.state_dict()
    recorder.checkpoint(r, server, plan.protocol, coding)


def worker_setup(plan: TrainingPlan) -> tuple[WorkerSpec, list[Shard], Normalizer]:
    """What every worker host is built from, the data shards, and the input normalizer.

    The normalizer is the server's: it evaluates on ``cluster.server_device``.
    """
    scheme, data, cluster = plan.scheme, plan.data, plan.cluster
    shards = shard_indices(len(data.train_y), scheme.k, plan.seed)
    batches = BatchPlan(tuple(len(s) for s in shards), plan.batch_size // scheme.k, plan.seed)
    mean, std = data.channel_stats()
    spec = WorkerSpec(
        scheme, plan.model_cfg, batches, mean, std, plan.augment,
        cluster.threads_per_actor, plan.num_jobs, plan.faults, plan.models,
        cluster.compute_time, cluster.device, cluster.bf16,
    )  # fmt: skip
    shard_data = [(data.train_x[idx], data.train_y[idx]) for idx in shards]
    return spec, shard_data, Normalizer(mean, std, cluster.server_device)


def ray_pool(plan: TrainingPlan, spec: WorkerSpec, shards: list[Shard]) -> WorkerPool:
    """Connect to Ray, put the shards into the object store (once), start the actors."""
    cluster = plan.cluster
    with under("cluster"):  # a GPU the joined cluster lacks: the key the user typed
        cluster.connect()
    shard_refs = [ray.put(shard) for shard in shards]
    groups = cluster.groups(one_per_worker=plan.protocol.network.clock == "wall")
    placement = Placement(
        len(groups), cluster.worker_cpus, cluster.worker_gpus, cluster.placement,
        cluster.pins(len(groups)),
    )  # fmt: skip
    return WorkerPool(
        spec, groups, shard_refs, placement, cluster.timeout, f"gclab-{uuid.uuid4().hex[:8]}"
    )
