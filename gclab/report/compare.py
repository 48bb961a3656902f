"""Paired comparisons of restricted times to target, labelled only by what the data says.

Two groups are compared seed by seed (same seed: same batches, initial weights and
losses): the ratio of the baseline's restricted time to the group's, ``r_s =
min(T_base, h) / min(T_group, h)`` (> 1: the group is faster). The ratio's estimate is the
geometric mean over the k paired seeds, exp(m) with m the mean of ln r_s, and its 95 %
interval exp(m ± t₀.₉₇₅,ₖ₋₁ · s/√k) (s the standard deviation of ln r_s).

An *A/A pair* is two groups that run the same algorithm as separate arms: their ratio is
1 but for noise. Its **noise floor** is the largest |ln r| its 95 % interval admits,
``max(|ln low|, |ln high|)``: an effect within it could come from the design alone. A
comparison is labelled ``faster`` or ``slower`` only when its interval excludes 1 and its
estimate lies beyond the floor (|ln ratio| > floor); otherwise, and with fewer than two
pairs, ``not distinguishable``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from typing import Any

import numpy as np

from gclab.report.intervals import Spread, t_half_width

FASTER, SLOWER, UNCLEAR = "faster", "slower", "not distinguishable"


def paired_ratio(base: Mapping[Any, float], mine: Mapping[Any, float]) -> Spread | None:
    """``base[s] / mine[s]`` over the seeds s both have (positive times): the geometric mean
    and its 95 % interval; None without a pair."""
    seeds = [s for s in mine if s in base and mine[s] > 0 and base[s] > 0]
    if not seeds:
        return None
    logs = np.log([base[s] / mine[s] for s in seeds])
    mean, half = float(logs.mean()), t_half_width(logs)
    return Spread(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(seeds))


def noise_floor(aa: Iterable[Spread | None]) -> float:
    """The A/A pair's noise floor on the log scale: over its ratios (one per loss setting
    where it ran) the largest max(|ln low|, |ln high|) of the ratio's interval; ∞ when a
    ratio has fewer than two pairs (no interval: nothing exceeds it) or there is none."""

    def one(ratio: Spread | None) -> float:
        if ratio is None or ratio.count < 2:
            return math.inf
        return max(abs(math.log(ratio.low)), abs(math.log(ratio.high)))

    return max(map(one, aa), default=math.inf)


def label(ratio: Spread | None, floor: float | None) -> str:
    """``faster``/``slower`` when the interval of ``ratio`` excludes 1 and its estimate
    exceeds ``floor`` (ln scale; None: no A/A control declared), else ``not distinguishable``."""
    if ratio is None or ratio.count < 2 or ratio.low <= 1 <= ratio.high:
        return UNCLEAR
    if floor is not None and abs(math.log(ratio.mean)) <= floor:
        return UNCLEAR
    return FASTER if ratio.low > 1 else SLOWER
