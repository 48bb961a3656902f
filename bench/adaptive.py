"""Adaptive coding (``adapt=search``) against choosing the code once, on the shared traces.

    python bench/adaptive.py             # both recovery modes, three scenarios
    python bench/adaptive.py --quick     # wait_all only, the regime change only

Scenarios, 256 workers, μ = 1, ``delay.slope`` (default 0.31 s per unit load, the
slope fitted on the traces in bench/sgc_traces.py) from base load 0, 100 jobs, built
with numpy into temporary traces from ``../shared/traces``:

* **regime change**: 50 rounds of Tokyo at load 0 (no heavy stragglers) replayed in
  order, then 50 rounds of a trace with 25–40 s tails (``--heavy``, default Sydney at
  load 0.5);
* **stationary**: 100 rounds of the heavy trace alone, and of Tokyo at load 0 alone.

Per scenario and ``network.recovery``, over the SGC papers' four schemes (``uncoded``,
``classic_cr``, ``sr_sgc``, ``m_sgc``, their full grids):

* *best fixed in hindsight*: the fastest setting over the whole run (the search on it);
* *best per phase*: the fastest setting of each phase, summed (phases run alone);
* *probe then fixed*: the fastest setting on a ``--probe``-job run of the first rounds,
  kept for the whole run (the papers' protocol);
* *adaptive*: ``adapt=search`` over the four schemes, starting from the probe's choice
  (regime change) or from the best fixed setting (stationary: a good start), with
  ``adapt.every``, ``adapt.window`` and ``adapt.margin`` at their defaults.

The adaptive run's decision time (wall, per decision) and its switches are printed with
the tables.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import numpy as np

import gclab.schemas  # noqa: F401  (registers the scheme schemas)
from gclab import CONF_DIR
from gclab.adapt.decide import Controller
from gclab.adapt.options import Search
from gclab.adapt.simulate import simulate_adaptive
from gclab.network import NetworkConfig
from gclab.network.trace import Trace, load_trace
from gclab.schemas import instantiate_checked
from gclab.sim.fast import load_kernels
from gclab.sim.search import Trial, scheme_option, search

TRACES = CONF_DIR.parents[2] / "shared" / "traces"
SCHEMES = ("uncoded", "classic_cr", "sr_sgc", "m_sgc")
N = 256


def rounds_of(name: str, rounds: int) -> np.ndarray:
    """``rounds`` columns of trace ``name`` replayed in order (wrapping around)."""
    durations, _ = load_trace(TRACES / f"{name}.npz")
    return durations[:, np.arange(rounds) % durations.shape[1]]


def heavy_rounds(rounds: int, tail: float) -> np.ndarray:
    """``rounds`` columns replaying, in order, every round of the shared traces in which
    some worker took more than ``tail`` seconds (file order, wrapping around)."""
    columns = []
    for path in sorted(TRACES.glob("lambda-*.npz")):
        durations, _ = load_trace(path)
        columns += [
            durations[:, r] for r in range(durations.shape[1]) if durations[:, r].max() > tail
        ]
    heavy = np.stack(columns, axis=1)
    return heavy[:, np.arange(rounds) % heavy.shape[1]]


def write(path: Path, durations: np.ndarray) -> Path:
    np.savez(path, durations=durations, load=np.float64(0.0))
    return path


def searched(trace: Path, slope: float, network: NetworkConfig, jobs: int) -> list[Trial]:
    """Every setting of the four schemes on ``jobs`` jobs of ``trace``, fastest first."""
    delay = Trace(str(trace), slope=slope, base_load=0.0)
    trials = [
        t for name in SCHEMES for t in search(scheme_option(name), N, delay, network, jobs, 0)
    ]
    return sorted(trials, key=lambda t: t.result.total_time)


def adaptive(trace: Path, args, network: NetworkConfig, start: Trial):
    """The adaptive run from ``start``'s setting; its result and controller."""
    delay = Trace(str(trace), slope=args.slope, base_load=0.0)
    nodes = {name: scheme_option(name) for name in SCHEMES}
    scheme = instantiate_checked(nodes[start.name], n=N, **start.params)
    policy = Search(args.every, args.window, None, args.slack, args.margin)
    controller = Controller(policy, nodes, scheme, delay, network, 0, 1427240.0)
    began = time.perf_counter()
    result = simulate_adaptive(scheme, controller, delay, network, args.jobs, 0)
    return result, controller, time.perf_counter() - began


