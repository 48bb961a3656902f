"""pipelined_cr / pipelined_fr: exhaustive tolerance, long random runs, T = 0 = classic."""

from __future__ import annotations

import copy
import itertools
from collections import Counter

import numpy as np
import pytest

from gclab.coding.classic import ClassicCR, ClassicFR
from gclab.coding.contract import Task
from gclab.coding.pipelined import PipelinedCR, PipelinedFR
from gclab.errors import ConfigError, DecodeError
from helpers.coding import decode, packets, partials
from helpers.sequential import bursty_mask, job_partials, run_stream

#: docs/design.md, test vector 8: decodable / total patterns by number of losses,
#: for the loss counts above (T+1)s (every lighter pattern decodes).
CR_TABLE = {
    (4, 2, 2): {7: (584, 792), 8: (235, 495), 9: (56, 220), 10: (6, 66), 11: (0, 12)},
    (4, 1, 1): {3: (32, 56), 4: (18, 70), 5: (4, 56), 6: (0, 28)},
    (5, 1, 2): {
        4: (1015, 1365),
        5: (1553, 3003),
        6: (1680, 5005),
        7: (1290, 6435),
        8: (690, 6435),
        9: (245, 5005),
        10: (52, 3003),
        11: (5, 1365),
        12: (0, 455),
    },
    (6, 2, 1): {5: (492, 792), 6: (299, 924), 7: (102, 792), 8: (15, 495), 9: (0, 220)},
}
#: docs/design.md, test vector 9, per FR group (n = s + 1).
FR_TABLE = {
    (1, 1): {3: (2, 4)},
    (1, 2): {4: (10, 15), 5: (2, 6)},
    (2, 2): {7: (24, 36), 8: (3, 9)},
}


def window_outcomes(scheme, length: int = 3) -> Counter:
    """Every erasure pattern of rounds 0..T: real decode of job 0 against the predicate."""
    n, T = scheme.n, scheme.T
    grads = job_partials(scheme, T + 1, length, seed=n + T)
    encoders = [scheme.encoder(w) for w in range(n)]
    plan_decoder = scheme.decoder(length)
    sent = {}
    for r in range(T + 1):
        plan = plan_decoder.plan(r)
        for w in range(n):
            sent[r, w] = encoders[w].encode(r, {t: grads[t.job, t.part] for t in plan[w]})
    truth = grads[0].sum(axis=0)
    counts: Counter = Counter()
    for bits in itertools.product([False, True], repeat=(T + 1) * n):
        erased = np.array(bits).reshape(T + 1, n)
        decoder = scheme.decoder(length)
        for r in range(T + 1):
            for w in np.flatnonzero(~erased[r]).tolist()[::-1]:  # non-sorted arrival order
                decoder.receive(r, w, sent[r, w])
        ok = 0 in decoder.decodable()
        assert ok == scheme.tolerates(erased), erased.astype(int)
        if ok:
            got = decoder.decode(0)
            assert np.linalg.norm(got - truth) <= 1e-9 * np.linalg.norm(truth), erased
        losses = int(erased.sum())
        if losses <= (T + 1) * scheme.s:
            assert ok, erased.astype(int)
        counts[losses, ok] += 1
    return counts


def table(counts: Counter, above: int) -> dict[int, tuple[int, int]]:
    losses = sorted({k for k, _ in counts if k > above})
    return {k: (counts[k, True], counts[k, True] + counts[k, False]) for k in losses}


@pytest.mark.parametrize("n, s, T", list(CR_TABLE))
def test_cr_exhaustive_window_matches_reference_counts(n: int, s: int, T: int) -> None:
    got = table(window_outcomes(PipelinedCR(n, s, T)), (T + 1) * s)
    assert {k: v for k, v in got.items() if k in CR_TABLE[n, s, T]} == CR_TABLE[n, s, T]
    assert all(ok == 0 for k, (ok, _) in got.items() if k > max(CR_TABLE[n, s, T]))


@pytest.mark.parametrize("s, T", list(FR_TABLE))
def test_fr_group_exhaustive_window_matches_reference_counts(s: int, T: int) -> None:
    got = table(window_outcomes(PipelinedFR(s + 1, s, T)), (T + 1) * s)
    assert {k: v for k, v in got.items() if v[0]} == FR_TABLE[s, T]


def test_fr_groups_are_independent() -> None:
    scheme = PipelinedFR(4, 1, 1)
    one_group = np.array([[True, True, False, False], [True, False, False, False]])
    assert not scheme.tolerates(one_group)  # 3 losses in group 0 > (T+1)s = 2
    spread = np.array([[True, True, False, False], [False, False, True, True]])
    assert scheme.tolerates(spread)  # 2 per group


