"""SGD with momentum/Nesterov and weight decay, its learning-rate schedule, and the
weight a stale gradient gets (``train.stale_lr``)."""

from __future__ import annotations

from collections.abc import Iterable
from enum import Enum

import torch


class Schedule(Enum):
    constant = "constant"
    cosine = "cosine"  # cosine decay to 0 over the run
    step = "step"  # ×0.1 at 50% and 75% of the run


class StaleLR(Enum):
    """How a gradient computed ``τ`` updates ago enters the optimizer (``train.stale_lr``).

    ``scaled`` multiplies it by ``1/(1+τ)``, the staleness-dependent learning rate of
    Zhang et al. 2016 ("Staleness-aware async-SGD"), applied to the gradient rather than
    to the step: with momentum the stale gradient's whole contribution (now and through
    the momentum buffer later) shrinks, while the fresh gradients already in the buffer
    keep their weight. With momentum 0 and no weight decay it is their rule exactly.
    """

    constant = "constant"  # every gradient at full weight (plain SGD on stale gradients)
    scaled = "scaled"  # weight 1/(1+τ)


def stale_weight(rule: StaleLR, staleness: int) -> float:
    """The factor a gradient ``staleness`` updates old is multiplied by under ``rule``."""
    if staleness < 0:
        raise ValueError(f"staleness must be >= 0, got {staleness}.")
    return 1.0 / (1 + staleness) if rule is StaleLR.scaled else 1.0


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
