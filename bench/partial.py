"""Partial recovery against waiting, on the shared Lambda traces (docs/simulator.md).

    python bench/partial.py            # 496 jobs per trace
    python bench/partial.py --quick    # 96 jobs

n = 256 workers, load slope 2.2 s per unit load, base load 0, wrap-around replay, as
bench/sgc_traces.py. For ``classic_fr``, ``classic_cr`` (s = 15), IS-GC's ``is_cr`` and
``is_hr`` at the same load (c = 16; is_hr with c1 = 8 in groups of n/g = 16) and
``uncoded``, each of the three recovery modes runs on every trace of both regions; a
table per μ (close
at min((1+μ)·fastest, slowest): μ = 1 as the papers, and a tight μ = 0.1 at which the
codes fail rounds) gives the total time (mean ± std over the traces), the mean coverage
(fraction of the batch gradient each job applied) and the share of jobs decoded
exactly.
"""

from __future__ import annotations

import argparse

import numpy as np
from sgc_traces import LOADS, REGIONS, N, trace_path

from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.is_cr import IsCR
from gclab.coding.is_hr import IsHR
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim.engine import simulate

SLOPE = 2.2
MUS = (1.0, 0.1)
MODES = ("wait_all", "decodable", "partial")
SCHEMES = {
    "classic_fr(s=15)": lambda: ClassicFR(N, 15),
    "classic_cr(s=15)": lambda: ClassicCR(N, 15),
    "is_cr(c=16)": lambda: IsCR(N, 16),
    "is_hr(c=16, c1=8, g=16)": lambda: IsHR(N, 16, 8, 16),
    "uncoded": lambda: Uncoded(N),
}


def run(jobs: int, mu: float) -> list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray]]:
    """``(scheme, mode, totals, coverage means, exact shares)`` over every trace."""
    rows = []
    for label, build in SCHEMES.items():
        scheme = build()
        for mode in MODES:
            network = NetworkConfig(policy="deadline", mu=mu, recovery=mode)
            totals, coverage, exact = [], [], []
            for region in REGIONS:
                for load in LOADS:
                    trace = Trace(str(trace_path(region, load)), slope=SLOPE, base_load=0.0)
                    result = simulate(scheme, trace, network, jobs, seed=0)
                    totals.append(result.total_time)
                    coverage.append(result.coverage.mean())
                    exact.append(np.mean(result.coverage == 1.0))
            rows.append((label, mode, *map(np.asarray, (totals, coverage, exact))))
    return rows


def table(
    rows: list[tuple[str, str, np.ndarray, np.ndarray, np.ndarray]], jobs: int, mu: float
) -> str:
    lines = [
        f"{jobs} jobs per trace, {2 * len(LOADS)} traces (Sydney, Tokyo; loads "
        f"{', '.join(map(str, LOADS))}), n = {N}, slope {SLOPE}, base load 0, μ = {mu:g}",
        "",
        "| scheme | recovery | total time (s) | vs wait_all | coverage mean | exact jobs |",
        "|---|---|---|---|---|---|",
    ]
    base = {}
    for label, mode, totals, coverage, exact in rows:
        base.setdefault(label, totals.mean())
        lines.append(
            f"| {label} | {mode} | {totals.mean():.1f} ± {totals.std():.1f} | "
            f"{totals.mean() / base[label]:.3f} | {coverage.mean():.4f} | {exact.mean():.3f} |"
        )
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="96 jobs per trace")
    args = parser.parse_args()
    jobs = 96 if args.quick else 496
    for mu in MUS:
        print(table(run(jobs, mu), jobs, mu), end="\n\n")


if __name__ == "__main__":
    main()