@pytest.mark.parametrize(
    "scheme",
    [PipelinedCR(4, 2, 2), PipelinedCR(5, 1, 2), PipelinedCR(6, 2, 1), PipelinedFR(6, 1, 2)],
    ids=lambda s: s.describe(),
)
def test_delay_zero_when_round_loses_at_most_s(scheme) -> None:
    rng = np.random.default_rng(0)
    rounds, jobs = 60, 60
    erased = np.zeros((rounds, scheme.n), dtype=bool)
    for r in range(rounds):
        erased[r, rng.choice(scheme.n, rng.integers(0, scheme.s + 1), replace=False)] = True
    run = run_stream(scheme, erased, job_partials(scheme, jobs, 4, seed=1))
    assert run.decoded_at == {t: t for t in range(jobs)}
    assert not any(run.recovered.values())
    assert max(run.errors) <= 1e-9


def _window_tolerated(scheme, erased: np.ndarray, job: int) -> bool:
    window = erased[job : job + scheme.T + 1]
    return window.shape[0] == scheme.T + 1 and scheme.tolerates(window)


@pytest.mark.parametrize(
    "scheme",
    [PipelinedCR(8, 2, 2), PipelinedCR(16, 1, 2), PipelinedFR(16, 1, 2), PipelinedFR(12, 2, 1)],
    ids=lambda s: s.describe(),
)
@pytest.mark.parametrize("losses", ["bernoulli", "bursty"])
def test_long_random_runs_decode_exactly_and_on_time(scheme, losses: str) -> None:
    jobs = 300
    rounds = jobs + scheme.T
    seed = scheme.n + scheme.s
    if losses == "bernoulli":
        erased = np.random.default_rng(seed).random((rounds, scheme.n)) < 0.2
    else:
        erased = bursty_mask(rounds, scheme.n, 0.2, 3.0, seed)
    run = run_stream(scheme, erased, job_partials(scheme, jobs, 5, seed))
    assert sorted(run.decoded_at) == list(range(jobs))
    assert max(run.errors) <= 1e-9
    tolerated = 0
    for t in range(jobs):
        assert run.decoded_at[t] <= t + scheme.T
        if _window_tolerated(scheme, erased, t):
            tolerated += 1
            assert run.recovered.get(t, 0) == 0, t
    assert 0 < tolerated < jobs  # both kinds of windows occurred


@pytest.mark.parametrize(
    "scheme", [PipelinedCR(16, 1, 2), PipelinedFR(16, 1, 2)], ids=lambda s: s.describe()
)
def test_float32_state_decodes_as_accurately_as_float64_state(scheme) -> None:
    """float32 packets: the decoder keeps float32 values (each rounded once from a float64
    sum). Over 300 bursty lossy rounds every job is within 2× the error of the same
    packets decoded with float64 state, plus the rounding of the result itself, and the
    worst job equals float64 state's: nothing accumulates across jobs."""
    jobs = 300
    erased = bursty_mask(jobs + scheme.T, scheme.n, 0.2, 3.0, seed=scheme.n)
    grads = job_partials(scheme, jobs, 16, seed=7).astype(np.float32)
    narrow = np.array(run_stream(scheme, erased, grads).errors)
    wide = np.array(run_stream(scheme, erased, grads, wide=True).errors)
    assert np.all(narrow <= 2 * wide + 1e-7)
    assert narrow.max() <= 1.01 * wide.max() + 1e-7
    assert wide.max() > 1e-7  # late decodes amplify the packets' rounding: the test sees it


@pytest.mark.parametrize(
    "pipelined, classic",
    [
        (PipelinedCR(7, 2, 0), ClassicCR(7, 2, construction="real")),
        (PipelinedFR(6, 2, 0), ClassicFR(6, 2)),
    ],
    ids=["cr", "fr"],
)
def test_delay_zero_is_classic_packet_for_packet(pipelined, classic) -> None:
    grads = partials(classic, 9).astype(np.float32)
    assert pipelined.placement == classic.placement and pipelined.load == classic.load
    want = packets(classic, grads)
    got = packets(pipelined, grads)
    for a, b in zip(got, want):  # float32 running sum vs one rounding of a float64 sum
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-6 * np.abs(b).max())
    n = classic.n
    for bits in itertools.product([False, True], repeat=n):
        erased = np.array(bits)
        arrivals = [w for w in np.random.default_rng(sum(bits)).permutation(n) if not erased[w]]
        assert pipelined.tolerates(erased) == classic.tolerates(erased)
        mine = decode(pipelined, want, arrivals, grads.shape[1])  # same packets: same bits,
        theirs = decode(classic, want, arrivals, grads.shape[1])  # rounded once to float32
        assert (mine is None) == (theirs is None)
        if mine is not None:
            np.testing.assert_array_equal(mine.astype(np.float32), theirs)
        decoder = pipelined.decoder(grads.shape[1])
        for w in arrivals:
            decoder.receive(0, w, got[w])
        # only the groups that cannot decode yet (classic_fr also names decodable groups)
        baseline = classic.decoder(grads.shape[1])
        for w in arrivals:
            baseline.receive(0, w, want[w])
        assert set(decoder.wanted(0)) <= set(baseline.wanted(0))
        assert (decoder.wanted(0) == []) == (mine is not None)


