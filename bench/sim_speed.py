"""Simulator speed: every scheme in gclab/conf/scheme at n=256, then the SGC papers' search.

    python bench/sim_speed.py            # 1000 jobs per scheme; search timed best of 5
    python bench/sim_speed.py --quick    # 100 jobs per scheme; search timed once
    python bench/sim_speed.py --search-only
    python bench/sim_speed.py --against main    # the search against a revision, side by side
    python bench/sim_speed.py --against main --only-in-process   # in one process only

Every scheme runs with the same delays: stragglers (1 s + Exp(0.3 s) per worker and
round, a fresh pattern every round so decoders cannot live off their caches) plus 1 %
Bernoulli packet loss, the μ-rule with μ = 1, rto = 1 s. Building a scheme is timed
apart from simulating it (evaluation codes build their numbers lazily and the simulator
never needs them, so "build" is only the constructor).

The search is the one command ``python -m gclab.sim sim.search=true
sim.schemes=[uncoded,classic_cr,sr_sgc,m_sgc] ...`` on the shared Sydney load-0 Lambda
trace with the public simulator's settings (256 workers, 16 jobs, slope 2.2 s per unit
load, base load 0, μ = 1), in both recovery modes, with the clock of bytes and server
time off and on (``BYTES``: 50 MB/s uplinks, a 10 Gb/s server link both ways, 5 ms of
server work per round, the small CNN's gradient), run as a user runs it (a fresh
interpreter). It reports ``search_seconds`` (the search alone, from summary.json),
settings per second, the whole command's wall time, and both against the public
simulator's full search of the same trace (3329 settings, its time read from
../shared/traces/PUBLIC_SIMULATOR.md) plus this machine's interpreter start with numpy
(theirs). Also: the same settings per second through the general engine (a sample), and
a cold start (:mod:`first_search`'s: a fresh copy of the package, an empty numba cache, so the
kernels compile). Skipped, with the reason, when
``../shared/traces`` is absent. ``--against REV`` runs the search commands of the working
tree and of a git revision alternately (its kernels compiled first) and prints both
``search_seconds`` (best of the repeats), their ratio and each against the public
simulator's time, so that a change is measured under one load; then the same search
called in one process (the four grids, kernels loaded, timed apart from Hydra and the
interpreter), wall and CPU seconds, best of the repeats: on a loaded machine the wall
time swells with the other processes and the CPU time much less.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import first_search
from common import SHARED
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

import gclab.coding
import gclab.schemas  # noqa: F401  (registers the scheme and delay schemas)
from gclab import CONF_DIR
from gclab.errors import DecodeError
from gclab.network import NetworkConfig
from gclab.network.trace import Trace
from gclab.sim import public
from gclab.sim.engine import simulate
from gclab.sim.search import grid, scheme_option, search

#: The probe trace of the search benchmark and the schemes whose grids it searches.
SEARCH_TRACE = SHARED / "traces/lambda-sydney-cnn-w256-r20-load000.npz"
SEARCH_SCHEMES = ("uncoded", "classic_cr", "sr_sgc", "m_sgc")
#: The search's links and server time when bytes are on.
BYTES = [
    "network.bandwidth=5e7",
    "network.server_bandwidth=1.25e9",
    "network.broadcast_bandwidth=1.25e9",
    "network.server_time=0.005",
]

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
    parser.add_argument("--search-only", action="store_true", help="only the papers' search")
    parser.add_argument("--against", metavar="REV", help="the search against a git revision")
    parser.add_argument("--repeats", type=int, default=5, help="runs of each search timed")
    parser.add_argument(
        "--only-in-process", action="store_true", help="with --against: no search commands"
    )
    parser.add_argument("--in-process", metavar="RECOVERY", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.in_process:  # the child of --against: this interpreter's package, timed
        print(json.dumps(in_process(args.in_process, args.repeats)))
        return
    if args.against:
        against(args.against, args.repeats, not args.only_in_process)
        return
    if not args.search_only:
        every_scheme(100 if args.quick else 1000, args.workers)
    papers_search(repeats=1 if args.quick else 5, cold=not args.quick)


def every_scheme(jobs: int, workers: int) -> None:
    """Simulate ``jobs`` jobs of every scheme option at ``workers`` workers."""
    print(f"n={workers}, {jobs} jobs, delay: {' '.join(DELAY[1:])}, deadline mu=1\n")
    print(f"| {'scheme':<36} | build (s) | simulate (s) | jobs/s | total time (s) | waits |")
    print(f"|{'-' * 38}|-----------|--------------|--------|----------------|-------|")
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        for overrides in settings():
            cfg = compose("sim", overrides=[*overrides, *DELAY, f"cluster.workers={workers}"])
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


def papers_search(repeats: int, cold: bool) -> None:
    """Time the one-command search of the papers' four schemes in both recovery modes."""
    if not SEARCH_TRACE.is_file():
        print(f"\nthe papers' search skipped: no trace at {SEARCH_TRACE}")
        return
    theirs = public.search_seconds(SEARCH_TRACE.parent / "PUBLIC_SIMULATOR.md")
    start = min(timed([sys.executable, "-c", "import numpy"])[0] for _ in range(repeats))
    print(f"\nthe papers' four schemes, {SEARCH_TRACE.name}, 16 jobs, slope 2.2, mu=1 "
          f"(load average {os.getloadavg()[0]:.1f})\n")  # fmt: skip
    print("| recovery | bytes | settings | search_seconds | settings/s | ratio to theirs "
          "| whole command (s) | theirs + interpreter (s) | engine settings/s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    for recovery, extra in [(r, b) for r in ("wait_all", "decodable") for b in ([], BYTES)]:
        runs = [search_command(recovery, extra) for _ in range(repeats)]
        wall, summary = min(runs, key=lambda run: run[1]["search_seconds"])
        seconds, settings = summary["search_seconds"], summary["settings"]
        whole = min(w for w, _ in runs)
        ratio = f"{theirs / seconds:.0f}× faster" if theirs else "–"
        budget = f"{theirs + start:.2f}" if theirs else "–"
        print(
            f"| {recovery} | {'on' if extra else 'off'} | {settings} | {seconds:.3f} | "
            f"{settings / seconds:,.0f} | {ratio} | {whole:.2f} | {budget} | "
            f"{engine_rate(recovery, extra):,.0f} |"
        )
    print(f"\ntheir full search: {theirs} s; interpreter start with numpy: {start:.2f} s")
    if cold:  # a fresh copy of the package: no kernel cached next to the sources is reused
        with tempfile.TemporaryDirectory() as tmp:
            source = Path(tmp) / "src"
            source.mkdir()
            first_search.install(source, None)
            wall, _, _ = first_search.timed(source, Path(tmp) / "numba", Path(tmp) / "out")
        print(f"cold start (a fresh install, the kernels compile): whole command {wall:.1f} s")


def against(rev: str, repeats: int, commands: bool = True) -> None:
    """``search_seconds`` of the working tree and of ``rev``, alternately, best of
    ``repeats`` (unless not ``commands``), then both searches in one process."""
    theirs = public.search_seconds(SEARCH_TRACE.parent / "PUBLIC_SIMULATOR.md")
    with tempfile.TemporaryDirectory() as tmp:
        source = Path(tmp)
        first_search.install(source, rev)
        compile_kernels = "from gclab.sim.fast import load_kernels; load_kernels()"
        subprocess.run([sys.executable, "-c", compile_kernels], cwd=source, check=True,
                       env={**os.environ, "PYTHONPATH": str(source)})  # fmt: skip
        if commands:
            search_commands(rev, repeats, source, theirs)
        print(f"\nthe same search in one process, best of {repeats} (load average "
              f"{os.getloadavg()[0]:.1f})\n")  # fmt: skip
        print(f"| recovery | working tree wall / CPU (s) | {rev} wall / CPU (s) | CPU ratio "
              f"| working tree CPU ÷ public | {rev} CPU ÷ public |")  # fmt: skip
        print("|---|---|---|---|---|---|")
        for recovery in ("wait_all", "decodable"):
            ours = child_in_process(recovery, repeats, None)
            old = child_in_process(recovery, repeats, source)
            print(
                f"| {recovery} | {ours['wall']:.3f} / {ours['cpu']:.3f} "
                f"| {old['wall']:.3f} / {old['cpu']:.3f} | {ours['cpu'] / old['cpu']:.2f} "
                f"| {ours['cpu'] / theirs:.3f} | {old['cpu'] / theirs:.3f} |"
            )
    print(f"\nload average {os.getloadavg()[0]:.1f}; the public simulator: {theirs} s")


def search_commands(rev: str, repeats: int, source: Path, theirs: float) -> None:
    """The search command's ``search_seconds`` here and at ``source`` (``rev``), alternately."""
    print(f"the papers' search, {repeats} runs each, alternately "
          f"(load average {os.getloadavg()[0]:.1f})\n")  # fmt: skip
    print(f"| recovery | bytes | working tree (s) | {rev} (s) | ratio "
          f"| working tree ÷ public simulator | {rev} ÷ public simulator |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for recovery, extra in [(r, b) for r in ("wait_all", "decodable") for b in ([], BYTES)]:
        ours, old = [], []
        for _ in range(repeats):
            ours.append(search_command(recovery, extra)[1]["search_seconds"])
            old.append(search_command(recovery, extra, source)[1]["search_seconds"])
        print(
            f"| {recovery} | {'on' if extra else 'off'} | {min(ours):.3f} | {min(old):.3f} "
            f"| {min(ours) / min(old):.2f} | {min(ours) / theirs:.3f} "
            f"| {min(old) / theirs:.3f} |"
        )


def in_process(recovery: str, repeats: int) -> dict[str, float]:
    """The papers' search (bytes off) called in this process: best wall and CPU seconds
    of ``repeats`` calls after one that loads the kernels and fills the caches."""
    from gclab.sim.fast import load_kernels

    load_kernels()
    delay = Trace(str(SEARCH_TRACE), slope=2.2, base_load=0.0)
    network = NetworkConfig(mu=1.0, recovery=recovery)
    nodes = [scheme_option(name) for name in SEARCH_SCHEMES]
    wall, cpu = [], []
    for _ in range(repeats + 1):
        began, began_cpu = time.perf_counter(), time.process_time()
        for node in nodes:
            search(node, 256, delay, network, 16, 0)
        wall.append(time.perf_counter() - began)
        cpu.append(time.process_time() - began_cpu)
    return {"wall": min(wall[1:]), "cpu": min(cpu[1:])}


def child_in_process(recovery: str, repeats: int, source: Path | None) -> dict[str, float]:
    """:func:`in_process` in a fresh interpreter, on the package at ``source`` if given."""
    env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
    command = [sys.executable, __file__, "--in-process", recovery, "--repeats", str(repeats)]
    return json.loads(timed(command, None, env)[1].splitlines()[-1])


def search_command(
    recovery: str, extra: list[str], source: Path | None = None
) -> tuple[float, dict]:
    """Run the search command (plus ``extra`` overrides) in a fresh interpreter, on the
    package at ``source`` if given: ``(wall seconds, summary.json)``."""
    env = None if source is None else {**os.environ, "PYTHONPATH": str(source)}
    with tempfile.TemporaryDirectory() as out:
        command = [
            sys.executable, "-m", "gclab.sim", "sim.search=true",
            "sim.schemes=[uncoded,classic_cr,sr_sgc,m_sgc]", "cluster.workers=256",
            "sim.jobs=16", "delay=trace", f"delay.path={SEARCH_TRACE}", "delay.slope=2.2",
            "delay.base_load=0", "network.mu=1", f"network.recovery={recovery}",
            f"hydra.run.dir={out}", *extra,
        ]  # fmt: skip
        wall, _ = timed(command, source, env)
        return wall, json.loads((Path(out) / "summary.json").read_text())


def timed(
    command: list[str], cwd: Path | None = None, env: dict[str, str] | None = None
) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True, cwd=cwd, env=env)
    return time.perf_counter() - start, done.stdout


def engine_rate(recovery: str, extra: list[str], sample: int = 8) -> float:
    """Settings per second through the general engine, on ``sample`` settings per scheme."""
    delay = Trace(str(SEARCH_TRACE), slope=2.2, base_load=0.0)
    keys = {o.split("=")[0].removeprefix("network."): float(o.split("=")[1]) for o in extra}
    network = NetworkConfig(mu=1.0, recovery=recovery, **keys)
    count, start = 0, time.perf_counter()
    for name in SEARCH_SCHEMES:
        node = scheme_option(name)
        settings = grid(node, 256, recovery)
        chosen = settings[:: max(1, len(settings) // sample)]
        search(node, 256, delay, network, 16, seed=0, settings=chosen)
        count += len(chosen)
    return count / (time.perf_counter() - start)


if __name__ == "__main__":
    main()
