"""The shortcut's check: a replayed run against the same run done for real.

Both runs evaluate the weights after some job j; for the same j the weights are the same
up to rounding (the shortcut's premise), so the accuracies must agree, and the virtual
times differ only by the measured compute times (the replay reuses the lossless run's,
the real run measured its own). :func:`compare` lines the evaluations up by job and
sums up the differences, including the time to the target accuracy.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from gclab.report.groups import first_reach
from gclab.report.runs import read_records
from gclab.study.replay import evaluated_jobs

COLUMNS = ("job", "real_round", "real_time", "real_accuracy", "replay_round", "replay_time",
           "replay_accuracy")  # fmt: skip


def evaluations(run_dir: Path) -> dict[int, dict[str, Any]]:
    """A run's first evaluation of the weights after each job evaluated, by job."""
    out: dict[int, dict[str, Any]] = {}
    for job, rec in evaluated_jobs(read_records(run_dir / "metrics.jsonl")):
        out.setdefault(job, rec)
    return out


@dataclass(frozen=True)
class Comparison:
    """A replayed run against its real counterpart."""

    name: str
    rows: list[tuple]  # COLUMNS, one per job evaluated in both
    target: float | None
    real_target_time: float | None
    replay_target_time: float | None
    retransmissions: tuple[int, int]  # real, replay

    @property
    def max_accuracy_gap(self) -> float:
        return max((abs(r[3] - r[6]) for r in self.rows), default=float("nan"))

    @property
    def time_ratios(self) -> np.ndarray:
        """Replay time over real time at each job evaluated in both."""
        return np.array([r[5] / r[2] for r in self.rows if r[2] > 0])


def _times(evals: dict[int, dict[str, Any]]) -> tuple[np.ndarray, np.ndarray]:
    ordered = sorted(evals.values(), key=lambda rec: rec["virtual_time"])
    return (
        np.array([rec["virtual_time"] for rec in ordered]),
        np.array([rec["test_accuracy"] for rec in ordered]),
    )


def _retransmissions(run_dir: Path) -> int:
    records = read_records(run_dir / "metrics.jsonl")
    return sum(rec.get("retransmissions", 0) for rec in records if rec.get("kind") == "round")


def compare(name: str, real: Path, replay: Path, target: float | None) -> Comparison:
    """Line up the evaluations of ``real`` and ``replay`` by job."""
    got, want = evaluations(replay), evaluations(real)
    rows = [
        (job, want[job]["round"], want[job]["virtual_time"], want[job]["test_accuracy"],
         got[job]["round"], got[job]["virtual_time"], got[job]["test_accuracy"])
        for job in sorted(set(got) & set(want))
    ]  # fmt: skip
    reach = [None, None] if target is None else [
        first_reach(*_times(evals), target) for evals in (want, got)
    ]  # fmt: skip
    return Comparison(
        name, rows, target, reach[0], reach[1], (_retransmissions(real), _retransmissions(replay))
    )


def write_rows(comparison: Comparison, path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        writer.writerows(comparison.rows)


def markdown(comparisons: list[Comparison]) -> str:
    """One row per verified point: accuracy gap, time ratios, time to target, retransmissions."""
    lines = [
        "# The shortcut against real runs",
        "",
        "Each replayed point also ran for real. Per job evaluated in both runs: the largest "
        "accuracy difference, and the replay's virtual time over the real one (they differ "
        "by the measured compute times only: the replay reuses the lossless run's).",
        "",
        "| point | jobs compared | max accuracy gap | time ratio median (min–max) "
        "| time to target real / replay (s) | retransmissions real / replay |",
        "|---|---|---|---|---|---|",
    ]
    for c in comparisons:
        ratios = c.time_ratios
        spread = (
            f"{np.median(ratios):.3f} ({ratios.min():.3f}–{ratios.max():.3f})"
            if ratios.size
            else "–"
        )
        reach = " / ".join("not reached" if t is None else f"{t:.1f}"
                           for t in (c.real_target_time, c.replay_target_time))  # fmt: skip
        if c.target is None:
            reach = "–"
        lines.append(
            f"| {c.name} | {len(c.rows)} | {c.max_accuracy_gap:.4f} | {spread} | {reach} "
            f"| {c.retransmissions[0]} / {c.retransmissions[1]} |"
        )
    return "\n".join([*lines, ""])
