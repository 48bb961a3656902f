"""Sweep reports: a Hydra multirun folder -> ``summary.csv``, ``summary.md`` and PNG plots.

``python -m gclab.report multirun/<date>/<time>`` reads every job of a training or
simulator sweep (:mod:`gclab.report.runs`), writes the tables
(:mod:`gclab.report.tables`) and the plots (:mod:`gclab.report.plots`) into the sweep
folder or ``--out``. Failed jobs are listed, never fatal: a long sweep with one bad
combination still gets its report.
"""

from __future__ import annotations

from pathlib import Path

from gclab.report.plots import PLOTS
from gclab.report.runs import Run, Sweep, SweepError, load_sweep
from gclab.report.tables import markdown, write_csv

__all__ = ["Run", "Sweep", "SweepError", "load_sweep", "write_report"]


def write_report(sweep: Sweep, out: Path) -> list[Path]:
    """Write the tables and every plot the sweep has data for; returns the files written."""
    out.mkdir(parents=True, exist_ok=True)
    write_csv(sweep, out / "summary.csv")
    (out / "summary.md").write_text(markdown(sweep), encoding="utf-8")
    written = [out / "summary.csv", out / "summary.md"]
    for name, plot in PLOTS.items():
        path = plot(sweep, out / name)
        if path is not None:
            written.append(path)
    return written
