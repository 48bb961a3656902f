"""One round's packets on a timeline: the close, delivery, recovery (gclab.network.protocol).

:class:`RoundPackets` applies rules 2 to 5 of :mod:`gclab.network.protocol` to one round
for :class:`~gclab.network.protocol.RoundProtocol`: it waits on the clock's timeline for
the close, delivers what arrived by it, and pursues the packets a due job wants (late
ones waited for, lost ones retransmitted with the loss model's draws) until the job
decodes; what a pursuit gave is a :class:`Pursuit`.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Protocol

import numpy as np

from gclab.coding.contract import Decoder
from gclab.network.base import DelayModel
from gclab.network.clock import Timeline
from gclab.network.links import Links

#: Retransmission attempts of one packet in one round before the protocol gives up.
MAX_ATTEMPTS = 4096

Payload = Callable[[int, int], "np.ndarray | None"]


class Timing(Protocol):
    """The ``network`` keys a round reads (:class:`gclab.network.protocol.NetworkConfig`)."""

    policy: str
    mu: float
    latency: float
    rto: float


class Setting(Protocol):
    """What a round reads from the protocol that runs it
    (:class:`gclab.network.protocol.RoundProtocol`, which builds on this module)."""

    network: Timing
    delay: DelayModel
    links: Links
    n: int
    seed: int
    #: Seconds on the protocol's clock when the round started.
    clock: float


class RecoveryError(RuntimeError):
    """A due job cannot be recovered (the decoder wants nothing more, or every attempt is lost)."""


@dataclass(frozen=True)
class Pursuit:
    """What pursuing packets (rule 4) gave: when it ended and what it delivered and sent."""

    #: Timeline seconds at the end.
    end: float
    #: ``(round, worker)`` of the packets delivered, in delivery order.
    delivered: list[tuple[int, int]] = field(default_factory=list)
    #: Retransmission attempts sent before the end.
    sent: int = 0
    #: Whether the round waited (a late packet, or every packet with ``wait_all``).
    waited: bool = False
    #: Whether the pursuit reached its goal (``done()``, or every packet in).
    done: bool = True

    def then(self, later: Pursuit) -> Pursuit:
        """This pursuit followed by ``later``."""
        return Pursuit(
            later.end,
            self.delivered + later.delivered,
            self.sent + later.sent,
            self.waited or later.waited,
            later.done,
        )


class RoundPackets:
    """One round's packets on a timeline: who came back when, who is lost, who was delivered."""

    def __init__(
        self,
        protocol: Setting,
        round: int,
        timeline: Timeline,
        decoder: Decoder,
        payload: Payload,
    ) -> None:
        self.protocol = protocol
        self.network = protocol.network
        self.round = round
        self.timeline = timeline
        self.decoder = decoder
        self.payload = payload
        n = protocol.n
        self.delays = protocol.delay.delays(round, n, protocol.seed, decoder.scheme.load)
        #: First transmission lost (the delay model's draw, or for a model that evolves in
        #: time its answer once the packet is sent; failures join as results come back).
        self.lost = np.zeros(n, dtype=bool)
        if not protocol.delay.timed:
            self.lost |= np.asarray(protocol.delay.lost(round, n, protocol.seed), dtype=bool)
        links = protocol.links
        #: Bytes of one packet, and the weights' broadcast that starts every worker late.
        self.size = decoder.scheme.packet_fraction * links.payload
        if protocol.delay.sized:  # what moving the bytes costs beyond the links' time
            extra = protocol.delay.transfer_delays(round, n, protocol.seed, self.size, links)
            self.delays = self.delays + extra
        self.broadcast = links.broadcast_time(n)
        #: Seconds from one retransmission attempt to the next (and to its arrival).
        self.cycle = self.network.rto + links.alone(self.size)
        self.compute = np.full(n, np.nan)  # NaN: the worker's result is not back yet
        self.arrival = np.full(n, np.nan)
        self.delivered = np.zeros(n, dtype=bool)

    def collect(self) -> float:
        """Wait for the close (rule 2), deliver what arrived by it (rule 3); the close."""
        close, final = self._close()
        while not final:
            self._wait(None if close == math.inf else close)
            close, final = self._close()
        while self.timeline.now() < close:
            self._wait(close)
        on_time = ~self.lost & (self.arrival <= close)
        order = np.argsort(self.arrival, kind="stable")
        workers = order[on_time[order]].tolist()
        self.decoder.receive_many(
            self.round, workers, [self.payload(self.round, w) for w in workers]
        )
        self.delivered[workers] = True
        return close

    def _close(self) -> tuple[float, bool]:
        """Rule 2 on the results back so far: ``(close, final)``.

        Not final while a result still out may change it: it is then the time to wait
        until (``inf``: the next result), after which the rule is applied again.
        """
        back = ~np.isnan(self.compute)
        got = self.arrival[back & ~self.lost]
        settled = not (~back & ~self.lost).any()
        if got.size == 0:
            return (0.0, True) if settled else (math.inf, False)
        if self.network.policy == "all":
            return (float(got.max()), True) if settled else (math.inf, False)
        first = float(got.min())
        deadline = (1.0 + self.network.mu) * first
        if settled:
            return (min(deadline, float(got.max())) if got.size == len(back) else deadline), True
        now = self.timeline.now()
        if first > now:  # a result still out may arrive before it
            return first, False
        return deadline, now >= deadline

    def _wait(self, until: float | None) -> list[int]:
        """Advance the timeline to ``until`` (``None``: the next results); who came back."""
        if until is None and not self.timeline.pending():
            raise self._missing()
        workers, compute, failed = self.timeline.wait(until)
        if workers.size:
            self.compute[workers] = compute
            self.arrival[workers] = self._arrivals(workers, compute)
            self.lost[workers] |= failed
        return workers.tolist()

    def _arrivals(self, workers: np.ndarray, compute: np.ndarray) -> np.ndarray:
        """First-transmission arrivals of ``workers`` back after ``compute`` seconds.

        Their packets enter the links at ``compute + delay`` (plus the broadcast) and
        arrive when through them, plus the latency (:mod:`gclab.network.links`); a loss
        model that evolves in time decides their loss at that sending time.
        """
        sent = compute + self.delays[workers]
        if self.broadcast:
            sent = sent + self.broadcast
        links = self.protocol.links
        if links.shared and workers.size != self.protocol.n:
            raise ValueError(
                f"round {self.round}: a shared server link needs every result at once "
                "(the virtual clock)."
            )
        if self.protocol.delay.timed:
            times = self.protocol.clock + sent
            self.lost[workers] |= self.protocol.delay.lost_at(workers, times, self.protocol.seed)
        return links.arrivals(sent, self.size) + self.network.latency

    def drain(self) -> None:
        """Collect the results still out (outside the duration): every arrival is known."""
        while self.timeline.pending():
            self._wait(None)
        if np.isnan(self.compute).any():
            raise self._missing()

    def _missing(self) -> ValueError:
        """The source has nothing left, yet some workers never came back (a source's bug)."""
        missing = np.flatnonzero(np.isnan(self.compute)).tolist()
        return ValueError(f"round {self.round}: no result from workers {missing}, none pending.")

    def deliver(self, packet_round: int, worker: int) -> None:
        self.decoder.receive(packet_round, worker, self.payload(packet_round, worker))
        if packet_round == self.round:
            self.delivered[worker] = True

    def recover(self, due: int, start: float) -> Pursuit:
        """Pursue what the due job wants from ``start`` until it decodes (rule 4)."""
        wanted = self.decoder.wanted(due)
        pursuit = self.pursue(wanted, start, lambda: due in self.decoder.decodable())
        if not pursuit.done:
            raise RecoveryError(
                f"round {self.round}: job {due} is due but not decodable even with every "
                f"packet the decoder wants ({len(wanted)})."
            )
        late = any(r == self.round and not self.lost[w] for r, w in pursuit.delivered)
        return replace(pursuit, waited=late)

    def pursue(
        self, packets: list[tuple[int, int]], start: float, done: Callable[[], bool] | None
    ) -> Pursuit:
        """Pursue ``packets`` (``(round, worker)``, by priority) in parallel from ``start``.

        A late packet of this round arrives at ``a_w``; a lost one, or one of an earlier
        round, is retransmitted (module docstring, rule 4); one whose result is still out
        is scheduled when it comes back. Packets are delivered in time order (ties:
        priority) until ``done()`` holds, or all of them with ``done=None``. Attempts
        count up to the last delivery's scheduled time, not the driver's lag.
        """
        events: list[tuple[float, int, int, int]] = []  # (time, priority, round, worker)
        attempts: list[tuple[float, int]] = []  # (base, attempts until success)
        awaited: dict[int, int] = {}  # worker -> priority: this round's, result not back yet

        def schedule(items: list[tuple[int, int, int]]) -> None:
            """Queue ``(priority, round, worker)``: waited for, retransmitted, or awaited."""
            resend: dict[int, list[tuple[int, int, float]]] = {}  # round -> (prio, worker, base)
            for priority, packet_round, worker in items:
                this_round = packet_round == self.round
                if this_round and np.isnan(self.compute[worker]):
                    awaited[worker] = priority
                elif this_round and not self.lost[worker]:  # late: wait for it
                    events.append((float(self.arrival[worker]), priority, packet_round, worker))
                else:
                    base = max(start, float(self.arrival[worker])) if this_round else start
                    resend.setdefault(packet_round, []).append((priority, worker, base))
            self._retransmit(resend, events, attempts)
            heapq.heapify(events)

        schedule([(priority, r, w) for priority, (r, w) in enumerate(packets)])
        delivered: list[tuple[int, int]] = []
        last = start
        while True:
            now = self.timeline.now()
            while events and events[0][0] <= now:
                time, _, packet_round, worker = heapq.heappop(events)
                self.deliver(packet_round, worker)
                delivered.append((packet_round, worker))
                last = max(last, time)
                if done is not None and done():
                    return Pursuit(self.timeline.now(), delivered, self._sent(last, attempts))
            if not events and not awaited:
                end = self.timeline.now()
                return Pursuit(end, delivered, self._sent(last, attempts), done=done is None)
            back = self._wait(events[0][0] if events else None)
            if awaited and back:
                schedule([(awaited.pop(w), self.round, w) for w in back if w in awaited])

    def attempts(
        self, packet_round: int, workers: list[int], bases: list[float], cycle: float
    ) -> np.ndarray:
        """Attempt number (1-based) of each worker's first retransmission that gets through.

        Attempt ``i`` of a worker is sent at ``bases[worker] + (i−1)·cycle`` seconds into
        the round, which a loss model that evolves in time (``delay.timed``) is asked about.
        """
        protocol = self.protocol
        count = 8
        while True:
            if protocol.delay.timed:
                times = protocol.clock + np.asarray(bases) + cycle * np.arange(count)[:, None]
                lost = protocol.delay.lost_at(np.asarray(workers), times, protocol.seed)
            else:
                lost = protocol.delay.relost(
                    self.round, packet_round, count, protocol.n, protocol.seed
                )[:, workers]
            through = ~lost
            if through.any(axis=0).all():
                return through.argmax(axis=0) + 1
            if count >= MAX_ATTEMPTS:
                stuck = [w for w, ok in zip(workers, through.any(axis=0)) if not ok]
                raise RecoveryError(
                    f"round {self.round}: the packets of round {packet_round} from workers "
                    f"{stuck} were lost {MAX_ATTEMPTS} times in a row; the loss model never lets "
                    "them through."
                )
            count *= 2

    def _retransmit(
        self,
        resend: dict[int, list[tuple[int, int, float]]],
        events: list[tuple[float, int, int, int]],
        attempts: list[tuple[float, int]],
    ) -> None:
        """Queue the retransmissions ``resend`` (round -> ``(priority, worker, base)``)."""
        cycle = self.cycle
        for packet_round, items in resend.items():
            workers, bases = [w for _, w, _ in items], [b for _, _, b in items]
            needed = self.attempts(packet_round, workers, bases, cycle)
            for (priority, worker, base), k in zip(items, needed):
                events.append((base + k * cycle, priority, packet_round, worker))
                attempts.append((base, k))

    def _sent(self, end: float, attempts: list[tuple[float, int]]) -> int:
        """Attempts sent before ``end``: ``(base, k)`` sends at ``base + (i-1)·cycle``, i <= k."""
        cycle = self.cycle
        return sum(min(k, max(0, math.ceil((end - base) / cycle - 1e-9))) for base, k in attempts)
