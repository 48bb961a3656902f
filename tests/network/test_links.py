"""What bytes and server time cost on the clock (gclab/network/links.py, protocol rules 1, 4).

Exact limiting cases with no delay model and equal compute: a round lasts the compute
time plus what its packets take on the one link that is limited; the fair-share link
is checked on a hand-made case; with every link unlimited bytes change nothing; a
retransmission pays its bytes and its time on the wire again; server time closes every
round.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from gclab.coding.cce import CCECR
from gclab.coding.classic import ClassicCR
from gclab.coding.m_sgc import MSGC
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig
from gclab.network.base import DelayModel
from gclab.network.bernoulli import Bernoulli
from gclab.network.links import Links
from gclab.sim.engine import simulate

N, UNIT, PAYLOAD = 8, 2.0, 1e6
SCHEMES = {
    "uncoded": Uncoded(N),
    "classic_cr": ClassicCR(N, 2),
    "cce_cr": CCECR(N, 2, 2),
    "m_sgc": MSGC(N, 1, 2, 2),
}


def rounds(scheme, **network) -> np.ndarray:
    return simulate(scheme, DelayModel(), NetworkConfig(**network), 6, 0, UNIT, PAYLOAD).durations


@pytest.mark.parametrize("name", list(SCHEMES))
def test_uplink_only_adds_the_packets_time_on_the_wire(name) -> None:
    scheme = SCHEMES[name]
    got = rounds(scheme, bandwidth=4e5)
    want = UNIT * scheme.load + scheme.packet_fraction * PAYLOAD / 4e5
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("name", list(SCHEMES))
def test_a_shared_server_link_carries_all_n_packets(name) -> None:
    scheme = SCHEMES[name]
    got = rounds(scheme, server_bandwidth=3e6, policy="all")
    want = UNIT * scheme.load + N * scheme.packet_fraction * PAYLOAD / 3e6
    np.testing.assert_allclose(got, want, rtol=1e-12)


@pytest.mark.parametrize("name", list(SCHEMES))
def test_the_broadcast_sends_n_copies_of_the_weights_first(name) -> None:
    scheme = SCHEMES[name]
    got = rounds(scheme, broadcast_bandwidth=5e7, server_time=0.125)
    want = N * PAYLOAD / 5e7 + UNIT * scheme.load + 0.125
    np.testing.assert_allclose(got, want, rtol=1e-12)


def test_packets_in_flight_share_the_server_link_fairly() -> None:
    """Two 1-byte flows, uplink 1 B/s, server 1.5 B/s: A alone until B starts at 0.5 s, both
    at 0.75 B/s until A's last byte at 0.5 + 0.5/0.75, then B alone at 1 B/s."""
    links = Links(uplink=1.0, server=1.5, payload=1.0)
    got = links.arrivals(np.array([0.5, 0.0]), 1.0)
    np.testing.assert_allclose(got, [1.5 + 1 / 6, 0.5 + 2 / 3], rtol=1e-12)
    # a flow that starts after the others are done has the link to itself
    alone = links.arrivals(np.array([0.0, 5.0]), 1.0)
    np.testing.assert_allclose(alone, [1.0, 6.0])
    # unlimited links: the packets arrive when they are sent
    np.testing.assert_array_equal(Links(payload=1.0).arrivals(np.array([0.5, 0.0]), 1.0), [0.5, 0])


@pytest.mark.parametrize("name", list(SCHEMES))
def test_unlimited_links_cost_nothing_bit_for_bit(name) -> None:
    scheme = SCHEMES[name]
    delay = Bernoulli(0.2)
    network = NetworkConfig(policy="deadline", mu=0.5, rto=0.5)
    heavy = simulate(scheme, delay, network, 30, 1, UNIT, payload_bytes=1e9)
    none = simulate(scheme, delay, network, 30, 1, UNIT, payload_bytes=0.0)
    np.testing.assert_array_equal(heavy.durations, none.durations)
    np.testing.assert_array_equal(heavy.retransmissions, none.retransmissions)
    assert heavy.bytes.sum() > 0 == none.bytes.sum()


def test_a_retransmission_pays_its_bytes_and_its_time_again() -> None:
    scheme = Uncoded(N)
    delay = Bernoulli(0.3)
    free = simulate(scheme, delay, NetworkConfig(policy="all", rto=0.5), 40, 2, 0.0, PAYLOAD)
    paid = simulate(
        scheme, delay, NetworkConfig(policy="all", rto=0.5, bandwidth=4e6), 40, 2, 0.0, PAYLOAD
    )
    np.testing.assert_array_equal(free.retransmissions, paid.retransmissions)  # same losses
    np.testing.assert_array_equal(paid.bytes, (N + paid.retransmissions) * PAYLOAD)
    wire = PAYLOAD / 4e6
    lost = free.retransmissions > 0
    assert lost.any()
    # a lost packet of this round: attempt k arrives k cycles after its first arrival
    attempts = np.round((free.durations[lost]) / 0.5)
    np.testing.assert_allclose(paid.durations[lost], wire + attempts * (0.5 + wire), rtol=1e-12)
    np.testing.assert_allclose(paid.durations[~lost], wire, rtol=1e-12)


def test_links_of_a_config() -> None:
    links = NetworkConfig(bandwidth=2.0, broadcast_bandwidth=8.0).links(4.0)
    assert (links.uplink, links.server, links.broadcast) == (2.0, math.inf, 8.0)
    assert links.broadcast_time(4) == 2.0 and links.alone(4.0) == 2.0 and not links.shared
