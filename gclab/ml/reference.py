"""Plain single-process SGD on exactly the global batches a gclab run uses.

This is the yardstick for exactness (an exact scheme with tolerated erasures must end
at these weights) and for framework overhead (the fastest this machine can train).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import torch
from torch import nn

from gclab.coding.base import Part
from gclab.ml.batches import BatchPlan, Normalizer, shard_indices
from gclab.ml.data import ImageData
from gclab.ml.gradients import BatchMaker, FlatModel, loss_and_gradient


def train_single_process(
    model: nn.Module,
    data: ImageData,
    k: int,
    batch_size: int,
    num_jobs: int,
    seed: int,
    augment: bool,
    make_optimizer: Callable[[FlatModel], tuple[torch.optim.Optimizer, object]],
    jobs: Sequence[int] | None = None,
    device: str = "cpu",
) -> FlatModel:
    """Train ``model`` for ``num_jobs`` steps; step i uses job i's whole global batch.

    ``jobs`` picks other jobs instead (e.g. ``range(m, J, T+1)``: one model of
    ``pipeline=interleaved``). ``device`` holds the model, the data and the batches.
    """
    shards = shard_indices(len(data.train_y), k, seed)
    plan = BatchPlan(tuple(len(s) for s in shards), batch_size // k, seed)
    local = {
        j: (data.train_x[idx].to(device), data.train_y[idx].to(device))
        for j, idx in enumerate(shards)
    }
    batches = BatchMaker(local, plan, Normalizer(*data.channel_stats(), device), augment)
    flat = FlatModel(model.to(device))
    optimizer, scheduler = make_optimizer(flat)
    for job in range(num_jobs) if jobs is None else jobs:
        parts = [batches(job, Part(j)) for j in range(k)]
        x = torch.cat([p[0] for p in parts])
        y = torch.cat([p[1] for p in parts])
        _, grad = loss_and_gradient(flat, x, y)
        flat.set_grad(grad / batch_size)
        optimizer.step()
        if scheduler is not None:
            scheduler.step()
    return flat
