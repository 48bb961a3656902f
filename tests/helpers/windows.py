"""IS-GC's repetition placement written out, and maximum sets by brute force.

Independent of :mod:`gclab.coding.windows`: the placement is IS-GC's ``partition`` rule in
words, and the maximum sets come from enumerating sets of workers.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable

import numpy as np


def isgc_parts(n: int, c: int, c1: int, g: int, w: int) -> frozenset[int]:
    """IS-GC's hybrid rule: worker ``w = q·n0 + i`` holds ``q·n0 + (i−c1 .. i−1 mod n0)``
    and ``w .. w+c−c1−1 (mod n)``; ``c1 = 0, g = 1`` is cyclic repetition."""
    n0 = n // g
    i = w % n0
    inside = {w - i + (i - k) % n0 for k in range(1, c1 + 1)}
    across = {(w + k) % n for k in range(c - c1)}
    return frozenset(inside | across)


def configurations(n: int) -> list[tuple[int, int, int]]:
    """Every ``(c, c1, g)`` the schemes accept for ``n`` workers (``g | n``, ``c | n/g``)."""
    return [
        (c, c1, g)
        for g in range(1, n + 1)
        if n % g == 0
        for c in range(1, n // g + 1)
        if (n // g) % c == 0
        for c1 in range(c + 1)
    ]


def largest(n: int, c: int, c1: int, g: int) -> np.ndarray:
    """For every arrival pattern (bit ``w`` of the index: worker ``w`` arrived), the size
    of a largest set of arrived workers whose windows pairwise do not overlap.

    The sets whose windows are disjoint are marked among all ``2^n`` sets, then each
    pattern takes the largest marked set inside it (a maximum over subsets, bit by bit).
    """
    parts = [isgc_parts(n, c, c1, g, w) for w in range(n)]
    masks = np.arange(2**n)
    has = [(masks >> w) & 1 == 1 for w in range(n)]
    disjoint = np.ones(2**n, dtype=bool)
    for a, b in itertools.combinations(range(n), 2):
        if parts[a] & parts[b]:
            disjoint &= ~(has[a] & has[b])
    best = np.where(disjoint, np.array([bin(m).count("1") for m in masks]), 0)
    for w in range(n):
        inside = masks[has[w]]
        best[inside] = np.maximum(best[inside], best[inside ^ (1 << w)])
    return best


def maximum_sets(n: int, c: int, c1: int, g: int, arrived: list[int]) -> list[tuple[int, ...]]:
    """Every largest set of ``arrived`` workers with disjoint windows."""
    parts = {w: isgc_parts(n, c, c1, g, w) for w in arrived}
    for size in range(len(arrived), 0, -1):
        found = [
            combo
            for combo in itertools.combinations(sorted(arrived), size)
            if sum(len(parts[w]) for w in combo)
            == len(frozenset().union(*(parts[w] for w in combo)))
        ]
        if found:
            return found
    return [()]


def mask(workers: Iterable[int]) -> int:
    """The arrival pattern (bitmask) of ``workers``."""
    return sum(1 << w for w in workers)
