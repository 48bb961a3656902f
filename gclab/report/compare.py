"""Paired comparisons of restricted times to target, labelled only by what the data says.

Two groups are compared seed by seed (same seed: same batches, initial weights and
losses): the ratio of the baseline's restricted time to the group's, ``r_s =
min(T_base, h) / min(T_group, h)`` (> 1: the group is faster). The ratio's estimate is the
geometric mean over the k paired seeds, exp(m) with m the mean of ln r_s, and its 95 %
interval exp(m ± t₀.₉₇₅,ₖ₋₁ · s/√k) (s the standard deviation of ln r_s).

**Multiplicity.** A table makes many comparisons at once; each is tested (H0: ratio 1,
the paired t-test of the ln r_s, two-sided p) and the family is corrected by **Holm's
step-down** (:func:`holm`): with the p-values sorted, p_(j) is rejected when every
p_(i) ≤ α/(m−i+1) for i ≤ j. A comparison shows its interval at the level of its rank,
1 − α/(m−j+1), or for a rank Holm does not reach, at the level of the first rank it
stopped at, so that an interval excludes 1 exactly when its comparison is rejected. A
comparison is labelled ``faster`` or ``slower`` when its corrected interval excludes 1;
otherwise, and with fewer than two pairs, ``not distinguishable``.

An *A/A pair* is one arm run twice through the same code (in a study only the loss draws
differ, ``network.stream``): their ratio is 1 but for noise, and its plain 95 % interval
must contain 1, else the study that declared it is invalid. Its **noise floor**, the
largest |ln r| that interval admits, ``max(|ln low|, |ln high|)``, survives as a
sensitivity check (:func:`label` with a floor): study v2 labelled only ratios beyond it.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np
from scipy import stats

from gclab.report.intervals import Spread, t_half_width

FASTER, SLOWER, UNCLEAR = "faster", "slower", "not distinguishable"
#: Every label of a study whose A/A control failed: its design's noise is not accounted for.
INVALID = "invalid (A/A)"


ALPHA = 0.05


def _logs(base: Mapping[Any, float], mine: Mapping[Any, float]) -> np.ndarray:
    """ln(base[s] / mine[s]) over the seeds s both have with positive times."""
    seeds = [s for s in mine if s in base and mine[s] > 0 and base[s] > 0]
    return np.log([base[s] / mine[s] for s in seeds])


def paired_ratio(
    base: Mapping[Any, float], mine: Mapping[Any, float], level: float = 0.95
) -> Spread | None:
    """``base[s] / mine[s]`` over the seeds s both have (positive times): the geometric mean
    and its ``level`` interval; None without a pair."""
    logs = _logs(base, mine)
    if not logs.size:
        return None
    mean, half = float(logs.mean()), t_half_width(logs, level)
    return Spread(math.exp(mean), math.exp(mean - half), math.exp(mean + half), len(logs))


def paired_p(base: Mapping[Any, float], mine: Mapping[Any, float]) -> float | None:
    """Two-sided p-value of the paired t-test of ln(base/mine) against 0; None with fewer
    than two pairs. Identical ratios (no spread): 1 if they are all 1, else 0."""
    logs = _logs(base, mine)
    if logs.size < 2:
        return None
    spread = float(logs.std(ddof=1))
    if spread == 0.0:
        return 1.0 if float(logs.mean()) == 0.0 else 0.0
    t = float(logs.mean()) / (spread / math.sqrt(logs.size))
    return float(2 * stats.t.sf(abs(t), logs.size - 1))


def holm(p_values: Sequence[float | None], alpha: float = ALPHA) -> list[tuple[float, float]]:
    """Holm's step-down over the family ``p_values`` (None: no test, left out of the
    family): for each, its adjusted p-value (rejected iff <= ``alpha``) and the confidence
    level of its corrected interval (module docstring); (1, 1 − alpha) for a None."""
    tested = sorted((p, i) for i, p in enumerate(p_values) if p is not None)
    m = len(tested)
    out = [(1.0, 1.0 - alpha)] * len(p_values)
    adjusted, stop = 0.0, None
    for rank, (p, i) in enumerate(tested):
        threshold = alpha / (m - rank)
        adjusted = max(adjusted, min(1.0, (m - rank) * p))
        if stop is None and p > threshold:
            stop = threshold  # Holm rejects nothing from here on
        out[i] = (adjusted, 1.0 - (threshold if stop is None else stop))
    return out


def noise_floor(aa: Iterable[Spread | None]) -> float:
    """The A/A pair's noise floor on the log scale: over its ratios (one per loss setting
    where it ran) the largest max(|ln low|, |ln high|) of the ratio's interval; ∞ when a
    ratio has fewer than two pairs (no interval: nothing exceeds it) or there is none."""

    def one(ratio: Spread | None) -> float:
        if ratio is None or ratio.count < 2:
            return math.inf
        return max(abs(math.log(ratio.low)), abs(math.log(ratio.high)))

    return max(map(one, aa), default=math.inf)


def label(ratio: Spread | None, floor: float | None = None) -> str:
    """``faster``/``slower`` when the interval of ``ratio`` excludes 1 (and, given a
    ``floor`` on the ln scale, study v2's sensitivity rule, its estimate lies beyond it),
    else ``not distinguishable``."""
    if ratio is None or ratio.count < 2 or ratio.low <= 1 <= ratio.high:
        return UNCLEAR
    if floor is not None and abs(math.log(ratio.mean)) <= floor:
        return UNCLEAR
    return FASTER if ratio.low > 1 else SLOWER
