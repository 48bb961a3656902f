"""Partial gradients of parts of jobs, and the flat vectors parameters travel as.

Parameters (and floating-point buffers such as batch-norm statistics) travel as one
flat float32 vector: one ``ray.put`` per round, zero-copy on the workers' side.
"""

from __future__ import annotations

import warnings

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from gclab.coding.contract import Part
from gclab.ml.batches import BatchPlan, Normalizer, augment


class FlatModel:
    """A model whose state is read and written as flat float32 vectors."""

    def __init__(self, model: nn.Module) -> None:
        self.model = model
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.buffers = [b for b in model.buffers() if b.is_floating_point()]
        self.num_params = sum(p.numel() for p in self.params)
        self.num_buffers = sum(b.numel() for b in self.buffers)

    def state_vector(self) -> torch.Tensor:
        """Parameters, then float buffers, as one new float32 vector."""
        return torch.cat([t.detach().reshape(-1) for t in [*self.params, *self.buffers]])

    @torch.no_grad()
    def load_state_vector(self, vector: torch.Tensor | np.ndarray) -> None:
        """Copy ``vector`` into the model; a read-only (zero-copy Ray) array is fine.

        On a GPU the whole vector crosses to the device in one copy.
        """
        with warnings.catch_warnings():  # only read here, so non-writable memory is safe
            warnings.filterwarnings("ignore", message="The given NumPy array is not writable")
            vector = torch.as_tensor(vector).to(self.params[0].device)
        offset = 0
        for t in [*self.params, *self.buffers]:
            t.copy_(vector[offset : offset + t.numel()].view_as(t))
            offset += t.numel()

    def buffer_vector(self) -> torch.Tensor:
        if not self.buffers:
            return torch.empty(0)
        return torch.cat([b.detach().reshape(-1) for b in self.buffers])

    @torch.no_grad()
    def set_grad(self, vector: torch.Tensor) -> None:
        offset = 0
        for p in self.params:
            p.grad = vector[offset : offset + p.numel()].view_as(p).clone()
            offset += p.numel()

    def grad_vector(self) -> torch.Tensor:
        return torch.cat([p.grad.reshape(-1) for p in self.params])


class BatchMaker:
    """Turns (job, part) into a normalised, augmented float batch from local shards."""

    def __init__(
        self,
        shards: dict[int, tuple[torch.Tensor, torch.Tensor]],
        plan: BatchPlan,
        normalizer: Normalizer,
        augment: bool,
    ) -> None:
        self.shards, self.plan, self.normalize, self.augment = shards, plan, normalizer, augment

    def __call__(self, job: int, part: Part) -> tuple[torch.Tensor, torch.Tensor]:
        x_all, y_all = self.shards[part.shard]  # on the worker's device: so is the batch
        pos = torch.from_numpy(self.plan.positions(job, part)).to(x_all.device)
        x, y = x_all[pos], y_all[pos]
        if self.augment:
            x = augment(x, *self.plan.augmentation(job, part))
        return self.normalize(x), y


def loss_and_gradient(
    flat: FlatModel, x: torch.Tensor, y: torch.Tensor, bf16: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum (not mean) of per-sample losses and its gradient, as a flat float32 vector.

    Sums make partial gradients add up to the batch gradient: Σ_parts g_part = g_batch.
    The loss comes back as a 0-d tensor on the model's device, so that a GPU worker does
    not wait for each task. ``bf16`` runs the forward pass under bfloat16 autocast (the
    backward pass follows its dtypes; parameters and gradients stay float32).
    """
    for p in flat.params:
        p.grad = None
    flat.model.train()
    with torch.autocast(x.device.type, dtype=torch.bfloat16, enabled=bf16):
        loss = F.cross_entropy(flat.model(x), y, reduction="sum")
    loss.backward()
    return loss.detach(), flat.grad_vector()


def to_host(t: torch.Tensor) -> torch.Tensor:
    """``t`` itself on the CPU; otherwise a copy into pinned host memory, started now.

    The copy is asynchronous: wait for the device's stream before reading it.
    """
    if t.device.type == "cpu":
        return t
    return torch.empty(t.shape, dtype=t.dtype, pin_memory=True).copy_(t, non_blocking=True)


@torch.no_grad()
def evaluate(
    model: nn.Module,
    x: torch.Tensor,
    y: torch.Tensor,
    normalizer: Normalizer,
    batch_size: int = 250,
) -> tuple[float, float]:
    """Test accuracy and mean loss over the whole set, on the model's device.

    Batches of 250 keep a CPU forward pass of the small CNN in cache (1.4–1.7× faster
    than batches of 1000; BENCHMARKS.md, "Evaluation"); the per-sample losses are summed
    once, in float64, in sample order. ``normalizer`` must normalise on the model's
    device too.
    """
    model.eval()
    device = next(model.parameters()).device
    correct = torch.zeros((), dtype=torch.int64, device=device)
    losses = []
    for i in range(0, len(x), batch_size):
        out = model(normalizer(x[i : i + batch_size].to(device)))
        target = y[i : i + batch_size].to(device)
        losses.append(F.cross_entropy(out, target, reduction="none").double())
        correct += (out.argmax(1) == target).sum()
    return int(correct) / len(x), float(torch.cat(losses).sum()) / len(x)
