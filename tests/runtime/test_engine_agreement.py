"""DESIGN principle 1: the Ray runtime and the simulator see the same rounds.

Delays come from a trace (seconds) so that the runtime's measured compute times
(milliseconds) cannot flip a late/in-time decision; losses are Bernoulli. Both engines
draw from the same seeded models, so erasures, losses, retransmissions and waits must
be identical round by round, and durations equal up to the measured compute time.
"""

import numpy as np
import pytest
from hydra.utils import instantiate

from gclab.app import run
from gclab.network import NetworkConfig
from gclab.sim.engine import simulate
from gclab.tracking.artifacts import read_metrics
from tests.conftest import TINY, compose_config


@pytest.mark.parametrize("scheme", [["scheme=uncoded"], ["scheme=classic_cr", "scheme.s=1"]])
def test_runtime_and_simulator_agree_round_by_round(ray_session, tmp_path, scheme):
    rng = np.random.default_rng(7)
    durations = 1.0 + 4.0 * (rng.random((4, 12)) < 0.2)  # 1 s, sometimes 5 s
    np.savez(tmp_path / "trace.npz", durations=durations, load=0.0)
    cfg = compose_config(
        [*TINY, *scheme, "cluster.workers=4", "train.rounds=10", "seed=3",
         "delay=composite", "delay@delay.compute=trace", f"delay.compute.path={tmp_path}/trace.npz",
         "delay.compute.slope=0", "delay@delay.loss=bernoulli", "delay.loss.p=0.2",
         "network.policy=deadline", "network.mu=1", "network.rto=0.5"]
    )  # fmt: skip
    run(cfg, tmp_path / "run")
    rounds = [r for r in read_metrics(tmp_path / "run" / "metrics.jsonl") if r["kind"] == "round"]

    scheme_obj = instantiate(cfg.scheme, n=4)
    sim = simulate(scheme_obj, instantiate(cfg.delay), NetworkConfig(**cfg.network), 10, seed=3)
    for key in ("erasures", "lost", "late", "retransmissions"):
        assert [r[key] for r in rounds] == getattr(sim, key).tolist(), key
    assert [r["waited"] for r in rounds] == sim.waited.tolist()
    assert [r["jobs_decoded"] for r in rounds] == [1] * 10
    got = np.array([r["round_time"] for r in rounds])
    assert np.allclose(got, sim.durations, atol=0.5)  # differ only by measured compute time
    assert sim.lost.sum() > 0 and sim.retransmissions.sum() > 0  # the test exercised loss
