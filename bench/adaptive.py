"""Adaptive coding (``adapt=search``) across regime changes on the shared Lambda traces.

    python bench/adaptive.py --quick                  # the family at slope 2.2, change at job 50
    python bench/adaptive.py --sets family            # the family, every scenario
    python bench/adaptive.py --processes 2            # everything (hours on 2 loaded cores)
    python bench/adaptive.py --sets papers --per-group 10   # 10 scenarios per group
    python bench/adaptive.py --sets family --changes ''      # the stationary scenarios only
    python bench/adaptive.py --sets papers --slopes 2.2 --phases  # best fixed from each start

*Regimes* are the ten shared traces (Tokyo and Sydney at loads 0, 0.25, 0.5, 0.75, 1),
each replayed in order from its first round (wrapping around) at its recorded load, as
``delay=trace`` does by default: a worker's delay is ``durations + (L − recorded
load)·slope`` at the scheme's load ``L``, clipped at 0. A *scenario* is 256 workers,
100 jobs, μ = 1 and ``network.recovery=wait_all`` (the papers' rule) on

* a sudden change: regime A for the rounds before job ``c``, then regime B from its
  first round, for every ordered pair A ≠ B and ``c`` in ``--changes`` (25, 35, 50, 65,
  75);
* or a stationary regime: A alone;

at each ``delay.slope`` of ``--slopes`` (2.2, the papers' and ``delay=trace``'s default;
0.31, fitted on the traces in bench/sgc_traces.py). Per scenario and candidate set:

* *best fixed in hindsight*: the fastest setting of the candidates' grids over the run;
* *start*: the fastest setting of a 16-job probe on the run's first rounds (the papers'
  protocol), and *staying*, the run that keeps it;
* *adaptive*: ``adapt=search`` with its defaults (or the options given), from the start.

Candidate sets (``--sets``): ``family``, the ``classic_cr`` family alone (what
``adapt=search`` chooses among with ``scheme=classic_cr`` and ``adapt.schemes`` left
null), and ``papers``, the SGC papers' four schemes (``uncoded``, ``classic_cr``,
``sr_sgc``, ``m_sgc``) over their full grids. Each group of scenarios has a *role* in
how the defaults were chosen (:func:`role`, docs/simulator.md): *tuning* (changes at
job 50 and stationary regimes, slope 2.2), *seen* (looked at while choosing the
switching rule) or *held out* (changes at jobs 30 and 70, first run with the defaults
chosen, and at 45, 55, 60 and 80, first run later with the same defaults).

Printed: per candidate set, slope and change point, the distribution of adaptive ÷ best
fixed in hindsight (median, 90th percentile, worst, how many above 1.15; stationary:
above 1.05), adaptive ÷ staying, decisions per run and their mean wall time; then the
worst scenarios. ``--out FILE`` keeps one JSON line per scenario (appended);
``--report FILE ...`` prints the tables of such files without running anything.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from dataclasses import asdict, dataclass
from multiprocessing import Pool
from pathlib import Path

import numpy as np
from common import SHARED, machine

import gclab.schemas  # noqa: F401  (registers the scheme schemas)
from gclab.adapt.decide import Controller
from gclab.adapt.options import Search
from gclab.adapt.shift import Shifted
from gclab.adapt.simulate import simulate_adaptive
from gclab.network import DelayModel, NetworkConfig
from gclab.network.trace import Trace
from gclab.schemas import instantiate_checked
from gclab.sim.fast import load_kernels
from gclab.sim.search import Trial, scheme_option, search

TRACES = SHARED / "traces"
SETS = {"family": ("classic_cr",), "papers": ("uncoded", "classic_cr", "sr_sgc", "m_sgc")}
N, JOBS, PROBE = 256, 100, 16
#: The scenarios the defaults were chosen on, and the change points first run with them.
TUNING = {"slope": 2.2, "changes": (50,)}
HELD_OUT = (30, 45, 55, 60, 70, 80)


def role(slope: float, change: int) -> str:
    """``tuning``, ``held out`` or ``seen`` (looked at while choosing the defaults): the
    role of the scenarios at ``slope`` with a change at job ``change`` (0: stationary)."""
    if slope == TUNING["slope"] and change in (0, *TUNING["changes"]):
        return "tuning"
    return "held out" if change in HELD_OUT else "seen"


class Spliced(DelayModel):
    """``first`` for rounds before ``at``, then ``second`` from its round 0: a sudden change."""

    def __init__(self, first: Trace, second: Trace, at: int) -> None:
        self.first, self.second, self.at = first, second, at
        self.slope = first.slope  # both parts' (load_slope reads it)

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        if round < self.at:
            return self.first.delays(round, n, seed, load)
        return self.second.delays(round - self.at, n, seed, load)

    def delays_by_load(self, rounds: int, n: int, seed: int, loads: np.ndarray) -> np.ndarray:
        before = min(rounds, self.at)
        parts = [self.first.delays_by_load(before, n, seed, loads)]
        if rounds > before:
            parts.append(self.second.delays_by_load(rounds - before, n, seed, loads))
        return np.concatenate(parts, axis=1)


@dataclass(frozen=True)
class Scenario:
    """Regime ``first`` then, from job ``change``, ``second`` (stationary: ``change`` 0)."""

    first: str
    second: str
    change: int
    slope: float
    candidates: str

    def delay(self) -> DelayModel:
        first = Trace(str(TRACES / f"{self.first}.npz"), slope=self.slope)
        if not self.change:
            return first
        return Spliced(
            first, Trace(str(TRACES / f"{self.second}.npz"), slope=self.slope), self.change
        )


def regimes() -> list[str]:
    """The shared traces' names (``lambda-<region>-cnn-w256-r<rounds>-load<load×100>``)."""
    return sorted(path.stem for path in TRACES.glob("lambda-*.npz"))


