"""``network.clock=wall``: the round protocol on the wall clock, as a real delay line.

The master emulates the network. Round ``r`` starts at wall time ``t0``, when its work
is sent out. Worker ``w``'s result comes back ``c_w`` seconds later, really computed
(a runtime actor hosting several logical workers returns them together, so they
share ``c_w``). The master holds the packet until ``t0 + c_w + delay_w + latency``,
with ``delay_w`` from the same seeded delay model as the virtual clock, and only then
delivers it. A packet the loss model marks lost, or the runtime marks failed (dead,
stuck or non-finite), is never delivered. The rules of :mod:`gclab.network.protocol`
then apply as events on the wall clock, without waiting for every worker first:

* **Close.** ``policy=deadline``: at ``(1+μ)·a`` where ``a`` is the scheduled time of
  the first delivered packet, or earlier, when all ``n`` packets are delivered.
  ``policy=all``: when every packet is delivered or known to be lost (a failed packet
  is known when its result comes back). Either policy closes at once when no packet can
  be delivered any more.
* **Recovery**, if the due job is not decodable at the close, for the packets
  ``decoder.wanted`` names: a late packet of this round is delivered at its time; a
  lost one is retransmitted, attempt ``i`` sent at ``max(close, a_w) + (i−1)·rto`` and
  delivered ``rto`` later unless lost again (the same draws as the virtual clock, so the
  patterns agree); a packet of an earlier round is retransmitted from the close.
* **Wait for all** (``network.recovery=wait_all``): if the scheme's straggler model
  rejects the erasures at the close, every packet not delivered is pursued as in
  recovery (late: delivered at its time; lost or failed: retransmitted) before the
  due job's own recovery, which then only runs if the job is still not decodable.
* **End.** When the due job is decodable (or at the close, or when every packet is in).
  The duration is the wall time measured from ``t0`` to then, so it includes the
  master's own work (delivery, retransmitted recomputations); the clock is the sum of
  durations.

After the end the source is drained, outside the duration, so that every worker's
compute time and arrival are known; their packets are discarded as late. (A runtime
actor runs one call at a time: it could not start the next round earlier anyway.)
"""

from __future__ import annotations

import heapq
import math
import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from gclab.coding.base import Decoder
from gclab.network.protocol import Payload, RoundOutcome, RoundProtocol


class ArrivalSource(Protocol):
    """Where one round's worker results come from (in the runtime: its actor calls)."""

    def pending(self) -> bool:
        """Whether some worker's result has not come back yet."""
        ...

    def wait(self, timeout: float | None) -> list[tuple[int, bool]]:
        """Block until results come back or ``timeout`` seconds pass (``None``: no limit).

        Returns ``(worker, failed)`` for each worker whose result came back (empty on a
        timeout); ``failed`` means the result holds no valid packet.
        """
        ...


class WallClockProtocol(RoundProtocol):
    """Runs rounds on the wall clock; :attr:`clock` sums measured durations."""

    def run_wall_round(
        self,
        round: int,
        source: ArrivalSource,
        decoder: Decoder,
        payload: Payload,
        start: float | None = None,
    ) -> RoundOutcome:
        """Run ``round`` as results come back from ``source``; see the module docstring.

        ``start`` is the ``time.monotonic()`` at which the round's work was sent out
        (default: now). ``payload(round, worker)`` must hold a worker's packet as soon as
        ``source`` reported it, and recompute a failed one when recovery asks for it.
        """
        line = _DelayLine(self, round, source, decoder, payload, start)
        close = line.collect()
        end, recovered, sent, waited = close, [], 0, False
        if self._waits_for_all(round, ~line.delivered, decoder):
            rest = [(round, w) for w in np.flatnonzero(~line.delivered).tolist()]
            end, recovered, sent, _ = line.pursue(rest, close, None)
            waited = bool(rest)
        due = round - decoder.scheme.T
        if self._needs_recovery(due, decoder):
            end, more, more_sent, more_waited = line.recover(due, end)
            recovered, sent, waited = recovered + more, sent + more_sent, waited or more_waited
        while source.pending():
            line.wait(None)
        return self._conclude(
            round, due, decoder, end, close, line.compute, line.arrival, line.lost,
            line.delivered, recovered, sent, waited,
        )  # fmt: skip


