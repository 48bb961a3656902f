"""The wall clock's delay line on hand-made patterns, fed by a fake arrival source (no Ray).

Times in the patterns are units of ``UNIT`` seconds. The machine is noisy, so no test
asserts a tight duration: measured times must be at least the modelled ones, within a
generous ``SLACK`` above them, and the erasure pattern must be the virtual clock's for
the same arrival times (the compute times the wall clock measured).
"""

from __future__ import annotations

import time

import numpy as np
import pytest

from gclab.coding.base import Scheme
from gclab.coding.uncoded import Uncoded
from gclab.network import NetworkConfig, RecoveryError, RoundOutcome, RoundProtocol
from gclab.network.base import DelayModel
from gclab.network.wallclock import WallClockProtocol
from helpers.protocol import (
    FractionalRepetition,
    LosesEverything,
    OneRoundLate,
    OneRoundLateDecoder,
    Scripted,
    mask,
    no_payload,
)

UNIT = 0.1  # seconds per pattern unit: margins between events are >= 0.5 units
SLACK = 0.4  # seconds a measured time may exceed the modelled one on a loaded machine


class Results:
    """Fake actor calls: worker ``w``'s result comes back ``compute[w]`` units after the start."""

    def __init__(self, compute: list[float], failed: tuple[int, ...] = ()) -> None:
        self.start = time.monotonic()
        self.due = sorted((UNIT * c, w) for w, c in enumerate(compute))
        self.failed = set(failed)

    def pending(self) -> bool:
        return bool(self.due)

    def wait(self, timeout: float | None) -> list[tuple[int, bool]]:
        until = self.start + self.due[0][0]
        if timeout is not None:
            until = min(until, time.monotonic() + timeout)
        time.sleep(max(0.0, until - time.monotonic()))
        back = []
        while self.due and self.start + self.due[0][0] <= time.monotonic():
            back.append(self.due.pop(0)[1])
        return [(w, w in self.failed) for w in back]


def scaled(delays: list[list[float]], **kwargs: object) -> Scripted:
    return Scripted([[UNIT * d for d in row] for row in delays], **kwargs)  # type: ignore[arg-type]


def network(**kwargs: object) -> NetworkConfig:
    if "rto" in kwargs:
        kwargs["rto"] = UNIT * kwargs["rto"]  # type: ignore[operator]
    return NetworkConfig(clock="wall", **kwargs)  # type: ignore[arg-type]


def wall_and_virtual(
    scheme: Scheme,
    model: DelayModel,
    compute: list[list[float]],
    **net: object,
) -> list[tuple[RoundOutcome, RoundOutcome]]:
    """Each round on the wall clock, then on the virtual clock with the measured compute times."""
    wall = WallClockProtocol(network(**net), model, scheme.n, seed=0)
    virtual = RoundProtocol(network(**net), model, scheme.n, seed=0)
    wall_decoder, virtual_decoder = scheme.decoder(), scheme.decoder()
    pairs = []
    for r, times in enumerate(compute):
        source = Results(times)
        out = wall.run_wall_round(r, source, wall_decoder, no_payload, start=source.start)
        ref = virtual.run_round(r, out.compute, virtual_decoder, no_payload)
        for decoder, o in ((wall_decoder, out), (virtual_decoder, ref)):
            for job in o.decodable:
                decoder.decode(job)
        assert_same_pattern(out, ref)
        pairs.append((out, ref))
    assert wall.clock == pytest.approx(sum(o.duration for o, _ in pairs))
    return pairs


def assert_same_pattern(wall: RoundOutcome, virtual: RoundOutcome) -> None:
    for key in ("lost", "late", "erased"):
        assert list(getattr(wall, key)) == list(getattr(virtual, key)), key
    for key in ("recovered", "retransmissions", "waited", "decodable"):
        assert getattr(wall, key) == getattr(virtual, key), key
    np.testing.assert_allclose(wall.arrival, virtual.arrival)
    assert virtual.close - 1e-9 <= wall.close <= virtual.close + SLACK
    assert virtual.duration - 1e-9 <= wall.duration <= virtual.duration + SLACK


