"""Runs that differ only by ``seed``, as one group: mean curves with a band, time to target.

A *group* is every training run whose ``.hydra/config.yaml`` is the same once ``seed``
(and what never changes the training: ``logger``, ``resume``) is left out. Its seeds'
accuracy curves are evaluated at different virtual times, so they are interpolated
linearly (``numpy.interp``) onto a common grid: the union of the seeds' evaluation times
within the span every seed covers (from the latest first evaluation to the earliest
last one), where the mean and the band are taken. The band is a 95 % Student-t
interval of the mean over seeds (``ci``: mean ± t₀.₉₇₅,ₖ₋₁·s/√k) or the range
(``range``: min–max over seeds).

A run's *time to target* is the virtual time of its first evaluation at or above the
target. A group reports how many of its finished seeds reached it, and the mean, the
95 % t-interval and the range over those that did: seeds that never reach the target
are not in the mean, which is then a lower bound, and the table says how many reached.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from gclab.report.runs import NOT_SERIES, SIM, TRAIN, Run, Sweep, label_key, short

#: Config keys that do not tell groups apart (``seed`` is what a group spans).
NOT_CONFIG = ("seed", "logger", "resume")
BANDS = {"ci": "95 % t-interval of the mean over seeds", "range": "min–max over seeds"}


@dataclass(frozen=True)
class Spread:
    """Mean of some values and their band (``low``, ``high``), and how many values."""

    mean: float
    low: float
    high: float
    count: int


def spread(values: Sequence[float], band: str) -> Spread | None:
    """Mean and band of ``values`` (no band width for a single value); None if empty."""
    x = np.asarray(values, dtype=np.float64)
    if x.size == 0:
        return None
    mean = float(x.mean())
    if band == "range":
        return Spread(mean, float(x.min()), float(x.max()), x.size)
    half = 0.0
    if x.size > 1:
        half = float(stats.t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size))
    return Spread(mean, mean - half, mean + half, x.size)


def first_reach(times: np.ndarray, accuracy: np.ndarray, target: float) -> float | None:
    """Virtual time of the first evaluation at or above ``target``, if any."""
    hits = np.flatnonzero(accuracy >= target)
    return float(times[hits[0]]) if hits.size else None


@dataclass
class Group:
    """Finished and failed runs of one configuration, one per seed."""

    label: str  # the series (scheme and what else distinguishes it), as plots name it
    delay: str  # the delay model's config option
    loss_rate: float | None
    runs: list[Run]
    context: str = ""  # what tells it from other groups of its label at its loss setting

    @property
    def name(self) -> str:
        """The label, then the context if any: no two groups of a sweep share a name at
        one loss setting, so tables can key on it."""
        return f"{self.label}, {self.context}" if self.context else self.label

    @property
    def finished(self) -> list[Run]:
        return [run for run in self.runs if not run.failed]

    def curves(self) -> list[tuple[np.ndarray, np.ndarray]]:
        """``(virtual_time, accuracy)`` of every finished seed with an evaluation."""
        return [c for c in (run.evaluations() for run in self.finished) if len(c[0])]

    def mean_curve(self, band: str) -> tuple[np.ndarray, list[Spread]] | None:
        """The common time grid and the mean and band at each of its points."""
        curves = self.curves()
        if not curves:
            return None
        start = max(float(t[0]) for t, _ in curves)
        stop = min(float(t[-1]) for t, _ in curves)
        grid = np.unique(np.concatenate([t for t, _ in curves]))
        grid = grid[(grid >= start) & (grid <= stop)]
        if grid.size == 0:
            return None
        values = np.array([np.interp(grid, t, a) for t, a in curves])
        return grid, [spread(values[:, i], band) for i in range(grid.size)]

    def times_to_target(self, target: float) -> list[float | None]:
        """Each finished seed's time to target (None: not reached)."""
        return [first_reach(t, a, target) for t, a in map(Run.evaluations, self.finished)]

    def jobs_to_target(self, target: float) -> list[int | None]:
        """Each finished seed's jobs applied by its first evaluation at or above ``target``."""
        out: list[int | None] = []
        for run in self.finished:
            _, accuracy = run.evaluations()
            hits = np.flatnonzero(accuracy >= target)
            out.append(int(run.jobs_at_evaluations()[hits[0]]) if hits.size else None)
        return out

    def seconds_per_job(self) -> list[float]:
        """Each finished seed's virtual time per applied job over the whole run: the pace at
        which the scheme and the losses let jobs through, whatever they train."""
        paces = []
        for run in self.finished:
            jobs, total = (run.summary or {}).get("jobs"), run.total_time
            if jobs and total is not None:
                paces.append(total / jobs)
        return paces

    def final_accuracies(self) -> list[float]:
        """Each finished seed's last evaluation's test accuracy: at the target for a run that
        stopped there, at the budget for one that did not reach it."""
        return [float(a[-1]) for _, a in map(Run.evaluations, self.finished) if len(a)]

    def stale_shares(self) -> list[float]:
        """Each finished seed's share of updates with a stale gradient
        (:func:`~gclab.report.runs.staleness` > 0), where its records tell."""
        shares = [run.values.get("stale_share") for run in self.finished]
        return [share for share in shares if share is not None]

    def seeds(self) -> list[Any]:
        """The finished runs' seeds, in the order of :meth:`times_to_target`."""
        return [run.config.get("seed") for run in self.finished]


