"""Packet-loss sweep (issue 5, result 1): total time for 1000 jobs, n = 16, s = 1, T = 2.

    python bench/packet_loss.py            # 1000 jobs, 3 seeds
    python bench/packet_loss.py --quick    # 200 jobs, 1 seed

Schemes: uncoded, classic_cr, classic_fr (s = 1), pipelined_cr, pipelined_fr (s = 1,
T = 2). Losses: Bernoulli p ∈ {0, .02, .05, .1, .2} and Gilbert–Elliott with mean burst 3
at the same mean rates (every transmission, retransmissions too, is lost at that
rate). Collection policy ``all``: a round closes when every packet not lost has
arrived; a due job that cannot decode is recovered by retransmitting what its decoder
``wanted`` (each attempt ``rto`` seconds, lost again at the same rate).

Compute time, as in ``gclab/sim`` (``sim.unit_time × load``, the same for every worker)
plus the ``straggler`` delay model: ``UNIT_TIME = 16`` s per unit load (one partial
gradient = 1 s at n = 16) and ``Exp(0.1 s)`` per worker per round. The coded schemes all
have load 2/16 (equal load: the comparison among them is fair); uncoded has 1/16, so its
rounds are half as long and it is listed as the no-redundancy reference, not as an
equal-load competitor. ``rto`` = 3 × the median round of the coded schemes without loss
(one network constant for every scheme). Pipelined schemes run until their last job is
decoded, at most ``J + T`` rounds (the last job is due ``T`` rounds late): those rounds
count. Mean over seeds; the simulator is symbolic (decodability only), exactly the
decoders the runtime uses.
"""

from __future__ import annotations

import argparse

import numpy as np

from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.pipelined import PipelinedCR, PipelinedFR
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.bernoulli import Bernoulli
from gclab.network.composite import Composite
from gclab.network.gilbert_elliott import GilbertElliott
from gclab.network.straggler import Straggler
from gclab.sim.engine import simulate

N, S, T = 16, 1, 2
UNIT_TIME = 16.0
JITTER = 0.1
RATES = (0.0, 0.02, 0.05, 0.1, 0.2)
BURST = 3.0


def schemes() -> list:
    return [
        Uncoded(N),
        ClassicCR(N, S),
        ClassicFR(N, S),
        PipelinedCR(N, S, T),
        PipelinedFR(N, S, T),
    ]


def loss_model(kind: str, rate: float):
    """Straggler compute jitter in series with the loss model (``delay=composite``)."""
    if kind == "bernoulli" or rate == 0:
        loss = Bernoulli(rate)
    else:
        loss = GilbertElliott(loss_rate=rate, burst_length=BURST)
    return Composite(Straggler(0.0, JITTER), loss)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="200 jobs, 1 seed")
    args = parser.parse_args()
    jobs, seeds = (200, [0]) if args.quick else (1000, [0, 1, 2])
    built = schemes()
    lossless = NetworkConfig(policy="all", rto=1.0)
    medians = [
        np.median(simulate(s, loss_model("bernoulli", 0.0), lossless, jobs, 0, UNIT_TIME).durations)
        for s in built
        if s.load == (S + 1) / N
    ]
    rto = 3.0 * float(np.median(medians))
    network = NetworkConfig(policy="all", rto=rto)
    print(f"n={N}, s={S}, T={T}, {jobs} jobs, seeds {seeds}, unit_time={UNIT_TIME} s/load, "
          f"jitter Exp({JITTER} s), rto={rto:.2f} s (3 × median coded round)\n")  # fmt: skip
    header = "| loss | p | " + " | ".join(s.describe() for s in built) + " |"
    print(header)
    print("|" + "---|" * (2 + len(built)))
    for kind in ("bernoulli", "gilbert_elliott"):
        for rate in RATES:
            if kind == "gilbert_elliott" and rate == 0:
                continue
            cells = []
            for scheme in built:
                runs = [
                    simulate(scheme, loss_model(kind, rate), network, jobs, seed, UNIT_TIME)
                    for seed in seeds
                ]
                total = np.mean([r.total_time for r in runs])
                sent = np.mean([r.retransmissions.sum() for r in runs])
                cells.append(f"{total:.0f} ({sent:.0f})")
            print(f"| {kind} | {rate} | " + " | ".join(cells) + " |")
    print("\ncells: total virtual time in seconds (mean retransmission attempts)")


if __name__ == "__main__":
    main()