def at_least(measured: float, units: float) -> bool:
    """``measured`` seconds is the modelled ``units``, give or take the machine's noise above."""
    return UNIT * units - 1e-9 <= measured <= UNIT * units + SLACK


def test_all_waits_for_every_packet_that_is_not_lost() -> None:
    [(out, _)] = wall_and_virtual(Uncoded(4), scaled([[1, 2, 3, 4]]), [[0, 0, 0, 0]], policy="all")
    assert at_least(out.close, 4) and out.duration == out.close
    assert not out.erased.any() and out.decodable == (0,)


def test_deadline_closes_at_one_plus_mu_times_the_first_delivery_then_waits() -> None:
    [(out, _)] = wall_and_virtual(Uncoded(4), scaled([[2, 3, 6, 8]]), [[0, 0, 0, 0]], mu=1.0)
    assert at_least(out.close, 4)  # (1 + 1) * 2
    assert list(out.late) == mask(2, 3) and out.waited and out.retransmissions == 0
    assert at_least(out.duration, 8) and out.recovered == ((0, 2), (0, 3))


def test_compute_time_is_measured_and_delays_are_added_to_it() -> None:
    [(out, _)] = wall_and_virtual(
        Uncoded(4), scaled([[1, 1, 1, 1]]), [[3, 0, 0, 5]], policy="all", latency=UNIT
    )
    assert at_least(out.compute[0], 3) and at_least(out.compute[3], 5)
    assert at_least(out.arrival[3], 7) and at_least(out.duration, 7)


def test_deadline_closes_early_when_every_packet_is_in() -> None:
    [(out, _)] = wall_and_virtual(Uncoded(4), scaled([[2, 2.5, 3, 3.5]]), [[0, 0, 0, 0]], mu=1.0)
    assert at_least(out.close, 3.5) and out.close < UNIT * 4 and not out.waited


def test_coded_scheme_waits_only_until_decodable_and_drains_the_rest() -> None:
    # close at 4; worker 2 arrives at 5 and suffices; worker 3 is still computing until 12.
    [(out, _)] = wall_and_virtual(
        FractionalRepetition(), scaled([[2, 3, 5, 1]]), [[0, 0, 0, 12]], mu=1.0
    )
    assert at_least(out.duration, 5) and out.duration < UNIT * 12
    assert out.recovered == ((0, 2),) and list(out.erased) == mask(3)
    assert at_least(out.compute[3], 12)  # drained after the end, so its arrival is known


def test_lost_packet_is_never_delivered_and_is_retransmitted_after_rto() -> None:
    model = scaled([[1, 2, 3, 4]], lost=[mask(1)], relost={(0, 1): [True, False]})
    [(out, _)] = wall_and_virtual(Uncoded(4), model, [[0, 0, 0, 0]], policy="all", rto=2)
    assert at_least(out.close, 4) and at_least(out.duration, 8)  # attempt 2 lands at 4 + 2·2
    assert out.retransmissions == 2 and list(out.lost) == mask(1) and not out.erased.any()


def test_a_lost_straggler_resends_only_after_it_finished() -> None:
    model = scaled([[1, 2, 3, 0]], lost=[mask(3)])
    [(out, _)] = wall_and_virtual(Uncoded(4), model, [[0, 0, 0, 8]], policy="all", rto=1)
    assert at_least(out.close, 3) and out.close < UNIT * 8  # lost: not waited for at the close
    assert at_least(out.duration, 9) and out.retransmissions == 1


def test_parallel_retransmissions_count_attempts_sent_before_the_end() -> None:
    model = scaled([[2, 3, 3.5, 3.8]], lost=[mask(2, 3)], relost={(0, 2): [True, True, False]})
    [(out, _)] = wall_and_virtual(FractionalRepetition(), model, [[0, 0, 0, 0]], mu=1.0, rto=2)
    assert at_least(out.duration, 6) and out.retransmissions == 2
    assert out.recovered == ((0, 3),)