def label(regime: str) -> str:
    """``tokyo 0.50`` for ``lambda-tokyo-cnn-w256-r10-load050``."""
    parts = regime.split("-")
    return f"{parts[1]} {int(parts[-1][4:]) / 100:.2f}"


def scenarios(
    sets: list[str], slopes: list[float], changes: list[int], per_group: int | None = None
) -> list[Scenario]:
    """Every scenario, or ``per_group`` evenly spaced ones of each candidate set, slope
    and change point (the pairs in the order of :func:`regimes`)."""
    names = regimes()
    out = []
    for candidates in sets:
        for slope in slopes:
            for change in [*changes, 0]:
                pairs = [(a, b) for a in names for b in names if (a != b) == bool(change)]
                if per_group is not None and per_group < len(pairs):
                    pairs = [
                        pairs[i]
                        for i in np.linspace(0, len(pairs) - 1, per_group).round().astype(int)
                    ]
                out += [Scenario(a, b, change, slope, candidates) for a, b in pairs]
    return out


def fastest(
    scenario: Scenario, delay: DelayModel, network: NetworkConfig, jobs: int
) -> list[Trial]:
    """Every setting of the scenario's candidates on ``jobs`` jobs, fastest first."""
    trials = [
        t for name in SETS[scenario.candidates]
        for t in search(scheme_option(name), N, delay, network, jobs, 0)
    ]  # fmt: skip
    return sorted(trials, key=lambda t: t.result.total_time)


def evaluate(job: tuple[Scenario, str, dict]) -> dict:
    """One scenario's totals, as a JSON-able record."""
    scenario, recovery, options = job
    network = NetworkConfig(recovery=recovery)
    delay = scenario.delay()
    trials = fastest(scenario, delay, network, JOBS)
    probe = fastest(scenario, delay, network, PROBE)[0]
    staying = next(t for t in trials if t.result.scheme == probe.result.scheme)
    nodes = {name: scheme_option(name) for name in SETS[scenario.candidates]}
    start = instantiate_checked(nodes[probe.name], n=N, **probe.params)
    policy = Search(**options)
    controller = Controller(policy, nodes, start, delay, network, 0, 4.0 * 356_810)
    began = time.process_time()
    result = simulate_adaptive(start, controller, delay, network, JOBS, 0)
    best = trials[0].result.total_time
    return {
        **asdict(scenario), "recovery": recovery,
        "best": best, "best_setting": trials[0].result.scheme, "start": probe.result.scheme,
        "staying": staying.result.total_time, "adaptive": result.total_time,
        "ratio": result.total_time / best, "switches": len(controller.switches),
        "decisions": len(controller.seconds),
        "decide_ms": 1e3 * float(np.mean(controller.seconds or [0.0])),
        "cpu_s": time.process_time() - began,
    }  # fmt: skip


def phases(job: tuple[str, float, str]) -> str:
    """A stationary regime's best fixed settings when the run starts at each round of its
    trace: a markdown row. Started at round 0 (as every scenario is), a setting may meet
    the trace's slow rounds in a phase of its own that no other start gives."""
    regime, slope, candidates = job
    scenario = Scenario(regime, regime, 0, slope, candidates)
    delay, network = scenario.delay(), NetworkConfig(recovery="wait_all")
    totals: dict[str, list[float]] = {}
    for start in range(delay.durations.shape[1]):  # each of the trace's rounds
        for name in SETS[candidates]:
            for t in search(scheme_option(name), N, Shifted(delay, start), network, JOBS, 0):
                totals.setdefault(t.result.scheme, []).append(t.result.total_time)
    names, times = list(totals), np.array(list(totals.values()))  # [settings, starts]
    first, mean = int(times[:, 0].argmin()), times.mean(axis=1)
    fair = int(mean.argmin())
    return (
        f"| {candidates} | {slope} | {label(regime)} | {names[first]} | {times[first, 0]:.1f} "
        f"| {times[first].min():.1f} / {np.median(times[first]):.1f} / {times[first].max():.1f} "
        f"| {names[fair]} | {mean[fair]:.1f} |"
    )


def _start_worker() -> None:
    load_kernels()  # compiled once per process, before any decision is timed


