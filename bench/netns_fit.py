"""Fit ``delay=tcp_loss`` to the network box's rounds; test it on points it did not see.

``tcp_loss`` (:mod:`gclab.network.tcp_loss`) was first fitted to single TCP messages sent
after an idle gap (``bench/netns_tcp.py``). In a round, Ray moves the weights and the
packets over connections that stay busy, and the box's rounds pay less for loss than
those single messages predict (BENCHMARKS.md). This script fits the parameters
that count timeouts, ``tail`` and ``resend``, the seconds a loss recovered within the
flow costs beyond its frames, ``fast_seconds``, and how many of a long message's chunks
recover side by side, ``streams``, to whole rounds: it reads the lossy points of
``bench/netns_clock.py --out`` files that kept the box's compute times (a point
measured again: its last measurement), replays each on those times under ``tcp_loss``
with every combination of a grid (the other parameters as configured), and scores one
by the mean over the *training* points (``--train``: by default classic_fr at n = 4
and 8, of every model in the files) of the squared log ratios of the predicted median
and 95th-percentile round to the box's. The model's draws are pooled over ``--seeds``
seeds, so a combination is judged by its distribution, not one draw.

Printed: the grid's best combination, then per point (training and held out) the box's
median / p95 and the ratios of the message fit's and the round fit's predictions, as
``bench/netns_clock.py`` makes them (the run's seed) and pooled over the seeds, and
how many points are within 20 % on both.

    python bench/netns_fit.py grid4.jsonl grid8.jsonl gridr.jsonl
    python bench/netns_fit.py grid4.jsonl --train classic_fr:4 classic_cr:4
"""

from __future__ import annotations

import argparse
import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from common import compose_config
from hydra.utils import instantiate
from netns_clock import MTU, common, on_clock

from gclab.coding.contract import Scheme
from gclab.network import NetworkConfig, RoundProtocol
from gclab.network.tcp_loss import TcpLoss
from gclab.study.replay import replay_rounds

TAILS = (0.0, 0.1, 0.25, 0.5, 1.0, 2.04)
RESENDS = (0.0, 0.03, 0.06, 0.12, 0.24, 0.48)
FAST_SECONDS = (0.00125, 0.0025, 0.005, 0.01, 0.02)
STREAMS = (1, 2, 4, 8)
#: Within this factor of the box's median and p95: the issue's goal for a loss model.
GOAL = 1.2
#: The fit to single messages after an idle gap (``bench/netns_tcp.py --fit``).
#: A lone message is one TCP flow.
MESSAGE_FIT = {"tail": 2.04, "resend": 0.48, "fast_seconds": 0.00125, "streams": 1}


@dataclass
class Point:
    """One lossy grid point: the box's rounds and what its replay needs."""

    record: dict
    scheme: Scheme
    network: NetworkConfig
    payload: float
    seed: int
    compute: np.ndarray
    server: np.ndarray

    @property
    def name(self) -> str:
        r = self.record
        rate, loss = r["rate"] / 1e6, 100 * r["loss"]
        return f"{r['scheme']} {r['model']} n={r['n']} {rate:g} MB/s {loss:g} %"

    def rounds(self, params: dict, seed: int) -> np.ndarray:
        """The replayed round durations under ``tcp_loss`` with ``params`` (the first,
        warm-up round left out, as the box's)."""
        delay = TcpLoss(ip_loss=self.record["loss"], mtu=MTU, **params)
        protocol = RoundProtocol(self.network, delay, self.scheme.n, seed, payload=self.payload)
        out = replay_rounds(
            self.scheme, protocol, self.compute, len(self.compute), server=self.server
        )
        return np.array([r.outcome.duration for r in out.rounds[1 : len(self.compute)]])


