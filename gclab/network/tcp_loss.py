"""``tcp_loss``: what IP packet loss costs a message over TCP, fitted to the network box.

Over TCP a lost IP packet is never an erased message: TCP resends it, and the message
arrives late. How late depends on the message's size, the loss, and the link. Measured
in the box (``bench/netns_tcp.py``: Linux TCP with BBR and RACK-TLP, a 200 ms minimum
retransmission timeout, messages after an idle gap), two kinds of loss make the delay:

* **recovered fast**: a lost packet with enough packets after it to reveal the loss is
  resent within the flow, which costs ``c = fast_frames·frame/rate + fast_seconds/k``
  (``frame`` = ``mtu + 14`` bytes on the link). Each of the message's ``N = ⌈size /
  (mtu − 52)⌉`` data packets is lost with probability ``ip_loss``, so there are
  ``L ~ Binomial(N, ip_loss)`` of them. ``k = min(streams, ⌈size / chunk⌉)``: Ray moves
  an object in chunks of ``chunk`` bytes (5 MiB) over several TCP connections, and
  while one connection recovers a loss the others keep the link busy, so a message of
  several chunks pays a loss's stall ``1/k`` of it (resent frames in full);
* **timed out**: the loss of one of the message's last packets (nothing after it to
  reveal it) or of a resent packet waits for the retransmission timeout, ``timeout``
  seconds each. A message first times out ``Poisson(λ)`` times, ``λ = ip_loss·tail +
  N·ip_loss²·resend``: about ``tail`` packets at the end, and a share ``resend`` of the
  resent packets lost again. ``K`` counts them, ``E[K] = λ``. With ``chains=true``,
  each timeout is followed by another with the chance of a lost last packet, ``a = 1 −
  e^(−ip_loss·tail)``, as if what is left of the message after TCP's restart from a
  window of one packet were once more a flow's last packets (geometric chains, ``E[K]
  = λ/(1 − a)``); the box's packets wait for a second timeout less often than that.

A message of ``size`` bytes over a link of ``rate`` bytes/s (``inf``: its time on the
wire is not the point, only the timeouts and ``fast_seconds`` remain) then takes
``L·c + K·timeout`` seconds more than it would without loss. The form and
``fast_frames`` are fitted to single messages sent after an idle gap
(``bench/netns_tcp.py``). What a round pays is fitted to training rounds through Ray in
the box (``bench/netns_fit.py``): ``tail``, ``copy_tail`` and ``timeout`` to how often,
and by how much, the box's packets and copies of the weights came late (its rounds'
timelines), ``fast_seconds`` and ``streams`` to its rounds' durations; ``resend`` is 0
there. docs/simulator.md has the fits, their commands and their limits.

As a delay model each worker's round pays it twice: for its copy of the weights
(``links.payload`` bytes at the broadcast's rate per copy, with ``copy_tail`` in place of
``tail``) and for its packet (``size`` bytes at its uplink's rate), each packet drawn
alone. With ``nodes`` > 0 the workers run on that many nodes, worker ``w`` on node ``w mod
nodes`` (as ``cluster=netns`` lays them out), and a node fetches one copy of the weights
for all its workers: one draw per node, so a copy that waits for a timeout makes every
worker of its node late together (``0``: each worker fetches its own). Its workers'
packets then go to the server over ``connections`` TCP connections (Ray's: 2); where
they queue on the node's link (each one's time there, ``size`` at the uplink's rate,
longer than a ``timeout``) they follow one another on those connections, and a packet
with another behind it on its connection cannot lose its tail unseen: a packet pays
``tail·min(1, connections/m)``, ``m`` the node's packets. It loses no packet, so the
protocol never retransmits for it; :attr:`loss_rate` is the IP loss it models.
"""

from __future__ import annotations

import math

import numpy as np

from gclab.errors import ConfigError
from gclab.network import draws
from gclab.network.base import DelayModel, integer, non_negative, number, probability
from gclab.network.links import Links

#: IP, TCP and TCP's timestamp option: the bytes of a packet that carry no payload.
HEADERS = 52
#: The Ethernet header the links' shapers count beside an IP packet.
FRAMING = 14
#: Ray's object manager moves an object in chunks of this many bytes.
RAY_CHUNK = 5 * 2**20


