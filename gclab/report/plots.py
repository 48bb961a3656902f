"""The sweep's PNG plots, drawn with matplotlib's object API (Agg, no pyplot state).

Figures are built as ``matplotlib.figure.Figure`` objects and saved to PNG, which
renders through Agg without selecting a global backend: the report runs the same on
a headless cluster node, inside tests, and next to an interactive session.

One colour per series (scheme and whatever else distinguishes curves, see
:meth:`Sweep.series`) across all plots, so a scheme looks the same everywhere. Each
function returns the file it wrote, or None when the sweep has nothing to show there
(e.g. a simulator sweep has no accuracy curve).
"""

from __future__ import annotations

import math
import os
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.figure import Figure

from gclab.report.groups import Group, groups
from gclab.report.intervals import BANDS, Spread, spread
from gclab.report.runs import SIM, TRAIN, Run, Sweep

DPI = 110


def colours(sweep: Sweep) -> dict[str, tuple[float, ...]]:
    """A stable colour per series, in job order."""
    return palette(sweep.series(run) for run in sweep.runs)


def palette(names: Iterable[str]) -> dict[str, tuple[float, ...]]:
    """A colour per name, in order (tab10, repeating after 10)."""
    cycle = colormaps["tab10"].colors
    return {name: cycle[i % len(cycle)] for i, name in enumerate(dict.fromkeys(names))}


def _clock(runs: list[Run]) -> str:
    """'simulated' for simulator runs, 'virtual' for training runs (both: seconds)."""
    return "simulated" if all(run.kind == SIM for run in runs) else "virtual"


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    return path


def _panels(sweep: Sweep, all_groups: list[Group]) -> dict[tuple[float, str] | None, list[Group]]:
    """Groups per panel: one per (loss rate, delay model) against the loss rate, else one."""
    panels: dict[tuple[float, str] | None, list[Group]] = defaultdict(list)
    for group in all_groups:
        rate = group.loss_rate if group.loss_rate is not None else -1.0
        panels[(rate, group.delay) if sweep.numeric_loss() else None].append(group)
    return dict(sorted(panels.items(), key=lambda item: item[0] or (-1.0, "")))


def _panel_title(key: tuple[float, str] | None, several_models: bool) -> str:
    if key is None:
        return "all runs"
    rate, delay = key
    text = "unknown loss rate" if rate < 0 else f"packet loss rate {rate:g}"
    return f"{delay}: {text}" if several_models and rate > 0 else text


