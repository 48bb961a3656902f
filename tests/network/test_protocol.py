"""The round protocol on hand-made patterns, one scenario table run under every clock.

Each scenario gives per-round delays, losses, retransmission losses and compute times
(in units), and what the rounds must come to. ``virtual`` runs it as the simulator does
(every result in at the start); ``wall`` runs the wall clock's event-driven driver on a
fake clock, where results come back at their compute times and sleeps only move time,
so the numbers are exact too. A few scenarios also run on the real wall clock, with
``UNIT`` seconds per unit: there a measured time may exceed the modelled one by up to
``SLACK`` (a loaded machine), and everything else must be exact.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import numpy as np
import pytest

from gclab.coding.contract import Scheme, StragglerModel
from gclab.coding.uncoded import Uncoded
from gclab.errors import ConfigError
from gclab.network import (
    Finished,
    NetworkConfig,
    RecoveryError,
    RoundOutcome,
    RoundProtocol,
    VirtualClock,
    WallClock,
)
from gclab.network.base import DelayModel
from gclab.network.clock import ArrivalSource, Clock
from helpers.protocol import (
    FakeTime,
    FractionalRepetition,
    LosesEverything,
    OneRoundLate,
    Scheduled,
    Scripted,
    mask,
    no_payload,
)

UNIT = 0.1  # seconds per unit on the real clock: events in its scenarios are >= 0.5 apart
SLACK = 0.4  # seconds a measured time may exceed the modelled one on a loaded machine
CLOCKS = ("virtual", "wall")
TIMES = ("start", "close", "duration", "compute", "arrival")  # scaled by UNIT on the real clock
MASKS = ("lost", "late", "erased")  # given as the workers they mark


class AdmitsAll(StragglerModel):
    def admits(self, round: int, erased: np.ndarray, decoder: object) -> bool:
        return True

    def settle(self, round: int, erased: np.ndarray, decoder: object) -> None:
        pass


class Careless(Uncoded):
    """Uncoded whose straggler model admits anything: the due job still must decode."""

    def straggler_model(self) -> StragglerModel:
        return AdmitsAll(self)


UNCODED, LATE, CARELESS, FR = (
    partial(Uncoded, 4), partial(OneRoundLate, 4), partial(Careless, 4), FractionalRepetition
)  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    """Rounds on a hand-made pattern (times in units) and what they must come to."""

    id: str
    scheme: Callable[[], Scheme]
    delays: list[list[float]]
    #: Per round: the fields of its :class:`RoundOutcome` that the scenario fixes.
    expect: list[dict[str, object]]
    network: dict[str, object] = field(default_factory=dict)
    compute: list[list[float]] | None = None  # default: 0 for every worker
    lost: list[tuple[int, ...]] | None = None
    relost: dict[tuple[int, int], list[bool]] | None = None
    failed: list[tuple[int, ...]] | None = None
    #: The protocol's totals after the last round: clock, waits, retransmissions.
    totals: dict[str, float] = field(default_factory=dict)


SCENARIOS = [
    Scenario(
        "policy_all_waits_for_every_packet_that_is_not_lost", UNCODED, [[1, 2, 3, 4]],
        [dict(close=4, duration=4, retransmissions=0, waited=False, erased=(), decodable=(0,))],
        network=dict(policy="all"),
    ),
    Scenario(
        "compute_time_and_latency_add_to_the_delay", UNCODED, [[1, 2, 3, 1]],
        [dict(compute=[0.5, 0, 0, 3], arrival=[1.75, 2.25, 3.25, 4.25], duration=4.25)],
        network=dict(policy="all", latency=0.25), compute=[[0.5, 0, 0, 3]],
    ),
    Scenario(
        "deadline_closes_at_one_plus_mu_times_the_fastest_then_waits", UNCODED, [[1, 1.5, 3, 4]],
        [dict(close=2, late=(2, 3), waited=True, retransmissions=0, duration=4,
              recovered=((0, 2), (0, 3)), erased=())],
        network=dict(mu=1.0),
    ),
    Scenario(
        "deadline_closes_early_when_every_packet_is_in", UNCODED, [[1, 1.2, 1.5, 1.9]],
        [dict(close=1.9, duration=1.9, waited=False)], network=dict(mu=1.0),
    ),
    Scenario(
        "coded_scheme_waits_only_until_decodable", FR, [[1, 1.5, 2.5, 4]],
        [dict(close=2, duration=2.5, waited=True, recovered=((0, 2),), erased=(3,),
              decodable=(0,))],
        network=dict(mu=1.0),
    ),
    Scenario(  # worker 3 computes until 11, long after the end: drained, its arrival known
        "results_after_the_end_are_drained", FR, [[1, 1.5, 2.5, 1]],
        [dict(close=2, duration=2.5, recovered=((0, 2),), erased=(3,), compute=[0, 0, 0, 11],
              arrival=[1, 1.5, 2.5, 12])],
        network=dict(mu=1.0), compute=[[0, 0, 0, 11]],
    ),
    Scenario(
        "tolerated_erasure_needs_no_recovery", FR, [[1, 1.5, 2, 4]],
        [dict(close=2, duration=2, waited=False, retransmissions=0, erased=(3,), late=(3,))],
        network=dict(mu=1.0),
    ),
    Scenario(  # close at 4; attempt 1 lost, attempt 2 arrives at 4 + 2
        "lost_packet_is_retransmitted_until_it_gets_through", UNCODED, [[1, 2, 3, 4]],
        [dict(close=4, duration=6, retransmissions=2, waited=False, lost=(1,), erased=())],
        network=dict(policy="all", rto=1.0), lost=[(1,)], relost={(0, 1): [True, False]},
        totals=dict(retransmissions=2, waits=0),
    ),
    Scenario(  # worker 3 finishes at 8 and would arrive at 10: it resends then, not at 3
        "a_lost_straggler_resends_only_after_it_finished", UNCODED, [[1, 2, 3, 2]],
        [dict(close=3, duration=10.5, retransmissions=1, arrival=[1, 2, 3, 10])],
        network=dict(policy="all", rto=0.5), lost=[(3,)], compute=[[0, 0, 0, 8]],
    ),
    Scenario(  # 2, 3 lost; 3 gets through at 3, when 2's second attempt would be sent
        "parallel_retransmissions_count_attempts_sent_before_the_end", FR,
        [[1, 1.5, 1.8, 1.9]],
        [dict(close=2, duration=3, retransmissions=2, waited=False, recovered=((0, 3),),
              erased=(2,))],
        network=dict(mu=1.0, rto=1.0), lost=[(2, 3)], relost={(0, 2): [True, True, False]},
    ),
    Scenario(  # worker 3 late (arrives 5), worker 2 lost (its retransmission arrives 2 + 1)
        "waiting_and_retransmitting_together", UNCODED, [[1, 1.5, 1.8, 5]],
        [dict(duration=5, waited=True, retransmissions=1, recovered=((0, 2), (0, 3)))],
        network=dict(mu=1.0, rto=1.0), lost=[(2,)],
    ),
    Scenario(
        "every_packet_lost_closes_at_zero_and_recovers", UNCODED, [[1, 2, 3, 4]],
        [dict(close=0, duration=5, retransmissions=4)],
        network=dict(mu=1.0, rto=1.0), lost=[(0, 1, 2, 3)],
    ),
    Scenario(  # failed at 2 (known then): lost; resent at max(close, 3), delivered at 4
        "a_failed_packet_counts_as_lost_and_is_recovered", UNCODED, [[1, 1, 1, 1]],
        [dict(close=1, duration=4, lost=(2,), recovered=((0, 2),), retransmissions=1)],
        network=dict(policy="all", rto=1.0), compute=[[0, 0, 2, 0]], failed=[(2,)],
    ),
    Scenario(
        "the_clock_sums_durations", UNCODED, [[1, 2, 3, 4], [2, 2, 2, 2], [0, 0, 0, 7]],
        [dict(start=0, duration=4), dict(start=4, duration=2), dict(start=6, duration=7)],
        network=dict(policy="all"), totals=dict(clock=13),
    ),
    Scenario(  # job 0 is due in round 1: its late packet (0, 3) is resent from that close
        "late_packet_of_an_earlier_round_is_discarded_and_retransmitted", LATE,
        [[1, 1, 1, 9], [1, 1, 1, 1]],
        [dict(duration=2, erased=(3,), waited=False),
         dict(close=1, duration=2, recovered=((0, 3),), retransmissions=1, waited=False,
              decodable=(0, 1))],
        network=dict(mu=1.0, rto=1.0),
    ),
    Scenario(
        "several_rounds_with_losses", FR,
        [[1, 2, 7, 3.5], [4, 1, 1, 1], [2, 2, 2, 2]],
        [dict(erased=(0, 2)), dict(erased=(0, 2)),
         dict(erased=(2,), recovered=((2, 3),), retransmissions=2)],
        network=dict(mu=1.0, rto=2.0), compute=[[0, 1, 0, 0], [0, 0, 3, 0], [0, 0, 0, 0]],
        lost=[(0,), (), (2, 3)], relost={(2, 2): [True, False]},
    ),
    Scenario(  # s = 1: one late packet fits the straggler model
        "wait_all_closes_on_time_when_the_model_admits_the_stragglers", FR,
        [[1, 1.5, 2, 4]],
        [dict(close=2, duration=2, waited=False, erased=(3,), late=(3,))],
        network=dict(recovery="wait_all"),
    ),
    Scenario(  # two late packets exceed s = 1 (decodable stops at 2.5, the scenario above)
        "wait_all_waits_for_every_packet_when_the_model_rejects_the_stragglers",
        FR, [[1, 1.5, 2.5, 4]],
        [dict(duration=4, waited=True, erased=(), recovered=((0, 2), (0, 3)), late=(2, 3))],
        network=dict(recovery="wait_all"),
    ),
    Scenario(  # worker 0 lost (attempts at 3 and 4, the second lands at 5), worker 3 late
        "wait_all_retransmits_lost_packets_too", FR, [[1, 1.5, 1.8, 4]],
        [dict(close=3, duration=5, retransmissions=2, waited=True, erased=())],
        network=dict(rto=1.0, recovery="wait_all"), lost=[(0,)],
        relost={(0, 0): [True, False]},
    ),
    Scenario(  # the model (<= s erasures), not decodability, decides: 1, 2 already decode
        "decodable_does_not_wait_where_wait_all_does", FR, [[1, 1.5, 1.8, 4]],
        [dict(duration=3, retransmissions=0, erased=(0, 3))],
        network=dict(rto=1.0), lost=[(0,)], relost={(0, 0): [True, False]},
    ),
    Scenario(  # T = 1, job t needs all of round t: the model rejects round 0's straggler
        "wait_all_waits_in_the_round_a_window_predicate_fails", LATE,
        [[1, 1, 1, 9], [1, 1, 1, 1]],
        [dict(duration=9, waited=True, decodable=(0,)), dict(duration=1, retransmissions=0)],
        network=dict(mu=1.0, recovery="wait_all"), totals=dict(waits=1),
    ),
    Scenario(
        "wait_all_recovers_a_due_job_its_model_let_down", CARELESS, [[1, 1.5, 3, 4]],
        [dict(close=2, duration=4, waited=True, recovered=((0, 2), (0, 3)))],
        network=dict(recovery="wait_all"),
    ),
    Scenario(  # round 1: 2 lost (resent at 4, lands at 7), 3 late (8): rejected, waits for
        # both. Round 2: 2, 3 still computing at the close (until 9, 10): waited for too.
        "wait_all_over_several_rounds", FR,
        [[2, 2.5, 3, 8], [2, 2.5, 3, 8], [2, 2.5, 0, 0]],
        [dict(duration=4, waited=False, erased=(3,)),
         dict(duration=8, waited=True, erased=(), recovered=((1, 2), (1, 3)), retransmissions=1),
         dict(duration=10, waited=True, recovered=((2, 2), (2, 3)))],
        network=dict(mu=1.0, rto=3.0, recovery="wait_all"),
        compute=[[0, 0, 0, 0], [0, 0, 0, 0], [0, 0, 9, 10]], lost=[(), (2,), ()],
    ),
]  # fmt: skip


def clock_of(name: str, fake: FakeTime) -> Clock:
    """``virtual``, ``wall`` on the fake time, or ``real``: the wall clock on real time."""
    if name == "wall":
        return partial(WallClock, monotonic=fake.monotonic, sleep=fake.sleep)
    return VirtualClock if name == "virtual" else WallClock


def results(
    name: str, fake: FakeTime, compute: list[float], failed: tuple[int, ...] = ()
) -> ArrivalSource:
    """A round's results for the clock ``name``: all in at once, or coming back over time."""
    if name == "virtual":
        return Finished(np.array(compute), np.array(mask(*failed, n=len(compute))))
    if name == "wall":
        fake.now = 0.0  # each round's times are exact: no drift from earlier rounds
        return Scheduled(compute, failed, fake.monotonic, fake.sleep)
    return Scheduled(compute, failed)