def report(records: list[dict]) -> None:
    """The distribution tables and the worst scenarios."""
    print(
        "| candidates | slope | change at job | scenarios | role | adaptive ÷ best: median "
        "| p90 | worst | above the bar | adaptive ÷ staying: median | decisions per run "
        "| decision ms (mean) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    groups: dict[tuple, list[dict]] = {}
    for r in records:
        groups.setdefault((r["candidates"], r["slope"], r["change"]), []).append(r)
    for (candidates, slope, change), rows in sorted(
        groups.items(), key=lambda g: (g[0][0], -g[0][1], g[0][2] or 999)
    ):
        ratio = np.array([r["ratio"] for r in rows])
        bar = 1.05 if not change else 1.15
        staying = np.median([r["adaptive"] / r["staying"] for r in rows])
        print(
            f"| {candidates} | {slope} | {change or 'stationary'} | {len(rows)} "
            f"| {role(slope, change)} | {np.median(ratio):.3f} "
            f"| {np.quantile(ratio, 0.9):.3f} | {ratio.max():.3f} "
            f"| {(ratio > bar).sum()} (> {bar}) "
            f"| {staying:.2f} | {np.mean([r['decisions'] for r in rows]):.0f} "
            f"| {np.mean([r['decide_ms'] for r in rows]):.0f} |"
        )
    print("\nworst scenarios:")
    for r in sorted(records, key=lambda r: -r["ratio"])[:8]:
        change = f"at job {r['change']} to {label(r['second'])}" if r["change"] else "stationary"
        print(
            f"  {r['ratio']:.3f}  {r['candidates']}, slope {r['slope']}, {label(r['first'])} "
            f"{change}: best {r['best']:.1f} s ({r['best_setting']}), "
            f"adaptive {r['adaptive']:.1f} s, staying {r['staying']:.1f} s ({r['start']}), "
            f"{r['switches']} switches"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", default="family,papers", help="family, papers or both")
    parser.add_argument("--slopes", default="2.2,0.31")
    parser.add_argument(
        "--changes", default="25,35,50,65,75", help="jobs at which the regime changes"
    )
    parser.add_argument("--recovery", default="wait_all")
    parser.add_argument("--quick", action="store_true", help="the family's tuning scenarios")
    parser.add_argument("--processes", type=int, default=1)
    parser.add_argument("--per-group", type=int, help="evenly spaced scenarios per group")
    parser.add_argument("--out", type=Path, help="one JSON line per scenario")
    parser.add_argument(
        "--report", type=Path, nargs="+", help="print the tables of earlier --out files only"
    )
    parser.add_argument(
        "--options", default="{}", help="adapt.* options as JSON, e.g. '{\"every\": 2}'"
    )
    parser.add_argument(
        "--phases", action="store_true",
        help="per stationary regime, the best fixed setting started at each of its trace's rounds",
    )  # fmt: skip
    args = parser.parse_args()
    if args.report:  # a scenario in several files counts once (the last)
        lines = [line for path in args.report for line in path.read_text().splitlines()]
        records = [json.loads(line) for line in lines]
        keys = ("candidates", "slope", "change", "first", "second", "recovery")
        report(list({tuple(r[k] for k in keys): r for r in records}.values()))
        return
    if not TRACES.is_dir():
        raise SystemExit(f"the shared traces are not at {TRACES}")
    if args.quick:
        args.sets, args.slopes, args.changes = "family", "2.2", "50"
    sets = args.sets.split(",")
    slopes = [float(s) for s in args.slopes.split(",")]
    changes = [int(c) for c in args.changes.split(",") if c]  # none: stationary only
    options = json.loads(args.options)
    if args.phases:
        print(
            "| candidates | slope | regime | best started at round 0 | its total (s) "
            "| its total from every start: min / median / max | best on the mean over "
            "starts | its mean (s) |\n|---|---|---|---|---|---|---|---|"
        )
        regimes_ = [(r, slope, c) for c in sets for slope in slopes for r in regimes()]
        with Pool(args.processes, initializer=_start_worker) as pool:
            for row in pool.imap(phases, regimes_):
                print(row, flush=True)
        return
    chosen = scenarios(sets, slopes, changes, args.per_group)
    jobs = [(s, args.recovery, options) for s in chosen]
    print(f"# {machine()}; load average {os.getloadavg()[0]:.1f}")
    print(
        f"# adapt=search {vars(Search(**options))}; {len(jobs)} scenarios, recovery {args.recovery}"
    )
    began = time.perf_counter()
    records = []
    with Pool(args.processes, initializer=_start_worker) as pool:
        for record in pool.imap_unordered(evaluate, jobs):
            records.append(record)
            if args.out:
                with args.out.open("a") as out:
                    out.write(json.dumps(record) + "\n")
    print(f"# {time.perf_counter() - began:.0f} s wall; load average {os.getloadavg()[0]:.1f}\n")
    report(records)


if __name__ == "__main__":
    main()
