"""The Ray runtime and the simulator see the same rounds (docs/design.md, architecture).

Both engines draw delays and losses from the same seeded models. Replaying the
runtime's measured compute times (``compute_s`` in metrics.jsonl) through the
simulator's symbolic decoder and the round protocol must reproduce every round:
erasures, losses, retransmissions, waits, decoded jobs, bytes and durations, in both
``network.recovery`` modes, with every link limited and the measured server time on the
clock, and both engines must skip the same idle rounds. Every scheme
runs with in-process workers (``helpers.inprocess``), one on real Ray actors; the static
codes also with ``network.recovery=partial``, whose coverage the engines agree on.
"""

import numpy as np
import pytest
from hydra.utils import instantiate

from gclab.app import run
from gclab.network import Finished, NetworkConfig, RoundProtocol
from gclab.sim.engine import simulate
from gclab.tracking.artifacts import read_metrics
from helpers.coding import builtin_schemes
from helpers.config import TINY, compose_config
from helpers.inprocess import in_process

#: Settings that differ from a scheme's defaults; every built-in scheme runs.
OVERRIDES = {"pipelined_cr": ["scheme.T=1"], "m_sgc": ["scheme.lam=1"]}
SCHEMES = {name: [f"scheme={name}", *OVERRIDES.get(name, [])] for name in builtin_schemes()}


#: Links on which the tiny model's packets (~0.3 MB) take tenths of a second.
LINKS = [
    "network.bandwidth=1e6",
    "network.server_bandwidth=2e6",
    "network.broadcast_bandwidth=4e6",
]

#: One scheme of each family runs in the fast lane, the others in the slow one.
FAST = {"uncoded", "classic_cr", "pipelined_cr", "sr_sgc", "m_sgc"}


@pytest.mark.parametrize("recovery", ["decodable", "wait_all"])
@pytest.mark.parametrize(
    "scheme", [s if s in FAST else pytest.param(s, marks=pytest.mark.slow) for s in SCHEMES]
)
def test_runtime_and_simulator_agree_round_by_round(tmp_path, scheme, recovery):
    check_agreement(tmp_path, SCHEMES[scheme], recovery, in_process)


#: The static codes (``network.recovery=partial`` refuses the others); FR in the fast lane.
PARTIAL = [
    "classic_fr", "classic_cr", "uncoded", "ignore_stragglers", "cce_fr", "cce_cr",
    "is_cr", "is_hr",
]  # fmt: skip


@pytest.mark.parametrize(
    "scheme", [s if s == "classic_fr" else pytest.param(s, marks=pytest.mark.slow) for s in PARTIAL]
)
def test_partial_runtime_and_simulator_agree_round_by_round(tmp_path, scheme):
    check_agreement(tmp_path, SCHEMES[scheme], "partial", in_process)


@pytest.mark.slow
def test_on_ray_runtime_and_simulator_agree_round_by_round(ray_session, tmp_path):
    check_agreement(tmp_path, SCHEMES["pipelined_cr"], "decodable", None)


def check_agreement(tmp_path, scheme, recovery, start_pool) -> None:
    rng = np.random.default_rng(7)
    durations = 1.0 + 4.0 * (rng.random((4, 12)) < 0.2)  # 1 s, sometimes 5 s
    np.savez(tmp_path / "trace.npz", durations=durations, load=0.0)
    cfg = compose_config(
        [*TINY, *scheme, "cluster.workers=4", "train.rounds=10", "seed=3",
         "delay=composite", "delay@delay.compute=trace", f"delay.compute.path={tmp_path}/trace.npz",
         "delay.compute.slope=0", "delay@delay.loss=bernoulli", "delay.loss.p=0.2",
         "network.policy=deadline", "network.mu=1", "network.rto=0.5",
         f"network.recovery={recovery}", *LINKS]
    )  # fmt: skip
    run(cfg, tmp_path / "run", start_pool=start_pool)
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]

    scheme_obj = instantiate(cfg.scheme, n=4)
    network = NetworkConfig(**cfg.network)
    model = instantiate(cfg.model, num_classes=cfg.data.num_classes)
    payload = 4 * sum(p.numel() for p in model.parameters())
    protocol = RoundProtocol(network, instantiate(cfg.delay), 4, seed=3, payload=payload)
    decoder = scheme_obj.decoder()  # symbolic, as in the simulator
    size = scheme_obj.packet_fraction * payload
    for record in rounds:
        compute = Finished(np.array(record["compute_s"]))
        decoder.begin_round(record["round"])  # and any skipped round before it
        out = protocol.run_round(record["round"], compute, decoder, _none)
        out = protocol.charge(out, record["server_time"])  # the run measured it
        assert record["server_time"] > 0
        assert record["bytes"] == out.bytes == (4 + out.retransmissions) * size
        decoded = [decoder.decode(job) for job in out.decodable if job < 10]
        covered = [decoder.decode_partial(job)[1] for job in out.partial]
        assert record["jobs_decoded"] == len(decoded) + len(covered)
        assert record["decode_delays"] == [
            record["round"] - j for j in (*out.decodable, *out.partial) if j < 10
        ]
        whole = [scheme_obj.decoded_coverage] * len(decoded)
        none = scheme_obj.decoded_coverage  # a round that finished no job
        assert record["coverage"] == (np.mean(whole + covered) if decoded or covered else none)
        assert record["round_time"] == pytest.approx(out.duration, abs=1e-12)
        assert record["erasures"] == out.erased.sum() and record["lost"] == out.lost.sum()
        assert record["late"] == out.late.sum() and record["waited"] == out.waited
        assert record["retransmissions"] == out.retransmissions

    assert sum(r["jobs_decoded"] for r in rounds) == 10  # every job, pipelined ones too
    # and the simulator proper, with compute time 0, sees the same erasure pattern
    timed = NetworkConfig(**{**cfg.network, "server_time": 0.0})  # the simulator measures none
    sim = simulate(scheme_obj, instantiate(cfg.delay), timed, 10, seed=3, payload_bytes=payload)
    assert [r["round"] for r in rounds] == sim.index.tolist()  # the same rounds skipped
    for key in ("erasures", "lost", "late"):
        assert [r[key] for r in rounds] == getattr(sim, key).tolist(), key
    assert sim.lost.sum() > 0  # the test exercised loss
    if recovery == "partial":  # never waits, applied what arrived
        assert sim.retransmissions.sum() == 0 and sim.coverage.tolist() == [
            r["coverage"] for r in rounds
        ]
        assert min(sim.coverage) < 1
    else:
        assert sim.retransmissions.sum() > 0


def _none(round: int, worker: int) -> None:
    return None
