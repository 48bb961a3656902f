"""The SGC papers' comparison on the shared Lambda traces, in both recovery modes (docs/design.md).

    python bench/sgc_traces.py            # 80 probe jobs, 496 jobs per evaluation trace
    python bench/sgc_traces.py --quick    # 16 probe jobs, 96 jobs

Three tables, each with ``network.recovery=wait_all`` (the papers' rule) and
``decodable`` (gclab's own) side by side:

1. **Against the public simulator**: every total ``../shared/traces/PUBLIC_SIMULATOR.md``
   lists (load-0 traces, base load 0, μ = 1), grouped by trace, slope and scheme: their
   range, how far ``wait_all`` is from it (it reproduces every row), how far
   ``decodable`` is, and why, counted round by round (rounds that end when the due job
   decodes instead of at the slowest worker, idle drain rounds not run, rounds that
   recover a packet the papers' rule leaves out, drain rounds that repeat work the
   papers' rule got by waiting).
2. **The papers' search** on their setting (Sydney load 0, 16 jobs, slope 2.2, μ = 1,
   the full grids of ``gclab.sim.search``): the best setting of each scheme, next to
   what their search picked.
3. **Probe, then evaluate**, per region (Sydney, Tokyo; 256 workers): fit the load slope
   (least squares of the mean duration against the recorded load over the five traces);
   search every grid on a ``--probe-jobs`` run of the load-0 trace and keep each
   scheme's fastest setting, as the papers chose parameters; run it for ``--jobs`` jobs
   on each of the four other traces, rescaled from their own recorded load
   (``delay = durations + (L − base_load)·slope``), μ = 1, wrap-around replay; mean ±
   std of the total time and mean waits over the four.
"""

from __future__ import annotations

import argparse
from collections import defaultdict
from pathlib import Path

import numpy as np

import gclab.schemas  # noqa: F401  (registers the scheme schemas)
from gclab import CONF_DIR
from gclab.network import NetworkConfig
from gclab.network.trace import Trace, load_trace
from gclab.schemas import instantiate_checked
from gclab.sim import public
from gclab.sim.engine import SimResult, simulate
from gclab.sim.fast import load_kernels
from gclab.sim.search import scheme_option, search

TRACES = CONF_DIR.parents[2] / "shared" / "traces"
TABLE = TRACES / "PUBLIC_SIMULATOR.md"
REGIONS = {"sydney": 20, "tokyo": 10}
LOADS = (0, 25, 50, 75, 100)
SCHEMES = ("uncoded", "classic_cr", "sr_sgc", "m_sgc")
MODES = ("wait_all", "decodable")
N = 256


def trace_path(region: str, load: int) -> Path:
    return TRACES / f"lambda-{region}-cnn-w{N}-r{REGIONS[region]}-load{load:03d}.npz"


def fitted_slope(region: str) -> float:
    """Seconds per unit load: least squares of the mean duration against the recorded
    load over the region's five traces."""
    points = [load_trace(trace_path(region, load)) for load in LOADS]
    return float(np.polyfit([r for _, r in points], [d.mean() for d, _ in points], 1)[0])


def network(recovery: str) -> NetworkConfig:
    return NetworkConfig(policy="deadline", mu=1.0, recovery=recovery)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="16 probe jobs, 96 jobs")
    parser.add_argument("--probe-jobs", type=int, default=None)
    parser.add_argument("--jobs", type=int, default=None)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    probe_jobs = args.probe_jobs or (16 if args.quick else 80)
    jobs = args.jobs or (96 if args.quick else 496)
    load_kernels()
    if TABLE.is_file():
        against_public(public.rows(TABLE))
        papers_search()
    else:
        print(f"no {TABLE}: the comparison with the public simulator is skipped")
    regions = [r for r in REGIONS if all(trace_path(r, load).is_file() for load in LOADS)]
    if not regions:
        raise SystemExit(f"no complete trace set under {TRACES}")
    probe_and_evaluate(regions, probe_jobs, jobs, args.seed)