def test_wanted_is_round_job_and_recovery_finishes_any_pattern() -> None:
    scheme = PipelinedCR(5, 1, 2)
    run = run_stream(scheme, np.ones((40, 5), dtype=bool), job_partials(scheme, 38, 3, seed=2))
    assert sorted(run.decoded_at) == list(range(38))  # everything lost: recovery alone
    assert max(run.errors) <= 1e-9
    decoder = scheme.decoder()
    wanted = decoder.wanted(0)
    assert wanted == [(0, w) for w in range(5)]


def test_encoder_holds_T_plus_1_accumulators_and_resumes_from_its_state() -> None:
    scheme = PipelinedCR(6, 2, 2)
    encoder, resumed = scheme.encoder(3), None
    grads = job_partials(scheme, 10, 4, seed=3)
    for r in range(10):
        tasks = scheme.decoder().plan(r)[3]
        partials = {t: grads[t.job, t.part] for t in tasks}
        packet = encoder.encode(r, partials)
        assert len(encoder.acc) == scheme.T + 1  # nothing else is kept
        if resumed is not None:
            assert np.array_equal(resumed.encode(r, partials), packet)
        if r == 4:  # a fresh encoder continues from the saved state, packet for packet
            resumed = scheme.encoder(3)
            resumed.load_state_dict(copy.deepcopy(encoder.state_dict()))


def test_lag_coefficients_follow_placement_and_decode_symbolically() -> None:
    scheme = PipelinedCR(9, 3, 2)
    for w in range(9):
        assert scheme.placement[w] == tuple(sorted((w + i) % 9 for i in range(4)))
    assert np.all(scheme.lag_coefficients[:, :, 0] == scheme.code.encoding[:, :, 0])
    decoder = scheme.decoder()
    for r in range(3):
        for w in range(9):
            if (r, w) not in {(0, 0), (0, 1), (0, 2), (0, 3), (0, 4), (1, 5), (1, 6)}:
                decoder.receive(r, w, None)
    assert decoder.decodable() == [0, 1, 2]
    assert decoder.decode(0) is None and decoder.decodable() == [1, 2]
    with pytest.raises(DecodeError):
        decoder.decode(7)


def test_decode_large_n_is_accurate() -> None:
    scheme = PipelinedCR(64, 7, 2)
    rng = np.random.default_rng(5)
    erased = np.zeros((80, 64), dtype=bool)
    for r in range(80):
        erased[r, rng.choice(64, 9 if r % 3 == 0 else 5, replace=False)] = True
    run = run_stream(scheme, erased, job_partials(scheme, 78, 3, seed=6))
    assert sorted(run.decoded_at) == list(range(78)) and max(run.errors) <= 1e-9


@pytest.mark.parametrize(
    "make, message",
    [
        (lambda: PipelinedCR(8, 1, -1), "T=-1 needs T >= 0"),
        (lambda: PipelinedCR(8, 1, 1.5), "T=1.5 is invalid"),
        (lambda: PipelinedCR(8, 8, 1), "s=8 needs 0 <= s < n"),
        (lambda: PipelinedFR(8, 2, 1), "s=2 needs (s+1) | n but n=8; valid s for n=8"),
        (lambda: PipelinedFR(0, 0, 1), "n=0 is invalid"),
    ],
)
def test_bad_parameters_raise_one_sentence(make, message: str) -> None:
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        make()


def test_task_plan_is_the_new_job_only() -> None:
    scheme = PipelinedFR(6, 2, 2)
    plan = scheme.decoder().plan(5)
    assert plan[4] == tuple(Task(5, j) for j in (3, 4, 5))


def test_straggler_model_is_the_exact_predicate_per_job_window() -> None:
    """``network.recovery=wait_all``'s model for a pipelined code: every job whose window
    holds the round must stay decodable, later rounds taken as erasure-free (n = 4,
    s = 1, T = 1; every pair of rounds)."""
    scheme = PipelinedCR(4, 1, 1)
    clean = np.zeros(4, dtype=bool)
    patterns = [np.array(bits, dtype=bool) for bits in itertools.product([0, 1], repeat=4)]
    decisions = Counter()
    for first in patterns:
        model = scheme.straggler_model()
        model.settle(0, first, scheme.decoder())
        for second in patterns:
            got = model.admits(1, second, scheme.decoder())
            job0 = scheme.tolerates(np.array([first, second]))
            job1 = scheme.tolerates(np.array([second, clean]))
            assert got == (job0 and job1), (first, second)
            decisions[got] += 1
    assert decisions[True] > 0 and decisions[False] > 0
    model = scheme.straggler_model()  # e.g.: a round losing 2 of 4, then one more
    model.settle(0, np.isin(np.arange(4), [0, 1]), scheme.decoder())
    assert not model.admits(1, np.isin(np.arange(4), [2]), scheme.decoder())
