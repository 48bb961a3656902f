"""A sweep as ``summary.csv`` (every number, exact) and a Markdown table (the ones to read).

The CSV has one row per run: who it is (job, kind, status, error, overrides, scheme,
delay model, loss rate) followed by every scalar of its ``summary.json``, so a script
can pick any column without re-reading the job folders. The Markdown table keeps the
columns a reader compares, rounded, with the overrides all runs share stated once above
it; failed runs stay in it, marked with their error.
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gclab.report.groups import Group, Spread, TargetRow
from gclab.report.runs import SIM, TRAIN, Run, Sweep

IDENTITY = ("job", "kind", "status", "error", "overrides", "scheme", "delay", "loss_rate")


def status(run: Run) -> str:
    if not run.failed:
        return "ok"
    return f"failed: {run.error}" if run.error else "failed: no summary.json"


def _cell(value: Any) -> Any:
    """CSV cell: empty for null/NaN, JSON for containers, the value itself otherwise."""
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return ""
    if isinstance(value, (dict, list)):
        return json.dumps(value, sort_keys=True)
    return value


def write_csv(sweep: Sweep, path: Path) -> None:
    """``summary.csv``: identity columns, then the union of the runs' summary keys."""
    keys = list(dict.fromkeys(k for run in sweep.runs for k in run.values if k not in IDENTITY))
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow((*IDENTITY, *keys))
        for run in sweep.runs:
            identity = (
                run.job,
                run.kind,
                "ok" if not run.failed else "failed",
                run.error,
                " ".join(f"{k}={v}" for k, v in run.overrides.items()),
                (run.summary or {}).get("scheme", run.scheme),
                run.choices.get("delay"),
                run.loss_rate,
            )
            values = run.values
            writer.writerow([_cell(v) for v in (*identity, *(values.get(k) for k in keys))])


def _number(spec: str) -> Callable[[Any], str]:
    """Formatter for a number with a format ``spec``; '–' for null, NaN and non-numbers."""

    def format_value(value: Any) -> str:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            return "–"
        return format(value, spec) if math.isfinite(value) else "–"

    return format_value


def _integer(value: Any) -> str:
    return str(value) if isinstance(value, int) and not isinstance(value, bool) else "–"


def _percent(value: Any) -> str:
    return "–" if value is None else f"{100 * value:.1f}"


def _names(value: Any) -> str:
    return "; ".join(map(str, value)) if isinstance(value, list) and value else "–"


def _time_to_target(summary: dict[str, Any]) -> str:
    if summary.get("target_accuracy") is None:
        return "–"
    seconds = summary.get("time_to_target")
    return "not reached" if seconds is None else _number(".2f")(seconds)


Column = tuple[str, Callable[[dict[str, Any]], str]]


def _key(name: str, format_value: Callable[[Any], str]) -> Callable[[dict[str, Any]], str]:
    return lambda summary: format_value(summary.get(name))


#: Markdown columns per kind of run: header, and how to show it from ``summary.json``.
COLUMNS: dict[str, list[Column]] = {
    TRAIN: [
        ("final accuracy", _key("test_accuracy", _number(".4f"))),
        ("time to target (s)", _time_to_target),
        ("total virtual time (s)", _key("total_virtual_time", _number(".2f"))),
        ("coverage mean", _key("coverage_mean", _number(".4f"))),
        ("decode ms mean", _key("decode_ms_mean", _number(".2f"))),
        ("decode ms p95", _key("decode_ms_p95", _number(".2f"))),
        ("waits", _key("waits", _integer)),
        ("retransmissions", _key("retransmissions", _integer)),
        ("stale updates (%)", _key("stale_share", _percent)),
        ("mean staleness", _key("staleness_mean", _number(".3f"))),
        ("compute s per worker-round (median)", _key("compute_s_median", _number(".4f"))),
        ("processors", _key("processors", _names)),
    ],
    SIM: [
        ("total time (s)", _key("total_time", _number(".2f"))),
        ("coverage mean", _key("coverage_mean", _number(".4f"))),
        ("waits", _key("waits", _integer)),
        ("retransmissions", _key("retransmissions", _integer)),
        ("load", _key("load", _number(".6f"))),
        ("jobs", _key("jobs", _integer)),
    ],
}
TITLES = {TRAIN: "Training runs", SIM: "Simulator runs"}


def _escape(text: str) -> str:
    return text.replace("|", "\\|")