class TcpLoss(DelayModel):
    """Delays from TCP recovering lost IP packets (see the module docstring)."""

    sized = True

    def __init__(
        self,
        ip_loss: float = 0.01,
        mtu: int = 9000,
        fast_frames: float = 2.87,
        fast_seconds: float = 0.00125,
        timeout: float = 0.202,
        tail: float = 5.53,
        resend: float = 0.0,
        streams: int = 1,
        chunk: float = RAY_CHUNK,
        copy_tail: float = 3.47,
        nodes: int = 0,
        connections: int = 2,
        chains: bool = False,
    ) -> None:
        self.ip_loss = probability("ip_loss", ip_loss, below_one=True)
        self.mtu = integer(
            "mtu", mtu, 576, 65535,
            "number of bytes in 576..65535 (1500: Ethernet, 9000: jumbo frames)",
        )  # fmt: skip
        self.fast_frames = non_negative("fast_frames", fast_frames)
        self.fast_seconds = non_negative("fast_seconds", fast_seconds)
        self.timeout = non_negative("timeout", timeout)
        self.tail = non_negative("tail", tail)
        self.resend = non_negative("resend", resend)
        self.copy_tail = non_negative("copy_tail", copy_tail)
        if not isinstance(chains, bool):
            raise ConfigError(
                f"chains={chains!r} is invalid: it must be true (a timeout may be followed "
                "by another) or false (Poisson timeouts alone).",
                param="chains",
            )
        self.chains = chains
        self.nodes = integer(
            "nodes", nodes, 0, math.inf,
            ">= 0 (the nodes whose workers share a copy of the weights; 0: none share)",
        )  # fmt: skip
        self.connections = integer(
            "connections", connections, 1, math.inf,
            ">= 1 (the TCP connections a node's packets share to the server; Ray's: 2)",
        )  # fmt: skip
        self.streams = integer(
            "streams", streams, 1, math.inf,
            ">= 1 (how many of a message's chunks recover their losses side by side; "
            "1: one TCP flow)",
        )  # fmt: skip
        self.chunk = number("chunk", chunk)
        if self.chunk <= 0:
            raise ConfigError(
                f"chunk={chunk!r} is invalid: it must be > 0 bytes (Ray's: {RAY_CHUNK}).",
                param="chunk",
            )

    @property
    def loss_rate(self) -> float:
        """The IP packet loss it models (no message is ever lost)."""
        return self.ip_loss

    def transfer_delays(
        self, round: int, n: int, seed: int, size: float, links: Links
    ) -> np.ndarray:
        rng = draws.generator(seed, draws.TRANSFER, round)
        rate = links.broadcast / n  # each worker's copy of the weights, all sent together
        copies = min(self.nodes, n) or n
        node = np.arange(n) % copies
        down = 0.0
        if links.payload:
            down = self.extra(rng, np.full(copies, links.payload), rate, self.copy_tail)[node]
        return down + self.extra(
            rng, np.full(n, size), links.uplink, self.packet_tails(node, size, links)
        )

    def packet_tails(self, node: np.ndarray, size: float, links: Links) -> np.ndarray | float:
        """The ``tail`` each worker's packet pays (worker ``w`` on node ``node[w]``): all
        of :attr:`tail` where each packet is alone in its flow; where a node's packets
        queue on its link (each one's time there longer than a timeout) they follow one
        another on its ``connections``, only the last on each can lose its tail unseen,
        and each pays ``min(1, connections / m)`` of it, ``m`` the node's packets."""
        if size / links.uplink <= self.timeout:
            return self.tail
        sharing = np.bincount(node)[node]  # the packets of each worker's node
        return self.tail * np.minimum(1.0, self.connections / sharing)

    def extra(
        self,
        rng: np.random.Generator,
        sizes: np.ndarray,
        rate: float,
        tail: float | np.ndarray | None = None,
    ) -> np.ndarray:
        """Seconds beyond their time on the wire that messages of ``sizes`` bytes take
        over a link of ``rate`` bytes/s (``tail``: packets at a message's end whose loss
        times out, by default :attr:`tail`, or one per message): one draw per message
        from ``rng``."""
        tail = self.tail if tail is None else tail
        sizes = np.asarray(sizes, dtype=np.float64)
        packets = np.ceil(sizes / (self.mtu - HEADERS))
        side_by_side = np.clip(np.ceil(sizes / self.chunk), 1, self.streams)
        p = self.ip_loss
        fast = rng.binomial(packets.astype(np.int64), p)
        sent = packets > 0  # an empty message (no bytes modelled) sends nothing to lose
        timeouts = rng.poisson(np.where(sent, p * tail + packets * p * p * self.resend, 0))
        if self.chains:  # after a timeout TCP resends from a window of one packet: what is
            # left is a flow's last packets again, and times out again with that chance
            again = np.where(sent, -np.expm1(-p * np.asarray(tail)), 0.0)
            chained = rng.negative_binomial(np.maximum(timeouts, 1), 1.0 - again)
            timeouts = timeouts + np.where(timeouts > 0, chained, 0)
        frame = 0.0 if math.isinf(rate) else (self.mtu + FRAMING) / rate
        stall = self.fast_seconds / side_by_side
        return fast * (self.fast_frames * frame + stall) + timeouts * self.timeout
