"""Long box points: is a miss of ``tcp_loss`` the model's, or 100 rounds' sampling noise?

At 5 % IP loss a round's 95th percentile sits where the rounds that waited for a second
timeout (or a retransmission round) begin, and 100 rounds hold five or so of them: the
p95 of 100 rounds moves with how many came. This reads points of
``bench/netns_clock.py --out`` run with many rounds (``--rounds 400``), and prints per
point the box's median and p95 over all its rounds and over each block of ``--block``
rounds, beside ``tcp_loss`` (its defaults, ``nodes=2`` as the box) replayed on the box's
own compute times: on the run's seed, over all rounds and per block, and with the
draws of ``--seeds`` seeds pooled. The first (warm-up) round is left out throughout.

    python bench/netns_clock.py --out long.jsonl --workers 4 --models cnn --rates 1.25e8 \\
        --losses 0.05 --schemes classic_cr pipelined_fr cce_cr --rounds 400 --virtual-runs lossless
    python bench/netns_long.py long.jsonl
"""

from __future__ import annotations

import argparse

import numpy as np
from netns_fit import GOAL, NODES, load


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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="netns_clock.py --out files")
    parser.add_argument("--block", type=int, default=100)
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    print(
        f"| point | rounds | box median / p95 s | box p95 per {args.block} rounds "
        "| tcp_loss, run's seed (× box) | its p95 per block | tcp_loss, seeds pooled (× box) "
        "| within 20 % (run's seed): all rounds / blocks |\n|---|---|---|---|---|---|---|---|"
    )
    params = {"nodes": NODES}
    for point in load(args.files):
        if "round_times" not in point.record["box"]:
            continue  # a point from before the box's rounds were kept
        box = np.array(point.record["box"]["round_times"][1:])
        own = point.rounds(params, point.seed)
        pooled = np.concatenate([point.rounds(params, s) for s in range(args.seeds)])
        b = np.median(box), np.percentile(box, 95)
        m = np.median(own) / b[0], np.percentile(own, 95) / b[1]
        p = np.median(pooled) / b[0], np.percentile(pooled, 95) / b[1]
        box_blocks, own_blocks = blocks(box, args.block), blocks(own, args.block)
        held = sum(within((o[0] / x[0], o[1] / x[1])) for x, o in zip(box_blocks, own_blocks))
        print(
            f"| {point.name} | {len(box)} | {b[0]:.3f} / {b[1]:.3f} "
            f"| {span([q for _, q in box_blocks])} "
            f"| ×{m[0]:.2f} / ×{m[1]:.2f} | {span([q for _, q in own_blocks])} "
            f"| ×{p[0]:.2f} / ×{p[1]:.2f} | {'yes' if within(m) else 'no'} "
            f"/ {held} of {len(box_blocks)} |"
        )


if __name__ == "__main__":
    main()
