"""The report's statistics on hand-made cases: censored times to target (Kaplan–Meier
median, restricted mean), paired ratios and their labels against the A/A floor."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

from gclab.report.compare import (
    FASTER,
    SLOWER,
    UNCLEAR,
    holm,
    label,
    noise_floor,
    paired_p,
    paired_ratio,
)
from gclab.report.groups import Group, crossing, first_reach, run_crossing, target_rows
from gclab.report.intervals import Spread
from gclab.report.runs import TRAIN, Run
from gclab.report.survival import Outcome, default_horizon, km_median, restricted_mean

T_975 = {2: 4.302652729911275, 4: 2.7764451051977987}  # Student t quantiles (tables)


def test_restricted_mean_is_the_mean_of_min_time_horizon_over_every_run():
    """Five runs, two of which missed the target (T = ∞): they count the horizon."""
    outcomes = [Outcome(30.0, 30.0), Outcome(55.0, 80.0, 80.0), Outcome(None, 80.0, 80.0),
                Outcome(70.0, 70.0), Outcome(None, 90.0)]  # fmt: skip
    horizon = 60.0
    values = [min(t, horizon) for t in (30.0, 55.0, math.inf, 70.0, math.inf)]
    got = restricted_mean(outcomes, horizon)
    assert got.mean == pytest.approx(np.mean(values)) and got.count == 5
    half = T_975[4] * np.std(values, ddof=1) / math.sqrt(5)
    assert got.low == pytest.approx(np.mean(values) - half)
    assert got.high == horizon  # clipped: min(T, h) never exceeds h
    assert [o.restricted(horizon) for o in outcomes] == values


def test_the_horizon_defaults_to_the_shortest_follow_up():
    """A budget limits every run; a run without one that missed the target is followed up
    to its end; runs that all reached it without a budget restrict nothing."""
    budgeted = [Outcome(30.0, 30.0, 100.0), Outcome(None, 101.0, 100.0), Outcome(None, 90.0)]
    assert default_horizon(budgeted) == 90.0
    assert default_horizon(budgeted[:2]) == 100.0
    assert default_horizon([Outcome(30.0, 30.0), Outcome(40.0, 50.0)]) == math.inf
    assert default_horizon([]) is None
    all_reached = [Outcome(30.0, 30.0), Outcome(40.0, 50.0)]
    assert restricted_mean(all_reached, math.inf).mean == 35.0  # the plain mean


def test_kaplan_meier_median_on_a_hand_made_case():
    """Events at 1, 3, 4; censored at 2 and 5. S(1) = 4/5; at 3, 3 runs at risk (2 was
    censored): S = 4/5 · 2/3 = 0.533; at 4, 2 at risk: S = 0.267 <= 0.5, so the median is 4
    (a mean over the reached runs would say 2.67)."""
    outcomes = [Outcome(1.0, 1.0), Outcome(None, 2.0), Outcome(3.0, 3.0), Outcome(4.0, 4.0),
                Outcome(None, 5.0)]  # fmt: skip
    assert km_median(outcomes) == 4.0
    assert km_median([Outcome(None, 5.0), Outcome(None, 6.0), Outcome(2.0, 2.0)]) == math.inf
    assert km_median([Outcome(None, 5.0)]) == math.inf
    assert km_median([]) is None
    tie = [Outcome(1.0, 1.0), Outcome(2.0, 2.0), Outcome(3.0, 3.0), Outcome(4.0, 4.0)]
    assert km_median(tie) == 2.0  # S(2) = 0.5 exactly: the smallest t with S(t) <= 0.5


def test_paired_ratio_is_the_geometric_mean_with_a_t_interval_on_the_log_scale():
    base, mine = {0: 60.0, 1: 62.0, 2: 64.0, 3: 50.0}, {0: 30.0, 1: 40.0, 2: 32.0}
    got = paired_ratio(base, mine)  # seed 3 has no pair
    logs = np.log([2.0, 62 / 40, 2.0])
    half = T_975[2] * logs.std(ddof=1) / math.sqrt(3)
    assert got.count == 3 and got.mean == pytest.approx(math.exp(logs.mean()))
    assert (got.low, got.high) == pytest.approx(
        (math.exp(logs.mean() - half), math.exp(logs.mean() + half))
    )
    assert paired_ratio(base, {7: 1.0}) is None


def test_labels_say_only_what_the_interval_and_the_floor_allow():
    clear = Spread(1.5, 1.3, 1.7, 5)
    assert label(clear, None) == FASTER  # no A/A declared: the interval alone
    assert label(Spread(0.6, 0.5, 0.7, 5), None) == SLOWER
    assert label(Spread(1.2, 0.9, 1.5, 5), None) == UNCLEAR  # the interval holds 1
    assert label(Spread(1.0, 1.0, 1.0, 5), None) == UNCLEAR  # e.g. both censored at h
    assert label(Spread(1.5, 1.5, 1.5, 1), None) == UNCLEAR  # one pair: no interval
    assert label(None, None) == UNCLEAR
    floor = noise_floor([Spread(1.18, 1.04, 1.6, 5)])  # A/A ratio 1.18 (1.04–1.6)
    assert floor == pytest.approx(math.log(1.6))
    assert label(clear, floor) == UNCLEAR  # 1.5 excludes 1 but lies within the floor
    assert label(Spread(2.0, 1.8, 2.2, 5), floor) == FASTER
    assert label(Spread(0.5, 0.45, 0.55, 5), floor) == SLOWER  # beyond the floor both ways


def test_the_floor_is_the_widest_a_a_interval_and_unmeasured_without_two_pairs():
    assert noise_floor([Spread(1.0, 0.8, 1.1, 3), Spread(1.1, 1.05, 1.2, 3)]) == pytest.approx(
        abs(math.log(0.8))
    )
    assert noise_floor([Spread(1.1, 1.1, 1.1, 1)]) == math.inf
    assert noise_floor([None]) == noise_floor([]) == math.inf
    assert label(Spread(9.0, 8.0, 10.0, 5), math.inf) == UNCLEAR


def test_a_smoothed_crossing_needs_the_mean_of_the_last_evaluations():
    """One lucky evaluation at 0.61 between 0.55s crosses 0.6 by default, not smoothed."""
    accuracy = np.array([0.3, 0.55, 0.61, 0.55, 0.6, 0.62, 0.64])
    times = np.arange(7.0) * 10
    assert crossing(accuracy, 0.6) == 2 and first_reach(times, accuracy, 0.6) == 20.0
    assert crossing(accuracy, 0.6, smooth=3) == 6  # mean(0.6, 0.62, 0.64) = 0.62
    assert first_reach(times, accuracy, 0.6, smooth=3) == 60.0
    assert crossing(np.array([0.7, 0.1]), 0.6, smooth=3) == 0  # fewer at the start
    assert crossing(accuracy, 0.7, smooth=2) is None


def test_holm_rejects_step_down_and_gives_intervals_that_agree_with_it():
    """p = 0.005, 0.01, 0.03, 0.04 (m = 4): the first two are rejected (0.005 <= 0.05/4,
    0.01 <= 0.05/3), 0.03 > 0.05/2 stops the procedure, so 0.03 and 0.04 are not, although
    0.04 <= 0.05/1. Their intervals take the level of the rank Holm stopped at (97.5 %)."""
    got = holm([0.01, 0.04, 0.03, None, 0.005])
    adjusted = [a for a, _ in got]
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 1.0, 0.02])
    assert [level for _, level in got] == pytest.approx([1 - 0.05 / 3, 0.975, 0.975, 0.95,
                                                         1 - 0.05 / 4])  # fmt: skip
    assert [a <= 0.05 for a in adjusted] == [True, False, False, False, True]
    assert holm([]) == [] and holm([None]) == [(1.0, 0.95)]


@pytest.mark.parametrize("seed", range(20))
def test_a_corrected_interval_excludes_1_exactly_when_holm_rejects(seed):
    """Random families of paired log-ratios: the interval at the level :func:`holm` gives
    excludes 1 iff the Holm-adjusted p-value is at most 0.05."""
    rng = np.random.default_rng(seed)
    family = [({s: 10.0 for s in range(5)},
               {s: 10.0 / math.exp(rng.normal(shift, 0.1)) for s in range(5)})
              for shift in rng.uniform(-0.3, 0.3, 8)]  # fmt: skip
    for (base, mine), (adjusted, level) in zip(family, holm([paired_p(*f) for f in family])):
        ratio = paired_ratio(base, mine, level=level)
        assert (label(ratio) != UNCLEAR) == (adjusted <= 0.05)


def test_paired_p_is_the_two_sided_t_test_of_the_log_ratios():
    base, mine = {0: 20.0, 1: 21.0, 2: 22.0}, {0: 15.0, 1: 16.0, 2: 17.0}
    logs = np.log([20 / 15, 21 / 16, 22 / 17])
    t = logs.mean() / (logs.std(ddof=1) / math.sqrt(3))
    assert paired_p(base, mine) == pytest.approx(2 * stats.t.sf(t, 2))
    assert paired_p(base, {0: 20.0, 1: 21.0}) == 1.0  # identical ratios of 1: no effect
    assert paired_p(base, {0: 10.0, 1: 10.5}) == 0.0  # identical ratios of 2, no spread
    assert paired_p(base, {0: 1.0}) is None  # one pair: no test


def run_of(evals: list[dict], confirm: bool = False, models: int = 1) -> Run:
    """A finished run with one round per evaluation (one job applied each)."""
    records = []
    for i, e in enumerate(evals):
        records.append({"kind": "round", "round": i, "jobs_applied": 1})
        records.append({"kind": "eval", "round": i, "virtual_time": 10.0 * (i + 1), **e})
    train = {"confirm_target": confirm, "pipeline": "interleaved" if models > 1 else "stale",
             "models": models}  # fmt: skip
    return Run("0", Path("."), 0, {}, {}, {"train": train}, TRAIN, {"models": models}, None,
               records)  # fmt: skip


def test_every_model_must_cross_and_only_decisive_evaluations_count():
    """Two models: model 1 crosses at the third evaluation, model 0 at the second but only
    on the subset (not decisive) and on the whole set at the fourth; model 0's later dip
    does not undo its crossing."""
    evals = [
        {"test_accuracy": 0.3, "model_accuracy": [0.3, 0.3]},
        {"test_accuracy": 0.6, "model_accuracy": [0.7, 0.5], "decisive": False},
        {"test_accuracy": 0.6, "model_accuracy": [0.5, 0.7]},
        {"test_accuracy": 0.6, "model_accuracy": [0.65, 0.55]},
        {"test_accuracy": 0.5, "model_accuracy": [0.5, 0.5]},
    ]
    run = run_of(evals, confirm=True, models=2)
    decisive = run.decisive_records()
    assert len(decisive) == 4
    assert run_crossing(run, 0.6) == 2 and decisive[2]["virtual_time"] == 40.0
    assert run_crossing(run, 0.6, first=True) == 1  # model 1 at the third evaluation
    assert run_crossing(run, 0.8) is None and run_crossing(run, 0.8, first=True) is None
    assert run.jobs_at(decisive).tolist() == [1, 3, 4, 5]
    group = Group("g", "none", 0.0, [run])
    assert group.times_to_target(0.6) == [40.0] and group.times_to_target(0.6, True) == [30.0]
    assert group.job_outcomes(0.6)[0].time == 4.0


def test_reached_counts_and_the_restricted_mean_follow_one_rule_at_the_horizon():
    """Three seeds reach the target at 30, 90 and 110 s with a horizon of 100 s: the last
    counts as not reached in the count, the KM median and the restricted mean alike; a
    fourth seed that ended at 80 s by a job cap is followed up less than the horizon."""

    def seed(time: float | None, end: float, budget: float | None = 125.0) -> Run:
        acc = [{"test_accuracy": 0.1}] * int(end / 10 - 1) + [{"test_accuracy": 0.1}]
        if time is not None:
            acc[int(time / 10) - 1] = {"test_accuracy": 0.7}
        run = run_of(acc)
        run.config["train"]["time_budget"] = budget
        run.summary["total_virtual_time"] = end
        return run

    runs = [seed(30, 125), seed(90, 125), seed(110, 125), seed(None, 80)]
    for i, run in enumerate(runs):
        run.config["seed"] = i
    (row,) = target_rows([Group("g", "none", 0.0, runs)], 0.6, horizon=100.0)
    assert row.group.times_to_target(0.6) == [30.0, 90.0, 110.0, None]
    assert row.reached == 2 and row.restricted == [30.0, 90.0, 100.0, 100.0]
    assert row.rmst.mean == pytest.approx(80.0)
    # KM: S(30) = 3/4; the capped run leaves at 80; S(90) = 3/4 · 1/2 <= 0.5 (110 s counts
    # as censored at 100, not as an event)
    assert row.median == 90.0
    assert row.short == (3,)
