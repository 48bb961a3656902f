"""Runs that differ only by ``seed``, as one group: mean curves with a band, time to target.

A *group* is every training run whose ``.hydra/config.yaml`` is the same once ``seed``
(and what never changes the training: ``logger``, ``resume``) is left out. Its seeds'
accuracy curves are evaluated at different virtual times, so they are interpolated
linearly (``numpy.interp``) onto a common grid: the union of the seeds' evaluation times
within the span every seed covers (from the latest first evaluation to the earliest
last one), where the mean and the band are taken (:mod:`gclab.report.intervals`).

A run's *time to target* is the virtual time of its first evaluation at or above the
target (or, smoothed, the first at which the mean of its last few evaluations is:
:func:`crossing`); a run that never reaches it is censored at its end
(:mod:`gclab.report.survival`).
A group reports how many of its finished seeds reached it, the Kaplan–Meier median and
the restricted mean up to a horizon shared by every group of its loss setting, and, with
a baseline, the paired ratio of restricted times and its label
(:mod:`gclab.report.compare`), judged against the noise floor of a declared A/A pair.
"""

from __future__ import annotations

import json
import math
from collections import defaultdict
from dataclasses import dataclass
from typing import Any

import numpy as np

from gclab.report.compare import (
    INVALID,
    UNCLEAR,
    holm,
    label,
    noise_floor,
    paired_p,
    paired_ratio,
)
from gclab.report.intervals import Spread, spread
from gclab.report.runs import NOT_SERIES, SIM, TRAIN, Run, Sweep, SweepError, label_key, short
from gclab.report.survival import Outcome, default_horizon, km_median, restricted_mean

#: Config keys that do not tell groups apart (``seed`` is what a group spans).
NOT_CONFIG = ("seed", "logger", "resume")


def crossing(accuracy: np.ndarray, target: float, smooth: int = 1) -> int | None:
    """Index of the first evaluation at which the mean of the last ``smooth`` evaluations
    (fewer at the start; 1: the evaluation itself) is at or above ``target``, if any."""
    means = [float(np.mean(accuracy[max(0, i + 1 - smooth) : i + 1])) for i in range(len(accuracy))]
    hits = np.flatnonzero(np.asarray(means) >= target)
    return int(hits[0]) if hits.size else None


def first_reach(
    times: np.ndarray, accuracy: np.ndarray, target: float, smooth: int = 1
) -> float | None:
    """Virtual time of the :func:`crossing` of ``target``, if any."""
    i = crossing(accuracy, target, smooth)
    return None if i is None else float(times[i])


def run_crossing(run: Run, target: float, smooth: int = 1, first: bool = False) -> int | None:
    """Index into ``run.decisive_records()`` of the evaluation by which every model (with
    ``first``, the first model) has crossed ``target`` (:func:`crossing`, model by model);
    None if not. Only decisive evaluations count: with ``train.confirm_target`` the
    whole-set ones."""
    records = run.decisive_records()
    if not records:
        return None
    accuracy = run.model_accuracies(records)
    hits = [crossing(accuracy[:, m], target, smooth) for m in range(accuracy.shape[1])]
    found = [i for i in hits if i is not None]
    if first:
        return min(found, default=None)
    return max(found) if len(found) == len(hits) else None


@dataclass
class Group:
    """Finished and failed runs of one configuration, one per seed."""

    label: str  # the series (scheme and what else distinguishes it), as plots name it
    delay: str  # the delay model's config option
    loss_rate: float | None
    runs: list[Run]
    context: str = ""  # what tells it from other groups of its label at its loss setting
    smooth: int = 1  # evaluations averaged for the crossing of a target (:func:`crossing`)

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

    def times_to_target(self, target: float, first: bool = False) -> list[float | None]:
        """Each finished seed's time to target (None: not reached) by :func:`run_crossing`:
        when every model has reached it, or with ``first`` the first model."""
        times = []
        for run in self.finished:
            i = run_crossing(run, target, self.smooth, first)
            times.append(None if i is None else float(run.decisive_records()[i]["virtual_time"]))
        return times

    def outcomes(self, target: float, first: bool = False) -> list[Outcome]:
        """Each finished seed's time to ``target``, censored at its end where not reached."""
        return [
            Outcome(time, run.total_time or 0.0, _budget(run))
            for run, time in zip(self.finished, self.times_to_target(target, first))
        ]

    def job_outcomes(self, target: float) -> list[Outcome]:
        """Each finished seed's jobs applied by its crossing of ``target`` (every model's,
        :func:`run_crossing`), censored at the jobs it applied in all where not reached."""
        out = []
        for run in self.finished:
            i = run_crossing(run, target, self.smooth)
            jobs = None if i is None else float(run.jobs_at(run.decisive_records())[i])
            out.append(Outcome(jobs, float((run.summary or {}).get("jobs") or 0)))
        return out

    @property
    def models(self) -> int:
        """The models each run trains (the most of any run; 1 without runs)."""
        return max((run.models for run in self.runs), default=1)

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