def markdown(sweep: Sweep) -> str:
    """One table per kind of run (a sweep normally has one), one row per run."""
    varying = sweep.varying or list(sweep.runs[0].overrides)
    lines = [f"# Sweep `{sweep.path}`", ""]
    if sweep.common and sweep.varying:
        lines += ["Common to all runs: " + " ".join(f"`{o}`" for o in sweep.common), ""]
    kinds = [k for k in (TRAIN, SIM) if any(r.kind == k for r in sweep.runs)] or [TRAIN]
    for kind in kinds:
        # A failed job that no file identifies is listed with the sweep's other runs.
        runs = [r for r in sweep.runs if (r.kind if r.kind in kinds else kinds[0]) == kind]
        columns = COLUMNS[kind]
        header = [
            "job",
            "overrides",
            "scheme",
            "loss rate",
            *(name for name, _ in columns),
            "status",
        ]
        lines += [f"## {TITLES[kind]}", "", "| " + " | ".join(header) + " |"]
        lines.append("|" + "|".join("---" for _ in header) + "|")
        for run in runs:
            summary = run.values
            cells = [
                run.job,
                " ".join(f"{k}={run.overrides[k]}" for k in varying if k in run.overrides),
                str(summary.get("scheme", run.scheme)),
                _number("g")(run.loss_rate),
                *(show(summary) if summary else "–" for _, show in columns),
                status(run),
            ]
            lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
        lines.append("")
    return "\n".join(lines)


# --- runs grouped over seeds (gclab.report.groups) -----------------------------------------


def _group_identity(group: Group) -> list[Any]:
    return [group.name, group.delay, group.loss_rate]


def write_curves_csv(all_groups: list[Group], band: str, path: Path) -> None:
    """``curves.csv``: each group's mean accuracy curve on its common time grid, with the
    band (``band_low``, ``band_high``: :data:`~gclab.report.groups.BANDS`) and the seeds."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(("series", "delay", "loss_rate", "seeds", "band", "virtual_time",
                         "accuracy_mean", "band_low", "band_high"))  # fmt: skip
        for group in all_groups:
            mean = group.mean_curve(band)
            if mean is None:
                continue
            for time, value in zip(*mean):
                row = [*_group_identity(group), value.count, band, float(time), value.mean,
                       value.low, value.high]  # fmt: skip
                writer.writerow([_cell(v) for v in row])


TARGET_COLUMNS = (
    "series", "delay", "loss_rate", "target", "runs", "finished", "reached", "mean",
    "ci95_low", "ci95_high", "min", "max", "seeds", "times", "speedup_mean",
    "speedup_ci95_low", "speedup_ci95_high", "pairs", "jobs_mean", "jobs_ci95_low",
    "jobs_ci95_high", "seconds_per_job_mean", "seconds_per_job_ci95_low",
    "seconds_per_job_ci95_high", "final_accuracy_mean", "final_accuracy_ci95_low",
    "final_accuracy_ci95_high", "stale_share_mean", "stale_share_ci95_low",
    "stale_share_ci95_high",
)  # fmt: skip


def write_target_csv(rows: list[TargetRow], target: float, path: Path) -> None:
    """``time_to_target.csv``: per group, every seed's time to target and their spread."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(TARGET_COLUMNS)
        for row in rows:
            time, extent, speed = row.time, row.extent, row.speedup
            numbers = [
                *_mean_low_high(time),
                *((extent.low, extent.high) if extent else (None,) * 2),
            ]
            speedup = [speed.mean, speed.low, speed.high, speed.count] if speed else [None] * 4
            cells = [*_group_identity(row.group), target, len(row.group.runs), row.finished,
                     row.reached, *numbers, row.group.seeds(),
                     row.group.times_to_target(target), *speedup, *_mean_low_high(row.jobs),
                     *_mean_low_high(row.pace), *_mean_low_high(row.final),
                     *_mean_low_high(row.stale)]  # fmt: skip
            writer.writerow([_cell(v) for v in cells])


def _mean_low_high(value: Spread | None) -> list[float | None]:
    return [value.mean, value.low, value.high] if value else [None] * 3


def _scaled(value: Spread | None, factor: float) -> Spread | None:
    if value is None:
        return None
    return Spread(value.mean * factor, value.low * factor, value.high * factor, value.count)


def _plus_minus(value: Spread | None, digits: int) -> str:
    if value is None:
        return "–"
    if value.count == 1:
        return f"{value.mean:.{digits}f}"
    return f"{value.mean:.{digits}f} ± {(value.high - value.low) / 2:.{digits}f}"


