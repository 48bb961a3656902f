"""Round protocol on hand-made arrival/loss patterns: exact durations, waits, retransmissions."""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding.base import StragglerModel
from gclab.coding.uncoded import Uncoded
from gclab.errors import ConfigError
from gclab.network import NetworkConfig, RecoveryError, RoundProtocol
from gclab.network.base import DelayModel
from helpers.protocol import (
    FractionalRepetition,
    LosesEverything,
    OneRoundLate,
    OneRoundLateDecoder,
    Scripted,
    mask,
    no_payload,
    run,
)


def test_all_waits_for_every_packet_that_is_not_lost() -> None:
    _, [out] = run(Uncoded(4), Scripted([[1, 2, 3, 4]]), policy="all")
    assert out.duration == 4 and out.close == 4
    assert out.retransmissions == 0 and not out.waited
    assert not out.erased.any() and out.decodable == (0,)


def test_compute_time_and_latency_add_to_the_delay() -> None:
    _, [out] = run(Uncoded(4), Scripted([[1, 2, 3, 4]]), compute=0.5, policy="all", latency=0.25)
    assert out.duration == pytest.approx(4.75)
    np.testing.assert_allclose(out.arrival, [1.75, 2.75, 3.75, 4.75])


def test_deadline_closes_at_one_plus_mu_times_the_fastest_then_waits() -> None:
    _, [out] = run(Uncoded(4), Scripted([[1, 1.5, 3, 4]]), policy="deadline", mu=1.0)
    assert out.close == 2.0
    assert list(out.late) == mask(2, 3)
    assert out.waited and out.retransmissions == 0
    assert out.duration == 4.0  # uncoded needs every packet: it waits for the last one
    assert out.recovered == ((0, 2), (0, 3)) and not out.erased.any()


def test_deadline_closes_early_when_every_packet_is_in() -> None:
    _, [out] = run(Uncoded(4), Scripted([[1, 1.2, 1.5, 1.9]]), policy="deadline", mu=1.0)
    assert out.close == out.duration == 1.9 and not out.waited


def test_coded_scheme_waits_only_until_decodable() -> None:
    # close at 2 with workers 0, 1 (group 0); worker 2 (group 1) arrives at 2.5 and suffices.
    _, [out] = run(FractionalRepetition(), Scripted([[1, 1.5, 2.5, 4]]), mu=1.0)
    assert out.close == 2.0 and out.duration == 2.5
    assert out.waited and out.recovered == ((0, 2),)
    assert list(out.erased) == mask(3) and out.decodable == (0,)


def test_tolerated_erasure_needs_no_recovery() -> None:
    _, [out] = run(FractionalRepetition(), Scripted([[1, 1.5, 2, 4]]), mu=1.0)
    assert out.duration == 2.0 and not out.waited and out.retransmissions == 0
    assert list(out.erased) == list(out.late) == mask(3)


def test_lost_packet_is_retransmitted_until_it_gets_through() -> None:
    # worker 1 lost; close at 4 (last packet not lost); attempt 1 lost, attempt 2 arrives at 4+2.
    model = Scripted([[1, 2, 3, 4]], lost=[mask(1)], relost={(0, 1): [True, False]})
    protocol, [out] = run(Uncoded(4), model, policy="all", rto=1.0)
    assert out.close == 4 and out.duration == 6
    assert out.retransmissions == 2 and not out.waited
    assert list(out.lost) == mask(1) and not out.erased.any()
    assert protocol.retransmissions == 2 and protocol.waits == 0


def test_a_lost_straggler_resends_only_after_it_finished() -> None:
    # worker 3 would arrive at 10: its retransmission leaves at 10, not at the close (3).
    model = Scripted([[1, 2, 3, 10]], lost=[mask(3)])
    _, [out] = run(Uncoded(4), model, policy="all", rto=0.5)
    assert out.close == 3 and out.duration == 10.5 and out.retransmissions == 1


