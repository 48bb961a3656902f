"""SR-SGC and M-SGC: straggler model, dynamic plans, loads, decoding of admitted patterns."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from gclab.coding.contract import Task
from gclab.coding.m_sgc import MSGC
from gclab.coding.sgc import bursty_model
from gclab.coding.sr_sgc import SRSGC
from gclab.errors import ConfigError
from gclab.network import NetworkConfig
from gclab.network.straggler import Straggler
from gclab.sim.engine import simulate
from helpers.sequential import job_partials, real_run, run_stream, symbolic_decode_rounds


def admitted_sequences(n: int, rounds: int, B: int, W: int, lam: int) -> list[np.ndarray]:
    """Every erasure sequence of ``rounds`` rounds whose every window fits the model."""
    rows = [np.array(bits, dtype=bool) for bits in itertools.product([False, True], repeat=n)]
    found: list[np.ndarray] = []

    def extend(prefix: list[np.ndarray]) -> None:
        if len(prefix) == rounds:
            found.append(np.array(prefix))
            return
        for row in rows:
            if bursty_model(np.array([*prefix[-(W - 1) :], row]), B, W, lam):
                extend([*prefix, row])

    extend([])
    return found


CASES = [(4, 1, 2, 1, 6), (3, 1, 3, 2, 6), (4, 1, 3, 1, 7), (3, 2, 3, 1, 7), (3, 2, 5, 2, 7)]


@pytest.mark.parametrize("cls", [SRSGC, MSGC], ids=["sr_sgc", "m_sgc"])
@pytest.mark.parametrize("n, B, W, lam, rounds", CASES)
def test_every_admitted_sequence_decodes_every_job_by_its_deadline(
    cls, n: int, B: int, W: int, lam: int, rounds: int
) -> None:
    scheme = cls(n, B, W, lam)
    sequences = admitted_sequences(n, rounds, B, W, lam)
    assert len(sequences) > 100
    for erased in sequences:
        decoder = scheme.decoder()
        done: set[int] = set()
        for r in range(rounds):
            decoder.begin_round(r)
            for w in np.flatnonzero(~erased[r]).tolist():
                decoder.receive(r, w, None)
            for job in decoder.decodable():
                decoder.decode(job)
                done.add(job)
            due = r - scheme.T
            assert due < 0 or due in done, (due, erased.astype(int))


@pytest.mark.parametrize("make", [lambda: SRSGC(4, 1, 2, 2), lambda: MSGC(4, 2, 3, 2)])
def test_real_payloads_decode_exactly_on_admitted_and_on_violating_patterns(make) -> None:
    scheme = make()
    rng = np.random.default_rng(4)
    rounds = 200
    admitted = np.zeros((rounds, scheme.n), dtype=bool)
    for r in range(rounds):  # grow an admitted sequence greedily from random candidates
        row = rng.random(scheme.n) < 0.3
        if bursty_model(np.vstack([admitted[max(0, r - scheme.W + 1) : r], row]), *_bwl(scheme)):
            admitted[r] = row
    jobs = rounds - scheme.T
    run = run_stream(scheme, admitted, job_partials(scheme, jobs, 3, seed=5))
    assert sorted(run.decoded_at) == list(range(jobs)) and max(run.errors) <= 1e-9
    assert not any(run.recovered.values())  # the model holds: no job needs recovery
    assert all(run.decoded_at[t] <= t + scheme.T for t in range(jobs))
    heavy = rng.random((rounds, scheme.n)) < 0.5  # violates the model all the time
    run = run_stream(scheme, heavy, job_partials(scheme, jobs, 3, seed=6))
    assert sorted(run.decoded_at) == list(range(jobs)) and max(run.errors) <= 1e-9
    assert any(run.recovered.values())


def _bwl(scheme) -> tuple[int, int, int]:
    return scheme.B, scheme.W, scheme.lam


def test_bursty_model_predicate() -> None:
    ok = np.zeros((4, 4), dtype=bool)
    ok[0, 0] = ok[1, 0] = True  # one burst of 2
    assert bursty_model(ok, 2, 3, 1) and not bursty_model(ok, 1, 3, 1)
    gap = np.zeros((3, 3), dtype=bool)
    gap[0, 1] = gap[2, 1] = True  # two bursts inside one window of W = 3
    assert not bursty_model(gap, 1, 3, 2) and bursty_model(gap, 1, 2, 2)
    many = np.zeros((2, 5), dtype=bool)
    many[0, :2] = many[1, 2] = True  # 3 distinct stragglers in a window of 2
    assert not bursty_model(many, 1, 2, 2) and bursty_model(many, 1, 2, 3)
    scheme = SRSGC(5, 1, 2, 3)
    assert scheme.tolerates(many) and scheme.tolerates(many[0])


def test_sr_sgc_repeats_the_missed_job_b_rounds_later() -> None:
    scheme = SRSGC(4, 1, 2, 2)  # s = ceil(2/2) = 1, T = B = 1
    assert (scheme.s, scheme.T, scheme.load) == (1, 1, 0.5)
    decoder = scheme.decoder()
    decoder.begin_round(0)
    for w in (2, 3):  # workers 0 and 1 straggle in round 0: v = 2 > s
        decoder.receive(0, w, None)
    assert decoder.decodable() == []
    assert decoder.wanted(0) == [(0, 0), (0, 1)]  # round 1 has not begun: no repeat yet
    decoder.begin_round(1)
    plan = decoder.plan(1)
    assert [t.job for t in plan[0]] == [0, 0] and [t.job for t in plan[1]] == [1, 1]
    assert decoder.wanted(0) == [(0, 0), (0, 1), (1, 0)]
    decoder.receive(1, 0, None)
    assert decoder.decodable() == [0]  # rounds 0 and 1 give 3 = n - s distinct results


def test_sr_sgc_repeaters_are_first_the_workers_that_never_computed_the_job() -> None:
    scheme = SRSGC(6, 1, 2, 4)  # s = 2
    decoder = scheme.decoder()
    decoder.begin_round(0)
    decoder.receive(0, 5, None)  # 5 stragglers in round 0: v = 5, 3 repeat job 0 in round 1
    decoder.begin_round(1)
    assert [plan[0].job for plan in decoder.plan(1)] == [0, 0, 0, 1, 1, 1]
    decoder.receive(1, 4, None)  # round 1: workers 0-2 (job 0) and 3, 5 (job 1) lost
    # job 1: 3 never computed it, 2 lost it -> v = 5; repeaters 0, 1, 2 first
    decoder.begin_round(2)
    assert [plan[0].job for plan in decoder.plan(2)] == [1, 1, 1, 2, 2, 2]


def test_m_sgc_redoes_a_failed_d1_chunk_instead_of_its_d2_group() -> None:
    scheme = MSGC(4, 1, 2, 1)  # T = 1: slot 0 = D1 chunk 0, slot 1 = D2 group 0 (λ = 1)
    decoder = scheme.decoder()
    decoder.begin_round(0)
    for w in (0, 1, 3):  # worker 2 straggles in round 0
        decoder.receive(0, w, None)
    decoder.begin_round(1)
    plan = decoder.plan(1)
    slot1 = {w: [t for t in plan[w] if t.job == 0] for w in range(4)}
    assert slot1[2] == [Task(0, scheme.part(2, 0))]  # redo chunk (0, 2)
    assert [t.part for t in slot1[0]] == [scheme.part(i, 1) for i in scheme.placement[0]]
    for w in range(4):
        decoder.receive(1, w, None)
    assert decoder.decodable() == [0]  # job 1's D2 group runs in round 2


def test_m_sgc_parts_tile_every_shard_and_placement_holds_only_touched_shards() -> None:
    for scheme in (MSGC(6, 2, 4, 2), MSGC(5, 1, 3, 5), MSGC(7, 3, 5, 0)):
        for shard in range(scheme.n):
            pieces = [p for p in scheme.parts if p.shard == shard]
            assert pieces[0].lo == 0.0 and pieces[-1].hi == 1.0
            assert all(a.hi == b.lo and a.lo < a.hi for a, b in itertools.pairwise(pieces))
        decoder = scheme.decoder()
        for r in range(3 * (scheme.T + 1)):
            decoder.begin_round(r)
            for w, tasks in enumerate(decoder.plan(r)):
                assert {scheme.parts[t.part].shard for t in tasks} <= set(scheme.placement[w])
                steady = r >= scheme.T
                work = sum(scheme.parts[t.part].hi - scheme.parts[t.part].lo for t in tasks)
                if steady:
                    assert work / scheme.n == pytest.approx(scheme.load)


@pytest.mark.parametrize(
    "make, s, load",
    [
        (lambda: MSGC(256, 1, 2, 27), 27, 0.007543),
        (lambda: MSGC(256, 1, 2, 9), 9, 0.007102),
        (lambda: SRSGC(256, 2, 3, 23), 12, 0.050781),
        (lambda: SRSGC(256, 1, 2, 6), 3, 0.015625),
    ],
)
def test_loads_match_reference_vector_10(make, s: int, load: float) -> None:
    scheme = make()
    assert scheme.s == s and round(scheme.load, 6) == load
    assert MSGC(8, 1, 3, 8).load == pytest.approx((3 - 1 + 1) / (8 * 2))  # λ = n: all D1


@pytest.mark.parametrize("make", [lambda: SRSGC(6, 1, 3, 3), lambda: MSGC(6, 1, 3, 2)])
def test_symbolic_and_real_agree_through_the_protocol_with_stragglers(make) -> None:
    scheme = make()
    delay = Straggler(0.5, 1.0)
    network = NetworkConfig(policy="deadline", mu=1.0)
    durations, decoded_at, worst = real_run(scheme, delay, network, 60, seed=2)
    sim = simulate(scheme, delay, network, 60, seed=2)
    np.testing.assert_allclose(sim.durations, durations)
    assert decoded_at == symbolic_decode_rounds(scheme, delay, network, 60, seed=2)
    assert sorted(decoded_at) == list(range(60)) and worst <= 1e-9


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: SRSGC(8, 2, 4, 2), r"B=2, W=4 needs B \| \(W-1\) but W-1=3"),
        (lambda: SRSGC(8, 0, 2, 2), "B=0 needs B >= 1"),
        (lambda: MSGC(8, 3, 3, 2), "B=3, W=3 needs 1 <= B < W"),
        (lambda: MSGC(8, 1, 2, 9), "lam=9 needs 0 <= lam <= n but n=8; valid lam"),
        (lambda: MSGC(8, 1, 2, "x"), "lam='x' is invalid"),
    ],
)
def test_bad_parameters_raise_one_sentence(make, message: str) -> None:
    with pytest.raises(ConfigError, match=message):
        make()


@pytest.mark.parametrize("make", [lambda: SRSGC(4, 1, 2, 2), lambda: MSGC(4, 1, 2, 1)])
def test_a_round_is_planned_only_once_it_has_begun(make) -> None:
    """The round hook fixes a plan; nothing of a round is asked or delivered before it."""
    decoder = make().decoder()
    for ask in (lambda: decoder.plan(0), lambda: decoder.receive(0, 1, None)):
        with pytest.raises(RuntimeError, match=r"begin_round\(0\) first"):
            ask()
    decoder.begin_round(1)  # begins round 0 too (a fresh decoder mid-run catches up)
    assert len(decoder.plan(0)) == len(decoder.plan(1)) == 4
    with pytest.raises(RuntimeError, match=r"round 2 has not begun"):
        decoder.serves(2, 10)
