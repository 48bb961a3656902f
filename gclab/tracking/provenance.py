"""Where a run's numbers come from: the code's commit and the measured compute speed.

Every ``summary.json`` records the commit of the code that ran (``commit``, with
``-dirty`` when the checkout had uncommitted changes; the package version when it is
not a git checkout) beside ``processors`` (what the workers ran on), and the measured
seconds per partition gradient (``partition_seconds``): the median over every worker-round
of a worker's compute time over the partitions it computed, the machine's speed that a
study's normalised clock divides out.
"""

from __future__ import annotations

import subprocess
from functools import lru_cache
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

import numpy as np


@lru_cache(maxsize=1)
def code_version() -> str:
    """The commit of the checkout gclab is imported from (``<sha>`` or ``<sha>-dirty``), or
    ``gclab <version>`` for an installed package."""
    root = Path(__file__).resolve().parents[2]

    def git(*args: str) -> str | None:
        try:
            done = subprocess.run(
                ["git", "-C", str(root), *args], capture_output=True, text=True, timeout=30
            )
        except (OSError, subprocess.SubprocessError):
            return None
        return done.stdout.strip() if done.returncode == 0 else None

    sha = git("rev-parse", "HEAD") if (root / ".git").exists() else None
    if not sha:
        try:
            return f"gclab {version('gclab')}"
        except PackageNotFoundError:
            return "unknown"
    dirty = git("status", "--porcelain", "--untracked-files=no", "--", "gclab")
    return f"{sha}-dirty" if dirty else sha


def partition_seconds(records: list[dict[str, Any]], partitions: float) -> float | None:
    """Median over the round records' worker-rounds of compute seconds per partition
    gradient, for workers that compute ``partitions`` partitions a round; None without
    compute times."""
    rounds = [rec for rec in records if rec.get("kind") == "round"]
    values = [c for rec in rounds for c in rec.get("compute_s") or []]
    finite = np.asarray([c for c in values if c is not None and np.isfinite(c)], dtype=np.float64)
    if finite.size == 0 or not partitions > 0:
        return None
    return float(np.median(finite) / partitions)