def against_public(rows: list[public.Row]) -> None:
    """Table 1: their totals, gclab's in both modes, and why decodable differs."""
    groups: dict[tuple, list] = defaultdict(list)
    for row in rows:
        runs = {m: simulate(row.build(), row.delay(), network(m), row.jobs, 0) for m in MODES}
        groups[row.trace.name.split("-")[1], row.slope, row.scheme].append((row, runs))
    print("1. against the public simulator (load-0 traces, every row of PUBLIC_SIMULATOR.md)\n")
    print("| trace | slope | scheme | rows | theirs (s) | wait_all − theirs | decodable − theirs "
          "| why decodable differs (rounds, over the rows) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for (trace, slope, scheme), members in groups.items():
        theirs = [row.total for row, _ in members]
        exact = max(abs(r["wait_all"].total_time / row.total - 1) for row, r in members)
        change = [round(100 * (r["decodable"].total_time / row.total - 1), 1) + 0.0
                  for row, r in members]  # fmt: skip
        why = reasons([(r["wait_all"], r["decodable"]) for _, r in members])
        print(
            f"| {trace} | {slope} | {scheme} | {len(members)} | {span(theirs, '.2f')} | "
            f"{f'≤ {exact:.0e}' if exact else '0'} | {span(change, '+.1f')} % | {why} |"
        )


def reasons(pairs: list[tuple[SimResult, SimResult]]) -> str:
    """Round-by-round causes of ``decodable`` ≠ ``wait_all`` (= theirs), counted."""
    counts = defaultdict(int)
    for papers, ours in pairs:
        theirs = dict(zip(papers.index.tolist(), papers.durations.tolist()))
        mine = dict(zip(ours.index.tolist(), ours.durations.tolist()))
        counts["idle drain rounds not run"] += len(theirs.keys() - mine.keys())
        counts["drain rounds run for repeats their waits made needless"] += len(
            mine.keys() - theirs.keys()
        )
        for r in theirs.keys() & mine.keys():
            if mine[r] < theirs[r]:
                counts["end when the due job decodes, not at the slowest worker"] += 1
            elif mine[r] > theirs[r]:
                counts["recover a packet their rule leaves out"] += 1
    listed = [f"{count} {cause}" for cause, count in counts.items() if count]
    return "; ".join(listed) or "none: identical"


def span(values: list[float], fmt: str) -> str:
    low, high = min(values), max(values)
    return f"{low:{fmt}}" if f"{low:{fmt}}" == f"{high:{fmt}}" else f"{low:{fmt}} … {high:{fmt}}"


def papers_search() -> None:
    """Table 2: the full search on their setting, best of each scheme, next to theirs."""
    delay = Trace(str(trace_path("sydney", 0)), slope=2.2, base_load=0.0)
    print("\n2. the papers' search: Sydney load 0, 16 jobs, slope 2.2, μ = 1, full grids\n")
    print("| scheme | wait_all: best | total (s) | decodable: best | total (s) |")
    print("|---|---|---|---|---|")
    for name in SCHEMES:
        cells = []
        for mode in MODES:
            best = search(scheme_option(name), N, delay, network(mode), 16, seed=0)[0]
            cells.append(f"{shown(best.params)} | {best.result.total_time:.9f}")
        print(f"| {name} | {' | '.join(cells)} |")
    print("\ntheir search (PUBLIC_SIMULATOR.md; their GC tolerates s − 1 stragglers):")
    for name, (setting, total) in public.search_best(TABLE).items():
        print(f"- {name}: {setting or '–'} {total:.9f}")


def probe_and_evaluate(regions: list[str], probe_jobs: int, jobs: int, seed: int) -> None:
    """Table 3: choose on a probe of the load-0 trace, run on the other four."""
    print(f"\n3. probe ({probe_jobs} jobs, load 0) then evaluate ({jobs} jobs, loads 25-100)")
    for region in regions:
        slope = fitted_slope(region)
        probe = Trace(str(trace_path(region, 0)), slope, base_load=0.0)
        print(f"\n{region}: slope {slope:.4f} s per unit load\n")
        print("| scheme | recovery | best params | load | probe (s) | total (s) | waits |")
        print("|---|---|---|---|---|---|---|")
        for name in SCHEMES:
            node = scheme_option(name)
            for mode in MODES:
                best = search(node, N, probe, network(mode), probe_jobs, seed)[0]
                scheme = instantiate_checked(node, n=N, **best.params)
                runs = [
                    simulate(scheme, Trace(str(trace_path(region, load)), slope), network(mode),
                             jobs, seed)
                    for load in LOADS[1:]
                ]  # fmt: skip
                times = [r.total_time for r in runs]
                print(
                    f"| {name} | {mode} | {shown(best.params)} | {scheme.load:.6f} | "
                    f"{best.result.total_time:.2f} | {np.mean(times):.2f} ± {np.std(times):.2f} "
                    f"| {np.mean([r.waits for r in runs]):.1f} |"
                )


def shown(params: dict) -> str:
    return ", ".join(f"{k}={v}" for k, v in params.items()) or "–"


if __name__ == "__main__":
    main()
