"""Where a box round's time goes: its timeline beside what the virtual clock charges.

Trains one point of ``bench/netns_clock.py`` on the box (``cluster=netns``, wall clock)
and reads each round's ``timeline`` (:mod:`gclab.runtime.timeline`: the driver's and
every actor's phases on CLOCK_MONOTONIC, one clock for every namespace of the host).
The same rounds are replayed on the virtual clock with the box's links
(``netns_clock.matching``) on the compute times the box's workers measured
(``worker_s``) and the server time it measured (``server_ms``), so each piece of the
box's round stands beside what the clock charges for it: the weights' broadcast, the
compute, each packet's transfer, the server's work. The first (warm-up) round is left
out; per-worker pieces pool every worker's rounds.

    python bench/netns_timeline.py                       # classic_fr, n=4, cnn, 12.5 MB/s, no loss
    python bench/netns_timeline.py --run-dir /tmp/tl     # keep the run; again: read it, no training
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

import numpy as np
from netns_clock import common, in_box, on_clock, replayed, train

from gclab.network import RoundOutcome
from gclab.study.replay import recorded_server_time
from gclab.tracking.artifacts import read_metrics


def box_run(args: argparse.Namespace, run_dir: Path) -> tuple[list[dict], dict]:
    """The box run's round records and summary: read from ``run_dir`` if it holds them,
    else trained into it."""
    done = run_dir.with_name(f"{run_dir.name}-0")
    if (done / "summary.json").is_file():
        rounds = [r for r in read_metrics(done / "metrics.jsonl") if r["kind"] == "round"]
        return rounds, json.loads((done / "summary.json").read_text())
    base = common(args.scheme, args.workers, args.model, args.rounds)
    return train(in_box(base, args.rate, args.loss), run_dir, tries=1)


#: The timeline's keys the table reads.
KEYS = ("sent", "top", "put", "closed", "served", "called", "fetched", "computing",
        "computed", "returned", "back")  # fmt: skip

#: A piece of a round: its name, the box's seconds and the clock's (``None``: not on it).
Piece = tuple[str, np.ndarray, "np.ndarray | None"]


def pieces(rounds: list[dict], clock: list[RoundOutcome], broadcast: float) -> list[Piece]:
    """Each piece of the box's rounds beside the clock's charge for it (``broadcast``:
    the weights' broadcast time it charges). Per-worker pieces have a value per (round,
    worker), the others one per round."""
    t = {key: np.array([r["timeline"][key] for r in rounds], dtype=float) for key in KEYS}
    worker = np.array([r["worker_s"] for r in rounds])
    arrival = np.array([o.arrival for o in clock])
    server = np.array([o.server_time for o in clock])
    duration = np.array([o.duration for o in clock])
    tops = t["sent"] + t["top"]
    return [
        ("call reaches the actor: called", t["called"], np.zeros_like(worker)),
        ("weights in hand: fetched", t["fetched"], np.full_like(worker, broadcast)),
        ("weights' fetch: fetched − called", t["fetched"] - t["called"], None),
        ("fetched → computing", t["computing"] - t["fetched"], None),
        ("compute: computed − computing (clock: worker_s)", t["computed"] - t["computing"], worker),
        ("compute end: computed", t["computed"], broadcast + worker),
        ("computed → returned", t["returned"] - t["computed"], None),
        ("packet's transfer: back − returned", t["back"] - t["returned"],
         arrival - broadcast - worker),
        ("packet in hand: back", t["back"], arrival),
        ("last packet in hand", t["back"].max(axis=1), arrival.max(axis=1)),
        ("protocol's end: closed", t["closed"], duration - server),
        ("server: served − closed (clock: server_ms)", t["served"] - t["closed"], server),
        ("round_time", np.array([r["round_time"] for r in rounds]), duration),
        ("not on either clock: served → next top", tops[1:] - (t["sent"] + t["served"])[:-1], None),
        ("not on either clock: put − top (the weights)", t["put"] - t["top"], None),
        ("not on either clock: sent − put (ray.put)", -t["put"], None),
    ]  # fmt: skip


def summarise(values: np.ndarray) -> str:
    """Median / 95th percentile."""
    v = np.asarray(values, dtype=float).ravel()
    return f"{np.median(v):.4f} / {np.percentile(v, 95):.4f}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scheme", default="classic_fr")
    parser.add_argument("--workers", type=int, default=4)
    parser.add_argument("--model", default="cnn")
    parser.add_argument("--rate", type=float, default=1.25e7)
    parser.add_argument("--loss", type=float, default=0.0)
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--run-dir", help="keep the box run here (read it if it is there)")
    args = parser.parse_args()
    before = os.getloadavg()
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = Path(args.run_dir) if args.run_dir else Path(tmp) / "box"
        rounds, summary = box_run(args, run_dir)
    after = os.getloadavg()
    base = common(args.scheme, args.workers, args.model, args.rounds)
    compute = np.array([r["worker_s"] for r in rounds])
    protocol, clock = replayed(
        [*on_clock(base, args.workers, args.rate), "delay=none"],
        compute, recorded_server_time(rounds), args.rounds,
    )  # fmt: skip
    broadcast = protocol.links.broadcast_time(args.workers)
    print(
        f"{args.scheme}, n={args.workers}, {args.model}, {args.rate / 1e6:g} MB/s, loss "
        f"{args.loss:g}, {len(rounds)} rounds (first left out); workers' nodes "
        f"{summary.get('worker_nodes')}; load average {before[0]:.2f} before, {after[0]:.2f} after"
    )
    print(
        "\n| piece (s from the round's `sent`, or a span) | box median / p95 | clock median / p95 |"
    )
    print("|---|---|---|")
    for name, box, charged in pieces(rounds[1:], clock[1:], broadcast):
        on_clock_ = "–" if charged is None else summarise(charged)
        print(f"| {name} | {summarise(box)} | {on_clock_} |")


if __name__ == "__main__":
    main()