class _DelayLine:
    """One round's packets on the wall clock: who came back when, who was delivered."""

    def __init__(
        self,
        protocol: WallClockProtocol,
        round: int,
        source: ArrivalSource,
        decoder: Decoder,
        payload: Payload,
        start: float | None,
    ) -> None:
        self.protocol = protocol
        self.round = round
        self.source = source
        self.decoder = decoder
        self.payload = payload
        self.t0 = time.monotonic() if start is None else start
        self.delays, lost = protocol._draws(round, decoder)
        self.lost = lost.copy()  # failures are added as results come back
        n = protocol.n
        self.compute = np.full(n, np.nan)  # seconds from t0 to the result; NaN: not back yet
        self.arrival = np.full(n, np.nan)
        self.delivered = np.zeros(n, dtype=bool)

    def now(self) -> float:
        return time.monotonic() - self.t0

    def wait(self, until: float | None) -> list[int]:
        """Wait until ``until`` (seconds from t0; ``None``: a result); returns who came back."""
        if not self.source.pending():
            if until is None:
                raise RuntimeError("the delay line has nothing left to wait for")
            time.sleep(max(0.0, until - self.now()))
            return []
        timeout = None if until is None else max(0.0, until - self.now())
        back = []
        for w, failed in self.source.wait(timeout):
            self.compute[w] = self.now()
            self.arrival[w] = self.compute[w] + self.delays[w] + self.protocol.network.latency
            self.lost[w] |= failed
            back.append(w)
        return back

    def deliver(self, packet_round: int, worker: int) -> None:
        self.decoder.receive(packet_round, worker, self.payload(packet_round, worker))
        if packet_round == self.round:
            self.delivered[worker] = True

    def collect(self) -> float:
        """Deliver first transmissions at their times until the close; returns the close."""
        network = self.protocol.network
        queue: list[tuple[float, int]] = []  # (arrival, worker): ties go to the lower id
        deadline = math.inf
        while True:
            now = self.now()
            while queue and queue[0][0] <= now:
                arrival, w = heapq.heappop(queue)
                self.deliver(self.round, w)
                if deadline == math.inf:
                    deadline = (1.0 + network.mu) * arrival
            settled = self.delivered | self.lost
            if (
                self.delivered.all()
                or self.lost.all()
                or (network.policy == "all" and settled.all())
                or (network.policy == "deadline" and now >= deadline)
            ):
                return now
            next_event = min(queue[0][0] if queue else math.inf, deadline)
            for w in self.wait(None if next_event == math.inf else next_event):
                if not self.lost[w]:
                    heapq.heappush(queue, (float(self.arrival[w]), w))

    def recover(self, due: int, close: float) -> tuple[float, list[tuple[int, int]], int, bool]:
        """Pursue what the due job wants; ``(end, delivered, attempts sent, waited)``."""
        wanted = self.decoder.wanted(due)
        end, recovered, sent, done = self.pursue(
            wanted, close, lambda: due in self.decoder.decodable()
        )
        if not done:
            raise self.protocol._unrecoverable(self.round, due, len(wanted))
        waited = any(r == self.round and not self.lost[w] for r, w in recovered)
        return end, recovered, sent, waited

    def pursue(
        self, packets: list[tuple[int, int]], close: float, done: Callable[[], bool] | None
    ) -> tuple[float, list[tuple[int, int]], int, bool]:
        """Pursue ``packets`` in parallel from ``close`` until ``done()`` (``None``: all in).

        Returns ``(end, delivered, attempts sent, whether done)``; attempts count up to
        the last delivered packet's scheduled time, not the master's lag.
        """
        protocol, rto = self.protocol, self.protocol.network.rto
        events: list[tuple[float, int, int, int]] = []  # (time, priority, round, worker)
        attempts: list[tuple[float, int]] = []  # (base, attempts until success)
        awaited: dict[int, int] = {}  # worker -> priority: this round's, result not back yet

        def pursue_one(priority: int, packet_round: int, worker: int) -> None:
            this_round = packet_round == self.round
            if this_round and math.isnan(self.compute[worker]):
                awaited[worker] = priority
            elif this_round and not self.lost[worker]:  # late: wait for it
                heapq.heappush(events, (float(self.arrival[worker]), priority, self.round, worker))
            else:  # lost, failed, or of an earlier round: retransmit
                base = max(close, float(self.arrival[worker])) if this_round else close
                k = int(protocol._attempts(self.round, packet_round, [worker])[0])
                heapq.heappush(events, (base + k * rto, priority, packet_round, worker))
                attempts.append((base, k))

        for priority, (packet_round, worker) in enumerate(packets):
            pursue_one(priority, packet_round, worker)
        recovered: list[tuple[int, int]] = []
        last = close
        while True:
            now = self.now()
            while events and events[0][0] <= now:
                last, _, packet_round, worker = heapq.heappop(events)
                self.deliver(packet_round, worker)
                recovered.append((packet_round, worker))
                if done is not None and done():
                    return self.now(), recovered, protocol._sent(last, attempts), True
            if not events and not awaited:
                end = self.now() if recovered else close
                return end, recovered, protocol._sent(last, attempts), done is None
            for w in self.wait(events[0][0] if events else None):
                if w in awaited:
                    pursue_one(awaited.pop(w), self.round, w)