def play(s: Scenario, clock: str, unit: float = 1.0) -> tuple[RoundProtocol, list[RoundOutcome]]:
    """Run ``s`` on ``clock`` with ``unit`` seconds per unit, decoding what each round makes
    decodable."""
    scheme, fake = s.scheme(), FakeTime()
    lost = [mask(*(s.lost[r] if s.lost else ()), n=scheme.n) for r in range(len(s.delays))]
    model = Scripted([[unit * d for d in row] for row in s.delays], lost, s.relost)
    network = {k: unit * v if k in ("rto", "latency") else v for k, v in s.network.items()}
    protocol = RoundProtocol(
        NetworkConfig(**network), model, scheme.n, seed=0, clock=clock_of(clock, fake)
    )
    decoder = scheme.decoder()
    outcomes = []
    for r in range(len(s.delays)):
        compute = [unit * c for c in (s.compute[r] if s.compute else [0.0] * scheme.n)]
        source = results(clock, fake, compute, s.failed[r] if s.failed else ())
        out = protocol.run_round(r, source, decoder, no_payload)
        for job in out.decodable:
            decoder.decode(job)
        outcomes.append(out)
    return protocol, outcomes


def check(actual: object, expected: object, key: str, unit: float) -> None:
    if key in MASKS:
        assert list(actual) == mask(*expected), key  # type: ignore[call-overload, misc]
    elif key in TIMES and unit == 1.0:
        np.testing.assert_allclose(actual, expected, rtol=1e-12, atol=1e-12, err_msg=key)
    elif key in TIMES:  # the real clock: measured, at least the modelled time
        modelled = unit * np.asarray(expected, dtype=float)
        assert np.all(actual >= modelled - 1e-9), (key, actual, modelled)
        assert np.all(actual <= modelled + SLACK), (key, actual, modelled)
    else:
        assert actual == expected, key


