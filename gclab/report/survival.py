"""Time to target as a censored quantity: the Kaplan–Meier median and the restricted mean.

A run either reaches the target at the virtual time T of its first evaluation at or
above it (an *event*), or ends at its end time c without reaching it: it is *censored*
at c (T > c is all it tells), never dropped. Its *follow-up* is how far it was watched
for the event: its ``train.time_budget`` (or no limit) if it reached the target, else
``min(budget, c)``.

* **Kaplan–Meier median** (:func:`km_median`): the survival curve S(t) (the share of runs
  still short of the target at t) estimated from events and censorings
  (``scipy.stats.ecdf``); its median is the smallest t with S(t) ≤ 0.5, and infinite when
  S stays above 0.5 (fewer than half the runs are known to reach the target).
* **Restricted mean** (:func:`restricted_mean`) up to a horizon h: the mean over every run
  of min(T, h), with T = ∞ for a run that missed the target. With h at most every run's
  follow-up each min(T, h) is observed, so it is a plain mean of bounded values; its
  95 % interval is the Student-t interval of that mean, clipped to [0, h]. (h = ∞ when
  every run reached the target without a budget: then it is the plain mean.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from gclab.report.intervals import Spread, spread


@dataclass(frozen=True)
class Outcome:
    """One run's time to target: ``time`` (None: not reached), its ``end`` and ``budget``."""

    time: float | None
    end: float
    budget: float | None = None

    @property
    def reached(self) -> bool:
        return self.time is not None

    @property
    def follow_up(self) -> float:
        """How far the run was watched for the target (∞: no limit)."""
        budget = math.inf if self.budget is None else self.budget
        return budget if self.reached else min(budget, self.end)

    def restricted(self, horizon: float) -> float:
        """min(T, horizon), with T = ∞ when the target was not reached."""
        return horizon if self.time is None else min(self.time, horizon)


def km_median(outcomes: Sequence[Outcome]) -> float | None:
    """The Kaplan–Meier median time to target: ∞ when the survival curve stays above 0.5,
    None without runs."""
    if not outcomes:
        return None
    events = [o.time for o in outcomes if o.reached]
    if not events:
        return math.inf
    censored = [o.end for o in outcomes if not o.reached]
    survival = stats.ecdf(stats.CensoredData(uncensored=events, right=censored)).sf
    below = np.flatnonzero(survival.probabilities <= 0.5)
    return float(survival.quantiles[below[0]]) if below.size else math.inf


def default_horizon(outcomes: Sequence[Outcome]) -> float | None:
    """The shortest follow-up of ``outcomes`` (the shortest budget, or end of a run that
    missed the target without one); ∞ when every run reached the target without a budget
    (nothing is restricted); None without runs."""
    return min((o.follow_up for o in outcomes), default=None)


def restricted_mean(outcomes: Sequence[Outcome], horizon: float) -> Spread | None:
    """Mean of min(T, ``horizon``) over every run, with its 95 % t-interval clipped to
    [0, horizon]; None without runs."""
    mean = spread([o.restricted(horizon) for o in outcomes], "ci")
    if mean is None:
        return None
    return Spread(mean.mean, max(mean.low, 0.0), min(mean.high, horizon), mean.count)