def load(paths: list[str]) -> list[Point]:
    """The lossy points of ``paths`` that kept the box's compute times; of a point
    measured again, the last measurement."""
    last = {}
    for line in itertools.chain(*(Path(p).read_text().splitlines() for p in paths)):
        r = json.loads(line)
        last[r["scheme"], r["n"], r["model"], r["rate"], r["loss"]] = r
    points = []
    for r in last.values():
        if r["loss"] == 0 or "recorded_on_box" not in r:
            continue
        base = common(r["scheme"], r["n"], r["model"], r["rounds"])
        cfg = compose_config([*on_clock(base, r["n"], r["rate"]), "delay=tcp_loss"])
        scheme = instantiate(cfg.scheme, n=cfg.cluster.workers)
        model = instantiate(cfg.model, num_classes=10)
        payload = 4 * sum(p.numel() for p in model.parameters())
        recorded = r["recorded_on_box"]
        points.append(
            Point(r, scheme, NetworkConfig(**cfg.network), payload, cfg.seed,
                  np.array(recorded["compute"]), np.array(recorded["server"]))
        )  # fmt: skip
    return points


def ratios(point: Point, params: dict, seeds: list[int]) -> tuple[float, float]:
    """Predicted median and p95 over the box's, the draws of ``seeds`` pooled."""
    t = np.concatenate([point.rounds(params, s) for s in seeds])
    box = point.record["box"]
    return float(np.median(t) / box["median"]), float(np.percentile(t, 95) / box["p95"])


def score(points: list[Point], params: dict, seeds: list[int]) -> float:
    """Mean squared log ratio of median and p95 over ``points``."""
    logs = [np.log(ratios(p, params, seeds)) for p in points]
    return float(np.mean(np.square(logs)))


def cell(median: float, p95: float) -> str:
    mark = "" if max(abs(np.log(median)), abs(np.log(p95))) <= np.log(GOAL) else " ✗"
    return f"×{median:.2f} / ×{p95:.2f}{mark}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", help="bench/netns_clock.py --out files")
    parser.add_argument(
        "--train", nargs="+", default=["classic_fr:4", "classic_fr:8"],
        help="scheme:n of the training points",
    )  # fmt: skip
    parser.add_argument("--seeds", type=int, default=8)
    args = parser.parse_args()
    points = load(args.files)
    train = {(s, int(n)) for s, n in (t.split(":") for t in args.train)}
    is_train = [(p.record["scheme"], p.record["n"]) in train for p in points]
    training = [p for p, t in zip(points, is_train) if t]
    if not training:
        raise SystemExit(f"no lossy point with kept compute times matches --train {args.train}")
    seeds = list(range(args.seeds))
    grid = [
        {"tail": t, "resend": r, "fast_seconds": f, "streams": k}
        for t in TAILS for r in RESENDS for f in FAST_SECONDS for k in STREAMS
    ]  # fmt: skip
    scores = [score(training, params, seeds) for params in grid]
    best = grid[int(np.argmin(scores))]
    print(f"{len(training)} training points, {len(points) - len(training)} held out; seeds {seeds}")
    print(f"message fit {MESSAGE_FIT}: training score {score(training, MESSAGE_FIT, seeds):.4f}")
    print(f"best of the grid {best}: training score {min(scores):.4f}\n")
    print(
        "| point | role | box median / p95 s | message fit (run's seed) | message fit (pooled) "
        "| round fit (run's seed) | round fit (pooled) |\n|---|---|---|---|---|---|---|"
    )
    within = {"message fit": [0, 0], "round fit": [0, 0]}
    for point, t in zip(points, is_train):
        box = point.record["box"]
        cells = []
        for name, params in (("message fit", MESSAGE_FIT), ("round fit", best)):
            own = ratios(point, params, [point.seed])
            cells += [cell(*own), cell(*ratios(point, params, seeds))]
            ok = max(abs(np.log(own[0])), abs(np.log(own[1]))) <= np.log(GOAL)
            within[name][int(not t)] += ok
        role = "training" if t else "held out"
        print(
            f"| {point.name} | {role} | {box['median']:.3f} / {box['p95']:.3f} | "
            + " | ".join(cells)
            + " |"
        )
    held = len(points) - len(training)
    for name, (tr, ho) in within.items():
        print(
            f"\n{name}: within {GOAL:g}x on median and p95 (the run's seed) at {tr} of "
            f"{len(training)} training and {ho} of {held} held-out points"
        )


if __name__ == "__main__":
    main()
