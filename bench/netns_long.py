"""Long box points: is a miss of ``tcp_loss`` the model's, or 100 rounds' sampling noise?

At 5 % IP loss a round's 95th percentile sits where the rounds that waited for a second
timeout (or a retransmission round) begin, and 100 rounds hold five or so of them: the
p95 of 100 rounds moves with how many came. This reads points of
``bench/netns_clock.py --out`` run with many rounds (``--rounds 400``), and prints per
point the box's median and p95 over all its rounds and over each block of ``--block``
rounds, beside ``tcp_loss`` (its defaults, ``nodes=2`` as the box) replayed on the box's
own compute times: on the run's seed, over all rounds and per block, and with the
draws of ``--seeds`` seeds pooled. The first (warm-up) round is left out throughout.

``--refit`` adds ``tcp_loss`` with its three timeline constants (``tail``,
``copy_tail``, ``timeout``) fitted to this machine's box instead of the grid's: the
timeline step of ``bench/netns_fit.py`` on the files' own points whose packets cross
their links alone, each point predicted from a fit that leaves its own timelines out.
No round duration enters either fit.

    python bench/netns_clock.py --out long.jsonl --workers 4 --models cnn --rates 1.25e8 \\
        --losses 0.05 --schemes classic_cr pipelined_fr cce_cr --rounds 400 --virtual-runs lossless
    python bench/netns_long.py long.jsonl --refit
"""

from __future__ import annotations

import argparse

import numpy as np
from netns_fit import GOAL, NODES, Point, clear, load, timeline_fit


def blocks(t: np.ndarray, size: int) -> list[tuple[float, float]]:
    """Median and p95 of each whole block of ``size`` rounds."""
    return [
        (float(np.median(t[i : i + size])), float(np.percentile(t[i : i + size], 95)))
        for i in range(0, len(t) - size + 1, size)
    ]


def within(ratios: tuple[float, float]) -> bool:
    """Whether a median and a p95 ratio are both within the issue's 20 %."""
    return all(1 / GOAL <= r <= GOAL for r in ratios)


def span(values: list[float]) -> str:
    """``lowest–highest`` of ``values``, in seconds."""
    return f"{min(values):.3f}–{max(values):.3f}"


def refits(points: list[Point]) -> tuple[dict, list[dict]]:
    """The timeline fit on all of ``points``, and for each point the fit on the others
    (the same fit where the point's timelines do not enter it)."""
    every = timeline_fit(points)[0]
    return every, [timeline_fit([q for q in points if q is not p])[0] if clear(p) else every
                   for p in points]  # fmt: skip


def ratios(rounds: np.ndarray, box: tuple[float, float]) -> tuple[float, float]:
    """Median and p95 of ``rounds`` over the box's."""
    return float(np.median(rounds) / box[0]), float(np.percentile(rounds, 95) / box[1])


def cells(ratios: tuple[float, float]) -> str:
    """A median and a p95 ratio as the tables print them."""
    return f"×{ratios[0]:.2f} / ×{ratios[1]:.2f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="netns_clock.py --out files")
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=8)
    parser.add_argument(
        "--refit", action="store_true",
        help="add tcp_loss with tail, copy_tail and timeout fitted to these files' timelines",
    )  # fmt: skip
    args = parser.parse_args()
    points = [p for p in load(args.files) if "round_times" in p.record["box"]]  # else: a
    # point from before the box's rounds were kept
    fits = [{}] * len(points)
    if args.refit:
        every, left_out = refits(points)
        fits = [{"nodes": NODES, **f} for f in left_out]
        tails = [f["tail"] for f in left_out]
        print(
            f"timeline fit on every point: {every}; leaving each out: tail "
            f"{min(tails)}–{max(tails)}\n"
        )
    extra = ("| refit, run's seed (× box) | refit, seeds pooled | within 20 % (refit, run's seed) ",
             "|---|---|---") if args.refit else ("", "")  # fmt: skip
    print(
        f"| point | rounds | box median / p95 s | box p95 per {args.block} rounds "
        "| tcp_loss, run's seed (× box) | its p95 per block | tcp_loss, seeds pooled (× box) "
        f"| within 20 % (run's seed): all rounds / blocks {extra[0]}|\n"
        f"|---|---|---|---|---|---|---|---{extra[1]}|"
    )
    params = {"nodes": NODES}
    for point, fit in zip(points, fits):
        box = np.array(point.record["box"]["round_times"][1:])
        own = point.rounds(params, point.seed)
        pooled = np.concatenate([point.rounds(params, s) for s in range(args.seeds)])
        b = np.median(box), np.percentile(box, 95)
        m, p = ratios(own, b), ratios(pooled, b)
        box_blocks, own_blocks = blocks(box, args.block), blocks(own, args.block)
        held = sum(within((o[0] / x[0], o[1] / x[1])) for x, o in zip(box_blocks, own_blocks))
        line = (
            f"| {point.name} | {len(box)} | {b[0]:.3f} / {b[1]:.3f} "
            f"| {span([q for _, q in box_blocks])} "
            f"| {cells(m)} | {span([q for _, q in own_blocks])} "
            f"| {cells(p)} | {'yes' if within(m) else 'no'} "
            f"/ {held} of {len(box_blocks)} |"
        )
        if fit:
            r = ratios(point.rounds(fit, point.seed), b)
            q = ratios(np.concatenate([point.rounds(fit, s) for s in range(args.seeds)]), b)
            line += f" {cells(r)} | {cells(q)} | {'yes' if within(r) else 'no'} |"
        print(line)


if __name__ == "__main__":
    main()