@pytest.mark.parametrize("clock", CLOCKS)
@pytest.mark.parametrize("s", SCENARIOS, ids=[s.id for s in SCENARIOS])
def test_scenario(s: Scenario, clock: str) -> None:
    protocol, outcomes = play(s, clock)
    assert len(s.expect) == len(outcomes)
    for out, expected in zip(outcomes, s.expect):
        for key, value in expected.items():
            check(getattr(out, key), value, key, 1.0)
    for key, value in s.totals.items():
        assert getattr(protocol, key) == pytest.approx(value), key
    assert protocol.clock == pytest.approx(sum(o.duration for o in outcomes))


REAL = [
    s
    for s in SCENARIOS
    if s.id
    in ("results_after_the_end_are_drained", "a_failed_packet_counts_as_lost_and_is_recovered")
]


@pytest.mark.parametrize("s", REAL, ids=[s.id for s in REAL])
def test_scenario_on_the_real_wall_clock(s: Scenario) -> None:
    """The wall clock really waits: measured times are the modelled ones, plus noise."""
    _, outcomes = play(s, "real", UNIT)
    _, virtual = play(s, "virtual")
    for out, ref, expected in zip(outcomes, virtual, s.expect):
        for key, value in expected.items():
            check(getattr(out, key), value, key, UNIT)
        for key in ("lost", "late", "erased"):
            assert list(getattr(out, key)) == list(getattr(ref, key)), key
        for key in ("recovered", "retransmissions", "waited", "decodable"):
            assert getattr(out, key) == getattr(ref, key), key


