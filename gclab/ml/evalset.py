"""The fixed test subset of the periodic evaluations (``train.eval_subset``).

Every run, whatever its seed or scheme, evaluates on the same images: the first
``count`` of a permutation of the test set drawn with ``numpy.random.default_rng(0)``,
taken in index order. Frequent evaluations on the subset locate the crossing of a target
accuracy closely; the run's last evaluation uses the whole test set.
"""

from __future__ import annotations

import numpy as np
import torch

#: Seed of the subset's permutation: fixed, so that every run sees the same images.
SUBSET_SEED = 0


def subset_indices(size: int, count: int) -> torch.Tensor:
    """Indices (int64, ascending) of ``count`` of the ``size`` test images."""
    chosen = np.random.default_rng(SUBSET_SEED).permutation(size)[:count]
    return torch.from_numpy(np.sort(chosen))
