"""Sweep and study reports: Hydra run folders -> tables (CSV, Markdown) and PNG plots.

``python -m gclab.report DIR [DIR ...]`` reads every run under the folders (a sweep, a
single run, a study of many sweeps: :mod:`gclab.report.runs`), groups runs that differ
only by seed (:mod:`gclab.report.groups`), takes times to target as censored
(:mod:`gclab.report.survival`) and compares groups by paired ratios against an A/A floor
(:mod:`gclab.report.compare`; intervals: :mod:`gclab.report.intervals`), writes the
tables (:mod:`gclab.report.tables`) and the plots (:mod:`gclab.report.plots`) into the
one folder given or ``--out``.
Failed jobs are listed, never fatal: a long sweep with one bad combination still gets
its report.
"""

from __future__ import annotations

from pathlib import Path

from gclab.report.groups import AAPair, aa_ratios, groups, target_rows
from gclab.report.intervals import BANDS
from gclab.report.plots import accuracy_vs_time, decode_latency, total_time
from gclab.report.runs import Run, Sweep, SweepError, load_sweep
from gclab.report.tables import (
    aa_markdown,
    aa_table,
    markdown,
    pivot_markdown,
    pivot_table,
    target_markdown,
    target_table,
    write_csv,
    write_curves_csv,
    write_target_csv,
)

__all__ = ["BANDS", "AAPair", "Run", "Sweep", "SweepError", "load_sweep", "write_report"]


def write_report(
    sweep: Sweep,
    out: Path,
    target: float | None = None,
    band: str = "ci",
    baseline: str | None = None,
    horizon: float | None = None,
    aa: AAPair | None = None,
    smooth: int = 1,
) -> list[Path]:
    """Write the tables and every plot the sweep has data for; returns the files written.

    With a ``target`` accuracy, also the time-to-target table (``time_to_target.csv``,
    ``time_to_target.md`` and a section of ``summary.md``: censored times, restricted to
    ``horizon`` or each loss setting's own; paired ratios against the series labelled
    ``baseline``, Holm-corrected over the table, valid only if the ``aa`` control holds:
    ``aa_control.md``) and the same times as a loss setting × series table
    (``time_to_target_by_loss.md``). The ``.md`` files hold the
    tables alone, to be pasted unchanged into documents. A run crosses the target at its
    first evaluation at or above it, or with ``smooth`` > 1 where the mean of its last
    ``smooth`` evaluations first is.
    Training runs with evaluations also get ``curves.csv``, the mean curves of
    ``accuracy_vs_time.png`` (``band``: a key of :data:`BANDS`).
    """
    out.mkdir(parents=True, exist_ok=True)
    all_groups = groups(sweep, smooth)
    text = markdown(sweep)
    written = [out / "summary.csv", out / "summary.md"]
    write_csv(sweep, written[0])
    if target is not None:
        rows = target_rows(all_groups, target, baseline, horizon, aa)
        write_target_csv(rows, target, out / "time_to_target.csv")
        text += "\n" + target_markdown(rows, target, baseline)
        text += "\n" + pivot_markdown(rows, target)
        tables = {
            out / "time_to_target.md": target_table(rows, baseline),
            out / "time_to_target_by_loss.md": pivot_table(rows),
        }
        if aa is not None:
            ratios = aa_ratios(all_groups, target, aa, horizon)
            text += "\n" + aa_markdown(ratios, aa.a, aa.b)
            tables[out / "aa_control.md"] = aa_table(ratios, aa.a, aa.b)
        for path, table in tables.items():
            path.write_text(table, encoding="utf-8")
        written += [out / "time_to_target.csv", *tables]
    written[1].write_text(text, encoding="utf-8")
    if any(group.curves() for group in all_groups):
        write_curves_csv(all_groups, band, out / "curves.csv")
        written.append(out / "curves.csv")
    plots = [
        accuracy_vs_time(sweep, out / "accuracy_vs_time.png", band),
        total_time(sweep, out / "total_time.png", band),
        decode_latency(sweep, out / "decode_latency.png"),
    ]
    return written + [path for path in plots if path is not None]