def test_parallel_retransmissions_count_attempts_sent_before_the_end() -> None:
    # FR: workers 2 and 3 (group 1) lost; either suffices. Worker 3 gets through on attempt 1
    # (arrives at 3); worker 2's second attempt would be sent at 3, when the round ends.
    model = Scripted([[1, 1.5, 1.8, 1.9]], lost=[mask(2, 3)], relost={(0, 2): [True, True, False]})
    _, [out] = run(FractionalRepetition(), model, mu=1.0, rto=1.0)
    assert out.close == 2.0 and out.duration == 3.0
    assert out.retransmissions == 2 and not out.waited
    assert out.recovered == ((0, 3),) and list(out.erased) == mask(2)


def test_waiting_and_retransmitting_together() -> None:
    # uncoded: worker 3 late (arrives 5), worker 2 lost (retransmission arrives 2+1).
    model = Scripted([[1, 1.5, 1.8, 5]], lost=[mask(2)])
    _, [out] = run(Uncoded(4), model, mu=1.0, rto=1.0)
    assert out.duration == 5 and out.waited and out.retransmissions == 1
    assert out.recovered == ((0, 2), (0, 3))


def test_every_packet_lost_closes_at_zero_and_recovers() -> None:
    model = Scripted([[1, 2, 3, 4]], lost=[mask(0, 1, 2, 3)])
    _, [out] = run(Uncoded(4), model, mu=1.0, rto=1.0)
    assert out.close == 0 and out.duration == 5 and out.retransmissions == 4


def test_virtual_clock_sums_durations() -> None:
    protocol, outs = run(
        Uncoded(4), Scripted([[1, 2, 3, 4], [2, 2, 2, 2], [0, 0, 0, 7]]), rounds=3, policy="all"
    )
    assert [o.start for o in outs] == [0, 4, 6]
    assert protocol.clock == 13


def test_loss_model_that_never_delivers_raises() -> None:
    with pytest.raises(RecoveryError, match="lost 4096 times"):
        run(Uncoded(4), LosesEverything(), policy="all")


def test_late_packet_of_an_earlier_round_is_discarded_and_retransmitted() -> None:
    # Round 0: worker 3 late (not due yet: T=1), discarded. Round 1 (close 2) is where
    # job 0 is due: the packet (0, 3) is retransmitted from the close and arrives at 3.
    scheme = OneRoundLate(4)
    model = Scripted([[1, 1, 1, 9], [1, 1, 1, 1]])
    protocol = RoundProtocol(NetworkConfig(mu=1.0, rto=1.0), model, 4, seed=0)
    decoder = OneRoundLateDecoder(scheme, None)
    first = protocol.run_round(0, np.zeros(4), decoder, no_payload)
    assert first.duration == 2.0 and list(first.erased) == mask(3) and not first.waited
    assert (0, 3) not in decoder.received
    second = protocol.run_round(1, np.zeros(4), decoder, no_payload)
    assert second.close == 1.0 and second.duration == 2.0
    assert second.recovered == ((0, 3),) and second.retransmissions == 1
    assert not second.waited and second.decodable == (0, 1)


def test_wait_all_closes_on_time_when_the_model_admits_the_stragglers() -> None:
    # s = 1: one late packet (worker 3) fits the model, the round closes at 2·fastest.
    _, [out] = run(FractionalRepetition(), Scripted([[1, 1.5, 2, 4]]), recovery="wait_all")
    assert out.duration == out.close == 2.0 and not out.waited
    assert list(out.erased) == list(out.late) == mask(3)


def test_wait_all_waits_for_every_packet_when_the_model_rejects_the_stragglers() -> None:
    # Two late packets exceed s = 1: the papers' master waits for the slowest (4), where
    # gclab's decodable rule stops at 2.5 (worker 2 completes group 1).
    model = Scripted([[1, 1.5, 2.5, 4]])
    _, [papers] = run(FractionalRepetition(), model, recovery="wait_all")
    _, [gclab] = run(FractionalRepetition(), model)
    assert papers.duration == 4.0 and papers.waited and not papers.erased.any()
    assert papers.recovered == ((0, 2), (0, 3)) and list(papers.late) == mask(2, 3)
    assert gclab.duration == 2.5


