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

from gclab.report.compare import FASTER, SLOWER, noise_floor
from gclab.report.groups import Comparison, Group, TargetRow
from gclab.report.intervals import Spread
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
    "series", "delay", "loss_rate", "target", "runs", "finished", "reached", "horizon",
    "km_median", "rmst", "rmst_low", "rmst_high", "seeds", "times", "restricted",
    "baseline", "ratio", "ratio_low", "ratio_high", "pairs", "label", "aa_floor",
    "p", "p_holm", "corrected_low", "corrected_high", "floor_label", "control",
    "first_rmst", "first_rmst_low", "first_rmst_high", "short_follow_up", "jobs_km_median",
    "seconds_per_job_mean", "seconds_per_job_ci95_low", "seconds_per_job_ci95_high",
    "final_accuracy_mean", "final_accuracy_ci95_low", "final_accuracy_ci95_high",
    "stale_share_mean", "stale_share_ci95_low", "stale_share_ci95_high",
)  # fmt: skip


def _infinite(value: float | None) -> Any:
    """A value for the CSV that may be infinite: a Kaplan–Meier median not reached, a horizon
    that restricts nothing, an unmeasured floor (``inf``); empty for None."""
    return "inf" if value == math.inf else value


def _floor(value: float | None) -> Any:
    """An A/A floor (ln scale) as the ratio it allows, exp(floor)."""
    return None if value is None else _infinite(math.exp(value))


def write_target_csv(rows: list[TargetRow], target: float, path: Path) -> None:
    """``time_to_target.csv``: per group, every seed's time to target (censored where not
    reached), the Kaplan–Meier median, the restricted mean and the paired comparison."""
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(TARGET_COLUMNS)
        for row in rows:
            versus = row.comparison
            ratio = versus.ratio if versus else None
            corrected = versus.corrected if versus else None
            compared = (
                [versus.reference, *_mean_low_high(ratio), ratio.count if ratio else None,
                 versus.label, _floor(versus.floor), versus.p, versus.adjusted,
                 *_mean_low_high(corrected)[1:], versus.floor_label, versus.control]
                if versus else [None] * 13
            )  # fmt: skip
            cells = [*_group_identity(row.group), target, len(row.group.runs), row.finished,
                     row.reached, _infinite(row.horizon), _infinite(row.median),
                     *_mean_low_high(row.rmst), row.group.seeds(),
                     row.group.times_to_target(target), row.restricted,
                     *compared, *_mean_low_high(row.first), list(row.short) or None,
                     _infinite(row.jobs), *_mean_low_high(row.pace),
                     *_mean_low_high(row.final), *_mean_low_high(row.stale)]  # fmt: skip
            writer.writerow([_cell(v) for v in cells])


def _mean_low_high(value: Spread | None) -> list[float | None]:
    return [value.mean, value.low, value.high] if value else [None] * 3


def _scaled(value: Spread | None, factor: float) -> Spread | None:
    if value is None:
        return None
    return Spread(value.mean * factor, value.low * factor, value.high * factor, value.count)


def _plus_minus(value: Spread | None, digits: int, interval: bool = False) -> str:
    """``mean ± half-width``, or with ``interval`` ``mean (low–high)`` (for an interval that
    need not be symmetric); the mean alone for a single value."""
    if value is None:
        return "–"
    if value.count == 1:
        return f"{value.mean:.{digits}f}"
    if interval:
        return f"{value.mean:.{digits}f} ({value.low:.{digits}f}–{value.high:.{digits}f})"
    return f"{value.mean:.{digits}f} ± {(value.high - value.low) / 2:.{digits}f}"


def _km(value: float | None, digits: int) -> str:
    if value is None:
        return "–"
    return "not reached" if value == math.inf else f"{value:.{digits}f}"


def _horizon(value: float | None) -> str:
    return "∞" if value == math.inf else _number(".1f")(value)


def _floor_text(floor: float | None) -> str:
    if floor is None:
        return "none declared"
    return "unmeasured" if floor == math.inf else f"×{math.exp(floor):.2f}"


def _table(header: list[str], body: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "|".join("---" for _ in header) + "|"]
    lines += ["| " + " | ".join(_escape(c) for c in cells) + " |" for cells in body]
    return "\n".join([*lines, ""])


