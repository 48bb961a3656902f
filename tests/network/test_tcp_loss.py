"""``delay=tcp_loss``: IP loss under TCP as message delays, a function of size, loss and rate.

The draws follow the model's law (their mean is its formula), grow with size and loss,
are seeded per round, reach every round of both engines through the round protocol
(the weights' broadcast and each packet), never erase a packet, and the fast search
leaves the model to the engine.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gclab.coding.classic import ClassicFR
from gclab.errors import ConfigError
from gclab.network import NetworkConfig
from gclab.network.base import DelayModel
from gclab.network.links import Links
from gclab.network.tcp_loss import HEADERS, RAY_CHUNK, TcpLoss
from gclab.sim.engine import simulate
from gclab.sim.fast import fast_results
from gclab.sim.search import grid, scheme_option
from helpers.config import assert_one_sentence

CNN = 1_427_240  # bytes of the small CNN's gradient


def mean_extra(model: TcpLoss, size: float, rate: float, copy: bool = False) -> float:
    """The model's expected extra seconds: E[L]·c + E[K]·timeout (``copy``: of a copy of
    the weights, whose tail is ``copy_tail``), where K is Poisson(λ) timeouts, with
    ``chains`` each followed by a geometric number more, each with chance
    ``1 − exp(−p·tail)``."""
    packets = math.ceil(size / (model.mtu - HEADERS))
    p = model.ip_loss
    side_by_side = min(model.streams, math.ceil(size / model.chunk))
    fast = model.fast_frames * (model.mtu + 14) / rate + model.fast_seconds / side_by_side
    tail = model.copy_tail if copy else model.tail
    first = p * tail + packets * p * p * model.resend
    chained = 1 / math.exp(-p * tail) if model.chains else 1.0
    return packets * p * fast + first * chained * model.timeout


@pytest.mark.parametrize(("loss", "size", "rate"), [(0.02, CNN, 1.25e7), (0.05, 44.7e6, 1.25e8)])
def test_draws_follow_the_model(loss, size, rate) -> None:
    model = TcpLoss(ip_loss=loss)
    extra = model.extra(np.random.default_rng(1), np.full(20_000, size), rate)
    assert extra.mean() == pytest.approx(mean_extra(model, size, rate), rel=0.05)
    assert (extra >= 0).all() and (extra == 0).any() == (size < 1e7)  # big ones always lose


def test_a_message_of_several_chunks_stalls_for_a_loss_a_share_of_the_time() -> None:
    """One chunk is one flow: each loss stalls it ``fast_seconds``. A message of ``c``
    chunks has ``min(c, streams)`` flows side by side: a stall costs it that share."""
    rate = 1.25e8
    frames = 2.87 * (9000 + 14) / rate
    for chunks, side_by_side in ((1, 1), (2, 2), (4, 4), (9, 4)):
        size = chunks * RAY_CHUNK - 1  # the last chunk not full
        model = TcpLoss(ip_loss=0.05, fast_seconds=0.008, tail=0, resend=0, streams=4)
        extra = model.extra(np.random.default_rng(2), np.full(4000, size), rate)
        packets = math.ceil(size / (9000 - HEADERS))
        assert extra.mean() == pytest.approx(
            packets * 0.05 * (frames + 0.008 / side_by_side), rel=0.03
        )
    one_flow = TcpLoss(ip_loss=0.05, fast_seconds=0.008, streams=1)
    four = TcpLoss(ip_loss=0.05, fast_seconds=0.008, streams=4)
    one_flow, four = (m.extra(np.random.default_rng(2), [44.7e6], rate) for m in (one_flow, four))
    assert one_flow > 2 * four


def test_timeouts_are_poisson_or_with_chains_followed_by_more() -> None:
    """A message times out at all with chance 1 − exp(−λ), λ = loss·tail (no resent
    packet lost again): K ~ Poisson(λ). With ``chains`` each timeout has a further one
    behind it with that same chance, so E[K] = λ·exp(λ); lost resent packets add
    timeouts, not chains."""
    counts = {}
    for chains in (False, True):
        model = TcpLoss(ip_loss=0.05, tail=10.0, fast_frames=0.0, fast_seconds=0.0,
                        timeout=1.0, chains=chains)  # fmt: skip
        counts[chains] = model.extra(np.random.default_rng(3), np.full(40_000, CNN), 1.25e7)
        assert (counts[chains] == 0).mean() == pytest.approx(math.exp(-0.5), abs=0.01)
    assert counts[False].mean() == pytest.approx(0.5, rel=0.03)  # Poisson(λ) only
    assert counts[True].mean() == pytest.approx(0.5 * math.exp(0.5), rel=0.03)
    assert (counts[False] >= 2).mean() < 0.1 < 0.15 < (counts[True] >= 2).mean()  # 0.09
    long = TcpLoss(ip_loss=0.05, tail=0.5, resend=0.48, fast_frames=0.0, fast_seconds=0.0,
                   timeout=1.0, chains=True)  # fmt: skip
    long = long.extra(np.random.default_rng(3), np.full(2000, 44.7e6), 1.25e8)
    first = 0.05 * 0.5 + math.ceil(44.7e6 / (9000 - HEADERS)) * 0.05**2 * 0.48  # about 6
    assert long.mean() == pytest.approx(first * math.exp(0.05 * 0.5), rel=0.03)


def test_no_loss_and_no_bytes_cost_nothing() -> None:
    rng = np.random.default_rng(0)
    assert not TcpLoss(ip_loss=0.0).extra(rng, np.full(100, CNN), 1.25e7).any()
    assert not TcpLoss(ip_loss=0.05).extra(rng, np.zeros(100), 1.25e7).any()


def test_more_loss_bigger_messages_and_slower_links_cost_more() -> None:
    def mean(loss: float, size: float, rate: float) -> float:
        rng = np.random.default_rng(0)
        return TcpLoss(ip_loss=loss).extra(rng, np.full(4000, size), rate).mean()

    assert mean(0.005, CNN, 1.25e7) < mean(0.02, CNN, 1.25e7) < mean(0.05, CNN, 1.25e7)
    assert mean(0.02, CNN, 1.25e7) < mean(0.02, 10 * CNN, 1.25e7)
    assert mean(0.02, 10 * CNN, 1.25e8) < mean(0.02, 10 * CNN, 1.25e7)
    assert mean(0.02, CNN, math.inf) > 0  # timeouts remain on an unlimited link


def test_a_round_pays_for_the_broadcast_and_the_packet_seeded_per_round() -> None:
    links = Links(uplink=6.25e6, broadcast=5e7, payload=CNN)  # 4 workers: 12.5 MB/s a copy
    model = TcpLoss(ip_loss=0.05, tail=2.0, copy_tail=5.0)
    first = model.transfer_delays(3, 4, 7, CNN, links)
    assert np.array_equal(first, model.transfer_delays(3, 4, 7, CNN, links))
    assert not np.array_equal(first, model.transfer_delays(4, 4, 7, CNN, links))
    rounds = np.array([model.transfer_delays(r, 4, 7, CNN, links) for r in range(4000)])
    down = mean_extra(model, CNN, 1.25e7, copy=True)
    assert rounds.mean() == pytest.approx(down + mean_extra(model, CNN, 6.25e6), rel=0.05)
    assert not model.lost(3, 4, 7).any() and model.loss_rate == 0.05
    assert DelayModel().transfer_delays(3, 4, 7, CNN, links).tolist() == [0.0] * 4


def test_a_nodes_workers_share_one_copy_of_the_weights() -> None:
    """With ``nodes`` k, worker w fetches node w mod k's copy: one draw a node, so its
    workers are late together; without, each worker draws its own copy."""
    links = Links(uplink=6.25e6, broadcast=5e7, payload=CNN)
    shared = TcpLoss(ip_loss=0.05, copy_tail=5.0, nodes=2)
    down = np.array([shared.transfer_delays(r, 4, 7, 0.0, links) for r in range(4000)])
    assert np.array_equal(down[:, 0], down[:, 2]) and np.array_equal(down[:, 1], down[:, 3])
    assert (down[:, 0] != down[:, 1]).any()
    assert down.mean() == pytest.approx(mean_extra(shared, CNN, 1.25e7, copy=True), rel=0.05)
    alone = TcpLoss(ip_loss=0.05, copy_tail=5.0)
    own = np.array([alone.transfer_delays(r, 4, 7, 0.0, links) for r in range(200)])
    assert all(len(set(row)) > 1 for row in own if row.max() > 0.1)  # timeouts come alone
    many = TcpLoss(ip_loss=0.05, copy_tail=5.0, nodes=9).transfer_delays(3, 4, 7, 0.0, links)
    assert np.array_equal(many, alone.transfer_delays(3, 4, 7, 0.0, links))  # one a node


def test_packets_queued_behind_their_nodes_others_lose_their_tails_less_often() -> None:
    """Where a node's packets queue on its link (each longer there than a timeout), only
    the last on each of its connections can lose its tail unseen: with four packets a
    node and two connections each pays half of ``tail``; alone in its flow, all of it."""
    model = TcpLoss(ip_loss=0.05, tail=10.0, copy_tail=0.0, fast_frames=0.0,
                    fast_seconds=0.0, timeout=1.0, nodes=2, connections=2)  # fmt: skip

    def timeouts(uplink: float, workers: int = 8) -> float:
        links = Links(uplink=uplink, broadcast=math.inf, payload=CNN)
        rounds = [model.transfer_delays(r, workers, 7, CNN, links) for r in range(3000)]
        return float(np.mean(rounds))  # timeout = 1 s: the mean count of timeouts

    assert timeouts(1e6) == pytest.approx(0.05 * 10.0 / 2, rel=0.08)  # 1.43 s on the link
    assert timeouts(1e8) == pytest.approx(0.05 * 10.0, rel=0.08)  # 14 ms: alone
    assert timeouts(1e6, workers=4) == pytest.approx(0.05 * 10.0, rel=0.08)  # one each
    alone = TcpLoss(ip_loss=0.05, tail=10.0, copy_tail=0.0, fast_frames=0.0,
                    fast_seconds=0.0, timeout=1.0)  # fmt: skip
    links = Links(uplink=1e6, broadcast=math.inf, payload=CNN)
    own = np.mean([alone.transfer_delays(r, 8, 7, CNN, links) for r in range(3000)])
    assert own == pytest.approx(0.5, rel=0.08)  # no nodes: every packet its own flow


def test_the_engine_slows_down_under_it_and_the_fast_search_steps_aside() -> None:
    network = NetworkConfig(bandwidth=6.25e6, broadcast_bandwidth=5e7)
    scheme = ClassicFR(4, s=1)
    plain = simulate(scheme, DelayModel(), network, 60, seed=0, payload_bytes=CNN)
    lossy = simulate(scheme, TcpLoss(ip_loss=0.05), network, 60, seed=0, payload_bytes=CNN)
    assert (lossy.durations >= plain.durations).all()
    assert lossy.total_time > plain.total_time and not lossy.lost.any()
    none = simulate(scheme, TcpLoss(ip_loss=0.0), network, 60, 0, payload_bytes=CNN)
    assert none.total_time == plain.total_time
    node = scheme_option("classic_cr")
    args = (TcpLoss(ip_loss=0.05), network, 10, 0, 0.0, CNN)
    assert fast_results("classic_cr", node, 8, grid(node, 8), *args) is None


@pytest.mark.parametrize(
    ("kwargs", "pattern"),
    [({"ip_loss": 1}, r"^ip_loss=1 is invalid: it must be a probability in \[0, 1\)"),
     ({"ip_loss": -0.1}, r"^ip_loss=-0\.1 is invalid"),
     ({"mtu": 100}, r"^mtu=100 is invalid: it must be an integer number of bytes in 576\.\.65535"),
     ({"timeout": -1}, r"^timeout=-1 is invalid: it must be >= 0"),
     ({"streams": 0}, r"^streams=0 is invalid: it must be an integer >= 1"),
     ({"streams": 1.5}, r"^streams=1\.5 is invalid"),
     ({"chunk": 0}, r"^chunk=0 is invalid: it must be > 0 bytes"),
     ({"copy_tail": -1}, r"^copy_tail=-1 is invalid: it must be >= 0"),
     ({"nodes": -1}, r"^nodes=-1 is invalid: it must be an integer >= 0"),
     ({"nodes": 2.5}, r"^nodes=2\.5 is invalid"),
     ({"connections": 0}, r"^connections=0 is invalid: it must be an integer >= 1"),
     ({"chains": "yes"}, r"^chains='yes' is invalid: it must be true")],
)  # fmt: skip
def test_bad_values_fail_in_one_sentence(kwargs, pattern) -> None:
    with pytest.raises(ConfigError) as info:
        TcpLoss(**kwargs)
    assert_one_sentence(str(info.value), pattern)
