"""``network.clock=wall`` against ``network.clock=virtual``: the same run, both clocks.

Both runs train the same config (the ``smoke`` experiment by default: synthetic data, a
thin CNN, 40 rounds) with packets held ``shift + Exp(mean)`` seconds and lost with
probability ``p``. For the wall run, every round is also replayed through the virtual
protocol with the compute times the wall run measured (metrics.jsonl ``compute_s``):
``overhead`` is the wall duration minus that modelled duration, i.e. what the real
delay line costs beyond the model (the master's timer lag, delivery, decoding checks,
recomputation of failed packets). The virtual run's own compute times are the actors'
in-process times, without Ray's call round trip, so its clock is a little shorter.

    python bench/wall_clock.py              # smoke, classic_cr s=1, n=4, 0.2 s + Exp(0.1), p=0.1
    python bench/wall_clock.py --quick      # 10 rounds
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np
from common import compose_config, machine
from hydra.utils import instantiate

import gclab.app
from gclab.network import Finished, NetworkConfig, RoundProtocol


def run(overrides: list[str]) -> list[dict]:
    """Train ``overrides`` in a temporary directory; its round records."""
    with tempfile.TemporaryDirectory() as tmp:
        gclab.app.run(compose_config(overrides), Path(tmp))
        lines = (Path(tmp) / "metrics.jsonl").read_text().splitlines()
    return [r for r in map(json.loads, lines) if r["kind"] == "round"]


def replay(overrides: list[str], rounds: list[dict]) -> np.ndarray:
    """Durations the virtual clock gives the recorded compute times (symbolic decoding)."""
    cfg = compose_config(overrides)
    scheme = instantiate(cfg.scheme, n=cfg.cluster.workers)
    network = NetworkConfig(**{**cfg.network, "clock": "virtual"})
    protocol = RoundProtocol(network, instantiate(cfg.delay), scheme.n, cfg.seed)
    decoder = scheme.decoder()
    durations = []
    for record in rounds:
        compute = Finished(np.array(record["compute_s"]))
        decoder.begin_round(record["round"])  # and any skipped round before it
        out = protocol.run_round(record["round"], compute, decoder, lambda r, w: None)
        for job in out.decodable:
            decoder.decode(job)
        durations.append(out.duration)
    return np.array(durations)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="10 rounds")
    parser.add_argument("--shift", type=float, default=0.2)
    parser.add_argument("--mean", type=float, default=0.1)
    parser.add_argument("--p", type=float, default=0.1)
    args = parser.parse_args()
    base = [
        "experiment=smoke", "scheme=classic_cr", "scheme.s=1", "cluster.workers=4",
        "train.eval_every=0", "network.policy=deadline", "network.mu=1", "network.rto=0.3",
        "delay=composite", "delay@delay.compute=straggler",
        f"delay.compute.shift={args.shift}", f"delay.compute.mean={args.mean}",
        "delay@delay.loss=bernoulli", f"delay.loss.p={args.p}",
        *(["train.rounds=10"] if args.quick else []),
    ]  # fmt: skip
    print(f"# {machine()}")
    print(f"# overrides: {' '.join(base)}")
    print(
        "| clock | rounds | total clock (s) | mean round (s) | waits | retransmissions "
        "| lost | late | mean compute (s) | modelled (s) | overhead per round (ms): mean, max "
        "| wall time (s) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for clock in ("virtual", "wall"):
        overrides = [*base, f"network.clock={clock}"]
        rounds = run(overrides)
        durations = np.array([r["round_time"] for r in rounds])
        modelled = replay(overrides, rounds)
        overhead = 1e3 * (durations - modelled)
        compute = np.mean([r["compute_s"] for r in rounds])
        print(
            f"| {clock} | {len(rounds)} | {durations.sum():.2f} | {durations.mean():.3f} "
            f"| {sum(r['waited'] for r in rounds)} | {sum(r['retransmissions'] for r in rounds)} "
            f"| {sum(r['lost'] for r in rounds)} | {sum(r['late'] for r in rounds)} "
            f"| {compute:.3f} | {modelled.sum():.2f} | {overhead.mean():.1f}, {overhead.max():.1f} "
            f"| {rounds[-1]['wall_time']:.2f} |"
        )


if __name__ == "__main__":
    main()