def test_failed_packet_counts_as_lost_and_recovery_asks_for_it_again() -> None:
    asked = []

    def payload(round: int, worker: int) -> None:
        asked.append((round, worker))

    protocol = WallClockProtocol(network(policy="all", rto=1), scaled([[1, 1, 1, 1]]), 4, seed=0)
    source = Results([0, 0, 2, 0], failed=(2,))
    out = protocol.run_wall_round(0, source, Uncoded(4).decoder(), payload)
    assert list(out.lost) == mask(2) and out.recovered == ((0, 2),)
    assert asked[-1] == (0, 2) and asked.count((0, 2)) == 1  # never delivered on first send
    assert at_least(out.duration, 4) and out.retransmissions == 1  # sent at 2 + 1, lands at 4


def test_every_packet_lost_closes_at_once_and_recovers() -> None:
    model = scaled([[1, 2, 3, 4]], lost=[mask(0, 1, 2, 3)])
    [(out, _)] = wall_and_virtual(Uncoded(4), model, [[0, 0, 0, 0]], mu=1.0, rto=2)
    assert out.close < SLACK and at_least(out.duration, 6) and out.retransmissions == 4


def test_late_packet_of_an_earlier_round_is_discarded_and_retransmitted_from_the_close() -> None:
    protocol = WallClockProtocol(network(mu=1.0, rto=2), scaled([[2, 2, 2, 9], [2] * 4]), 4, 0)
    decoder = OneRoundLateDecoder(OneRoundLate(4), None)
    first = protocol.run_wall_round(0, Results([0] * 4), decoder, no_payload)
    assert list(first.erased) == mask(3) and (0, 3) not in decoder.received
    second = protocol.run_wall_round(1, Results([0] * 4), decoder, no_payload)
    assert second.recovered == ((0, 3),) and second.retransmissions == 1
    assert at_least(second.close, 2) and at_least(second.duration, 4)
    assert second.decodable == (0, 1)
    assert protocol.clock == pytest.approx(first.duration + second.duration)


def test_several_rounds_keep_the_virtual_pattern() -> None:
    model = scaled(
        [[1, 2, 7, 3.5], [4, 1, 1, 1], [2, 2, 2, 2]],
        lost=[mask(0), mask(), mask(2, 3)],
        relost={(2, 2): [True, False]},
    )
    pairs = wall_and_virtual(
        FractionalRepetition(), model, [[0, 1, 0, 0], [0, 0, 3, 0], [0, 0, 0, 0]], mu=1.0, rto=2
    )
    assert [list(o.erased) for o, _ in pairs] == [mask(0, 2), mask(0, 2), mask(2)]
    assert pairs[2][0].recovered == ((2, 3),) and pairs[2][0].retransmissions == 2


def test_wait_all_waits_for_every_packet_on_the_wall_clock() -> None:
    # FR, s = 1; close at 4. Round 0: worker 3 alone late, admitted. Round 1: worker 2 lost
    # (resent at 4, lands at 7) and worker 3 late (8): rejected, the round waits for both.
    # Round 2: workers 2, 3 still computing at the close (until 9, 10): waited for too.
    model = scaled([[2, 2.5, 3, 8], [2, 2.5, 3, 8], [2, 2.5, 0, 0]], lost=[mask(), mask(2), mask()])
    compute = [[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 9, 10]]
    pairs = wall_and_virtual(
        FractionalRepetition(), model, compute, mu=1.0, rto=3, recovery="wait_all"
    )
    (first, _), (second, _), (third, _) = pairs
    assert at_least(first.duration, 4) and not first.waited and list(first.erased) == mask(3)
    assert at_least(second.duration, 8) and second.waited and not second.erased.any()
    assert second.recovered == ((1, 2), (1, 3)) and second.retransmissions == 1
    assert at_least(third.duration, 10) and third.waited and third.recovered == ((2, 2), (2, 3))


def test_a_loss_model_that_never_delivers_raises() -> None:
    protocol = WallClockProtocol(network(policy="all"), LosesEverything(), 4, seed=0)
    with pytest.raises(RecoveryError, match="lost 4096 times"):
        protocol.run_wall_round(0, Results([0] * 4), Uncoded(4).decoder(), no_payload)
