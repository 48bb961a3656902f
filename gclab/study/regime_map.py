"""The regime map: where each scheme wins, over compute per round / rto and the loss.

Each cell of the map is a regime (ρ, ℓ): the baseline's compute per round over the rto
(ρ, the spec's ``map.rhos``) and a loss setting (``map.losses``). A scheme's cell is its
time to target there against the baseline's, paired by seed, as the study's tables
compare real runs; it is built from the study's real runs, where that is valid:

* every run is put on the normalised clock first (compute and server time scaled so that
  its median is the regime's pre-registered ``partition_seconds``; the bandwidths are the
  regime's), and the rto set to the cell's: rto = k·partition_seconds / ρ, k the
  partitions of the baseline's round;
* an exact variant (T = 0, or interleaved models) is **replayed** from its lossless run
  under the cell's loss (:mod:`gclab.study.replay`): its weights per job do not depend on
  the losses or the clock, so only when each job is applied changes;
* a stale variant is **re-timed** from its real run at the cell's loss, if the study has
  one: with a per-attempt loss model the same packets are lost whatever the clock, and
  the same jobs must apply in every round (checked; a cell whose recovery reorders is
  left out). Other losses have no stale cell.

A cell's time to target is read as a real run's is (decisive evaluations, every model),
with no time budget: its horizon is the shortest follow-up of its runs. Ratios and their
Holm correction (over one scheme's cells) are the report's (:mod:`gclab.report.compare`).
``map.verify`` names corners of the grid to run for real: each real run's time over the
cell's prediction for its seed, paired, with its 95 % interval.
"""

from __future__ import annotations

import copy
import csv
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from matplotlib.figure import Figure
from omegaconf import DictConfig

from gclab.report.compare import UNCLEAR, holm, label, paired_p, paired_ratio
from gclab.report.intervals import Spread
from gclab.report.survival import Outcome, default_horizon
from gclab.study.replay import (
    build_protocol,
    evaluated_jobs,
    not_replayable,
    payload_of,
    recorded_server_time,
    replay_rounds,
    source_config,
)
from gclab.tracking.artifacts import read_metrics

#: Marks of a label in the map's tables and figures.
MARKS = {"faster": "▲", "slower": "▼"}


@dataclass(frozen=True)
class Cell:
    """One variant's outcome in one regime for one seed (None: no valid cell)."""

    variant: str
    rho: float
    loss: str
    seed: int
    outcome: Outcome | None


def crossing_time(records: list[tuple[float, dict[str, Any]]], target: float) -> float | None:
    """When every model has crossed ``target``: the latest of each model's first decisive
    evaluation at or above it, over ``(time, eval record)`` pairs in time order."""
    firsts: dict[int, float] = {}
    width = None
    for time, rec in records:
        if not rec.get("decisive", True):
            continue
        accuracies = rec.get("model_accuracy") or [rec["test_accuracy"]]
        width = len(accuracies)
        for m, accuracy in enumerate(accuracies):
            if accuracy >= target:
                firsts.setdefault(m, time)
    if width is None or len(firsts) < width:
        return None
    return max(firsts.values())


def cell_outcome(
    source: Path,
    target: float,
    rto: float,
    partition_seconds: float,
    delay: DictConfig | None = None,
) -> Outcome | None:
    """The run ``source`` in another regime: its compute and server time scaled to
    ``partition_seconds`` per partition gradient, the rto set to ``rto`` and, for an exact
    run, the delay model replaced by ``delay``; None where that is not valid (a stale run
    under another loss, or one whose deliveries reorder)."""
    cfg = source_config(source)
    summary = _summary(source)
    records = read_metrics(source / "metrics.jsonl")
    rounds = [rec for rec in records if rec["kind"] == "round"]
    scheme, _ = build_protocol(cfg)
    exact = not_replayable(cfg, scheme) is None
    if delay is not None and not exact:
        return None
    changed = copy.deepcopy(cfg)
    changed.network.rto = float(rto)
    if delay is not None:
        changed.delay = delay
    scheme, protocol = build_protocol(changed, payload_of(summary, rounds, cfg))
    compute = np.array([rec["compute_s"] for rec in rounds], dtype=np.float64)
    scale = partition_seconds * summary["load"] * summary["n"] / float(np.median(compute))
    server = recorded_server_time(rounds) * scale
    evals = evaluated_jobs(records)
    until = max((job for job, _ in evals), default=-1) if exact else -1
    replay = replay_rounds(scheme, protocol, compute * scale, summary["num_jobs"], until, server)
    clock = np.cumsum([step.outcome.duration for step in replay.rounds])
    if exact:
        placed = [(float(clock[replay.applied_at[job]]), rec) for job, rec in evals]
    else:
        timed = [len(step.applied) for step in replay.rounds]
        if timed != [rec.get("jobs_applied", 0) for rec in rounds]:
            return None  # the new clock reorders a recovery: not the run's weights
        placed = [(float(clock[rec["round"]]), rec) for rec in records if rec["kind"] == "eval"]
    return Outcome(crossing_time(placed, target), float(clock[-1]) if len(clock) else 0.0)