def accuracy_vs_time(sweep: Sweep, path: Path, band: str = "ci") -> Path | None:
    """Test accuracy against the virtual clock, one panel per loss setting, one curve per
    group: a single seed's evaluations, or the mean over seeds with its band (over the
    span every seed covers) and each seed's own evaluations as a thin line (runs that
    stop at a target end at different times, past the mean's span)."""
    all_groups = [g for g in groups(sweep) if g.curves()]
    if not all_groups:
        return None
    panels = _panels(sweep, all_groups)
    several_models = len({key[1] for key in panels if key is not None and key[0] > 0}) > 1
    cols = min(len(panels), 3)
    rows = math.ceil(len(panels) / cols)
    fig = Figure(figsize=(4.2 * cols + 2.2, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, sharey=True, squeeze=False).ravel()
    colour = palette(g.name for g in all_groups)
    seeds = max(len(g.curves()) for g in all_groups)
    for ax, (key, members) in zip(axes, panels.items()):
        for group in members:
            c = colour[group.name]
            if len(group.curves()) == 1:
                times, accuracy = group.curves()[0]
                ax.plot(times, accuracy, marker="o", markersize=3, color=c, label=group.name)
                continue
            mean = group.mean_curve(band)
            if mean is None:  # seeds without a common time span
                continue
            grid, spreads = mean
            for times, accuracy in group.curves():
                ax.plot(times, accuracy, color=c, linewidth=0.7, alpha=0.45)
            ax.plot(grid, [s.mean for s in spreads], color=c, label=group.name)
            # an accuracy lies in [0, 1]; a t-interval over 2 seeds (t = 12.7) can leave it
            low = np.clip([s.low for s in spreads], 0, 1)
            high = np.clip([s.high for s in spreads], 0, 1)
            ax.fill_between(grid, low, high, color=c, alpha=0.2)
        ax.set_title(_panel_title(key, several_models))
        ax.set_xlabel("virtual time (s)")
        ax.grid(alpha=0.3)
    for ax in axes[len(panels) :]:
        ax.set_axis_off()
    for ax in axes[::cols]:
        ax.set_ylabel("test accuracy (fraction correct)")
    _legend(fig, axes, spare=axes[len(panels)] if len(panels) < len(axes) else None)
    title = "Test accuracy vs virtual time"
    if seeds > 1:
        title += f" (mean over seeds; band: {BANDS[band]}; thin lines: each seed)"
    fig.suptitle(title)
    return _save(fig, path)


def _legend(fig: Figure, axes: np.ndarray, spare: Axes | None = None) -> None:
    """One legend for the figure, each series once: in the ``spare`` grid cell where the
    panels leave one, else below the panels (clear of the title)."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    if spare is not None:
        spare.legend(entries.values(), entries.keys(), loc="center", title="scheme")
        return
    columns = min(len(entries), 3)
    fig.legend(
        entries.values(), entries.keys(), loc="outside lower center", ncols=columns, title="scheme"
    )


def _strip_common_prefix(labels: list[str]) -> tuple[str, list[str]]:
    """Drop the words all labels share (``lambda-sydney-…-load025`` -> ``load025``)."""
    prefix = os.path.commonprefix(labels) if len(labels) > 1 else ""  # noqa: RUF071 (text)
    cut = max(prefix.rfind(c) for c in "-_. /=") + 1
    return prefix[:cut], [label[cut:] for label in labels]


def total_time(sweep: Sweep, path: Path, band: str = "ci") -> Path | None:
    """Total virtual time per series: against the loss rate, or as bars per configuration.

    Runs that differ only by seed are one point (their mean, with the band as error bars).
    """
    points = []  # (group, spread of its finished runs' total times)
    for group in groups(sweep):
        values = [run.total_time for run in group.finished if run.total_time is not None]
        if values:
            points.append((group, spread(values, band)))
    if not points:
        return None
    runs = [run for group, _ in points for run in group.finished]
    colour = colours(sweep)
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    lines: dict[tuple[str, str], list[tuple[float, Spread]]] = defaultdict(list)
    if sweep.numeric_loss():
        for group, value in points:
            if group.loss_rate is not None:
                lines[group.label, group.delay].append((group.loss_rate, value))
        several_models = len({delay for _, delay in lines}) > 1
        styles = {
            delay: "-o" if i == 0 else "--s"
            for i, delay in enumerate(dict.fromkeys(d for _, d in lines))
        }
        for (name, delay), line in lines.items():
            line.sort(key=lambda item: item[0])
            x, y = [rate for rate, _ in line], [v.mean for _, v in line]
            err = [[v.mean - v.low for _, v in line], [v.high - v.mean for _, v in line]]
            label = f"{name}, {delay}" if several_models else name
            ax.errorbar(
                x, y, yerr=err, fmt=styles[delay], color=colour[name], label=label, capsize=3
            )
        ax.set_xlabel("packet loss rate (probability per transmission)")
        ax.set_title(f"Total {_clock(runs)} time vs packet loss rate")
    else:
        categories = list(dict.fromkeys(sweep.category(g.runs[0]) for g, _ in points))
        names = list(dict.fromkeys(g.label for g, _ in points))
        width = 0.8 / len(names)
        for i, name in enumerate(names):
            offset = (i - (len(names) - 1) / 2) * width
            mine = [(g, v) for g, v in points if g.label == name]
            x = [categories.index(sweep.category(g.runs[0])) + offset for g, _ in mine]
            err = [[v.mean - v.low for _, v in mine], [v.high - v.mean for _, v in mine]]
            ax.bar(x, [v.mean for _, v in mine], width, yerr=err, color=colour[name], label=name)
        prefix, labels = _strip_common_prefix(categories)
        ax.set_xticks(range(len(categories)), labels)
        keys = ", ".join(sweep.category_keys()) or "configuration"
        ax.set_xlabel(f"{keys} ({prefix}…)" if prefix else keys)
        ax.set_title(f"Total {_clock(runs)} time per configuration")
    if any(value.count > 1 for _, value in points):
        ax.set_title(f"{ax.get_title()}\n(mean over seeds; error bars: {BANDS[band]})")
    ax.set_ylabel(f"total {_clock(runs)} time (s)")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    fig.legend(loc="outside right upper", title="scheme")
    return _save(fig, path)


def decode_latency(sweep: Sweep, path: Path) -> Path | None:
    """Distribution of per-round decode latency per series (loss rates pooled)."""
    samples: dict[str, list[np.ndarray]] = defaultdict(list)
    for run in sweep.runs:
        if run.kind == TRAIN and len(run.decode_ms()):
            samples[sweep.series(run)].append(run.decode_ms())
    if not samples:
        return None
    colour = colours(sweep)
    names = list(samples)
    data = [np.concatenate(samples[name]) for name in names]
    fig = Figure(figsize=(max(7.0, 1.6 * len(names) + 2.0), 4.2), layout="constrained")
    ax = fig.subplots()
    boxes = ax.boxplot(
        data, patch_artist=True, showmeans=True, widths=0.6, medianprops={"color": "black"}
    )
    for patch, name in zip(boxes["boxes"], names):
        patch.set_facecolor(colour[name])
        patch.set_alpha(0.6)
    ax.set_xticks(
        range(1, len(names) + 1), [f"{n}\n({len(d)} rounds)" for n, d in zip(names, data)]
    )
    ax.set_xlabel("scheme (box: quartiles, line: median, triangle: mean, whiskers: 1.5 IQR)")
    ax.set_ylabel("decode latency per round (ms)")
    pooled = " (loss rates pooled)" if sweep.numeric_loss() else ""
    ax.set_title(f"Decode latency distribution per scheme{pooled}")
    ax.grid(axis="y", alpha=0.3)
    return _save(fig, path)