def test_wait_all_retransmits_lost_packets_too() -> None:
    # worker 0 lost (attempts at 3 and 4, the second gets through at 5), worker 3 late (4).
    model = Scripted([[1, 1.5, 1.8, 4]], lost=[mask(0)], relost={(0, 0): [True, False]})
    _, [papers] = run(FractionalRepetition(), model, rto=1.0, recovery="wait_all")
    assert papers.close == 3.0 and papers.duration == 5.0
    assert papers.retransmissions == 2 and papers.waited and not papers.erased.any()
    # the model (≤ s erasures), not decodability, decides: workers 1, 2 already decode
    _, [gclab] = run(FractionalRepetition(), model, rto=1.0)
    assert gclab.duration == 3.0 and gclab.retransmissions == 0
    assert list(gclab.erased) == mask(0, 3)


def test_wait_all_waits_in_the_round_a_window_predicate_fails() -> None:
    # T = 1, job t needs every packet of round t: its model rejects round 0's straggler
    # at once, so round 0 waits for it (9) instead of retransmitting it in round 1.
    model = Scripted([[1, 1, 1, 9], [1, 1, 1, 1]])
    protocol = RoundProtocol(NetworkConfig(mu=1.0, recovery="wait_all"), model, 4, seed=0)
    decoder = OneRoundLateDecoder(OneRoundLate(4), None)
    first = protocol.run_round(0, np.zeros(4), decoder, no_payload)
    assert first.duration == 9.0 and first.waited and first.decodable == (0,)
    decoder.decode(0)
    second = protocol.run_round(1, np.zeros(4), decoder, no_payload)
    assert second.duration == 1.0 and second.retransmissions == 0 and protocol.waits == 1


class AdmitsAll(StragglerModel):
    def admits(self, round: int, erased: np.ndarray, decoder: object) -> bool:
        return True

    def settle(self, round: int, erased: np.ndarray, decoder: object) -> None:
        pass


class Careless(Uncoded):
    """Uncoded whose straggler model admits anything: the due job still must decode."""

    def straggler_model(self) -> StragglerModel:
        return AdmitsAll(self)


def test_wait_all_recovers_a_due_job_its_model_let_down() -> None:
    _, [out] = run(Careless(4), Scripted([[1, 1.5, 3, 4]]), recovery="wait_all")
    assert out.close == 2.0 and out.duration == 4.0 and out.waited  # the decodable rule
    assert out.recovered == ((0, 2), (0, 3))


def test_payload_is_delivered_with_each_packet() -> None:
    scheme = Uncoded(2)
    decoder = scheme.decoder(grad_size=3)
    protocol = RoundProtocol(NetworkConfig(policy="all"), Scripted([[1, 2]]), 2, seed=0)
    out = protocol.run_round(0, np.zeros(2), decoder, lambda r, w: np.full(3, float(w + 1)))
    assert out.decodable == (0,)
    np.testing.assert_allclose(decoder.decode(0), [3.0, 3.0, 3.0])


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("policy", "first", "network.policy='first' is invalid"),
        ("mu", -1.0, "network.mu=-1.0 is invalid"),
        ("latency", float("nan"), "network.latency=nan is invalid"),
        ("rto", 0.0, "network.rto=0.0 is invalid: it must be a finite number > 0"),
        ("clock", "bogus", "network.clock='bogus' is invalid: it must be one of virtual, wall"),
        (
            "recovery",
            "sometimes",
            "network.recovery='sometimes' is invalid: it must be one of decodable, wait_all",
        ),
    ],
)
def test_bad_network_config(field: str, value: object, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        NetworkConfig(**{field: value})


def test_bad_protocol_arguments() -> None:
    with pytest.raises(ConfigError, match=r"cluster\.workers=0"):
        RoundProtocol(NetworkConfig(), DelayModel(), 0, seed=0)
    with pytest.raises(ConfigError, match="seed=-1"):
        RoundProtocol(NetworkConfig(), DelayModel(), 4, seed=-1)
    protocol = RoundProtocol(NetworkConfig(), DelayModel(), 4, seed=0)
    with pytest.raises(ValueError, match="compute_times must be 4"):
        protocol.run_round(0, np.zeros(3), Uncoded(4).decoder(), no_payload)