def _budget(run: Run) -> float | None:
    budget = (run.config.get("train") or {}).get("time_budget")
    return float(budget) if isinstance(budget, (int, float)) else None


def _key(run: Run) -> str:
    config = {k: v for k, v in run.config.items() if k not in NOT_CONFIG}
    return json.dumps(config, sort_keys=True, default=str)


def groups(sweep: Sweep, smooth: int = 1) -> list[Group]:
    """The training and simulator runs of ``sweep`` grouped by configuration, ordered by
    loss rate, then delay model, then name (in the order the runs first show it).

    Groups that share a series label and a loss setting (a sweep without a loss axis over
    more than the scheme, or one whose label leaves out a key that only some runs set)
    get the overrides that differ between them as their context. A group crosses a target
    where the mean of its last ``smooth`` evaluations first reaches it (:func:`crossing`)."""
    found: dict[str, Group] = {}
    for run in sweep.runs:
        if run.kind not in (TRAIN, SIM):
            continue
        key = _key(run)
        if key not in found:
            delay = run.choices.get("delay", "?")
            found[key] = Group(sweep.series(run), delay, run.loss_rate, [], smooth=smooth)
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


def parse_setting(text: str) -> tuple[str, float | None]:
    """A loss setting as ``DELAY`` or ``DELAY:RATE`` (``none``, ``bernoulli:0.1``): the delay
    option and the loss rate (None: any); ValueError if it is neither."""
    delay, colon, rate = text.partition(":")
    if not delay:
        raise ValueError(text)
    return delay, float(rate) if colon else None


@dataclass(frozen=True)
class AAPair:
    """Two groups (by name) that run the same algorithm as separate arms, compared at the
    loss settings ``at`` names (``DELAY`` or ``DELAY:RATE``; None: wherever both ran)."""

    a: str
    b: str
    at: str | None = None

    def matches(self, group: Group) -> bool:
        if self.at is None:
            return True
        delay, rate = parse_setting(self.at)
        return group.delay == delay and (
            rate is None or (group.loss_rate is not None and math.isclose(group.loss_rate, rate))
        )


@dataclass(frozen=True)
class Comparison:
    """A group against a reference group at its loss setting: the paired ratio of restricted
    times (reference's over the group's: > 1 is faster), Holm-corrected, and its label.

    ``ratio`` is the plain 95 % interval, ``corrected`` the interval at the level Holm's
    step-down gives the comparison in its table (:func:`~gclab.report.compare.holm`), which
    the label follows. ``floor`` and ``floor_label`` are the sensitivity check: study v2's
    rule (the plain interval beyond the A/A floor). An A/A arm is compared but is no member
    of the family (``control``): its plain interval is the study's validity check."""

    reference: str  # the reference group's name
    ratio: Spread | None  # geometric mean and 95 % interval over the paired seeds
    label: str
    floor: float | None  # the A/A noise floor (ln scale), for the sensitivity check
    corrected: Spread | None = None  # the ratio's Holm-corrected interval
    p: float | None = None  # paired t-test of ln ratio = 0, two-sided
    adjusted: float | None = None  # Holm-adjusted p (None: not in the family)
    floor_label: str = UNCLEAR  # study v2's rule: the plain interval beyond the floor
    control: bool = False  # the A/A arm: not in the family


@dataclass(frozen=True)
class TargetRow:
    """One group's time to target over every finished seed, reached or censored.

    A run reached the target when it did so by the horizon: ``reached`` counts those, and
    the Kaplan–Meier median and restricted mean take a time past the horizon as censored
    there (one rule for all three). ``short`` lists the seeds whose follow-up ended before
    the horizon without reaching the target (a job cap, or a re-timing that shortened the
    run): their min(T, h) is unknown, and a study with any is invalid.
    """

    group: Group
    reached: int
    finished: int
    horizon: float | None  # the restricted mean's horizon (shared by the loss setting)
    median: float | None  # Kaplan–Meier median (inf: not reached by half; None: no run)
    rmst: Spread | None  # restricted mean time to target up to the horizon, 95 % t-interval
    restricted: list[float | None]  # each finished seed's min(T, horizon), in seeds() order
    comparison: Comparison | None  # against the baseline group of the same loss setting
    jobs: float | None  # Kaplan–Meier median of the jobs applied by the target
    pace: Spread | None  # virtual seconds per applied job, over every finished seed (95 % t)
    final: Spread | None  # last evaluation's test accuracy, over every finished seed (the same)
    stale: Spread | None  # share of updates with a stale gradient, over every finished seed
    first: Spread | None = None  # with several models: restricted mean to the first model's
    short: tuple[Any, ...] = ()  # seeds followed up less than the horizon, target not reached