def _key(run: Run) -> str:
    config = {k: v for k, v in run.config.items() if k not in NOT_CONFIG}
    return json.dumps(config, sort_keys=True, default=str)


def groups(sweep: Sweep) -> list[Group]:
    """The training and simulator runs of ``sweep`` grouped by configuration, ordered by
    loss rate, then delay model, then name (in the order the runs first show it).

    Groups that share a series label and a loss setting (a sweep without a loss axis over
    more than the scheme, or one whose label leaves out a key that only some runs set)
    get the overrides that differ between them as their context."""
    found: dict[str, Group] = {}
    for run in sweep.runs:
        if run.kind not in (TRAIN, SIM):
            continue
        key = _key(run)
        if key not in found:
            delay = run.choices.get("delay", "?")
            found[key] = Group(sweep.series(run), delay, run.loss_rate, [])
        found[key].runs.append(run)
    peers: dict[tuple[str, str, float | None], list[Group]] = defaultdict(list)
    for group in found.values():
        peers[group.label, group.delay, group.loss_rate].append(group)
    for same in peers.values():
        if len(same) > 1:
            _set_contexts(same, [k for k in sweep.varying if k not in NOT_SERIES])
    names = list(dict.fromkeys(group.name for group in found.values()))
    return sorted(
        found.values(),
        key=lambda g: (
            -1.0 if g.loss_rate is None else g.loss_rate,
            g.delay,
            names.index(g.name),
        ),
    )


def _set_contexts(same: list[Group], keys: list[str]) -> None:
    """Name each of ``same`` (one label, one loss setting) by the overrides in which
    their runs differ; numbered where even those agree (configs from elsewhere)."""
    overrides = [group.runs[0].overrides for group in same]
    differ = [k for k in keys if len({o.get(k) for o in overrides}) > 1]
    for group, mine in zip(same, overrides):
        group.context = ", ".join(f"{label_key(k)}={short(mine[k])}" for k in differ if k in mine)
    if len({group.context for group in same}) < len(same):
        for i, group in enumerate(same, 1):
            group.context = f"{group.context}, #{i}" if group.context else f"#{i}"


@dataclass(frozen=True)
class TargetRow:
    """One group's time to target: the spread over the seeds that reached it."""

    group: Group
    reached: int
    finished: int
    time: Spread | None  # 95 % t-interval over the seeds that reached
    extent: Spread | None  # the same values' range
    speedup: Spread | None  # baseline's time / this group's, paired by seed (95 % t-interval)
    jobs: Spread | None  # jobs applied by the target, over the seeds that reached (95 % t-interval)
    pace: Spread | None  # virtual seconds per applied job, over every finished seed (the same)
    final: Spread | None  # last evaluation's test accuracy, over every finished seed (the same)
    stale: Spread | None  # share of updates with a stale gradient, over every finished seed


def _by_seed(group: Group, target: float) -> dict[Any, float]:
    times = group.times_to_target(target)
    return {seed: t for seed, t in zip(group.seeds(), times) if t is not None}


def _baseline_for(group: Group, bases: list[Group]) -> Group | None:
    """The baseline group at ``group``'s loss setting: the only one, or else the only one
    whose overrides outside the scheme's agree with ``group``'s wherever both set them."""
    here = [b for b in bases if (b.delay, b.loss_rate) == (group.delay, group.loss_rate)]
    if len(here) > 1:
        mine = group.runs[0].overrides
        here = [
            b for b in here
            if all(v == mine[k] for k, v in b.runs[0].overrides.items()
                   if k in mine and k != "scheme" and not k.startswith("scheme."))
        ]  # fmt: skip
    return here[0] if len(here) == 1 else None


def target_rows(
    all_groups: list[Group], target: float, baseline: str | None = None
) -> list[TargetRow]:
    """Every group's time to ``target``; with a ``baseline`` series label, each group's
    speed-up over the baseline group of the same loss setting, seed by seed (where
    several baseline groups share the setting, the one whose other overrides agree with
    the group's)."""
    bases = [g for g in all_groups if g.label == baseline]
    rows = []
    for group in all_groups:
        times = [t for t in group.times_to_target(target) if t is not None]
        base = _baseline_for(group, bases)
        reference = _by_seed(base, target) if base is not None else {}
        mine = _by_seed(group, target)
        ratios = [reference[seed] / t for seed, t in mine.items() if seed in reference and t > 0]
        rows.append(
            TargetRow(
                group,
                len(times),
                len(group.finished),
                spread(times, "ci"),
                spread(times, "range"),
                spread(ratios, "ci"),
                spread([j for j in group.jobs_to_target(target) if j is not None], "ci"),
                spread(group.seconds_per_job(), "ci"),
                spread(group.final_accuracies(), "ci"),
                spread(group.stale_shares(), "ci"),
            )
        )
    return rows
