"""``network.clock=wall``: real waits and drops, the model's losses.

The training loop runs with in-process workers (``helpers.inprocess``: the wall clock
then really waits for the modelled delays, while the workers compute one after another);
recomputing a crashed worker's packet needs real Ray actors.

Timing on a loaded 2-core machine is noisy, so durations are only checked from below:
a wall round lasts at least what the virtual clock makes of the same compute times
(the measured ones, from metrics.jsonl), and every such bound includes the injected
delays of 0.2 s and more.
"""

import math

import pytest
from hydra.utils import instantiate

from gclab.network import Finished, NetworkConfig, RoundOutcome, RoundProtocol
from gclab.tracking.artifacts import read_metrics
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process
from helpers.training import assert_same_weights, reference_weights, trained_weights

#: Every packet is held 0.2 s + Exp(0.1 s); one in five first transmissions is lost.
DELAY = [
    "delay=composite", "delay@delay.compute=straggler", "delay.compute.shift=0.2",
    "delay.compute.mean=0.1", "delay@delay.loss=bernoulli", "delay.loss.p=0.2",
]  # fmt: skip
WALL = ["network.clock=wall", "network.policy=deadline", "network.mu=1", "network.rto=0.3"]
SEED = 3


@pytest.mark.parametrize(
    "scheme",
    [["scheme=classic_cr", "scheme.s=1"], ["scheme=pipelined_cr", "scheme.s=1", "scheme.T=1"]],
    ids=["classic_cr", "pipelined_cr"],
)
def test_wall_clock_waits_drops_as_modelled_and_trains(tmp_path, monkeypatch, scheme) -> None:
    cfg = compose_config(
        [*TINY, *scheme, "cluster.workers=4", "train.rounds=6", f"seed={SEED}", *DELAY, *WALL]
    )
    outcomes: list[RoundOutcome] = []
    run_round = RoundProtocol.run_round

    def recording(self, *args, **kwargs) -> RoundOutcome:
        outcomes.append(run_round(self, *args, **kwargs))
        return outcomes[-1]

    monkeypatch.setattr(RoundProtocol, "run_round", recording)
    weights = trained_weights(cfg, tmp_path, in_process)
    monkeypatch.undo()  # the virtual replay below runs rounds too
    records = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "round"]
    scheme_obj = instantiate(cfg.scheme, n=4)
    delay = instantiate(cfg.delay)
    replay = RoundProtocol(NetworkConfig(**{**cfg.network, "clock": "virtual"}), delay, 4, SEED)
    decoder = scheme_obj.decoder()  # symbolic: the virtual clock on the measured compute times
    assert len(records) == len(outcomes) == 6 + scheme_obj.T
    for record, out in zip(records, outcomes):
        r = record["round"]
        assert list(out.lost) == list(delay.lost(r, 4, SEED))  # really dropped, as modelled
        # the measured server work follows the round on the clock
        assert record["round_time"] == out.duration + record["server_time"] > out.duration
        assert record["lost"] == out.lost.sum()
        assert record["compute_s"] == out.compute.tolist()
        # what each worker measured itself, before its result came back
        assert all(0 < w <= c for w, c in zip(record["worker_s"], record["compute_s"]))
        t = record["timeline"]  # the driver's phases in order, each worker's inside them
        assert t["top"] <= t["put"] <= 0 <= t["closed"] <= t["served"]
        assert "called" not in t  # in process: no call, no weights to fetch
        for w, measured in enumerate(record["worker_s"]):
            assert 0 <= t["computing"][w] <= t["computed"][w] <= t["back"][w] <= t["closed"]
            assert measured <= t["computed"][w] - t["computing"][w] + 1e-6
        virtual = replay.run_round(r, Finished(out.compute), decoder, lambda rr, w: None)
        for job in virtual.decodable:
            decoder.decode(job)
        assert out.duration >= virtual.duration - 1e-9
        first = (out.compute + delay.delays(r, 4, SEED, scheme_obj.load))[~out.lost]
        assert out.duration >= first.min() >= 0.2  # nothing is delivered before its delay
        if scheme_obj.T == 0:  # the predicate decides whether the close sufficed
            assert (out.recovered == ()) == scheme_obj.tolerates(out.lost | out.late)
            assert scheme_obj.tolerates(out.erased) and record["jobs_decoded"] == 1
        assert math.isfinite(record["train_loss"])
    assert sum(r["jobs_decoded"] for r in records) == 6
    assert sum(out.lost.sum() for out in outcomes) > 0  # the test exercised loss
    charged = sum(o.duration for o in outcomes) + sum(r["server_time"] for r in records)
    assert records[-1]["virtual_time"] == pytest.approx(charged)
    if scheme_obj.T == 0:  # exact scheme: the same weights as single-process SGD
        assert_same_weights(weights, reference_weights(cfg))


@pytest.mark.slow
def test_wall_clock_recomputes_the_packet_of_a_crashed_worker(ray_session, tmp_path) -> None:
    """A failed packet counts as lost: recovery has the restarted worker compute it again."""
    cfg = compose_config(
        [*TINY, "cluster.workers=2", "train.rounds=3", "faults.crash=[1:1]", "delay=straggler",
         "delay.shift=0.1", "delay.mean=0.05", "network.clock=wall", "network.rto=0.1"]
    )  # fmt: skip
    assert_same_weights(trained_weights(cfg, tmp_path), reference_weights(cfg))
    round1 = [r for r in read_metrics(tmp_path / "metrics.jsonl") if r["kind"] == "round"][1]
    assert round1["failed"] == round1["lost"] == 1 and round1["erasures"] == 0
    assert round1["retransmissions"] == 1 and round1["round_time"] >= 0.1 + 0.1  # delay + rto