@pytest.mark.parametrize("clock", CLOCKS)
def test_payload_comes_with_each_packet_and_a_failed_one_is_asked_for_again(clock: str) -> None:
    fake, asked = FakeTime(), []

    def payload(round: int, worker: int) -> np.ndarray:
        asked.append((round, worker))
        return np.full(3, float(worker + 1))

    network = NetworkConfig(policy="all")
    protocol = RoundProtocol(network, Scripted([[1, 1]]), 2, 0, clock=clock_of(clock, fake))
    decoder = Uncoded(2).decoder(grad_size=3)
    out = protocol.run_round(0, results(clock, fake, [0.0, 0.0], failed=(1,)), decoder, payload)
    assert out.decodable == (0,) and out.recovered == ((0, 1),)
    assert asked == [(0, 0), (0, 1)]  # the failed packet once, when recovery resends it
    np.testing.assert_allclose(decoder.decode(0), [3.0, 3.0, 3.0])


@pytest.mark.parametrize("clock", CLOCKS)
def test_a_loss_model_that_never_delivers_raises(clock: str) -> None:
    fake = FakeTime()
    timer = clock_of(clock, fake)
    protocol = RoundProtocol(NetworkConfig(policy="all"), LosesEverything(), 4, 0, clock=timer)
    with pytest.raises(RecoveryError, match="lost 4096 times"):
        protocol.run_round(0, results(clock, fake, [0.0] * 4), Uncoded(4).decoder(), no_payload)


