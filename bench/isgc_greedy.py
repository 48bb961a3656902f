"""IS-GC's greedy rule against the maximum set, on the shared Lambda traces.

    python bench/isgc_greedy.py            # 496 jobs per trace
    python bench/isgc_greedy.py --quick    # 96 jobs

n = 256 workers, slope 2.2 s per unit load, base load 0, wrap-around replay, every trace
of both regions (as bench/partial.py), ``network.recovery=partial`` at μ = 1 and 0.1. Each
round's workers in time come from the round protocol; the decoder's maximum set of them
with disjoint windows (:meth:`gclab.coding.windows.Windows.maximum`) is compared with
IS-GC's ``index_max_d`` (:func:`gclab.coding.windows.isgc_greedy`) from a start drawn
uniformly among the arrived workers, as IS-GC draws it (seeded), and from its worst start.
The table gives the share of rounds in which the greedy set covers less, the mean
coverage of each, and the maximum set's CPU time per round (``time.thread_time``, mean
over the distinct rounds; CPU time, so that the machine's load shows less in it).
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np
from sgc_traces import LOADS, REGIONS, N, trace_path

from gclab.coding.is_cr import IsCR
from gclab.coding.is_hr import IsHR
from gclab.coding.repetition import RepetitionScheme
from gclab.coding.windows import isgc_greedy
from gclab.network import Finished, NetworkConfig, RoundProtocol
from gclab.network.trace import Trace

SLOPE = 2.2
MUS = (1.0, 0.1)
SCHEMES = {
    "is_cr(c=16)": lambda: IsCR(N, 16),
    "is_hr(c=16, c1=8, g=16)": lambda: IsHR(N, 16, 8, 16),
    "is_hr(c=16, c1=8, g=4)": lambda: IsHR(N, 16, 8, 4),
}


def arrivals(scheme: RepetitionScheme, trace: Trace, mu: float, jobs: int) -> list[np.ndarray]:
    """The workers in time in each round, as the protocol delivers them under ``partial``."""
    network = NetworkConfig(policy="deadline", mu=mu, recovery="partial")
    protocol = RoundProtocol(network, trace, N, seed=0)
    decoder = scheme.decoder()
    out = []
    for r in range(jobs):
        outcome = protocol.run_round(r, Finished(np.zeros(N)), decoder, lambda round, w: None)
        for job in outcome.decodable:
            decoder.decode(job)
        for job in outcome.partial:
            decoder.decode_partial(job)
        out.append(~outcome.erased)
    return out


def trace(region: str, load: int) -> Trace:
    return Trace(str(trace_path(region, load)), slope=SLOPE, base_load=0.0)


def compare(scheme: RepetitionScheme, rounds: list[np.ndarray], rng: np.random.Generator):
    """``(short drawn, short worst, coverage max, coverage drawn, coverage worst, ms)``.

    Replay wraps around the trace's columns, so rounds repeat: each distinct pattern is
    solved once (the time per round is the maximum set's, over the distinct patterns).
    """
    windows, c = scheme.windows, scheme.windows.c
    solved: dict[bytes, tuple[int, list[int]]] = {}
    seconds = 0.0
    short_drawn = short_worst = 0
    best, drawn, worst = [], [], []
    for arrived in rounds:
        key = np.packbits(arrived).tobytes()
        if key not in solved:
            start = time.thread_time()
            size = len(windows.maximum(arrived))
            seconds += time.thread_time() - start
            solved[key] = (size, [len(kept) for kept in isgc_greedy(windows, arrived)])
        size, sizes = solved[key]
        pick = sizes[int(rng.integers(len(sizes)))]
        short_drawn += pick < size
        short_worst += min(sizes) < size
        best.append(size * c / N)
        drawn.append(pick * c / N)
        worst.append(min(sizes) * c / N)
    n = len(rounds)
    return (
        short_drawn / n, short_worst / n, np.mean(best), np.mean(drawn), np.mean(worst),
        1e3 * seconds / len(solved),
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="96 jobs per trace")
    args = parser.parse_args()
    jobs = 96 if args.quick else 496
    rng = np.random.default_rng(0)
    for mu in MUS:
        print(
            f"{jobs} jobs per trace, {2 * len(LOADS)} traces (Sydney, Tokyo; loads "
            f"{', '.join(map(str, LOADS))}), n = {N}, slope {SLOPE}, base load 0, μ = {mu:g}, "
            f"load average {os.getloadavg()[0]:.1f}\n"
        )
        print(
            "| scheme | rounds | greedy covers less (drawn start) | (worst start) | "
            "coverage: maximum | greedy, drawn | greedy, worst | maximum set (CPU ms/round) |"
        )
        print("|---|---|---|---|---|---|---|---|")
        for label, build in SCHEMES.items():
            scheme = build()
            rounds = [
                arrived
                for region in REGIONS
                for load in LOADS
                for arrived in arrivals(scheme, trace(region, load), mu, jobs)
            ]
            less, worst, best, drawn, low, ms = compare(scheme, rounds, rng)
            print(
                f"| {label} | {len(rounds)} | {less:.2%} | {worst:.2%} | {best:.4f} | "
                f"{drawn:.4f} | {low:.4f} | {ms:.2f} |"
            )
        print()


if __name__ == "__main__":
    main()
