"""Simulator speed: every scheme in gclab/conf/scheme at n=256, then the full SGC parameter search.

    python bench/sim_speed.py            # 1000 jobs per scheme; search with 80 probe jobs
    python bench/sim_speed.py --quick    # 100 jobs per scheme; search with 10 probe jobs

Every scheme runs with the same delays: stragglers (1 s + Exp(0.3 s) per worker and
round, a fresh pattern every round so decoders cannot live off their caches) plus 1 %
Bernoulli packet loss, the μ-rule with μ = 1, rto = 1 s. Building a scheme is timed
apart from simulating it (evaluation codes build their numbers lazily and the simulator
never needs them, so "build" is only the constructor).

The search is ``gclab.sim.search.search`` (what ``python -m gclab.sim sim.search=true``
runs) over the whole grid of uncoded, classic_cr, sr_sgc and m_sgc on the shared Sydney
load-0 Lambda trace (256 workers, slope 0.3088 s per unit load, μ = 1), as the SGC paper
chose its parameters on 80-job probe runs (REFERENCE.md §6). Skipped, with the reason,
when ``../shared/traces`` is absent.
"""

from __future__ import annotations

import argparse
import time

from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import gclab.coding
import gclab.network  # noqa: F401  (register the scheme and delay schemas)
from gclab import CONF_DIR
from gclab.errors import DecodeError
from gclab.network import NetworkConfig
from gclab.sim.engine import simulate
from gclab.sim.search import search

#: The probe trace of the search benchmark and the schemes whose grids it searches.
SEARCH_TRACE = CONF_DIR.parents[2] / "shared/traces/lambda-sydney-cnn-w256-r20-load000.npz"
SEARCH_SCHEMES = ("uncoded", "classic_cr", "sr_sgc", "m_sgc")

#: Parameters that make each scheme meaningful at n=256 (s=15 as the SGC paper's GC).
PARAMS = {
    "classic_fr": ["scheme.s=15"],
    "classic_cr": ["scheme.s=15"],
    "ignore_stragglers": ["scheme.s=15"],
    "cce_cr": ["scheme.s=15", "scheme.m=2"],
    "cce_fr": ["scheme.s=14", "scheme.m=2"],
}
#: Extra rows: scheme options worth timing on their own.
VARIANTS = {"classic_cr": [["scheme.construction=tandon"]]}
DELAY = [
    "delay=composite",
    "delay.compute.shift=1.0",
    "delay.compute.mean=0.3",
    "delay.loss.p=0.01",
]


def settings() -> list[list[str]]:
    """Override lists, one per row: every scheme option, then its variants."""
    rows = []
    for path in sorted((CONF_DIR / "scheme").glob("*.yaml")):
        base = [f"scheme={path.stem}", *PARAMS.get(path.stem, [])]
        rows.append(base)
        rows.extend(base + extra for extra in VARIANTS.get(path.stem, []))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 jobs instead of 1000")
    parser.add_argument("--workers", type=int, default=256)
    args = parser.parse_args()
    jobs = 100 if args.quick else 1000
    print(f"n={args.workers}, {jobs} jobs, delay: {' '.join(DELAY[1:])}, deadline mu=1\n")
    print(f"| {'scheme':<36} | build (s) | simulate (s) | jobs/s | total time (s) | waits |")
    print(f"|{'-' * 38}|-----------|--------------|--------|----------------|-------|")
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        for overrides in settings():
            cfg = compose("sim", overrides=[*overrides, *DELAY, f"cluster.workers={args.workers}"])
            start = time.perf_counter()
            scheme = instantiate(cfg.scheme, n=cfg.cluster.workers)
            built = time.perf_counter()
            try:
                result = simulate(scheme, instantiate(cfg.delay), NetworkConfig(), jobs, seed=0)
            except DecodeError as exc:
                print(
                    f"| {scheme.describe():<36} | {built - start:9.2f} | DecodeError: {exc!s:.60}"
                )
                continue
            took = time.perf_counter() - built
            print(
                f"| {scheme.describe():<36} | {built - start:9.2f} | {took:12.2f} | "
                f"{jobs / took:6.0f} | {result.total_time:14.1f} | {result.waits:5d} |"
            )
        full_search(probe_jobs=10 if args.quick else 80)


def full_search(probe_jobs: int) -> None:
    """Time the whole SGC parameter search on one 256-worker trace (target: <= 60 s)."""
    if not SEARCH_TRACE.is_file():
        print(f"\nfull SGC parameter search skipped: no trace at {SEARCH_TRACE}")
        return
    print(f"\nfull SGC parameter search, {SEARCH_TRACE.name}, {probe_jobs} probe jobs, mu=1\n")
    print("| scheme | settings | seconds | best | probe time (s) |")
    print("|---|---|---|---|---|")
    delay = ["delay=trace", f"delay.path={SEARCH_TRACE}", "delay.slope=0.3088"]
    network = NetworkConfig(policy="deadline", mu=1.0)
    total = 0.0
    for name in SEARCH_SCHEMES:
        cfg = compose("sim", overrides=[f"scheme={name}", "cluster.workers=256", *delay])
        start = time.perf_counter()
        trials = search(cfg.scheme, 256, instantiate(cfg.delay), network, probe_jobs, seed=0)
        took = time.perf_counter() - start
        total += took
        best = ", ".join(f"{k}={v}" for k, v in trials[0].params.items()) or "–"
        print(
            f"| {name} | {len(trials)} | {took:.1f} | {best} | {trials[0].result.total_time:.1f} |"
        )
    print(f"\nwhole search: {total:.1f} s")


if __name__ == "__main__":
    main()
