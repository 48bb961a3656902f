"""Which samples each job uses, and how a part of a job becomes a training batch.

The global batch of job ``t`` depends only on ``(seed, t, k, batch_size)``: never on the
scheme, the delays or retries. Runs of different schemes are therefore paired
comparisons, and an exact scheme reproduces single-process SGD bit for bit (up to
float summation order). Augmentation draws are made per (job, shard) for all of the
shard's samples at once and then sliced, so splitting a shard's samples into parts
does not change any sample's crop or flip.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch
import torch.nn.functional as F

from gclab.coding.contract import Part

PAD = 4  # pixels of zero padding for the random crop (the standard CIFAR recipe)


def shard_indices(num_samples: int, k: int, seed: int) -> list[np.ndarray]:
    """Split ``range(num_samples)`` into ``k`` disjoint shards (seeded shuffle)."""
    perm = np.random.default_rng([seed, 0x5EED]).permutation(num_samples)
    return [np.sort(chunk) for chunk in np.array_split(perm, k)]


@dataclass(frozen=True)
class BatchPlan:
    """Sampling of per-shard batches: each job takes ``per_shard`` samples of every shard.

    One epoch visits every sample of the smallest shard's size once per shard, in an
    order reshuffled each epoch (seeded by ``(seed, epoch, shard)``).
    """

    shard_sizes: tuple[int, ...]
    per_shard: int
    seed: int

    @property
    def steps_per_epoch(self) -> int:
        return min(self.shard_sizes) // self.per_shard

    def positions(self, job: int, part: Part) -> np.ndarray:
        """Positions (within its shard) of the samples of ``part`` of ``job``."""
        epoch, step = divmod(job, self.steps_per_epoch)
        order = np.random.default_rng([self.seed, epoch, part.shard]).permutation(
            self.shard_sizes[part.shard]
        )
        chosen = order[step * self.per_shard : (step + 1) * self.per_shard]
        lo, hi = part_bounds(part, self.per_shard)
        return chosen[lo:hi]

    def augmentation(self, job: int, part: Part) -> tuple[np.ndarray, np.ndarray]:
        """Crop offsets ``[b, 2]`` and flip flags ``[b]`` of ``part``'s samples in ``job``."""
        rng = np.random.default_rng([self.seed, job, part.shard, 0xA06])
        offsets = rng.integers(0, 2 * PAD + 1, size=(self.per_shard, 2))
        flips = rng.random(self.per_shard) < 0.5
        lo, hi = part_bounds(part, self.per_shard)
        return offsets[lo:hi], flips[lo:hi]


def part_bounds(part: Part, per_shard: int) -> tuple[int, int]:
    """Integer sample range of a part; consecutive parts of a shard tile it exactly."""
    return round(part.lo * per_shard), round(part.hi * per_shard)


def augment(x: torch.Tensor, offsets: np.ndarray, flips: np.ndarray) -> torch.Tensor:
    """Random crop with zero padding and horizontal flip, on a uint8 batch ``[b, C, H, W]``."""
    h, w = x.shape[-2:]
    dev = x.device  # the draws are made on the host, the gather runs where x is
    padded = F.pad(x, (PAD, PAD, PAD, PAD))
    # gather each sample's crop window with one advanced-indexing call
    offsets = torch.as_tensor(offsets, device=dev)
    rows = offsets[:, 0:1] + torch.arange(h, device=dev)[None, :]  # [b, h]
    cols = offsets[:, 1:2] + torch.arange(w, device=dev)[None, :]  # [b, w]
    cols = torch.where(torch.as_tensor(flips, device=dev)[:, None], cols.flip(1), cols)
    b = torch.arange(x.shape[0], device=dev)[:, None, None, None]
    c = torch.arange(x.shape[1], device=dev)[None, :, None, None]
    return padded[b, c, rows[:, None, :, None], cols[:, None, None, :]]


class Normalizer:
    """uint8 images to normalised float32, with per-channel mean/std in [0, 1] units.

    It normalises on ``device`` (the device of the batches it gets).
    """

    def __init__(
        self, mean: torch.Tensor, std: torch.Tensor, device: torch.device | str = "cpu"
    ) -> None:
        self.scale = (1.0 / (255.0 * std)).view(1, -1, 1, 1).to(device)
        self.shift = (mean / std).view(1, -1, 1, 1).to(device)

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        return x.float() * self.scale - self.shift
