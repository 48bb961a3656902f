"""``gilbert_elliott_time``: bursts that last in seconds, seen alike by first transmissions
and retransmissions (gclab/network/gilbert_elliott.py)."""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding.uncoded import Uncoded
from gclab.errors import ConfigError
from gclab.network import Finished, NetworkConfig, RoundProtocol
from gclab.network.composite import Composite
from gclab.network.gilbert_elliott import GilbertElliott, TimedGilbertElliott
from gclab.network.straggler import Straggler


def test_the_long_run_loss_rate_and_burst_length_are_the_configured_ones() -> None:
    model = TimedGilbertElliott(loss_rate=0.2, burst_seconds=1.5)
    workers = np.arange(32)
    times = np.linspace(0.0, 4000.0, 20001)[:, None].repeat(32, axis=1)
    lost = model.lost_at(workers, times, seed=7)
    assert lost.mean() == pytest.approx(0.2, abs=0.015)
    bursts = [model._path(7, w, 4000.0) for w in range(32)]
    # np.diff gives sojourns 1, 2, ...: sojourn i is bad when i is even and the first was bad
    lengths = np.concatenate([np.diff(s)[(1 if bad else 0) :: 2] for bad, s in bursts])
    assert lengths.mean() == pytest.approx(1.5, rel=0.05)


def test_answers_do_not_depend_on_the_order_they_are_asked_in() -> None:
    times = np.random.default_rng(0).uniform(0, 500, (50, 4))
    first = TimedGilbertElliott(0.3, 2.0)
    forward = first.lost_at(np.arange(4), times, seed=3)
    second = TimedGilbertElliott(0.3, 2.0)
    second.lost_at(np.array([2]), np.array([[900.0]]), seed=3)  # extends one path far first
    backward = second.lost_at(np.arange(4)[::-1], times[::-1, ::-1], seed=3)[::-1, ::-1]
    np.testing.assert_array_equal(forward, backward)
    assert forward.any() and not forward.all()
    assert not TimedGilbertElliott(0.0, 1.0).lost_at(np.arange(4), times, 3).any()


def test_retransmissions_see_the_same_burst_as_the_first_transmission() -> None:
    """Each lost packet is resent every cycle until the first attempt sent in a good period;
    its attempts are exactly the ones the channel's burst covers, in seconds."""
    n, rto = 4, 0.1
    model = TimedGilbertElliott(loss_rate=0.2, burst_seconds=1.0)
    network = NetworkConfig(policy="all", rto=rto)
    protocol = RoundProtocol(network, model, n, seed=5)
    decoder = Uncoded(n).decoder()
    checked = 0
    for r in range(300):
        start = protocol.clock
        out = protocol.run_round(r, Finished(np.full(n, 0.5)), decoder, lambda *a: None)
        decoder.decode(r)
        for w in np.flatnonzero(out.lost).tolist():
            assert model.lost_at(np.array([w]), np.array([start + 0.5]), 5)[0]
            sends = start + 0.5 + rto * np.arange(200)
            lost = model.lost_at(np.array([w]), sends[:, None], 5)[:, 0]
            needed = int(np.argmin(lost)) + 1  # the first attempt sent while good
            assert out.duration >= 0.5 + needed * rto - 1e-9
            checked += needed > 1
        if out.lost.sum() == 1:
            w = int(np.flatnonzero(out.lost)[0])
            sends = start + 0.5 + rto * np.arange(200)
            needed = int(np.argmin(model.lost_at(np.array([w]), sends[:, None], 5)[:, 0])) + 1
            assert out.retransmissions == needed
            assert out.duration == pytest.approx(0.5 + needed * rto)
    assert checked > 5  # bursts really outlasted several attempts


def recovery_seconds(model, rto: float) -> float:
    """Mean extra seconds a round with a lost packet spends recovering it (uncoded, n = 4)."""
    n = 4
    protocol = RoundProtocol(NetworkConfig(policy="all", rto=rto), model, n, seed=1)
    decoder = Uncoded(n).decoder()
    extra = []
    for r in range(600):
        out = protocol.run_round(r, Finished(np.full(n, 0.1)), decoder, lambda *a: None)
        decoder.decode(r)
        if out.lost.any():
            extra.append(out.duration - 0.1)
    return float(np.mean(extra))


def test_a_burst_lasts_seconds_whatever_the_retransmission_timeout() -> None:
    """A lost packet waits out the rest of its burst (mean 1 s: exponential sojourns) at any
    rto; the per-attempt chain's burst of 3 instead lasts 3 attempts, i.e. scales with rto."""
    timed = TimedGilbertElliott(loss_rate=0.1, burst_seconds=1.0)
    fast, slow = recovery_seconds(timed, 0.05), recovery_seconds(timed, 0.2)
    assert 0.6 < fast < 1.6 and 0.6 < slow < 1.6 and slow / fast < 1.5
    chain = GilbertElliott(loss_rate=0.1, burst_length=3)
    assert recovery_seconds(chain, 0.2) / recovery_seconds(chain, 0.05) > 3


def test_mixing_kinds_of_loss_in_a_composite_is_refused() -> None:
    with pytest.raises(ConfigError, match="cannot mix a loss model that evolves in time"):
        Composite(GilbertElliott(loss_rate=0.1, burst_length=3), TimedGilbertElliott())
    timed = Composite(Straggler(shift=0.0, mean=0.2), TimedGilbertElliott())
    assert timed.timed
