"""SGD with momentum/Nesterov and weight decay, and its learning-rate schedule."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

import torch


class Schedule(Enum):
    constant = "constant"
    cosine = "cosine"  # cosine decay to 0 over the run
    step = "step"  # ×0.1 at 50% and 75% of the run


def make_optimizer(
    params: Iterable[torch.nn.Parameter],
    lr: float,
    momentum: float,
    nesterov: bool,
    weight_decay: float,
    schedule: Schedule,
    total_steps: int,
) -> tuple[torch.optim.SGD, torch.optim.lr_scheduler.LRScheduler | None]:
    """The optimizer and its per-step scheduler (``None`` for a constant rate)."""
    optimizer = torch.optim.SGD(
        params, lr=lr, momentum=momentum, nesterov=nesterov, weight_decay=weight_decay
    )
    if schedule is Schedule.cosine:
        return optimizer, torch.optim.lr_scheduler.CosineAnnealingLR(optimizer, total_steps)
    if schedule is Schedule.step:
        milestones = [total_steps // 2, (3 * total_steps) // 4]
        return optimizer, torch.optim.lr_scheduler.MultiStepLR(optimizer, milestones, 0.1)
    return optimizer, None
