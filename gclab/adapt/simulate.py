"""The adaptive simulator: a run whose scheme the controller may change at job boundaries.

The run is a sequence of segments, one per scheme. A segment runs its scheme's rounds
as :func:`gclab.sim.engine.simulate` does (its own decoder and round protocol, the
run's clock and round numbers: :class:`~gclab.adapt.shift.Shifted`), starting jobs
until a decision point at which the controller (:class:`~gclab.adapt.decide.Controller`)
switches. The segment then starts no more jobs: its remaining rounds drain the jobs in
flight (rounds ``J .. J+T−1`` of a run of the jobs so far, run as the recovery mode
runs them), and the next scheme starts the next job in the next round. Every job is so
decoded by the scheme that started it, and an exact scheme stays exact across a switch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from gclab.adapt.decide import Controller
from gclab.adapt.shift import Shifted
from gclab.coding.contract import Scheme
from gclab.network import DelayModel, Finished, NetworkConfig, RoundProtocol
from gclab.sim.engine import (
    PAYLOAD_BYTES,
    SimResult,
    _symbolic,
    check_clock,
    check_run,
    decode_round,
)


@dataclass(frozen=True)
class AdaptiveResult(SimResult):
    """A :class:`SimResult` of an adaptive run, with where the scheme changed."""

    #: Per round run: whether it is the first round of a scheme switched to.
    switched: np.ndarray
    #: The controller's record (:meth:`Controller.summary`).
    adaptation: dict

    def summary(self) -> dict[str, object]:
        return {**super().summary(), **self.adaptation}

    def columns(self) -> dict[str, np.ndarray]:
        return {**super().columns(), "switched": self.switched.astype(int)}


def simulate_adaptive(
    scheme: Scheme,
    controller: Controller,
    delay: DelayModel,
    network: NetworkConfig,
    jobs: int,
    seed: int,
    unit_time: float = 0.0,
    payload_bytes: float = PAYLOAD_BYTES,
) -> AdaptiveResult:
    """Simulate ``jobs`` jobs starting with ``scheme``, switching as ``controller`` decides."""
    check_clock(network)
    check_run(scheme, delay, jobs, unit_time, payload_bytes)
    rows: list[tuple] = []  # round, duration, erasures, lost, late, retrans., waited, server,
    # bytes, coverage
    loads: list[float] = []
    switched: list[bool] = []
    offset, first, clock = 0, 0, 0.0  # the segment's round 0 in the run, its first job, clock
    while first < jobs:
        protocol = RoundProtocol(
            network, Shifted(delay, offset), scheme.n, seed, payload=payload_bytes
        )
        protocol.clock = clock
        decoder = scheme.decoder()
        compute = np.full(scheme.n, unit_time * scheme.load)
        limit = 1  # jobs this segment starts (so far): one more at each boundary not switched at
        following, r, last = None, 0, -1
        while True:
            if r == limit and following is None and first + limit < jobs:
                if controller.due(first + limit):
                    following = controller.decide(first + limit, protocol.clock)
                if following is None:
                    limit += 1
            if r >= limit + scheme.T:
                break
            decoder.begin_round(r)
            if protocol.runs(r, limit, decoder):
                out = protocol.charge(protocol.run_round(r, Finished(compute), decoder, _symbolic))
                coverage = decode_round(scheme, decoder, out)
                controller.observe(out, protocol, scheme)
                counts = (out.erased.sum(), out.lost.sum(), out.late.sum())
                rows.append(
                    (offset + r, out.duration, *counts, out.retransmissions, out.waited,
                     out.server_time, out.bytes, coverage)
                )  # fmt: skip
                loads.append(scheme.load)
                switched.append(first > 0 and last < 0)
                last = r
            r += 1
        offset, first, clock = offset + last + 1, first + limit, protocol.clock
        scheme = following or scheme
    return _result(controller, jobs, rows, loads, switched)


def _result(
    controller: Controller,
    jobs: int,
    rows: list[tuple],
    loads: list[float],
    switched: list[bool],
) -> AdaptiveResult:
    """The run's :class:`AdaptiveResult` from its rows (one per round run)."""
    columns = list(zip(*rows))
    whole = lambda i: np.array(columns[i], dtype=np.int64)  # noqa: E731
    real = lambda i: np.array(columns[i], dtype=np.float64)  # noqa: E731
    names = ", ".join(controller.nodes)
    return AdaptiveResult(
        scheme=f"adaptive[{names}]",
        n=controller.n,
        load=float(np.mean(loads)),
        jobs=int(jobs),
        index=whole(0),
        durations=real(1),
        erasures=whole(2),
        lost=whole(3),
        late=whole(4),
        retransmissions=whole(5),
        waited=np.array(columns[6], dtype=bool),
        server_time=real(7),
        bytes=real(8),
        coverage=real(9),
        switched=np.array(switched, dtype=bool),
        adaptation=controller.summary(),
    )
