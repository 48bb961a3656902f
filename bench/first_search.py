"""The first search of a fresh install, cold and warm: the README's search command.

Each run is a fresh ``python -m gclab.sim`` from start to exit, on a copy of the package
in a temporary folder (so that no compiled kernel cached next to the sources, in
``__pycache__``, is reused) with an empty numba cache (``NUMBA_CACHE_DIR``). The search
runs again and again until a run compiles its kernel (the SGC loop appears in the
cache): *cold* is the first run; *warm* the best of the runs between it and the one
that compiles (a search too small to pay for compiling interprets its kernel until its
runs together have interpreted the kernel's budget: ``gclab.sim.kernels.Tiered``); then
*compiled* is the best of ``--warm`` runs that load the machine code. Wall and CPU
seconds (user + system of the command) are printed; the machine may be shared, so the
load average is printed with them; every run must find the same best setting.
``--rev REV`` measures a git revision's package instead of the working tree, so that
two versions can be compared under the same load.

    python bench/first_search.py                 # the working tree
    python bench/first_search.py --rev HEAD~3    # a revision, for comparison
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import SHARED, machine

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("gclab", "hydra_plugins")
COMMAND = [
    "sim.search=true", "sim.schemes=[uncoded,classic_cr,sr_sgc,m_sgc]", "cluster.workers=256",
    "sim.jobs=16", "network.recovery=wait_all", "delay=trace", "delay.slope=2.2",
    f"delay.path={SHARED}/traces/lambda-sydney-cnn-w256-r20-load000.npz", "delay.base_load=0",
]  # fmt: skip
#: Runs of the search after which the bench stops waiting for one to compile its kernel.
MAX_RUNS = 8


def install(into: Path, rev: str | None) -> None:
    """The packages of the working tree (``rev=None``) or of a git revision, without caches."""
    if rev is None:
        for name in PACKAGES:
            shutil.copytree(ROOT / name, into / name, ignore=shutil.ignore_patterns("__pycache__"))
        return
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev, *PACKAGES], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)


def timed(source: Path, cache: Path, out: Path) -> tuple[float, float, dict]:
    """``(wall s, CPU s, summary.json)`` of one search command."""
    command = [sys.executable, "-m", "gclab.sim", *COMMAND, f"hydra.run.dir={out}"]
    wall, cpu = seconds(command, source, cache)
    return wall, cpu, json.loads((out / "summary.json").read_text())


def seconds(command: list[str], source: Path, cache: Path) -> tuple[float, float]:
    """``(wall s, CPU s)`` of a command on the installed copy and the numba cache."""
    env = {**os.environ, "PYTHONPATH": str(source), "NUMBA_CACHE_DIR": str(cache)}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    subprocess.run(command, cwd=source, env=env, capture_output=True, check=True)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rev", help="a git revision to measure instead of the working tree")
    parser.add_argument("--warm", type=int, default=2, help="runs once compiled (the best is kept)")
    args = parser.parse_args()
    print(f"# {machine()}")
    print(f"# python -m gclab.sim {' '.join(COMMAND)}")
    with tempfile.TemporaryDirectory() as tmp:
        source, cache = Path(tmp) / "src", Path(tmp) / "numba"
        source.mkdir()
        install(source, args.rev)
        load = os.getloadavg()[0]
        runs = [timed(source, cache, Path(tmp) / "run1")]
        while not any(cache.glob("**/*sgc_rounds*.nbi")) and len(runs) < MAX_RUNS:
            runs.append(timed(source, cache, Path(tmp) / f"run{len(runs) + 1}"))
        compiled = best_of(source, cache, Path(tmp) / "compiled", args.warm)
        load = max(load, os.getloadavg()[0])
    cold, interpreted, compiling = runs[0], runs[1:-1], runs[-1]
    warm = min(interpreted, key=lambda run: run[0]) if interpreted else None
    print("| package | cold wall (s) | cold CPU (s) | warm wall (s) | search_seconds cold / warm "
          "| the run that compiles: which, wall (s) | compiled wall (s) "
          "| search_seconds compiled | best | load average |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    best = f"{cold[2]['scheme']} {cold[2]['total_time']:.9f} s"
    assert all(run[2]["best"] == cold[2]["best"] for run in [*runs, compiled]), "the tiers disagree"
    which = f"{len(runs)}, {compiling[0]:.1f}" if len(runs) < MAX_RUNS else f"none of {MAX_RUNS}"
    warm_s = (f"{warm[0]:.1f}", f"{warm[2]['search_seconds']:.3f}") if warm else ("–", "–")
    print(
        f"| {args.rev or 'working tree'} | {cold[0]:.1f} | {cold[1]:.1f} | {warm_s[0]} "
        f"| {cold[2]['search_seconds']:.3f} / {warm_s[1]} | {which} | {compiled[0]:.1f} "
        f"| {compiled[2]['search_seconds']:.3f} | {best} | {load:.1f} |"
    )


def best_of(source: Path, cache: Path, out: Path, runs: int) -> tuple[float, float, dict]:
    """The fastest (by wall seconds) of ``runs`` search commands."""
    return min((timed(source, cache, out.with_name(f"{out.name}{i}")) for i in range(runs)),
               key=lambda run: run[0])  # fmt: skip


if __name__ == "__main__":
    main()
