"""The parameter server: the whole distributed training loop.

Per round: broadcast the weights once (``ray.put``), every actor computes and encodes
its logical workers' tasks, the round protocol decides which packets arrive in time
(virtual clock: measured compute times + modelled delays and losses), the scheme's
decoder turns them into gradients, and the optimizer steps in job order.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import ray
import torch
from tqdm import tqdm

from gclab.coding.base import Scheme
from gclab.ml.batches import BatchPlan, Normalizer, shard_indices
from gclab.ml.data import ImageData
from gclab.ml.gradients import FlatModel, evaluate
from gclab.network.protocol import RoundProtocol
from gclab.runtime.cluster import Cluster
from gclab.runtime.faults import Faults
from gclab.runtime.pool import WorkerPool
from gclab.runtime.worker import WorkerSpec
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
    checkpoint_every: int
    seed: int
    cluster: Cluster
    protocol: RoundProtocol
    faults: Faults
    resume: bool


class ParameterServer:
    """Holds the model and optimizer; applies decoded gradients strictly in job order."""

    def __init__(self, plan: TrainingPlan) -> None:
        torch.manual_seed(plan.seed)
        from hydra.utils import instantiate

        self.flat = FlatModel(instantiate(plan.model_cfg))
        self.optimizer, self.scheduler = plan.build_optimizer(self.flat)
        self.batch_size = plan.batch_size
        self.next_job = 0
        self._pending: dict[int, np.ndarray] = {}

    def state(self) -> np.ndarray:
        return self.flat.state_vector().numpy()

    def state_dict(self) -> dict:
        """Model, optimizer and schedule state, for the checkpoint."""
        return {
            "model": self.flat.model.state_dict(),
            "optimizer": self.optimizer.state_dict(),
            "scheduler": self.scheduler.state_dict() if self.scheduler else None,
            "next_job": self.next_job,
        }

    def load_state_dict(self, state: dict) -> None:
        self.flat.model.load_state_dict(state["model"])
        self.optimizer.load_state_dict(state["optimizer"])
        if self.scheduler is not None:
            self.scheduler.load_state_dict(state["scheduler"])
        self.next_job = state["next_job"]

    def submit(self, job: int, gradient_sum: np.ndarray) -> list[int]:
        """Queue job's decoded gradient sum; apply every job now in order. Returns applied."""
        self._pending[job] = gradient_sum
        applied = []
        while self.next_job in self._pending:
            grad = self._pending.pop(self.next_job)
            self.flat.set_grad(torch.from_numpy(grad / self.batch_size).float())
            self.optimizer.step()
            if self.scheduler is not None:
                self.scheduler.step()
            applied.append(self.next_job)
            self.next_job += 1
        return applied

    def set_buffers(self, buffers: list[np.ndarray]) -> None:
        """Average the workers' float buffers (batch-norm statistics) of the round."""
        if buffers and self.flat.num_buffers:
            state = self.flat.state_vector()
            state[self.flat.num_params :] = torch.from_numpy(np.mean(buffers, axis=0))
            self.flat.load_state_vector(state)


def train(plan: TrainingPlan, recorder: RunRecorder) -> dict:
    """Start the workers, run every round, and return the run summary."""
    plan.cluster.connect()
    pool, normalizer = _start_workers(plan)
    try:
        return _loop(plan, recorder, pool, normalizer)
    finally:
        pool.close()


def _loop(
    plan: TrainingPlan, recorder: RunRecorder, pool: WorkerPool, normalizer: Normalizer
) -> dict:
    """The distributed loop: broadcast, compute, collect, protocol, decode, step."""
    scheme, data = plan.scheme, plan.data
    server = ParameterServer(plan)
    decoder = scheme.decoder(server.flat.num_params)
    start = recorder.resume(server, plan.protocol) if plan.resume else 0
    packets: dict[tuple[int, int], np.ndarray] = {}  # (round, worker), kept T+1 rounds
    rounds = plan.num_jobs + scheme.T
    progress = tqdm(range(start, rounds), desc=scheme.describe(), unit="round", initial=start)
    for r in progress:
        wall_start = time.perf_counter()
        state_ref = ray.put(server.state())  # broadcast once: every actor reads this copy
        tasks = decoder.plan(r)
        reports, failed = pool.run_round(r, state_ref, tasks)
        packets.update({(r, w): rep.packet for w, rep in reports.items() if not failed[w]})
        for key in [key for key in packets if key[0] < r - scheme.T]:
            del packets[key]

        def payload(rr: int, w: int, state_ref=state_ref, tasks=tasks) -> np.ndarray:
            if (rr, w) not in packets:  # a failed packet that recovery needs
                packets[rr, w] = pool.refetch(rr, w, state_ref, tasks)
            return packets[rr, w]

        compute = np.array([reports[w].seconds if w in reports else 0.0 for w in range(scheme.n)])
        outcome = plan.protocol.run_round(r, compute, decoder, payload, failed)
        decode_start = time.perf_counter()
        applied = []
        for job in decoder.decodable():
            applied += server.submit(job, decoder.decode(job))
        decode_ms = 1e3 * (time.perf_counter() - decode_start)
        delivered = [w for w in reports if not outcome.erased[w]]
        server.set_buffers([reports[w].buffers for w in delivered])
        samples = sum(rep.samples for rep in reports.values())
        loss = sum(rep.loss_sum for rep in reports.values()) / max(samples, 1)
        wall = time.perf_counter() - wall_start
        faults = {"failed": int(failed.sum()), "failures_total": pool.failures}
        record = recorder.round(
            r, outcome, applied, decode_ms, loss, wall, compute.tolist(), faults
        )
        postfix = {"loss": f"{record['train_loss']:.3f}"}
        if plan.eval_every and ((r + 1) % plan.eval_every == 0 or r + 1 == rounds):
            acc, test_loss = evaluate(server.flat.model, data.test_x, data.test_y, normalizer)
            recorder.evaluation(r, acc, test_loss)
            postfix["acc"] = f"{acc:.3f}"
        progress.set_postfix(postfix)
        if plan.checkpoint_every and ((r + 1) % plan.checkpoint_every == 0 or r + 1 == rounds):
            recorder.checkpoint(r, server, plan.protocol)
    return recorder.summary()


def _start_workers(plan: TrainingPlan) -> tuple[WorkerPool, Normalizer]:
    """Shard the data into the object store (once) and start the worker actors."""
    scheme, data, cluster = plan.scheme, plan.data, plan.cluster
    shards = shard_indices(len(data.train_y), scheme.k, plan.seed)
    batches = BatchPlan(tuple(len(s) for s in shards), plan.batch_size // scheme.k, plan.seed)
    mean, std = data.channel_stats()
    spec = WorkerSpec(
        scheme, plan.model_cfg, batches, mean, std, plan.augment,
        cluster.threads_per_actor, plan.num_jobs, plan.faults,
    )  # fmt: skip
    shard_refs = [ray.put((data.train_x[idx], data.train_y[idx])) for idx in shards]
    pool = WorkerPool(
        spec, cluster.groups(), shard_refs, cluster.worker_cpus, cluster.worker_gpus,
        cluster.timeout, f"gclab-{uuid.uuid4().hex[:8]}",
    )  # fmt: skip
    return pool, Normalizer(mean, std)
