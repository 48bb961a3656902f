"""Plain single-process SGD on exactly the global batches a gclab run uses.

This is the yardstick for exactness (an exact scheme with tolerated erasures must end
at these weights) and for framework overhead (plain PyTorch in one process, which
``bench/overhead.py`` runs side by side with gclab).
:func:`train_stale` is the yardstick of ``train.pipeline=stale``: the same steps, each
gradient computed on the weights of the round that started its job.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

import torch
from torch import nn

from gclab.coding.contract import Part
from gclab.ml.batches import BatchPlan, Normalizer, shard_indices
from gclab.ml.data import ImageData
from gclab.ml.gradients import BatchMaker, FlatModel, loss_and_gradient

MakeOptimizer = Callable[[FlatModel], tuple[torch.optim.Optimizer, object]]


def _batch_maker(
    data: ImageData, k: int, batch_size: int, seed: int, augment: bool, device: str = "cpu"
) -> BatchMaker:
    """The run's k shards and per-job batches, all in this process, on ``device``."""
    shards = shard_indices(len(data.train_y), k, seed)
    plan = BatchPlan(tuple(len(s) for s in shards), batch_size // k, seed)
    local = {
        j: (data.train_x[idx].to(device), data.train_y[idx].to(device))
        for j, idx in enumerate(shards)
    }
    return BatchMaker(local, plan, Normalizer(*data.channel_stats(), device), augment)


def _gradient(
    flat: FlatModel, batches: BatchMaker, job: int, k: int, shards: Sequence[int] | None = None
) -> torch.Tensor:
    """Sum of the per-sample gradients of job's whole global batch at ``flat``'s weights;
    of the samples of ``shards`` only, times ``k / len(shards)``, when they are given."""
    parts = [batches(job, Part(j)) for j in (range(k) if shards is None else shards)]
    x = torch.cat([p[0] for p in parts])
    y = torch.cat([p[1] for p in parts])
    grad = loss_and_gradient(flat, x, y)[1]
    return grad if shards is None else grad * (k / len(shards))


def _step(
    flat: FlatModel, optimizer: torch.optim.Optimizer, scheduler, grad: torch.Tensor | None
) -> None:
    """One optimizer step on ``grad``; ``None`` takes none, and the schedule still advances."""
    if grad is not None:
        flat.set_grad(grad)
        optimizer.step()
    if scheduler is not None:
        scheduler.step()


def train_single_process(
    model: nn.Module,
    data: ImageData,
    k: int,
    batch_size: int,
    num_jobs: int,
    seed: int,
    augment: bool,
    make_optimizer: MakeOptimizer,
    jobs: Sequence[int] | None = None,
    device: str = "cpu",
    covered: Mapping[int, Sequence[int]] | None = None,
) -> FlatModel:
    """Train ``model`` for ``num_jobs`` steps; step i uses job i's whole global batch.

    ``jobs`` picks other jobs instead (e.g. ``range(m, J, T+1)``: one model of
    ``pipeline=interleaved``). ``device`` holds the model, the data and the batches.
    ``covered`` maps jobs to the shards ``network.recovery=partial`` applies of them: the
    sum of those shards' gradients rescaled by ``k / len(shards)``, no step for none
    (docs/design.md, "Partial recovery"); jobs it leaves out use their whole batch.
    """
    batches = _batch_maker(data, k, batch_size, seed, augment, device)
    flat = FlatModel(model.to(device))
    optimizer, scheduler = make_optimizer(flat)
    for job in range(num_jobs) if jobs is None else jobs:
        shards = None if covered is None else covered.get(job)
        grad = (
            None if shards is not None and not shards else _gradient(flat, batches, job, k, shards)
        )
        _step(flat, optimizer, scheduler, None if grad is None else grad / batch_size)
    return flat


def train_stale(
    model: nn.Module,
    data: ImageData,
    k: int,
    batch_size: int,
    seed: int,
    augment: bool,
    make_optimizer: MakeOptimizer,
    decoded: Sequence[Sequence[int]],
    scaled: bool = False,
) -> FlatModel:
    """One model trained as ``pipeline=stale`` prescribes, given when each job decodes.

    ``decoded[r]`` lists the jobs decoded in round r (job r's gradient is computed at the
    start of round r, on the weights every earlier step has produced); decoded jobs are
    applied strictly in job order, a job decoded early waiting for its predecessors.
    ``scaled`` weighs a gradient that is ``τ`` steps stale when applied by ``1/(1+τ)``.
    Jobs never decoded are never applied.
    """
    batches = _batch_maker(data, k, batch_size, seed, augment)
    flat = FlatModel(model)
    optimizer, scheduler = make_optimizer(flat)
    computed: dict[int, tuple[torch.Tensor, int]] = {}  # job -> (gradient, steps before it)
    ready: set[int] = set()
    steps = 0
    jobs = 1 + max((j for jobs_r in decoded for j in jobs_r), default=-1)
    for r, jobs_r in enumerate(decoded):
        if r < jobs:
            computed[r] = (_gradient(flat, batches, r, k), steps)
        ready.update(jobs_r)
        while steps in ready:
            grad, basis = computed.pop(steps)
            staleness = steps - basis
            weight = 1.0 / (1 + staleness) if scaled else 1.0
            _step(flat, optimizer, scheduler, grad * weight / batch_size)
            ready.discard(steps)
            steps += 1
    return flat
