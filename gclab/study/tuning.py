"""``python -m gclab.study.tuning DIR [DIR ...] [--last K] [--archive DEST]``: a
learning-rate sweep's verdict.

A tuning sweep is a Hydra multirun (``python -m gclab -m ... train.lr=a,b,c``) on seeds
outside the study's, each run a fixed number of jobs. Its score is the mean whole-test-set
accuracy of the run's last ``K`` evaluations (default 3), which a single noisy evaluation
would not give. Runs are grouped by everything but the learning rate (the report's groups,
:mod:`gclab.report.groups`), and each group's best rate is marked; a best rate at the edge
of the rates tried says the grid should extend. ``--archive`` keeps every run's results
(:mod:`gclab.study.archive`) so the table can be rebuilt from the repository.
"""

from __future__ import annotations

import argparse
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from gclab.report import SweepError, load_sweep
from gclab.report.runs import TRAIN, Run
from gclab.study.archive import SUFFIX, archive_run, restore_run


def score(run: Run, last: int) -> float | None:
    """Mean accuracy of the run's last ``last`` whole-set evaluations (None without any)."""
    whole = [r["test_accuracy"] for r in run.decisive_records()]
    return float(np.mean(whole[-last:])) if whole else None


def table(runs: list[Run], last: int) -> str:
    """One line per run, grouped by everything but the rate: the score, best marked."""
    groups: dict[str, list[tuple[float, float | None]]] = defaultdict(list)
    for run in runs:
        if run.kind != TRAIN or (run.failed and not run.records):
            continue
        train = run.config.get("train") or {}
        scheme = (run.config.get("scheme") or {}).get("_target_", "?").rsplit(".", 1)[-1]
        key = f"{scheme}, pipeline={train.get('pipeline')}, stale_lr={train.get('stale_lr')}"
        groups[key].append((float(train["lr"]), None if run.failed else score(run, last)))
    lines = [f"| group | lr | mean of the last {last} evaluations | |", "|---|---|---|---|"]
    for key, points in groups.items():
        points.sort()
        scored = [(s, lr) for lr, s in points if s is not None]
        best = max(scored)[1] if scored else None
        edge = best in (points[0][0], points[-1][0]) and len(points) > 1
        for lr, s in points:
            mark = ("best, at the grid's edge" if edge else "best") if lr == best else ""
            shown = "failed" if s is None else f"{s:.4f}"
            lines.append(f"| {key} | {lr:g} | {shown} | {mark} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gclab.study.tuning", description=__doc__)
    parser.add_argument("dirs", nargs="+", type=Path, help="tuning sweeps (multirun folders)")
    parser.add_argument("--last", type=int, default=3, help="evaluations averaged (default 3)")
    parser.add_argument("--archive", type=Path, help="keep every run's results here")
    parser.add_argument("--restore", action="store_true", help="read the runs from --archive")
    args = parser.parse_args(argv)
    if args.last < 1:
        print(f"gclab.study.tuning: error: --last {args.last} must be >= 1.", file=sys.stderr)
        return 2
    dirs = list(args.dirs)
    if args.restore:
        if args.archive is None or not args.archive.is_dir():
            message = "--restore needs an --archive folder."
            print(f"gclab.study.tuning: error: {message}", file=sys.stderr)
            return 2
        for path in sorted(args.archive.rglob("*" + SUFFIX)):
            name = path.relative_to(args.archive).as_posix()[: -len(SUFFIX)]
            restore_run(path, dirs[0] / name)
    try:
        sweep = load_sweep(*dirs)
    except SweepError as exc:
        print(f"gclab.study.tuning: error: {exc}.", file=sys.stderr)
        return 2
    if args.archive is not None and not args.restore:
        for run in sweep.runs:
            if not run.failed:
                name = run.path.relative_to(run.path.parents[1]).as_posix()
                archive_run(run.path, args.archive / (name + SUFFIX))
    print(table(sweep.runs, args.last), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
