"""The round protocol: DESIGN.md's time and network model, once, for both engines.

Times are seconds from the start ``t_r`` of round ``r`` (the virtual clock before it).

1. **Arrivals.** Worker ``w``'s packet arrives at ``a_w = compute_times[w] +
   delays[w] + latency`` unless its first transmission is lost (delay model, seeded).
2. **Close.** ``policy=all``: at the last arrival of a packet that was not lost.
   ``policy=deadline`` (μ-rule): at ``(1+μ)·min_w a_w`` over packets not lost, or
   earlier, at the last arrival, when all ``n`` packets are in (nothing is left to
   wait for). A round whose packets are all lost closes at 0.
3. **Delivery.** Packets not lost with ``a_w <= close`` go to ``decoder.receive`` in
   arrival order (ties: lower worker id first). The others are erasures (lost or late).
4. **Recovery.** If the job due this round (``r − T``) is not decodable, the master
   pursues every packet ``decoder.wanted(job)`` names, in parallel:

   * a late packet of this round is waited for: it arrives at ``a_w``;
   * a lost packet of this round is retransmitted; attempt ``i`` (1, 2, …) is sent at
     ``max(close, a_w) + (i−1)·rto`` (a worker still computing cannot resend earlier)
     and arrives ``rto`` later unless the loss model loses it again;
   * a packet of an earlier round (lost, or late and discarded) is retransmitted the
     same way from ``close``.

   Packets are delivered in time order (ties: ``wanted`` order) until the job is
   decodable; the round ends then. ``retransmissions`` counts attempts sent before
   the end; ``waited`` says whether a late packet was waited for.
5. **Late packets.** A packet not delivered by the end of its round is discarded
   when it arrives: its worker is taken to be cancelled and starts round ``r+1`` at
   ``t_{r+1}`` like the others. A later job that needs it gets it retransmitted.
6. **Rounds that run** (:meth:`RoundProtocol.runs`): a round runs if it serves a job
   not decoded yet, so a run ends when its last job is decoded.

``network.recovery=wait_all`` is the SGC papers' rule instead of rules 4 and 6: at the
close the scheme's straggler model (:meth:`~gclab.coding.base.Scheme.straggler_model`)
judges the erasures, given the rounds before; if it rejects them every packet not
delivered is pursued as in rule 4 (late ones waited for, lost ones retransmitted) and
the round ends when all are in. Rule 4 then only runs if the due job still cannot
decode, and rounds run as the papers' code runs them (:meth:`StragglerModel.runs`).
The default, ``decodable``, is gclab's own rule.

Engines decode the jobs in :attr:`RoundOutcome.decodable` before the next round. The
protocol never looks at gradients: ``payload(round, worker)`` supplies the packet to
deliver (``None`` in the simulator's symbolic mode).

This is ``network.clock=virtual``: durations are computed from the times above.
:mod:`gclab.network.wallclock` applies the same rules on the wall clock
(``network.clock=wall``, runtime only): it really waits, drops and measures.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from gclab.coding.base import Decoder, StragglerModel
from gclab.errors import ConfigError
from gclab.network.base import DelayModel

POLICIES = ("deadline", "all")
#: ``decodable``: a round lasts until the due job decodes (gclab's rule). ``wait_all``: the
#: SGC papers' rule, a round whose erasures the scheme's straggler model does not admit
#: waits for every packet.
RECOVERIES = ("decodable", "wait_all")
#: ``virtual``: durations are computed from the model (both engines). ``wall``: the
#: runtime sleeps, drops and measures (:mod:`gclab.network.wallclock`).
CLOCKS = ("virtual", "wall")

#: Retransmission attempts of one packet in one round before the protocol gives up.
MAX_ATTEMPTS = 4096

Payload = Callable[[int, int], "np.ndarray | None"]


@dataclass
class NetworkConfig:
    """The ``network`` config key: collection policy, timing (seconds), clock and recovery."""

    policy: str = "deadline"
    mu: float = 1.0
    latency: float = 0.0
    rto: float = 1.0
    clock: str = "virtual"
    recovery: str = "decodable"

    def __post_init__(self) -> None:
        for name, allowed in (("policy", POLICIES), ("clock", CLOCKS), ("recovery", RECOVERIES)):
            value = getattr(self, name)
            if value not in allowed:
                raise ConfigError(
                    f"network.{name}={value!r} is invalid: it must be one of {', '.join(allowed)}."
                )
        for name in ("mu", "latency", "rto"):
            value = getattr(self, name)
            finite = isinstance(value, (int, float)) and math.isfinite(value)
            if not finite or value < 0 or (name == "rto" and value == 0):
                relation = "> 0" if name == "rto" else ">= 0"
                raise ConfigError(
                    f"network.{name}={value!r} is invalid: it must be a finite number {relation}."
                )


class RecoveryError(RuntimeError):
    """A due job cannot be recovered (the decoder wants nothing more, or every attempt is lost)."""


@dataclass(frozen=True)
class RoundOutcome:
    """What happened in one round. Masks are ``bool [n]`` over this round's packets."""

    round: int
    #: Virtual clock when the round started (sum of earlier durations), seconds.
    start: float
    #: Seconds from start to end, recovery included.
    duration: float
    #: Seconds from start to the close (before recovery).
    close: float
    #: Compute times (seconds): as given (virtual clock), or measured from the start to
    #: the worker's result (wall clock).
    compute: np.ndarray
    #: First-transmission arrival times (seconds from start; lost packets: when they would have).
    arrival: np.ndarray
    #: First transmission lost.
    lost: np.ndarray
    #: Not lost, but arrived after the close.
    late: np.ndarray
    #: Not delivered to the decoder by the end of the round.
    erased: np.ndarray
    #: ``(round, worker)`` of packets delivered during recovery, in delivery order.
    recovered: tuple[tuple[int, int], ...]
    #: Retransmission attempts sent in this round.
    retransmissions: int
    #: Whether the round waited: for a late packet the due job needed or, with
    #: ``recovery=wait_all``, for every packet (the straggler model rejected the close).
    waited: bool
    #: Jobs decodable after the round and not decoded yet, ascending.
    decodable: tuple[int, ...]


