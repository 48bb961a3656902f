"""What bytes cost: the workers' uplinks, the server's ingress and its broadcast of the weights.

A round's packets all have the same size, ``packet_fraction × payload`` bytes (the
payload is the gradient: 4 bytes × the model's parameters in training,
``sim.payload_bytes`` in the simulator). Three links carry them, each ``null``
(unlimited, no cost: the clock without bytes, bit for bit) or a rate in bytes/s:

* ``network.broadcast_bandwidth``: the server's egress. At the start of a round it
  sends the weights (``payload`` bytes) to each of the ``n`` workers, the copies
  sharing the link, so every worker starts computing ``n·payload/broadcast_bandwidth``
  seconds into the round.
* ``network.bandwidth``: each worker's uplink. A packet alone takes
  ``size/bandwidth`` seconds on the wire.
* ``network.server_bandwidth``: the server's ingress, shared fairly by the packets in
  flight, as TCP flows share a bottleneck (processor sharing): while ``k`` packets are
  in flight each moves at ``min(bandwidth, server_bandwidth/k)``.

Every worker's first transmission enters the links when its worker is done
(``compute + delay``), whether or not the loss model then loses it, and arrives when its
last byte is through (plus ``network.latency``). A retransmission is sent alone: it
takes ``size/min(bandwidth, server_bandwidth)`` seconds on the wire, which lengthens
each attempt's cycle from ``rto`` to ``rto`` plus that time (:mod:`gclab.network.protocol`,
rule 4), and pays its bytes again.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Links:
    """The three link rates (bytes/s; ``math.inf`` when unlimited) and the packets' payload."""

    uplink: float = math.inf
    server: float = math.inf
    broadcast: float = math.inf
    #: Bytes of one full gradient (a packet carries ``packet_fraction`` of it).
    payload: float = 0.0

    @property
    def free(self) -> bool:
        """Whether bytes cost no time: every link is unlimited, or packets carry nothing."""
        unlimited = math.isinf(self.uplink) and math.isinf(self.server)
        return self.payload == 0 or (unlimited and math.isinf(self.broadcast))

    @property
    def shared(self) -> bool:
        """Whether the server's ingress is limited, so packets in flight slow each other."""
        return self.payload > 0 and not math.isinf(self.server)

    def broadcast_time(self, n: int) -> float:
        """Seconds until every one of ``n`` workers holds the round's weights."""
        return n * self.payload / self.broadcast if self.payload else 0.0

    def alone(self, size: float) -> float:
        """Seconds a packet of ``size`` bytes takes on the wire with the links to itself."""
        return size / min(self.uplink, self.server) if size else 0.0

    def arrivals(self, sent: np.ndarray, size: float) -> np.ndarray:
        """When each packet of ``size`` bytes, sent at ``sent``, has its last byte through."""
        if size == 0 or (math.isinf(self.uplink) and math.isinf(self.server)):
            return sent
        if math.isinf(self.server):
            return sent + size / self.uplink
        out = np.empty_like(sent)
        order = np.argsort(sent, kind="stable")
        fair_share(sent, size, self.uplink, self.server, order, out, np.empty_like(sent))
        return out


def fair_share(
    sent: np.ndarray,
    size: float,
    uplink: float,
    server: float,
    order: np.ndarray,
    out: np.ndarray,
    at_start: np.ndarray,
) -> None:
    """Finish times of equal flows through a fairly shared link: processor sharing.

    Flow ``w`` of ``size`` bytes starts at ``sent[w]`` (``order`` sorts ``sent``); while
    ``k`` flows are active each moves at ``min(uplink, server/k)``. All active flows move
    at one rate and have equal sizes, so they finish in the order they started: the
    loop tracks ``served``, the bytes every active flow has received since time 0, and
    the oldest active flow finishes once ``served`` reaches its start's value plus
    ``size`` (``at_start``, scratch of ``sent``'s size, keeps each flow's start value).
    Plain loops over arrays, so that :mod:`gclab.sim.kernels` compiles this same function
    for the fast search.
    """
    count = sent.size
    now = 0.0
    served = 0.0
    head = 0  # oldest active flow, in start order
    nxt = 0  # next flow to start
    while head < count:
        active = nxt - head
        rate = min(uplink, server / active) if active > 0 else 0.0
        finish = math.inf
        if active > 0:
            finish = now + (at_start[head] + size - served) / rate
        start = sent[order[nxt]] if nxt < count else math.inf
        if start <= finish:  # a flow starts first (or together): the rate changes
            if active > 0:
                served += (start - now) * rate
            now = start
            at_start[nxt] = served
            nxt += 1
        else:
            served = at_start[head] + size
            now = finish
            out[order[head]] = now
            head += 1