def _summary(source: Path) -> dict[str, Any]:
    return json.loads((source / "summary.json").read_text(encoding="utf-8"))


@dataclass(frozen=True)
class MapRow:
    """One scheme's paired ratio against the baseline in one regime."""

    variant: str
    baseline: str
    rho: float
    loss: str
    horizon: float | None
    ratio: Spread | None  # plain 95 % interval
    corrected: Spread | None  # Holm-corrected over the variant's cells
    adjusted: float | None
    label: str
    times: dict[int, float]  # the variant's min(T, horizon) by seed
    base_times: dict[int, float]


def compare_cells(
    cells: list[Cell], baselines: dict[str, str], invalid: bool = False
) -> list[MapRow]:
    """Every variant's cells against its baseline's (``baselines``: variant -> baseline
    variant), paired by seed, restricted to the cell's shortest follow-up, labelled by
    Holm's correction over the variant's cells (``invalid``: every label says the study is
    invalid)."""
    by_key = {(c.variant, c.rho, c.loss, c.seed): c.outcome for c in cells}
    regimes = list(dict.fromkeys((c.rho, c.loss) for c in cells))
    rows = []
    for variant, baseline in baselines.items():
        pending = []
        for rho, loss in regimes:
            seeds = sorted(
                {c.seed for c in cells if (c.variant, c.rho, c.loss) == (variant, rho, loss)}
            )
            pairs = [
                (s, by_key.get((variant, rho, loss, s)), by_key.get((baseline, rho, loss, s)))
                for s in seeds
            ]
            pairs = [(s, a, b) for s, a, b in pairs if a is not None and b is not None]
            if not pairs:
                continue
            horizon = default_horizon([o for _, a, b in pairs for o in (a, b)])
            mine = {s: a.restricted(horizon) for s, a, _ in pairs}
            base = {s: b.restricted(horizon) for s, _, b in pairs}
            pending.append((rho, loss, horizon, base, mine))
        corrections = holm([paired_p(base, mine) for *_, base, mine in pending])
        for (rho, loss, horizon, base, mine), (adjusted, level) in zip(pending, corrections):
            shown = paired_ratio(base, mine, level=level)
            verdict = "invalid (A/A)" if invalid else label(shown)
            rows.append(
                MapRow(
                    variant,
                    baseline,
                    rho,
                    loss,
                    horizon,
                    paired_ratio(base, mine),
                    shown,
                    adjusted if len(mine) > 1 else None,
                    verdict if len(mine) > 1 else UNCLEAR,
                    mine,
                    base,
                )
            )
    return rows


COLUMNS = ("variant", "baseline", "rho", "loss", "horizon", "pairs", "ratio", "ratio_low",
           "ratio_high", "corrected_low", "corrected_high", "p_holm", "label",
           "variant_mean", "baseline_mean")  # fmt: skip


def write_csv(rows: list[MapRow], path: Path) -> None:
    with path.open("w", newline="", encoding="utf-8") as f:
        writer = csv.writer(f)
        writer.writerow(COLUMNS)
        for row in rows:
            r, c = row.ratio, row.corrected
            writer.writerow([
                row.variant, row.baseline, row.rho, row.loss, row.horizon,
                r.count if r else 0, *(("", "", "") if r is None else (r.mean, r.low, r.high)),
                *(("", "") if c is None else (c.low, c.high)), row.adjusted, row.label,
                np.mean(list(row.times.values())), np.mean(list(row.base_times.values())),
            ])  # fmt: skip