class RoundProtocol:
    """Runs rounds for one decoder: timing, erasures, recovery, and the virtual clock."""

    def __init__(self, network: NetworkConfig, delay: DelayModel, n: int, seed: int) -> None:
        for name, value, low in (("cluster.workers", n, 1), ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ConfigError(f"{name}={value!r} is invalid: it must be an integer >= {low}.")
        self.network = network
        self.delay = delay
        self.n = int(n)
        self.seed = int(seed)
        #: Virtual clock: the sum of the durations of the rounds run so far.
        self.clock = 0.0
        #: Rounds that waited for a late packet.
        self.waits = 0
        #: Retransmission attempts over all rounds.
        self.retransmissions = 0
        self._ready: set[int] = set()
        self._model: StragglerModel | None = None  # recovery=wait_all, built at the first round

    def state_dict(self) -> dict:
        """The clock, the counters and the jobs known decodable before they are due.

        Everything else is a pure function of the seed and the round, so a resumed run
        that loads this after round ``r`` sees the rounds after it as the uninterrupted
        run does.
        """
        return {
            "clock": self.clock,
            "waits": self.waits,
            "retransmissions": self.retransmissions,
            "ready": sorted(self._ready),
        }

    def load_state_dict(self, state: dict) -> None:
        self.clock, self.waits = state["clock"], state["waits"]
        self.retransmissions, self._ready = state["retransmissions"], set(state["ready"])

    def run_round(
        self,
        round: int,
        compute_times: np.ndarray,
        decoder: Decoder,
        payload: Payload,
        failed: np.ndarray | None = None,
    ) -> RoundOutcome:
        """Run ``round``: deliver its packets to ``decoder`` and recover the due job.

        ``compute_times[w]`` is the time worker ``w`` computed (measured by the runtime;
        chosen by the simulator); the delay model's draw and the latency are added here.
        ``failed[w]`` marks a packet the runtime has no valid copy of (its worker died,
        was stuck past the timeout, or sent non-finite values): its first transmission
        counts as lost, and recovery asks ``payload`` for it again like any lost packet.
        """
        compute = np.asarray(compute_times, dtype=np.float64)
        if compute.shape != (self.n,) or not np.all(np.isfinite(compute)) or np.any(compute < 0):
            raise ValueError(
                f"compute_times must be {self.n} finite times >= 0, got shape {compute.shape}."
            )
        delays, lost = self._draws(round, decoder)
        arrival = compute + delays + self.network.latency
        if failed is not None:
            lost = lost | np.asarray(failed, dtype=bool)
        close = self._close(arrival, lost)
        delivered = ~lost & (arrival <= close)
        order = np.argsort(arrival, kind="stable")
        on_time = order[delivered[order]].tolist()
        decoder.receive_many(round, on_time, [payload(round, w) for w in on_time])
        end, recovered, sent, waited = close, [], 0, False
        if self._waits_for_all(round, ~delivered, decoder):
            rest = [(round, w) for w in np.flatnonzero(~delivered).tolist()]
            end, recovered, sent, _ = self._pursue(
                round, rest, decoder, payload, arrival, lost, close, None
            )
            waited = bool(rest)
        due = round - decoder.scheme.T
        if self._needs_recovery(due, decoder):
            end, more, more_sent, more_waited = self._recover(
                round, due, decoder, payload, arrival, lost, end
            )
            recovered, sent, waited = recovered + more, sent + more_sent, waited or more_waited
        return self._conclude(
            round, due, decoder, end, close, compute, arrival, lost, delivered, recovered,
            sent, waited,
        )  # fmt: skip

    def runs(self, round: int, jobs: int, decoder: Decoder) -> bool:
        """Whether an engine runs ``round`` of a run of ``jobs`` jobs (rounds ``< jobs + T``).

        ``decodable``: when it serves a job not decoded yet, so a run ends with its last
        job. ``wait_all``: as the papers' code does (:meth:`StragglerModel.runs`).
        """
        if self.network.recovery == "wait_all":
            return self._straggler_model(decoder).runs(round, jobs, decoder)
        return decoder.serves(round, jobs)

    def _straggler_model(self, decoder: Decoder) -> StragglerModel:
        if self._model is None:
            self._model = decoder.scheme.straggler_model()
        return self._model

    def _waits_for_all(self, round: int, erased: np.ndarray, decoder: Decoder) -> bool:
        """``recovery=wait_all``: whether the straggler model rejects the close's erasures.

        The model then records the round's straggler pattern: ``erased`` if admitted,
        none if the master waits for every packet. Always ``False`` with ``decodable``.
        """
        if self.network.recovery != "wait_all":
            return False
        model = self._straggler_model(decoder)
        admitted = model.admits(round, erased, decoder)
        model.settle(round, erased if admitted else np.zeros_like(erased), decoder)
        return not admitted

    def _draws(self, round: int, decoder: Decoder) -> tuple[np.ndarray, np.ndarray]:
        """The delay model's ``(delays, lost)`` for the first transmissions of ``round``."""
        delays = self.delay.delays(round, self.n, self.seed, decoder.scheme.load)
        return delays, np.asarray(self.delay.lost(round, self.n, self.seed), dtype=bool)

    def _needs_recovery(self, due: int, decoder: Decoder) -> bool:
        """Whether the job due this round exists, is not decoded yet and is not decodable."""
        return due >= 0 and due not in self._ready and due not in decoder.decodable()

    def _conclude(
        self,
        round: int,
        due: int,
        decoder: Decoder,
        end: float,
        close: float,
        compute: np.ndarray,
        arrival: np.ndarray,
        lost: np.ndarray,
        delivered: np.ndarray,
        recovered: list[tuple[int, int]],
        sent: int,
        waited: bool,
    ) -> RoundOutcome:
        """The round's outcome; advances the clock and the counters."""
        ready = decoder.decodable()
        delivered[[w for r, w in recovered if r == round]] = True
        self._ready.update(ready)
        self._ready.discard(due)
        outcome = RoundOutcome(
            round=round,
            start=self.clock,
            duration=float(end),
            close=float(close),
            compute=compute,
            arrival=arrival,
            lost=lost,
            late=~lost & (arrival > close),
            erased=~delivered,
            recovered=tuple(recovered),
            retransmissions=sent,
            waited=waited,
            decodable=tuple(ready),
        )
        self.clock += outcome.duration
        self.waits += int(waited)
        self.retransmissions += sent
        return outcome

    def _close(self, arrival: np.ndarray, lost: np.ndarray) -> float:
        got = arrival[~lost]
        if got.size == 0:
            return 0.0
        if self.network.policy == "all":
            return float(got.max())
        deadline = (1.0 + self.network.mu) * float(got.min())
        return min(deadline, float(got.max())) if got.size == self.n else deadline

    def _recover(
        self,
        round: int,
        due: int,
        decoder: Decoder,
        payload: Payload,
        arrival: np.ndarray,
        lost: np.ndarray,
        close: float,
    ) -> tuple[float, list[tuple[int, int]], int, bool]:
        """Pursue the packets the due job wants; ``(end, delivered, attempts sent, waited)``."""
        wanted = decoder.wanted(due)
        end, delivered, sent, done = self._pursue(
            round, wanted, decoder, payload, arrival, lost, close,
            lambda: due in decoder.decodable(),
        )  # fmt: skip
        if not done:
            raise self._unrecoverable(round, due, len(wanted))
        waited = any(r == round and not lost[w] for r, w in delivered)
        return end, delivered, sent, waited

    def _pursue(
        self,
        round: int,
        packets: list[tuple[int, int]],
        decoder: Decoder,
        payload: Payload,
        arrival: np.ndarray,
        lost: np.ndarray,
        close: float,
        done: Callable[[], bool] | None,
    ) -> tuple[float, list[tuple[int, int]], int, bool]:
        """Pursue ``packets`` (``(round, worker)``, by priority) in parallel from ``close``.

        A late packet of this round arrives at ``a_w``; a lost one, or one of an earlier
        round, is retransmitted (module docstring, rule 4). Packets are delivered in time
        order (ties: priority) until ``done()`` holds, or all of them with ``done=None``.
        Returns ``(end, delivered, attempts sent before the end, whether done)``.
        """
        events: list[tuple[float, int, int, int]] = []  # (time, priority, round, worker)
        resend: dict[int, list[tuple[int, int, float]]] = {}  # round -> (priority, worker, base)
        for priority, (packet_round, worker) in enumerate(packets):
            if packet_round == round and not lost[worker]:
                events.append((float(arrival[worker]), priority, round, worker))
            else:
                base = max(close, float(arrival[worker])) if packet_round == round else close
                resend.setdefault(packet_round, []).append((priority, worker, base))
        attempts: list[tuple[float, int]] = []  # (base, attempts until success)
        for packet_round, items in resend.items():
            needed = self._attempts(round, packet_round, [w for _, w, _ in items])
            for (priority, worker, base), k in zip(items, needed):
                events.append((base + k * self.network.rto, priority, packet_round, worker))
                attempts.append((base, k))
        events.sort()
        end, delivered, finished = close, [], done is None
        for time, _, packet_round, worker in events:
            decoder.receive(packet_round, worker, payload(packet_round, worker))
            delivered.append((packet_round, worker))
            end = max(close, time)
            if done is not None and done():
                finished = True
                break
        return end, delivered, self._sent(end, attempts), finished

    @staticmethod
    def _unrecoverable(round: int, due: int, wanted: int) -> RecoveryError:
        return RecoveryError(
            f"round {round}: job {due} is due but not decodable even with every packet "
            f"the decoder wants ({wanted})."
        )

    def _sent(self, end: float, attempts: list[tuple[float, int]]) -> int:
        """Attempts sent before ``end``: ``(base, k)`` sends at ``base + (i-1)·rto``, i <= k."""
        return sum(
            min(k, max(0, math.ceil((end - base) / self.network.rto - 1e-9)))
            for base, k in attempts
        )

    def _attempts(self, round: int, packet_round: int, workers: list[int]) -> np.ndarray:
        """Attempt number (1-based) of each worker's first retransmission that gets through."""
        count = 8
        while True:
            lost = self.delay.relost(round, packet_round, count, self.n, self.seed)[:, workers]
            through = ~lost
            if through.any(axis=0).all():
                return through.argmax(axis=0) + 1
            if count >= MAX_ATTEMPTS:
                stuck = [w for w, ok in zip(workers, through.any(axis=0)) if not ok]
                raise RecoveryError(
                    f"round {round}: the packets of round {packet_round} from workers {stuck} were "
                    f"lost {MAX_ATTEMPTS} times in a row; the loss model never lets them through."
                )
            count *= 2