def target_table(rows: list[TargetRow], baseline: str | None) -> str:
    """The time-to-target table alone (``time_to_target.md``): one row per group."""
    several = any(row.first is not None for row in rows)
    header = ["scheme", "delay", "loss rate", "reached", "KM median (s)", "horizon (s)",
              "restricted mean (s), 95 % interval",
              *(["first model's restricted mean (s)"] if several else []),
              "jobs to target (KM median)", "s per job", "final accuracy",
              "stale updates (%)"]  # fmt: skip
    if baseline is not None:
        header += [f"ratio vs {baseline} (95 % interval)", "Holm-corrected interval", "label"]
    body = []
    for row in rows:
        cells = [
            row.group.name,
            row.group.delay,
            _number("g")(row.group.loss_rate),
            f"{row.reached}/{row.finished}" + _short(row),
            _km(row.median, 1),
            _horizon(row.horizon),
            _plus_minus(row.rmst, 1, interval=True),
            *([_plus_minus(row.first, 1, interval=True)] if several else []),
            _km(row.jobs, 0),
            _plus_minus(row.pace, 4),
            _plus_minus(row.final, 3),
            _plus_minus(_scaled(row.stale, 100), 1),
        ]
        if baseline is not None:
            cells += _comparison_cells(row.comparison, row.group.name, baseline)
        body.append(cells)
    return _table(header, body)


def _short(row: TargetRow) -> str:
    """A note on the seeds whose follow-up ended before the horizon (none: empty)."""
    if not row.short:
        return ""
    return f" (follow-up < h: seed {', '.join(map(str, row.short))})"


def _comparison_cells(
    versus: Comparison | None, name: str, baseline: str | None = None
) -> list[str]:
    """The ratio with its plain interval (naming the group it compares with where that is
    not ``baseline``), the Holm-corrected interval and the label (the baseline against
    itself and the A/A arm: the plain interval alone, outside the family)."""
    if versus is None:
        return ["–"] * 3
    ratio = versus.ratio
    plural = "s" if ratio and ratio.count != 1 else ""
    shown = _plus_minus(ratio, 2, interval=True)
    plain = f"{shown}, {ratio.count} pair{plural}" if ratio else "–"
    if baseline is not None and versus.reference != baseline and name != versus.reference:
        plain += f" vs {versus.reference}"  # e.g. the baseline's scheme on models in turn
    if versus.control:
        role = "baseline" if name == versus.reference else "control"
        return [plain, f"– ({role})", versus.label]
    corrected = versus.corrected
    level = "–"
    if corrected is not None and corrected.count > 1:
        level = f"{corrected.low:.2f}–{corrected.high:.2f}"
    return [plain, level, versus.label]


def target_markdown(rows: list[TargetRow], target: float, baseline: str | None) -> str:
    """The time-to-target section of ``summary.md``: what it shows, then :func:`target_table`."""
    text = (
        f"Time to {target:g}: the virtual time of a run's first evaluation at or above it; a "
        "run that ends without reaching it is censored at its end, never dropped. KM median: "
        "the Kaplan–Meier median over every finished seed ('not reached' when fewer than half "
        "are known to reach it). Restricted mean: the mean over every finished seed of "
        "min(time, horizon), a run that missed the target counting the horizon, with the 95 % "
        "t-interval of that mean; the horizon is the shortest follow-up (budget, or end of a "
        "run that missed the target) at the loss setting. Jobs to target: the Kaplan–Meier "
        "median of the jobs applied by then; s per job: virtual seconds per applied job over "
        "every finished seed, whole runs; final accuracy: the last evaluation's (both mean ± "
        "the 95 % t-interval's half-width). Stale updates: the share of each seed's updates "
        "whose gradient missed earlier updates, in %."
    )
    smooth = max((row.group.smooth for row in rows), default=1)
    if smooth > 1:
        text += (
            f" Here a run reaches {target:g} at the first evaluation where the mean of its "
            f"last {smooth} evaluations is at or above it."
        )
    if any(row.first is not None for row in rows):
        text += (
            " A run that trains several models reaches the target when every model has (each "
            "at its own first crossing); the first model's restricted mean is beside it."
        )
    if any(row.short for row in rows):
        text += (
            " Follow-up < h: seeds that ended before the horizon without reaching the target "
            "(a job cap, or a re-timing that shortened the run); their min(time, h) is unknown "
            "and counts h here."
        )
    if baseline is not None:
        text += (
            f" Ratio: {baseline}'s restricted time over this group's, per seed (paired: same "
            "seed, same batches, same losses), geometric mean and 95 % interval. The "
            "comparisons of this table are one family, corrected by Holm's step-down (the "
            "interval at the level of the comparison's rank; gclab/report/compare.py): labelled "
            "faster or slower only when the corrected interval excludes 1, else not "
            "distinguishable. An A/A arm is the control, outside the family: its plain 95 % "
            "interval must contain 1, else every label reads 'invalid (A/A)'."
        )
        if any(r.comparison and r.group.models > 1 for r in rows):
            text += (
                f" Several models in turn are compared with {baseline}'s scheme trained in "
                "turn on as many (named beside the ratio)."
            )
    title = f"## Time to test accuracy {target:g}"
    return "\n".join([title, "", text, "", target_table(rows, baseline)])


MARKS = {FASTER: " ▲", SLOWER: " ▼"}