def _baseline_for(group: Group, bases: list[Group]) -> Group | None:
    """The baseline group at ``group``'s loss setting that trains as many models: the only
    one, or else the only one whose overrides outside the scheme's agree with ``group``'s
    wherever both set them."""
    here = [
        b for b in bases
        if (b.delay, b.loss_rate) == (group.delay, group.loss_rate) and b.models == group.models
    ]  # fmt: skip
    if len(here) > 1:
        mine = group.runs[0].overrides
        here = [
            b for b in here
            if all(v == mine[k] for k, v in b.runs[0].overrides.items()
                   if k in mine and k != "scheme" and not k.startswith("scheme."))
        ]  # fmt: skip
    return here[0] if len(here) == 1 else None


def _scheme_of(group: Group) -> tuple[str, dict[str, Any]]:
    """The scheme option and the ``scheme.*`` overrides of ``group``'s runs."""
    run = group.runs[0]
    return run.scheme, {k: v for k, v in run.overrides.items() if k.startswith("scheme.")}


def _in_turn(bases: list[Group], all_groups: list[Group]) -> list[Group]:
    """The groups that train the baseline's scheme (its option and ``scheme.*`` overrides)
    on several models in turn: a workload of several models is compared with the
    baseline's scheme on the same workload, never with one model."""
    schemes = [_scheme_of(b) for b in bases]
    return [
        g for g in all_groups
        if g.models > 1 and all(g is not b for b in bases) and _scheme_of(g) in schemes
    ]  # fmt: skip


def _setting(group: Group) -> tuple[str, float | None]:
    return group.delay, group.loss_rate


def horizons(
    all_groups: list[Group], target: float, horizon: float | None = None
) -> dict[tuple[str, float | None], float | None]:
    """The restricted mean's horizon per loss setting: ``horizon`` if given, else the
    shortest follow-up of the runs of every group at that setting
    (:func:`~gclab.report.survival.default_horizon`)."""
    outcomes: dict[tuple[str, float | None], list[Outcome]] = defaultdict(list)
    for group in all_groups:
        outcomes[_setting(group)] += group.outcomes(target)
    return {k: horizon if horizon is not None else default_horizon(v) for k, v in outcomes.items()}


def _restricted_by_seed(group: Group, target: float, horizon: float) -> dict[Any, float]:
    return {
        seed: outcome.restricted(horizon)
        for seed, outcome in zip(group.seeds(), group.outcomes(target))
    }


def _by_horizon(outcome: Outcome, horizon: float) -> Outcome:
    """``outcome`` as watched up to ``horizon``: a target reached past it is not reached,
    and the run censored there."""
    if outcome.time is not None and outcome.time <= horizon:
        return outcome
    return Outcome(None, min(outcome.end, horizon), outcome.budget)


@dataclass(frozen=True)
class AAResult:
    """The A/A control: the pair's paired ratio per loss setting and whether it holds (every
    plain 95 % interval contains 1, with at least two pairs)."""

    ratios: dict[tuple[str, float | None], Spread | None]

    @property
    def valid(self) -> bool:
        return bool(self.ratios) and all(
            r is not None and r.count >= 2 and r.low <= 1 <= r.high for r in self.ratios.values()
        )


def aa_ratios(
    all_groups: list[Group], target: float, pair: AAPair, horizon: float | None = None
) -> dict[tuple[str, float | None], Spread | None]:
    """The A/A pair's paired ratio (``pair.a``'s restricted time over ``pair.b``'s) at every
    loss setting where both groups ran (and ``pair.at`` admits)."""
    ends = horizons(all_groups, target, horizon)
    found: dict[tuple[str, float | None], dict[str, Group]] = defaultdict(dict)
    for group in all_groups:
        if group.name in (pair.a, pair.b) and pair.matches(group):
            found[_setting(group)][group.name] = group
    out = {}
    for setting, both in found.items():
        if len(both) == 2 and ends[setting] is not None:
            a, b = (_restricted_by_seed(both[n], target, ends[setting]) for n in (pair.a, pair.b))
            out[setting] = paired_ratio(a, b)
    return out


