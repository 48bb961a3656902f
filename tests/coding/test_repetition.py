"""``is_cr`` and ``is_hr``: IS-GC's repetition codes (docs/design.md, "IS-GC's repetition codes").

The placement is IS-GC's ``partition`` rule; the decoder's set is a largest set of arrived
workers with disjoint windows, against brute force on every arrival pattern
(``helpers.windows``); IS-GC's greedy rule never covers more and sometimes less; a job
decodes exactly when arrived windows tile the ``n`` partitions; a job that does not gets
the exact sum of the partitions of the set, rescaled.
"""

from __future__ import annotations

import numpy as np
import pytest

from gclab.coding.is_cr import IsCR
from gclab.coding.is_hr import IsHR
from gclab.coding.windows import Windows, isgc_greedy
from helpers.coding import packets, partials
from helpers.windows import configurations, isgc_parts, largest, mask


def arrived_of(n: int, workers: list[int]) -> np.ndarray:
    arrived = np.zeros(n, dtype=bool)
    arrived[workers] = True
    return arrived


def test_placements_by_hand() -> None:
    assert IsCR(6, 2).placement == ((0, 1), (1, 2), (2, 3), (3, 4), (4, 5), (0, 5))
    # n0 = 4, c1 = 1 in the group (i−1 mod 4), c2 = 1 from the worker's id
    assert IsHR(8, 2, 1, 2).placement == (
        (0, 3), (0, 1), (1, 2), (2, 3), (4, 7), (4, 5), (5, 6), (6, 7),
    )  # fmt: skip
    # n0 = 6, c1 = 1, c2 = 2: worker 5 spills into group 1, worker 11 into group 0
    hybrid = IsHR(12, 3, 1, 2)
    assert hybrid.placement[5] == (4, 5, 6) and hybrid.placement[11] == (0, 10, 11)
    assert hybrid.placement[6] == (6, 7, 11)  # i = 0: i−1 wraps to the group's end
    assert (IsCR(6, 2).load, IsHR(12, 3, 1, 2).load) == (2 / 6, 3 / 12)  # c / n


@pytest.mark.parametrize("n", [4, 6, 8, 12])
def test_every_placement_is_isgc_s_partition_rule(n: int) -> None:
    for c, c1, g in configurations(n):
        windows = Windows(n, c, c1, g)
        for w in range(n):
            assert set(windows.parts(w)) == isgc_parts(n, c, c1, g, w), (c, c1, g, w)


def test_isgc_small_cases_by_hand() -> None:
    # cyclic, n = 8, c = 2: workers 0, 1, 2 hold 01, 12, 23; 1 overlaps both others
    cyclic = Windows(8, 2, 0, 1)
    got = arrived_of(8, [0, 1, 2])
    assert cyclic.maximum(got) == (0, 2) and not cyclic.tiles(got)
    assert [len(kept) for kept in isgc_greedy(cyclic, got)] == [2, 2, 2]  # every start
    assert cyclic.tiles(arrived_of(8, [1, 3, 5, 7]))

    # hybrid, n = 12, g = 3 groups of n0 = c = 4, c1 = 1: worker 2 holds 1-4 (spills 4),
    # worker 4 holds its group 4-7, worker 11 holds 10, 11 and spills 0, 1
    hybrid = Windows(12, 4, 1, 3)
    assert [hybrid.parts(w) for w in (2, 4, 11)] == [(1, 2, 3, 4), (4, 5, 6, 7), (0, 1, 10, 11)]
    got = arrived_of(12, [2, 4, 11])  # 2 overlaps 4 and 11; 4 and 11 are disjoint
    assert hybrid.maximum(got) == (4, 11)
    # IS-GC's greedy from worker 2 (start index 0) keeps only 2: a third of its draws
    assert isgc_greedy(hybrid, got) == [(2,), (4, 11), (4, 11)]

    # hybrid with groups of 2c: two windows of one group can be disjoint, which IS-GC's
    # rule never takes (any two workers of a group conflict)
    wide = Windows(8, 2, 2, 2)
    assert [wide.parts(w) for w in range(4)] == [(2, 3), (0, 3), (0, 1), (1, 2)]
    everyone = np.ones(8, dtype=bool)
    assert wide.tiles(everyone) and len(wide.maximum(everyone)) == 4
    assert {len(kept) for kept in isgc_greedy(wide, everyone)} == {2}