def _reached(row: TargetRow | None) -> str:
    if row is None:
        return "–"
    if row.reached == 0:
        text = f"not reached (final {_plus_minus(row.final, 2)})"
    else:
        restricted = row.rmst is not None and row.rmst.low >= (row.horizon or math.inf)
        text = f"≥ {row.horizon:.1f}" if restricted else _plus_minus(row.rmst, 1, interval=True)
        if row.reached != row.finished:
            text += f" ({row.reached}/{row.finished})"
    if row.stale is not None and row.stale.mean > 0:
        text += f" [{row.stale.mean * 100:.1f} %]"
    return text + MARKS.get(row.comparison.label if row.comparison else "", "")


def _setting(delay: str, rate: float) -> str:
    return "none" if delay == "none" else f"{delay} {_number('g')(rate)}"


def pivot_table(rows: list[TargetRow]) -> str:
    """Restricted mean times as a paper prints them (``time_to_target_by_loss.md``): loss
    settings (in the groups' order) against series (sorted by name), the longer list down
    the rows (one row per loss setting when there are at least as many as series, else
    one row per series); a group that no seed brought to the target shows its final
    accuracy, one that only some seeds did says how many, a missing group shows –, a group
    with stale updates gives their share in brackets, and a generated mark says what the
    comparison with the baseline found (▲ faster, ▼ slower)."""
    settings = list(dict.fromkeys((row.group.delay, row.group.loss_rate) for row in rows))
    horizon = {(row.group.delay, row.group.loss_rate): row.horizon for row in rows}
    series = sorted({row.group.name for row in rows})
    found = {(row.group.delay, row.group.loss_rate, row.group.name): row for row in rows}
    if len(settings) >= len(series):
        header = ["delay", "loss rate", "horizon (s)", *series]
        body = [
            [delay, _number("g")(rate), _horizon(horizon[delay, rate]),
             *(_reached(found.get((delay, rate, s))) for s in series)]
            for delay, rate in settings
        ]  # fmt: skip
    else:
        header = ["series"] + [
            f"{_setting(*setting)} (h = {_horizon(horizon[setting])} s)" for setting in settings
        ]
        body = [
            [label, *(_reached(found.get((*setting, label))) for setting in settings)]
            for label in series
        ]
    return _table(header, body)


def pivot_markdown(rows: list[TargetRow], target: float) -> str:
    """The by-loss-setting section of ``summary.md``: what it shows, then :func:`pivot_table`."""
    text = (
        f"Restricted mean time to {target:g} up to the loss setting's horizon h (s), over "
        "every finished seed, and its 95 % t-interval (how many seeds reached "
        f"{target:g}, when not all; ≥ h where none did by h); where none did at all, the "
        "final accuracy; in brackets, the "
        "share of updates whose gradient was stale, where any was; ▲/▼: faster/slower than "
        "the baseline by the labels of the time-to-target table."
    )
    title = f"## Time to test accuracy {target:g} by loss setting"
    return "\n".join([title, "", text, "", pivot_table(rows)])


def aa_table(ratios: dict[tuple[str, float | None], Spread | None], a: str, b: str) -> str:
    """The A/A control alone (``aa_control.md``): the pair's paired ratio and its plain 95 %
    interval at each loss setting, and whether it holds there (the interval contains 1)."""
    body = []
    for (delay, rate), ratio in ratios.items():
        holds = ratio is not None and ratio.count >= 2 and ratio.low <= 1 <= ratio.high
        verdict = "holds (contains 1)" if holds else "fails: the study is invalid"
        if ratio is None or ratio.count < 2:
            verdict = "fails: fewer than 2 pairs"
        pairs = str(ratio.count if ratio else 0)
        body.append([_setting(delay, rate), _plus_minus(ratio, 2, True), pairs, verdict])
    return _table(["loss setting", f"{a} / {b} (95 % interval)", "pairs", "A/A control"], body)


def aa_markdown(ratios: dict[tuple[str, float | None], Spread | None], a: str, b: str) -> str:
    """The A/A section of ``summary.md``: what the control is, :func:`aa_table`, and study
    v2's noise floor as a sensitivity check (:func:`~gclab.report.compare.noise_floor`)."""
    floor = noise_floor(ratios.values())
    lines = [
        "## A/A control",
        "",
        f"{a} and {b} run one arm twice through the same code: their ratio (restricted "
        "times, paired by seed) is 1 but for noise, and its 95 % interval must contain 1 at "
        "every setting, or the study is invalid and every label says so. Sensitivity: study "
        "v2's floor, the largest ratio this interval admits, "
        f"{_floor_text(floor)}; the time-to-target CSV's floor_label is each comparison's "
        "label under that rule.",
        "",
    ]
    return "\n".join([*lines, aa_table(ratios, a, b)])