def test_the_clock_follows_network_clock() -> None:
    assert RoundProtocol(NetworkConfig(), DelayModel(), 4, 0).timer is VirtualClock
    assert RoundProtocol(NetworkConfig(clock="wall"), DelayModel(), 4, 0).timer is WallClock


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("mu", -1.0, "^mu=-1.0 is invalid"),
        ("latency", float("nan"), "^latency=nan is invalid"),
        ("rto", 0.0, "^rto=0.0 is invalid: it must be a finite number > 0"),
    ],
)
def test_bad_network_config(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NetworkConfig(**{field: value})


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("policy", "first", "'first' is not a valid Policy"),
        ("clock", "bogus", "'bogus' is not a valid ClockName"),
        ("recovery", "sometimes", "'sometimes' is not a valid Recovery"),
    ],
)
def test_a_choice_outside_its_enum_is_refused(field: str, value: str, message: str) -> None:
    """From the config it fails at compose time (tests/test_config_keys.py); in code, here."""
    with pytest.raises(ValueError, match=message):
        NetworkConfig(**{field: value})


def test_bad_protocol_arguments() -> None:
    with pytest.raises(ConfigError, match=r"^n=0 is invalid"):
        RoundProtocol(NetworkConfig(), DelayModel(), 0, seed=0)
    with pytest.raises(ConfigError, match="seed=-1"):
        RoundProtocol(NetworkConfig(), DelayModel(), 4, seed=-1)
    with pytest.raises(ValueError, match="compute times must be finite and >= 0"):
        Finished(np.array([0.0, -1.0, 0.0, 0.0]))
    protocol = RoundProtocol(NetworkConfig(), DelayModel(), 4, seed=0)
    with pytest.raises(ValueError, match=r"no result from workers \[3\], none pending"):
        protocol.run_round(0, Finished(np.zeros(3)), Uncoded(4).decoder(), no_payload)