def check_against_brute_force(n: int, settings: list[tuple[int, int, int]], greedy: bool) -> None:
    """Every arrival pattern of every setting: the maximum set's size, validity and tiling."""
    for c, c1, g in settings:
        windows = Windows(n, c, c1, g)
        best = largest(n, c, c1, g)
        parts = [windows.parts(w) for w in range(n)]
        for pattern in range(2**n):
            arrived = np.array([(pattern >> w) & 1 for w in range(n)], dtype=bool)
            chosen = windows.maximum(arrived)
            where = (n, c, c1, g, np.flatnonzero(arrived).tolist())
            assert len(chosen) == best[pattern], where
            assert mask(chosen) & ~pattern == 0, where  # arrived workers only
            covered = [p for w in chosen for p in parts[w]]
            assert len(covered) == len(set(covered)), where  # disjoint
            assert windows.tiles(arrived) == (best[pattern] * c == n), where
            if greedy:
                for kept in isgc_greedy(windows, arrived):
                    held = [p for w in kept for p in parts[w]]
                    assert len(held) == len(set(held)) and len(kept) <= best[pattern], where
                    if c1 == 0 and g == 1:  # IS-GC's cyclic rule is exact from every start
                        assert len(kept) == best[pattern], where


@pytest.mark.parametrize("n", [6, 8])
def test_maximum_set_against_brute_force(n: int) -> None:
    check_against_brute_force(n, configurations(n), greedy=True)


def test_maximum_set_against_brute_force_of_a_hybrid_that_wraps_and_spills() -> None:
    check_against_brute_force(12, [(4, 1, 3)], greedy=False)  # n0 = c = 4


@pytest.mark.slow
@pytest.mark.no_ray
@pytest.mark.parametrize("n", range(1, 13))
def test_maximum_set_against_brute_force_n_up_to_12(n: int) -> None:
    check_against_brute_force(n, configurations(n), greedy=True)


@pytest.mark.parametrize("n", [6, 8, 12])
def test_every_c_minus_1_erasures_decode_and_some_c_do_not(n: int) -> None:
    counts = np.array([bin(m).count("1") for m in range(2**n)])
    for c, c1, g in configurations(n):
        windows = Windows(n, c, c1, g)
        tiles = largest(n, c, c1, g) * c == n
        assert tiles[counts >= n - (c - 1)].all(), (c, c1, g)
        assert not tiles[counts == n - c].all(), (c, c1, g)
        assert windows.c - 1 == (IsHR(n, c, c1, g).s if c1 or g > 1 else IsCR(n, c).s)


SCHEMES = {
    "is_cr(8, 2)": IsCR(8, 2),
    "is_cr(9, 3)": IsCR(9, 3),
    "is_hr(8, 2, 2, 2)": IsHR(8, 2, 2, 2),
    "is_hr(12, 4, 1, 3)": IsHR(12, 4, 1, 3),
}


@pytest.mark.parametrize("name", SCHEMES)
def test_decodes_exactly_when_windows_tile_and_else_the_rescaled_maximum_set(name: str) -> None:
    scheme = SCHEMES[name]
    n, c = scheme.n, scheme.windows.c
    w = scheme.windows
    best = largest(n, c, w.c1, w.g)
    grads = partials(scheme, 11, seed=4).astype(np.float32)
    sent = packets(scheme, grads)
    truth = grads.astype(np.float64).sum(axis=0)
    rng = np.random.default_rng(5)
    for pattern in rng.permutation(2**n)[:150].tolist():
        survivors = [v for v in rng.permutation(n).tolist() if (pattern >> v) & 1]
        decoder = scheme.decoder(grads.shape[1])
        for v in survivors:
            decoder.receive(0, v, sent[v])
        if best[pattern] * c == n:  # the windows tile: the whole gradient
            assert decoder.decodable() == [0]
            np.testing.assert_allclose(decoder.decode(0), truth, rtol=1e-6, atol=1e-5)
            continue
        assert decoder.decodable() == []
        gradient, coverage = decoder.decode_partial(0)
        parts = scheme.partial_cover(tuple(survivors))
        assert coverage == len(parts) / n == best[pattern] * c / n
        if not parts:
            assert gradient is None
            continue
        want = grads[list(parts)].astype(np.float64).sum(axis=0) * n / len(parts)
        np.testing.assert_allclose(gradient, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("setting", [(8, 2, 0, 1), (12, 3, 1, 2), (12, 4, 1, 3), (8, 2, 2, 2)])
def test_completion_is_the_first_arrival_at_which_the_windows_tile(setting) -> None:
    """What the fast search reads: the earliest ``t`` with a tiling among arrivals ``≤ t``."""
    n, c, c1, g = setting
    windows, best = Windows(n, c, c1, g), largest(n, c, c1, g)
    times = np.random.default_rng(6).integers(0, 6, (40, n)).astype(float)  # with ties
    times[0, 0] = np.inf  # a packet that never arrives
    got = windows.completion(times)
    for row, done in zip(times, got):
        first = min(t for t in np.unique(row) if best[mask(np.flatnonzero(row <= t))] * c == n)
        assert done == first