def scenario(name: str, phases: list[Path], whole: Path, args, network: NetworkConfig) -> None:
    """One scenario's table rows for one recovery mode."""
    jobs = args.jobs
    trials = searched(whole, args.slope, network, jobs)
    best = trials[0]
    per_phase = sum(searched(p, args.slope, network, jobs // len(phases))[0].result.total_time
                    for p in phases)  # fmt: skip
    probe = searched(whole, args.slope, network, args.probe)[0]
    kept = next(t for t in trials if t.result.scheme == probe.result.scheme)
    start = probe if len(phases) > 1 else best
    result, controller, wall = adaptive(whole, args, network, start)
    total = result.total_time
    seconds = controller.seconds or [0.0]
    print(
        f"| {name} | {network.recovery} | {best.result.total_time:.1f} ({best.result.scheme}) | "
        f"{per_phase:.1f} | {kept.result.total_time:.1f} ({probe.result.scheme}) | {total:.1f} | "
        f"{total / kept.result.total_time:.2f} | {total / best.result.total_time:.2f} | "
        f"{len(controller.switches)} | {1e3 * np.mean(seconds):.0f} / {1e3 * max(seconds):.0f} | "
        f"{wall:.1f} |"
    )
    for switch in controller.switches:
        print(f"  switch at job {switch.job}: {switch.scheme}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--heavy", default=None, help="a trace (default: the heavy rounds)")
    parser.add_argument("--tail", type=float, default=20.0)
    parser.add_argument("--every", type=int, default=Search().every)
    parser.add_argument("--window", type=int, default=Search().window)
    parser.add_argument("--slack", type=float, default=Search().slack)
    parser.add_argument("--margin", type=float, default=Search().margin)
    parser.add_argument("--calm", default="lambda-sydney-cnn-w256-r20-load000")
    parser.add_argument("--slope", type=float, default=0.31)
    parser.add_argument("--jobs", type=int, default=100)
    parser.add_argument("--probe", type=int, default=16)
    parser.add_argument("--quick", action="store_true")
    args = parser.parse_args()
    load_kernels()
    half = args.jobs // 2
    print(f"every={args.every} window={args.window} slack={args.slack} margin={args.margin}")
    print(
        "| scenario | recovery | best fixed in hindsight (s) | best per phase (s) | "
        "probe then fixed (s) | adaptive (s) | adaptive / probe | adaptive / best | "
        "switches | decision ms (mean / max) | adaptive run wall (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    modes = ("wait_all",) if args.quick else ("wait_all", "decodable")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        calm = rounds_of(args.calm, args.jobs)
        if args.heavy is None:
            heavy = heavy_rounds(args.jobs, args.tail)
        else:
            heavy = rounds_of(args.heavy, args.jobs)
        change = write(folder / "change.npz", np.concatenate([calm[:, :half], heavy[:, :half]], 1))
        phases = [write(folder / "a.npz", calm[:, :half]), write(folder / "b.npz", heavy[:, :half])]
        scenarios = [("regime change", phases, change)]
        if not args.quick:
            for label, durations in (("stationary heavy", heavy), ("stationary calm", calm)):
                path = write(folder / f"{label.split()[1]}.npz", durations)
                scenarios.append((label, [path], path))
        for recovery in modes:
            network = NetworkConfig(recovery=recovery)
            for name, parts, whole in scenarios:
                scenario(name, parts, whole, args, network)


if __name__ == "__main__":
    main()