def check_aa(all_groups: list[Group], pair: AAPair) -> None:
    """Raise :class:`~gclab.report.runs.SweepError` unless both groups of ``pair`` exist and
    share a loss setting that ``pair.at`` admits."""
    names = list(dict.fromkeys(group.name for group in all_groups))
    for name in (pair.a, pair.b):
        if name not in names:
            raise SweepError(f"--aa {name!r} is none of the groups: {', '.join(map(repr, names))}")
    shared = {_setting(g) for g in all_groups if g.name == pair.a and pair.matches(g)} & {
        _setting(g) for g in all_groups if g.name == pair.b and pair.matches(g)
    }
    if pair.a == pair.b or not shared:
        where = f" at {pair.at}" if pair.at else ""
        raise SweepError(
            f"--aa {pair.a!r} {pair.b!r}: an A/A pair is two groups that ran at one loss "
            f"setting{where}, and these do not"
        )


def target_rows(
    all_groups: list[Group],
    target: float,
    baseline: str | None = None,
    horizon: float | None = None,
    aa: AAPair | None = None,
) -> list[TargetRow]:
    """Every group's time to ``target``, censored where not reached, restricted to its loss
    setting's horizon (``horizon`` if given, :func:`horizons`). With a ``baseline`` (a
    group's name, as the tables show it, else a series label), each group's paired ratio
    against the baseline group of its loss setting that trains as many models (where
    several share it, the one whose other overrides agree with the group's; for several
    models in turn, the baseline's scheme trained in turn, :func:`_in_turn`), labelled by
    its Holm-corrected interval over every comparison of the table but the A/A arm's;
    without a valid A/A control (when ``aa`` is declared) every label is ``invalid``."""
    ends = horizons(all_groups, target, horizon)
    floor, valid = None, True
    if aa is not None:
        control = AAResult(aa_ratios(all_groups, target, aa, horizon))
        floor, valid = noise_floor(control.ratios.values()), control.valid
    # a group's name first: 'classic_fr' beside 'classic_fr, network.recovery=partial'
    bases = [g for g in all_groups if g.name == baseline]
    bases = bases or [g for g in all_groups if g.label == baseline]
    bases += _in_turn(bases, all_groups)
    controls = {aa.a, aa.b} - {baseline} if aa is not None else set()
    tests = []  # (group index, base name, base times, own times, is control)
    for i, group in enumerate(all_groups):
        base, end = _baseline_for(group, bases), ends[_setting(group)]
        if base is not None and end is not None:  # the baseline against itself: ratio 1
            pair = (_restricted_by_seed(base, target, end), _restricted_by_seed(group, target, end))
            control = group.name in controls and aa is not None and aa.matches(group)
            tests.append((i, base.name, pair, base is group or control))
    family = [t for t in tests if not t[3]]
    corrected = dict(zip((t[0] for t in family), holm([paired_p(*t[2]) for t in family])))
    comparisons = {}
    for i, reference, pair, control in tests:
        ratio, p = paired_ratio(*pair), paired_p(*pair)
        adjusted, level = corrected.get(i, (None, 0.95))
        shown = paired_ratio(*pair, level=level)
        verdict = label(shown) if valid else INVALID
        comparisons[i] = Comparison(
            reference, ratio, UNCLEAR if control else verdict, floor, shown, p, adjusted,
            label(ratio, floor), control,
        )  # fmt: skip
    rows = []
    for i, group in enumerate(all_groups):
        end = ends[_setting(group)]
        raw = group.outcomes(target)
        outcomes = raw if end is None else [_by_horizon(o, end) for o in raw]
        short = tuple(
            seed for seed, o in zip(group.seeds(), raw)
            if end is not None and not o.reached and o.follow_up < end
        )  # fmt: skip
        first = None
        if group.models > 1 and end is not None:
            firsts = [_by_horizon(o, end) for o in group.outcomes(target, first=True)]
            first = restricted_mean(firsts, end)
        rows.append(
            TargetRow(
                group,
                sum(o.reached for o in outcomes),
                len(outcomes),
                end,
                km_median(outcomes),
                None if end is None else restricted_mean(outcomes, end),
                [None if end is None else o.restricted(end) for o in outcomes],
                comparisons.get(i),
                km_median(group.job_outcomes(target)),
                spread(group.seconds_per_job(), "ci"),
                spread(group.final_accuracies(), "ci"),
                spread(group.stale_shares(), "ci"),
                first,
                short,
            )
        )
    return rows