def target_markdown(rows: list[TargetRow], target: float, baseline: str | None) -> str:
    """The time-to-target table: one row per group, the spread over its seeds."""
    lines = [
        f"## Time to test accuracy {target:g}",
        "",
        f"Virtual time of each run's first evaluation at or above {target:g}: mean over the "
        "seeds that reached it ± the half-width of its 95 % t-interval, and the range. It is "
        "the jobs applied by then (over the same seeds) times the virtual seconds per job "
        "(over every finished seed, whole runs): the first is what training needs, the "
        "second what the scheme and the losses charge for each job. Final accuracy: the last "
        "evaluation's, over every finished seed (at the target where a run stopped there, at "
        "the budget where it did not reach it). Stale updates: the share of each seed's "
        "updates whose gradient was computed on weights that missed earlier updates (only "
        "`train.pipeline=stale` has any), in %.",
    ]
    header = ["scheme", "delay", "loss rate", "reached", "time to target (s)", "range (s)",
              "jobs to target", "s per job", "final accuracy", "stale updates (%)"]  # fmt: skip
    if baseline is not None:
        lines[-1] += (
            f" Speed-up: {baseline}'s time over this group's, per seed (paired: same seed, "
            "same batches, same losses), mean ± 95 % t-interval half-width."
        )
        header.append(f"speed-up vs {baseline}")
    lines += ["", "| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    for row in rows:
        extent = row.extent
        cells = [
            row.group.name,
            row.group.delay,
            _number("g")(row.group.loss_rate),
            f"{row.reached}/{row.finished}",
            _plus_minus(row.time, 1),
            f"{extent.low:.1f}–{extent.high:.1f}" if extent else "–",
            _plus_minus(row.jobs, 0),
            _plus_minus(row.pace, 4),
            _plus_minus(row.final, 3),
            _plus_minus(_scaled(row.stale, 100), 1),
        ]
        if baseline is not None:
            speed = row.speedup
            plural = "s" if speed and speed.count != 1 else ""
            cells.append(f"{_plus_minus(speed, 2)} ({speed.count} pair{plural})" if speed else "–")
        lines.append("| " + " | ".join(_escape(c) for c in cells) + " |")
    return "\n".join([*lines, ""])


def _reached(row: TargetRow | None) -> str:
    if row is None:
        return "–"
    if row.reached == 0:
        text = f"not reached (final {_plus_minus(row.final, 2)})"
    else:
        text = _plus_minus(row.time, 1)
        if row.reached != row.finished:
            text += f" ({row.reached}/{row.finished})"
    if row.stale is not None and row.stale.mean > 0:
        text += f" [{row.stale.mean * 100:.1f} %]"
    return text


def _setting(delay: str, rate: float) -> str:
    return "none" if delay == "none" else f"{delay} {_number('g')(rate)}"


def pivot_markdown(rows: list[TargetRow], target: float) -> str:
    """Time to target as a paper prints it: loss settings (in the groups' order) against
    series (sorted by name), the longer list down the rows (one row per loss setting when
    there are at least as many as series, else one row per series); a group that no seed
    brought to the target shows its final accuracy, one that only some seeds did says how
    many, a missing group shows –, and a group with stale updates gives their share in
    brackets."""
    settings = list(dict.fromkeys((row.group.delay, row.group.loss_rate) for row in rows))
    series = sorted({row.group.name for row in rows})
    found = {(row.group.delay, row.group.loss_rate, row.group.name): row for row in rows}
    lines = [
        f"## Time to test accuracy {target:g} by loss setting",
        "",
        "Seconds, mean ± the half-width of the 95 % t-interval over the seeds that reached "
        f"{target:g} (how many of the finished seeds did, when not all); where none did, "
        "the final accuracy; in brackets, the share of updates whose gradient was stale, "
        "where any was.",
        "",
    ]
    if len(settings) >= len(series):
        header = ["delay", "loss rate", *series]
        body = [
            [delay, _number("g")(rate), *(_reached(found.get((delay, rate, s))) for s in series)]
            for delay, rate in settings
        ]
    else:
        header = ["series", *(_setting(*setting) for setting in settings)]
        body = [
            [label, *(_reached(found.get((*setting, label))) for setting in settings)]
            for label in series
        ]
    lines += ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_escape(c) for c in cells) + " |" for cells in body]
    return "\n".join([*lines, ""])
