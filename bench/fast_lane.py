"""The fast lane in one process against one pytest-xdist worker per core, back to back.

    python bench/fast_lane.py [-m "not slow"] [PATH ...]

Runs ``python -m pytest -q -p no:cacheprovider -m MARKS PATHS`` twice from the repository
root, first with ``-n 0`` (every test in this one process, as before pytest-xdist) then with
pyproject.toml's ``-n auto --dist loadgroup``, and prints for each the wall-clock seconds,
the CPU seconds of the run and its workers (their rusage, which counts every waited-for
process), the tests' summary line and the load average before it started; then the wall
and CPU ratios of the second to the first. The machine is shared: the ratios, measured in
one run, are what to compare, with the load beside them.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def lane(workers: list[str], marks: str, paths: list[str]) -> tuple[float, float, str]:
    """Wall seconds, CPU seconds (user + system of every process it waited for) and the
    summary line of one run of the lane."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *workers, "-m", marks,
         *paths],
        cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)}, capture_output=True, text=True,
    )  # fmt: skip
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    lines = proc.stdout.strip().splitlines()
    return wall, cpu, lines[-1] if lines else f"exit {proc.returncode}: {proc.stderr[-500:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-m", dest="marks", default="not slow", help="pytest's -m (the lane)")
    parser.add_argument("paths", nargs="*", default=["tests"], help="folders to run")
    args = parser.parse_args()
    runs = {}
    for name, workers in (("one process (-n 0)", ["-n", "0"]), ("xdist (-n auto)", [])):
        load = " ".join(f"{x:.1f}" for x in os.getloadavg())
        runs[name] = wall, cpu, summary = lane(workers, args.marks, args.paths)
        print(f"{name}: {wall:.0f} s wall, {cpu:.0f} s CPU, load {load} before: {summary}")
    (wall0, cpu0, _), (wall1, cpu1, _) = runs.values()
    print(f"xdist / one process: wall {wall1 / wall0:.2f}x, CPU {cpu1 / cpu0:.2f}x")


if __name__ == "__main__":
    main()
