"""A mean and its band: the 95 % Student-t interval of the mean, or the range."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

BANDS = {"ci": "95 % t-interval of the mean over seeds", "range": "min–max over seeds"}


@dataclass(frozen=True)
class Spread:
    """Mean of some values and their band (``low``, ``high``), and how many values."""

    mean: float
    low: float
    high: float
    count: int


def t_half_width(values: np.ndarray, level: float = 0.95) -> float:
    """Half-width of the ``level`` Student-t interval of the mean of ``values`` (0 for one
    value): t_{(1+level)/2, n−1} · s/√n."""
    if values.size < 2:
        return 0.0
    quantile = stats.t.ppf((1 + level) / 2, values.size - 1)
    return float(quantile * values.std(ddof=1) / math.sqrt(values.size))


def spread(values: Sequence[float], band: str) -> Spread | None:
    """Mean and band of ``values`` (no band width for a single value); None if empty."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    mean = float(x.mean())
    if band == "range":
        return Spread(mean, float(x.min()), float(x.max()), x.size)
    half = t_half_width(x)
    return Spread(mean, mean - half, mean + half, x.size)
