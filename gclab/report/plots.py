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
from pathlib import Path

import numpy as np
from matplotlib import colormaps
from matplotlib.figure import Figure

from gclab.report.runs import SIM, TRAIN, Run, Sweep

DPI = 110


def colours(sweep: Sweep) -> dict[str, tuple[float, ...]]:
    """A stable colour per series, in job order."""
    palette = colormaps["tab10"].colors
    names = dict.fromkeys(sweep.series(run) for run in sweep.runs)
    return {name: palette[i % len(palette)] for i, name in enumerate(names)}


def _clock(runs: list[Run]) -> str:
    """'simulated' for simulator runs, 'virtual' for training runs (both: seconds)."""
    return "simulated" if all(run.kind == SIM for run in runs) else "virtual"


def _save(fig: Figure, path: Path) -> Path:
    fig.savefig(path, dpi=DPI)
    return path


def accuracy_vs_time(sweep: Sweep, path: Path) -> Path | None:
    """Test accuracy against the virtual clock, one panel per loss rate, one curve per series."""
    runs = [r for r in sweep.runs if r.kind == TRAIN and len(r.evaluations()[0])]
    if not runs:
        return None
    panels: dict[float | None, list[Run]] = defaultdict(list)
    for run in runs:
        panels[run.loss_rate if sweep.numeric_loss() else None].append(run)
    rates = sorted(panels, key=lambda r: -1.0 if r is None else r)
    cols = min(len(rates), 3)
    rows = math.ceil(len(rates) / cols)
    fig = Figure(figsize=(4.2 * cols + 2.2, 3.4 * rows), layout="constrained")
    axes = fig.subplots(rows, cols, sharey=True, squeeze=False).ravel()
    colour = colours(sweep)
    for ax, rate in zip(axes, rates):
        for run in panels[rate]:
            times, accuracy = run.evaluations()
            name = sweep.series(run)
            ax.plot(times, accuracy, marker="o", markersize=3, color=colour[name], label=name)
        ax.set_title("all runs" if rate is None else f"packet loss rate {rate:g}")
        ax.set_xlabel("virtual time (s)")
        ax.grid(alpha=0.3)
    for ax in axes[len(rates) :]:
        ax.set_visible(False)
    for ax in axes[::cols]:
        ax.set_ylabel("test accuracy (fraction correct)")
    _legend(fig, axes)
    fig.suptitle("Test accuracy vs virtual time")
    return _save(fig, path)


def _legend(fig: Figure, axes: np.ndarray) -> None:
    """One legend for the figure, each series once, outside the panels."""
    entries: dict[str, object] = {}
    for ax in axes:
        for handle, label in zip(*ax.get_legend_handles_labels()):
            entries.setdefault(label, handle)
    fig.legend(entries.values(), entries.keys(), loc="outside right upper", title="scheme")


def _strip_common_prefix(labels: list[str]) -> tuple[str, list[str]]:
    """Drop the words all labels share (``lambda-sydney-…-load025`` -> ``load025``)."""
    prefix = os.path.commonprefix(labels) if len(labels) > 1 else ""  # noqa: RUF071 (text)
    cut = max(prefix.rfind(c) for c in "-_. /=") + 1
    return prefix[:cut], [label[cut:] for label in labels]


def total_time(sweep: Sweep, path: Path) -> Path | None:
    """Total virtual time per series: against the loss rate, or as bars per configuration."""
    runs = [r for r in sweep.runs if not r.failed and r.total_time is not None]
    if not runs:
        return None
    colour = colours(sweep)
    fig = Figure(figsize=(7.5, 4.2), layout="constrained")
    ax = fig.subplots()
    groups: dict[str, list[Run]] = defaultdict(list)
    for run in runs:
        groups[sweep.series(run)].append(run)
    if sweep.numeric_loss():
        for name, members in groups.items():
            points = sorted((r.loss_rate, r.total_time) for r in members if r.loss_rate is not None)
            ax.plot(*zip(*points), marker="o", color=colour[name], label=name)
        ax.set_xlabel("packet loss rate (probability per transmission)")
        ax.set_title(f"Total {_clock(runs)} time vs packet loss rate")
    else:
        categories = list(dict.fromkeys(sweep.category(r) for r in runs))
        width = 0.8 / len(groups)
        for i, (name, members) in enumerate(groups.items()):
            offset = (i - (len(groups) - 1) / 2) * width
            x = [categories.index(sweep.category(r)) + offset for r in members]
            ax.bar(x, [r.total_time for r in members], width, color=colour[name], label=name)
        prefix, labels = _strip_common_prefix(categories)
        ax.set_xticks(range(len(categories)), labels)
        keys = ", ".join(sweep.category_keys()) or "configuration"
        ax.set_xlabel(f"{keys} ({prefix}…)" if prefix else keys)
        ax.set_title(f"Total {_clock(runs)} time per configuration")
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


#: Output file name -> plot function, in the order the report writes them.
PLOTS = {
    "accuracy_vs_time.png": accuracy_vs_time,
    "total_time.png": total_time,
    "decode_latency.png": decode_latency,
}
