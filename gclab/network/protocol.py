"""The round protocol: the time and network model of docs/design.md, once, for both clocks.

Times are seconds from the start ``t_r`` of round ``r``.

1. **Arrivals.** Worker ``w``'s result comes back after its compute time ``c_w``; its
   packet arrives at ``a_w = c_w + delays[w] + latency`` unless its first transmission
   is lost (delay model, seeded) or the result holds no valid packet (*failed*: the
   runtime's worker died, was stuck past the timeout, or sent non-finite values).
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
close the scheme's straggler model (:meth:`~gclab.coding.contract.Scheme.straggler_model`)
judges the erasures, given the rounds before; if it rejects them every packet not
delivered is pursued as in rule 4 (late ones waited for, lost ones retransmitted) and
the round ends when all are in. Rule 4 then only runs if the due job still cannot
decode, and rounds run as the papers' code runs them (:meth:`StragglerModel.runs`).
The default, ``decodable``, is gclab's own rule.

``network.recovery=partial`` never pursues anything: the round ends at the close, and a
due job that is not decodable is listed in :attr:`RoundOutcome.partial` for the engine
to apply the partial gradient of what arrived
(:meth:`~gclab.coding.contract.Decoder.decode_partial`); rounds run as with ``decodable``.
Only schemes with :attr:`~gclab.coding.contract.Scheme.partial` take it (:func:`check_recovery`).

**Clocks** (:mod:`gclab.network.clock`). The rules run as events on a timeline that
knows only the results that have come back so far: the close is taken once no result
still out can change it (a result that comes back at ``t`` arrives at ``a_w >= t``), a
pursued packet whose result is still out is scheduled when it comes back, and after the
end the remaining results are collected (drained) outside the duration, so that every
compute time and arrival is known. On the virtual clock every result is in at the start
and time jumps from event to event, so a round's numbers follow from the model alone.
On the wall clock the runtime's results come back as its workers finish, the driver
really sleeps until each event, and the duration is the wall time measured from the
round's start to its end, the master's own work included. Given the same compute times
both clocks give the same erasures, recoveries and retransmissions.

Engines decode the jobs in :attr:`RoundOutcome.decodable` before the next round. The
protocol never looks at gradients: ``payload(round, worker)`` supplies the packet to
deliver (``None`` in the simulator's symbolic mode); it must hold a worker's packet once
its result came back, and recompute a failed one when recovery asks for it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from enum import StrEnum
from typing import Any

import numpy as np

from gclab.coding.contract import Decoder, Scheme, StragglerModel
from gclab.errors import ConfigError
from gclab.network.base import DelayModel
from gclab.network.clock import ArrivalSource, Clock, VirtualClock, WallClock
from gclab.network.draws import stream_seed
from gclab.network.links import Links
from gclab.network.rounds import Payload, Pursuit, RoundPackets


class Policy(StrEnum):
    """When a round closes (``network.policy``; rule 2 above)."""

    deadline = "deadline"
    all = "all"


#: ``network.server_time``: the round's measured decode and optimizer step (training only).
MEASURED = "measured"


class Recovery(StrEnum):
    """What a round does about a due job that is not decodable (``network.recovery``).

    ``decodable``: a round lasts until the due job decodes (gclab's rule). ``wait_all``:
    the SGC papers' rule, a round whose erasures the scheme's straggler model does not
    admit waits for every packet. ``partial``: a round ends at its close and a due job
    that is not decodable gets the partial gradient of what arrived.
    """

    decodable = "decodable"
    wait_all = "wait_all"
    partial = "partial"


class ClockName(StrEnum):
    """``network.clock``. ``virtual``: durations follow from the model (both engines).
    ``wall``: the runtime sleeps, drops and measures (runtime only). See
    :mod:`gclab.network.clock`."""

    virtual = "virtual"
    wall = "wall"


CLOCKS: dict[ClockName, Clock] = {ClockName.virtual: VirtualClock, ClockName.wall: WallClock}


@dataclass
class NetworkConfig:
    """The ``network`` config key: collection policy, timing (seconds), clock and recovery."""

    policy: Policy = Policy.deadline
    mu: float = 1.0
    latency: float = 0.0
    rto: float = 1.0
    clock: ClockName = ClockName.virtual
    recovery: Recovery = Recovery.decodable
    #: Each worker's uplink, bytes/s (``None``: unlimited). See :mod:`gclab.network.links`.
    bandwidth: float | None = None
    #: The server's ingress, bytes/s, shared fairly by the packets in flight (``None``: unlimited).
    server_bandwidth: float | None = None
    #: The server's egress for the weights it sends each round, bytes/s (``None``: unlimited).
    broadcast_bandwidth: float | None = None
    #: The server's work per round (decode, optimizer step) on the clock, after the round:
    #: ``measured`` (training only: the round's measured decode and step) or seconds.
    server_time: Any = 0.0
    #: The random stream of the delay and loss draws (:func:`gclab.network.draws.stream_seed`):
    #: runs that differ only in it train on the same batches from the same weights under
    #: other delays and losses, an A/A replicate of one arm.
    stream: int = 0

    def __post_init__(self) -> None:
        self.policy, self.clock = Policy(self.policy), ClockName(self.clock)
        self.recovery = Recovery(self.recovery)
        for name in ("mu", "latency", "rto"):
            value = getattr(self, name)
            if not _finite(value) or value < 0 or (name == "rto" and value == 0):
                relation = "> 0" if name == "rto" else ">= 0"
                raise ConfigError(
                    f"{name}={value!r} is invalid: it must be a finite number {relation}.",
                    param=name,
                )
        for name in ("bandwidth", "server_bandwidth", "broadcast_bandwidth"):
            value = getattr(self, name)
            if value is not None and not (_finite(value) and value > 0):
                raise ConfigError(
                    f"{name}={value!r} is invalid: it must be a rate in bytes/s > 0, "
                    "or null (unlimited).",
                    param=name,
                )
        if isinstance(self.stream, bool) or not isinstance(self.stream, int) or self.stream < 0:
            raise ConfigError(
                f"stream={self.stream!r} is invalid: it must be an integer >= 0 (0: the "
                "seed's own draws).",
                param="stream",
            )
        value = self.server_time
        if value != MEASURED and not (_finite(value) and value >= 0):
            raise ConfigError(
                f"server_time={value!r} is invalid: it must be {MEASURED!r} or a number "
                "of seconds >= 0.",
                param="server_time",
            )
        if self.clock == "wall" and self.server_bandwidth is not None:
            raise ConfigError(
                f"server_bandwidth={self.server_bandwidth!r} needs clock=virtual: "
                "on the wall clock a packet's arrival would depend on results not back yet; "
                "set it to null or use the virtual clock.",
                param="server_bandwidth",
            )

    def links(self, payload: float) -> Links:
        """The links of this config, for packets of ``payload`` bytes per full gradient."""
        rate = {
            name: math.inf if value is None else float(value)
            for name, value in (
                ("uplink", self.bandwidth),
                ("server", self.server_bandwidth),
                ("broadcast", self.broadcast_bandwidth),
            )
        }
        return Links(**rate, payload=float(payload))


def check_recovery(scheme: Scheme, network: NetworkConfig) -> None:
    """Refuse ``network.recovery=partial`` for a scheme without partial decoding (ConfigError)."""
    if network.recovery == "partial" and not scheme.partial:
        raise ConfigError(
            f"recovery=partial is not supported by {scheme.name}, a code across "
            "rounds whose packets mix several jobs, so a due job has no partial sum to "
            "apply; use recovery=decodable or wait_all.",
            param="recovery",
        )


def _finite(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


@dataclass(frozen=True)
class RoundOutcome:
    """What happened in one round. Masks are ``bool [n]`` over this round's packets."""

    round: int
    #: The protocol's clock when the round started (sum of earlier durations), seconds.
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
    #: Bytes the workers sent: every first transmission and every retransmission attempt.
    bytes: float = 0.0
    #: Seconds of the server's work charged after the round (:meth:`RoundProtocol.charge`),
    #: included in ``duration``.
    server_time: float = 0.0
    #: ``recovery=partial``: the due job, if it is not decodable; the engine applies its
    #: partial gradient (:meth:`~gclab.coding.contract.Decoder.decode_partial`).
    partial: tuple[int, ...] = ()


class RoundProtocol:
    """Runs rounds for one decoder: timing, erasures, recovery, and the protocol's clock.

    ``clock`` is where time comes from (:mod:`gclab.network.clock`); by default the one
    ``network.clock`` names. ``payload`` is the bytes of one full gradient, which a
    packet carries ``packet_fraction`` of (:mod:`gclab.network.links`).
    """

    def __init__(
        self,
        network: NetworkConfig,
        delay: DelayModel,
        n: int,
        seed: int,
        clock: Clock | None = None,
        payload: float = 0.0,
    ) -> None:
        for name, value, low in (("n", n, 1), ("seed", seed, 0)):
            if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
                raise ConfigError(
                    f"{name}={value!r} is invalid: it must be an integer >= {low}.", param=name
                )
        self.network = network
        self.delay = delay
        self.n = int(n)
        #: The seed of the delay and loss draws: the run's seed on ``network.stream``.
        self.seed = stream_seed(int(seed), network.stream)
        #: Makes each round's timeline (:data:`gclab.network.clock.Clock`).
        self.timer = CLOCKS[network.clock] if clock is None else clock
        #: What bytes cost (:mod:`gclab.network.links`).
        self.links = network.links(payload)
        #: The sum of the durations of the rounds run so far, seconds.
        self.clock = 0.0
        #: Rounds that waited for a late packet.
        self.waits = 0
        #: Retransmission attempts over all rounds.
        self.retransmissions = 0
        #: Bytes the workers sent over all rounds.
        self.bytes = 0.0
        #: Seconds of server work charged over all rounds.
        self.server_time = 0.0
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
            "bytes": self.bytes,
            "server_time": self.server_time,
            "ready": sorted(self._ready),
        }

    def load_state_dict(self, state: dict) -> None:
        self.clock, self.waits = state["clock"], state["waits"]
        self.retransmissions, self._ready = state["retransmissions"], set(state["ready"])
        self.bytes, self.server_time = state["bytes"], state["server_time"]

    def charge(self, outcome: RoundOutcome, measured: float | None = None) -> RoundOutcome:
        """Put the server's work after ``outcome``'s round on the clock (``network.server_time``).

        ``measured`` is the round's measured decode and optimizer step, which
        ``server_time=measured`` charges; a number of seconds is charged as it is. The
        returned outcome's ``duration`` includes it.
        """
        seconds = self.network.server_time
        if seconds == MEASURED:
            if measured is None:
                raise ValueError("server_time=measured needs the measured seconds, not None.")
            seconds = measured
        seconds = float(seconds)
        self.clock += seconds
        self.server_time += seconds
        return replace(outcome, duration=outcome.duration + seconds, server_time=seconds)

    def run_round(
        self, round: int, results: ArrivalSource, decoder: Decoder, payload: Payload
    ) -> RoundOutcome:
        """Run ``round`` on the results of ``results``: deliver, close, recover, drain.

        The delay model's draws and the latency are added to each compute time here.
        """
        line = RoundPackets(self, round, self.timer(results), decoder, payload)
        close = line.collect()
        pursuit = Pursuit(close)
        if self._waits_for_all(round, ~line.delivered, decoder):
            rest = [(round, w) for w in np.flatnonzero(~line.delivered).tolist()]
            pursuit = replace(line.pursue(rest, close, None), waited=bool(rest))
        due = round - decoder.scheme.T
        short = self._needs_recovery(due, decoder)
        partial = short and self.network.recovery == "partial"
        if short and not partial:
            pursuit = pursuit.then(line.recover(due, pursuit.end))
        line.drain()
        outcome = self._conclude(line, due, close, pursuit)
        return replace(outcome, partial=(due,)) if partial else outcome

    def runs(self, round: int, jobs: int, decoder: Decoder) -> bool:
        """Whether an engine runs ``round`` of a run of ``jobs`` jobs (rounds ``< jobs + T``).

        ``decodable`` and ``partial``: when it serves a job not decoded yet, so a run ends
        with its last job. ``wait_all``: as the papers' code does (:meth:`StragglerModel.runs`).
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

    def _needs_recovery(self, due: int, decoder: Decoder) -> bool:
        """Whether the job due this round exists, is not decoded yet and is not decodable."""
        return due >= 0 and due not in self._ready and due not in decoder.decodable()

    def _conclude(
        self, line: RoundPackets, due: int, close: float, pursuit: Pursuit
    ) -> RoundOutcome:
        """The round's outcome; advances the clock and the counters."""
        ready = line.decoder.decodable()
        self._ready.update(ready)
        self._ready.discard(due)
        outcome = RoundOutcome(
            round=line.round,
            start=self.clock,
            duration=float(pursuit.end),
            close=float(close),
            compute=line.compute,
            arrival=line.arrival,
            lost=line.lost,
            late=~line.lost & (line.arrival > close),
            erased=~line.delivered,
            recovered=tuple(pursuit.delivered),
            retransmissions=pursuit.sent,
            waited=pursuit.waited,
            decodable=tuple(ready),
            bytes=(self.n + pursuit.sent) * line.size,
        )
        self.clock += outcome.duration
        self.waits += int(pursuit.waited)
        self.retransmissions += pursuit.sent
        self.bytes += outcome.bytes
        return outcome
