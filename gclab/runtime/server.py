"""The parameter server: the whole distributed training loop.

Per round: broadcast the weights once (``ray.put``), every actor computes and encodes
its logical workers' tasks, the round protocol decides which packets arrive in time,
the scheme's decoder turns them into gradients, and the optimizer steps in job order.
With ``network.clock=virtual`` the protocol runs once every actor has answered, on
their measured compute times plus the modelled delays and losses; with
``network.clock=wall`` it runs while they answer, as a real delay line
(:mod:`gclab.network.wallclock`).
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
from gclab.network.wallclock import WallClockProtocol
from gclab.runtime.cluster import Cluster
from gclab.runtime.faults import Faults
from gclab.runtime.placement import Placement
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
    models: int  # 1 (pipeline=stale) or T+1 (pipeline=interleaved)


class ParameterServer:
    """Holds the model(s) and optimizers; applies decoded gradients strictly in job order.

    ``pipeline=stale`` trains one model: job t is computed on the newest weights, so its
    gradient is up to T steps stale. ``pipeline=interleaved`` trains T+1 models from the
    same initial weights, job t on model t mod (T+1): each model then gets exact
    synchronous SGD on its own jobs (its previous job is due before its next starts).
    """

    def __init__(self, plan: TrainingPlan) -> None:
        from hydra.utils import instantiate

        self.device = torch.device(plan.cluster.server_device)
        self.models: list[FlatModel] = []
        self.optimizers, self.schedulers = [], []
        for _ in range(plan.models):
            torch.manual_seed(plan.seed)  # every model starts from the same weights
            flat = FlatModel(instantiate(plan.model_cfg).to(self.device))
            optimizer, scheduler = plan.build_optimizer(flat)
            self.models.append(flat)
            self.optimizers.append(optimizer)
            self.schedulers.append(scheduler)
        self.num_params = self.models[0].num_params
        self.batch_size = plan.batch_size
        self.next_job = 0
        self._pending: dict[int, np.ndarray] = {}

    def state(self) -> np.ndarray:
        """Every model's parameters and buffers, concatenated: one broadcast per round."""
        return torch.cat([m.state_vector() for m in self.models]).cpu().numpy()

    def submit(self, job: int, gradient_sum: np.ndarray) -> list[int]:
        """Queue job's decoded gradient sum; apply every job now in order. Returns applied."""
        self._pending[job] = gradient_sum
        applied = []
        while self.next_job in self._pending:
            grad = self._pending.pop(self.next_job)
            i = self.next_job % len(self.models)
            grad = torch.from_numpy(grad / self.batch_size).float().to(self.device)
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
        DESIGN.md promises; ``models``/``optimizers``/``schedulers`` hold all of them.
        """
        return {
            "model": self.models[0].model.state_dict(),
            "optimizer": self.optimizers[0].state_dict(),
            "models": [m.model.state_dict() for m in self.models],
            "optimizers": [o.state_dict() for o in self.optimizers],
            "schedulers": [s.state_dict() if s else None for s in self.schedulers],
            "next_job": self.next_job,
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

    def evaluate(self, data: ImageData, normalizer: Normalizer) -> tuple[float, float]:
        """Test accuracy and loss, averaged over the models (one model: its own)."""
        results = [evaluate(m.model, data.test_x, data.test_y, normalizer) for m in self.models]
        return float(np.mean([a for a, _ in results])), float(np.mean([l for _, l in results]))


def train(plan: TrainingPlan, recorder: RunRecorder) -> dict:
    """Start the workers, run every round, and return the run summary."""
    torch.set_num_threads(plan.cluster.server_threads)
    plan.cluster.connect()
    pool, normalizer = _start_workers(plan)
    cluster = plan.cluster
    recorder.extra.update(
        actors=len(pool.groups), compute_time=cluster.compute_time.value, device=cluster.device,
        nodes=len(set(pool.nodes)),
    )  # fmt: skip
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
    decoder = scheme.decoder(server.num_params)
    start = recorder.resume(server, plan.protocol) if plan.resume else 0
    packets: dict[tuple[int, int], np.ndarray] = {}  # (round, worker), kept T+1 rounds
    rounds = plan.num_jobs + scheme.T
    progress = tqdm(range(start, rounds), desc=scheme.describe(), unit="round", initial=start)
    for r in progress:
        wall_start = time.perf_counter()
        state_ref = ray.put(server.state())  # broadcast once: every actor reads this copy
        tasks = decoder.plan(r)
        calls = pool.submit(r, state_ref, tasks)
        for key in [key for key in packets if key[0] < r - scheme.T]:
            del packets[key]

        def payload(
            rr: int, w: int, r=r, state_ref=state_ref, tasks=tasks, calls=calls
        ) -> np.ndarray:
            if (rr, w) not in packets:
                if rr == r and w in calls.reports and not calls.failed[w]:  # just came back
                    packets[rr, w] = calls.reports[w].packet
                else:  # a failed packet that recovery needs
                    packets[rr, w] = pool.refetch(rr, w, state_ref, tasks)
            return packets[rr, w]

        if isinstance(plan.protocol, WallClockProtocol):
            outcome = plan.protocol.run_wall_round(r, calls, decoder, payload, start=calls.sent)
            reports, failed = calls.reports, calls.failed
        else:
            reports, failed = calls.finish()
            compute = [reports[w].seconds if w in reports else 0.0 for w in range(scheme.n)]
            outcome = plan.protocol.run_round(r, np.array(compute), decoder, payload, failed)
        packets.update({(r, w): rep.packet for w, rep in reports.items() if not failed[w]})
        # decode latency: coefficient lookup + combine, not the optimizer step
        decode_start = time.perf_counter()
        # drain rounds (r >= num_jobs) start jobs that do not exist: never decode them
        decoded = [j for j in decoder.decodable() if j < plan.num_jobs]
        gradients = [decoder.decode(job) for job in decoded]
        decode_ms = 1e3 * (time.perf_counter() - decode_start)
        applied = [a for job, g in zip(decoded, gradients) for a in server.submit(job, g)]
        server.set_buffers([rep for w, rep in reports.items() if not outcome.erased[w]])
        samples = sum(rep.samples for rep in reports.values())
        loss = sum(rep.loss_sum for rep in reports.values()) / max(samples, 1)
        wall = time.perf_counter() - wall_start
        faults = {"failed": int(failed.sum()), "failures_total": pool.failures}
        record = recorder.round(
            r, outcome, decoded, applied, decode_ms, loss, wall, outcome.compute.tolist(), faults
        )
        postfix = {"loss": f"{record['train_loss']:.3f}"}
        if plan.eval_every and ((r + 1) % plan.eval_every == 0 or r + 1 == rounds):
            acc, test_loss = server.evaluate(data, normalizer)
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
        cluster.threads_per_actor, plan.num_jobs, plan.faults, plan.models,
        cluster.compute_time, cluster.device, cluster.bf16,
    )  # fmt: skip
    shard_refs = [ray.put((data.train_x[idx], data.train_y[idx])) for idx in shards]
    groups = cluster.groups(one_per_worker=isinstance(plan.protocol, WallClockProtocol))
    placement = Placement(len(groups), cluster.worker_cpus, cluster.worker_gpus, cluster.placement)
    pool = WorkerPool(
        spec, groups, shard_refs, placement, cluster.timeout, f"gclab-{uuid.uuid4().hex[:8]}"
    )
    return pool, Normalizer(mean, std, cluster.server_device)  # evaluation on the server