def _text(row: MapRow | None) -> str:
    if row is None or row.ratio is None:
        return "–"
    return f"{row.ratio.mean:.2f}{MARKS.get(row.label, '')}"


def markdown(rows: list[MapRow], rhos: list[float], losses: list[str]) -> str:
    """One table per variant: loss settings down, ρ across, each cell the paired ratio (the
    baseline's time over the variant's: > 1 is faster) and its Holm label (▲ faster,
    ▼ slower)."""
    found = {(r.variant, r.rho, r.loss): r for r in rows}
    parts = []
    for variant in dict.fromkeys(r.variant for r in rows):
        baseline = next(r.baseline for r in rows if r.variant == variant)
        header = ["loss \\ compute per round / rto", *(f"{rho:g}" for rho in rhos)]
        rule = "|" + "|".join("---" for _ in header) + "|"
        lines = [f"**{variant}** against {baseline}", "", "| " + " | ".join(header) + " |", rule]
        for loss in losses:
            cells = [_text(found.get((variant, rho, loss))) for rho in rhos]
            lines.append("| " + " | ".join([loss, *cells]) + " |")
        parts.append("\n".join(lines) + "\n")
    return "\n".join(parts)


def heat_maps(rows: list[MapRow], rhos: list[float], losses: list[str], path: Path) -> Path | None:
    """One heat map per variant (log2 of the ratio: blue where the variant is faster),
    annotated with the ratio and its label, side by side in one PNG."""
    variants = list(dict.fromkeys(r.variant for r in rows))
    if not variants:
        return None
    found = {(r.variant, r.rho, r.loss): r for r in rows}
    cols = min(3, len(variants))
    lines = math.ceil(len(variants) / cols)
    fig = Figure(figsize=(4.2 * cols, 2.9 * lines), layout="constrained")
    axes = np.atleast_1d(fig.subplots(lines, cols, squeeze=False)).ravel()
    image = None
    for ax, variant in zip(axes, variants):
        grid = np.full((len(losses), len(rhos)), np.nan)
        for i, loss in enumerate(losses):
            for j, rho in enumerate(rhos):
                row = found.get((variant, rho, loss))
                if row is not None and row.ratio is not None:
                    grid[i, j] = math.log2(row.ratio.mean)
                ax.text(j, i, _text(row), ha="center", va="center", fontsize=8)
        image = ax.imshow(grid, cmap="RdBu", vmin=-1.5, vmax=1.5, aspect="auto")
        ax.set_xticks(range(len(rhos)), [f"{rho:g}" for rho in rhos])
        ax.set_yticks(range(len(losses)), losses, fontsize=7)
        ax.set_xlabel("compute per round / rto")
        baseline = next(r.baseline for r in rows if r.variant == variant)
        ax.set_title(f"{variant} vs {baseline}", fontsize=9)
    for ax in axes[len(variants) :]:
        ax.set_axis_off()
    if image is not None:
        fig.colorbar(image, ax=list(axes[: len(variants)]), label="log2 ratio (> 0: faster)")
    fig.savefig(path, dpi=110)
    return path


def verify_rows(
    pairs: list[tuple[str, float, str, int, Outcome | None, Outcome | None]],
) -> list[tuple[str, float, str, Spread | None, int]]:
    """Per verified corner (variant, ρ, loss), the real run's time to target over the
    map's prediction for its seed, paired over seeds (geometric mean, 95 % interval), and
    how many seeds both reached: ``pairs`` holds (variant, ρ, loss, seed, real, map)."""
    out = []
    corners = list(dict.fromkeys((v, rho, loss) for v, rho, loss, *_ in pairs))
    for variant, rho, loss in corners:
        both = [
            (seed, real, mapped)
            for v, r, l, seed, real, mapped in pairs
            if (v, r, l) == (variant, rho, loss) and real and mapped
            and real.reached and mapped.reached
        ]  # fmt: skip
        ratio = paired_ratio({s: real.time for s, real, _ in both},
                             {s: mapped.time for s, _, mapped in both})  # fmt: skip
        out.append((variant, rho, loss, ratio, len(both)))
    return out
