"""Sequential schemes through the round protocol: symbolic (simulator) and real payloads agree."""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding.classic import ClassicCR
from gclab.coding.contract import Scheme
from gclab.coding.pipelined import PipelinedCR, PipelinedFR
from gclab.network import NetworkConfig
from gclab.network.bernoulli import Bernoulli
from gclab.network.composite import Composite
from gclab.network.gilbert_elliott import GilbertElliott
from gclab.network.straggler import Straggler
from gclab.sim.engine import simulate
from helpers.sequential import real_run, symbolic_decode_rounds

LOSSY = NetworkConfig(policy="all", rto=1.0)


PIPELINED = [PipelinedCR(8, 1, 2), PipelinedFR(8, 1, 2), PipelinedCR(6, 2, 1)]


@pytest.mark.parametrize("scheme", PIPELINED, ids=lambda s: s.describe())
@pytest.mark.parametrize(
    "delay",
    [Bernoulli(0.15), GilbertElliott(loss_rate=0.15, burst_length=3.0)],
    ids=["bernoulli", "gilbert_elliott"],
)
def test_pipelined_symbolic_and_real_agree(scheme: Scheme, delay) -> None:
    jobs = 120
    sim = simulate(scheme, delay, LOSSY, jobs, seed=3)
    durations, decoded_at, worst = real_run(scheme, delay, LOSSY, jobs, seed=3)
    np.testing.assert_allclose(sim.durations, durations)
    assert decoded_at == symbolic_decode_rounds(scheme, delay, LOSSY, jobs, seed=3)
    assert sorted(decoded_at) == list(range(jobs))
    assert all(r <= t + scheme.T for t, r in decoded_at.items())
    assert worst <= 1e-9


def test_pipelined_needs_fewer_recoveries_than_classic_at_equal_load() -> None:
    delay = Bernoulli(0.1)
    classic = simulate(ClassicCR(16, 1), delay, LOSSY, 300, seed=1)
    pipelined = simulate(PipelinedCR(16, 1, 2), delay, LOSSY, 300, seed=1)
    assert classic.load == pipelined.load
    assert pipelined.retransmissions.sum() < classic.retransmissions.sum()
    assert (pipelined.retransmissions > 0).sum() < (classic.retransmissions > 0).sum()


def test_pipelined_with_stragglers_and_losses_waits_or_retransmits_to_finish() -> None:
    delay = Composite(Straggler(0.0, 1.0), Bernoulli(0.1))
    network = NetworkConfig(policy="deadline", mu=1.0, rto=2.0)
    scheme = PipelinedCR(8, 2, 2)
    _, decoded_at, worst = real_run(scheme, delay, network, 80, seed=5)
    assert sorted(decoded_at) == list(range(80)) and worst <= 1e-9
    assert decoded_at == symbolic_decode_rounds(scheme, delay, network, 80, seed=5)
