"""IS-GC's repetition placement and which arrived workers to sum (``is_cr``, ``is_hr``).

IS-GC (ignore-stragglers gradient coding; its public code, IS-GC/IS-GC ``ray_gc.py``)
gives every worker ``c`` of the ``n`` partitions and has it send their **plain sum**. The
master sums the packets of arrived workers whose partitions do not overlap: the exact
sum of the partitions they hold, the whole gradient when they tile all ``n``.

**Placement** (:class:`Windows`, parameters ``c``, ``c1``, ``g``): ``n = g·n0`` workers in
``g`` groups of ``n0`` consecutive ids; worker ``w = q·n0 + i`` of group ``q`` holds ``c1``
partitions cyclically inside its group, ``q·n0 + (i−c1 .. i−1 mod n0)``, and ``c2 = c − c1``
from its own id on, ``w .. w+c2−1 (mod n)``, which may run into the next group. In one
picture: worker ``w``'s *window* starts at ``σ = (i − c1) mod n0`` of its group and holds
``c`` consecutive positions; a window that runs past the group's end (``σ > n0 − c``)
either *wraps* to its own group's start (``σ ≥ n0 − c1``: the in-group part) or *spills*
into the next group's start (``n0 − c < σ < n0 − c1``). ``is_cr`` (cyclic repetition,
worker ``w`` holds ``w .. w+c−1``) is the case ``c1 = 0, g = 1``; ``c1 = c = n0`` is
fractional repetition (every worker holds its group).

**The maximum set** (:meth:`Windows.maximum`): a largest set of arrived windows that
pairwise do not overlap, found exactly. A group's positions are a line between its seams;
what crosses a seam is a spill from the group before (occupying positions ``0 .. b−1``,
``b = σ + c − n0``) or a window of the group itself (a wrap occupies both ends, a spill the
end). Per group, a transfer table ``M[b_in, b_out]`` holds the most windows the group can
add given the spill ``b_in`` that enters it and the spill ``b_out`` it sends on (0: none):
the rest of a group is windows on an interval, where taking the earliest-starting arrived
window first is optimal (equal lengths), counted for every left end at once by one
backward pass. The groups form a ring: the best set is the largest diagonal entry of the
max-plus product ``M_0 ⊗ … ⊗ M_{g−1}``, and back-pointers give the workers. Cost per
round: ``O(n + g·c·c2 + g·c2³)`` (one pass over the positions, ``O(c·c2)`` entries per
group, ``g`` products of ``c2 × c2`` tables); ``is_cr`` is one table and its diagonal.
At ``n = 256``, ``c = 16``: 0.06–0.43 ms of CPU per round (``bench/isgc_greedy.py``,
BENCHMARKS.md).

:func:`isgc_greedy` is IS-GC's own rule (its ``index_max_d``), the baseline the exact
set is compared with (``bench/isgc_greedy.py``, ``tests/coding/test_repetition.py``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

NONE = -(10**9)  # an impossible table entry (max-plus zero), far below any count


@dataclass(frozen=True)
class Windows:
    """IS-GC's hybrid placement of ``n`` workers on ``n`` partitions (module docstring)."""

    n: int
    c: int
    c1: int
    g: int

    @property
    def n0(self) -> int:
        """Workers (and partitions) per group."""
        return self.n // self.g

    @property
    def c2(self) -> int:
        """Partitions a worker holds from its own id on, across the group's end."""
        return self.c - self.c1

    def start(self, worker: int) -> int:
        """``σ``: where the worker's window starts inside its group."""
        return (worker % self.n0 - self.c1) % self.n0

    def parts(self, worker: int) -> tuple[int, ...]:
        """The partitions worker ``worker`` holds, ascending."""
        n0, q, sigma = self.n0, worker // self.n0, self.start(worker)
        wraps = sigma >= n0 - self.c1
        out = []
        for p in range(sigma, sigma + self.c):
            group = q if p < n0 or wraps else (q + 1) % self.g
            out.append(group * n0 + p % n0)
        return tuple(sorted(out))

    def _by_start(self, values: np.ndarray) -> np.ndarray:
        """``[..., g, n0]``: ``values[..., w]`` of the window of group ``q`` starting at ``σ``."""
        values = np.asarray(values)
        groups = values.reshape(*values.shape[:-1], self.g, self.n0)
        return np.roll(groups, -self.c1, axis=-1)  # worker i = (σ + c1) mod n0

    def completion(self, times: np.ndarray) -> np.ndarray:
        """When the arrived windows first tile all ``n`` partitions (``c | n0``), from each
        worker's arrival ``times[..., w]`` (``inf``: never): the job decodes then.

        A tiling takes the windows at starts ``r, r+c, …`` of every group: each group on
        its own at ``r = 0`` or ``r ≥ c2`` (the last one wraps), or every group at the same
        ``1 ≤ r < c2`` (each group's last window spills into the next). A tiling is complete
        at its latest arrival; the first complete one counts.
        """
        c, c2 = self.c, self.c2
        starts = self._by_start(times)
        full = starts.reshape(*starts.shape[:-1], -1, c).max(axis=-2)  # [..., g, r]
        alone = full[..., [0, *range(max(c2, 1), c)]].min(axis=-1).max(axis=-1)
        across = full[..., 1:c2].max(axis=-2, initial=-np.inf).min(axis=-1, initial=np.inf)
        return np.minimum(alone, across)

    def tiles(self, arrived: np.ndarray) -> bool:
        """Whether the arrived windows tile all ``n`` partitions: the job decodes."""
        return bool(self.completion(np.where(arrived, 0.0, np.inf)) == 0.0)

    def maximum(self, arrived: np.ndarray) -> tuple[int, ...]:
        """A largest set of arrived workers whose windows do not overlap, ascending."""
        n0, c2 = self.n0, self.c2
        states = max(c2, 1)  # spill sizes 0 .. c2−1 entering a group
        starts = self._by_start(np.asarray(arrived, dtype=bool))
        groups = [_Group(self, starts[q]) for q in range(self.g)]
        tables = [group.table(states) for group in groups]
        best, pointers = tables[0], []
        for table in tables[1:]:  # max-plus product, with the middle state that won
            total = best[:, :, None] + table[None, :, :]
            pointers.append(total.argmax(axis=1))
            best = total.max(axis=1)
        ring = int(np.argmax(np.diagonal(best)))
        if best[ring, ring] <= 0:
            return ()
        spill = [0] * (self.g + 1)  # spill[q]: what enters group q; spill[g] = spill[0]
        spill[0] = spill[self.g] = ring
        for q in range(self.g - 1, 0, -1):
            spill[q] = int(pointers[q - 1][ring, spill[q + 1]])
        chosen = []
        for q, group in enumerate(groups):
            for sigma in group.windows(spill[q], spill[q + 1]):
                chosen.append(q * n0 + (sigma + self.c1) % n0)
        return tuple(sorted(chosen))


class _Group:
    """One group's arrived windows, and the most it adds for each spill in and out."""

    def __init__(self, windows: Windows, arrived: np.ndarray) -> None:
        """``arrived[σ]``: whether the group's window starting at ``σ`` arrived."""
        n0, c = windows.n0, windows.c
        self.n0, self.c, self.c1 = n0, c, windows.c1
        plain = n0 - c + 1  # starts 0 .. n0−c lie inside the group
        arrived = arrived.tolist()
        self.crossing = [s for s in range(plain, n0) if arrived[s]]
        # next arrived plain start at or after x; count and last start of the greedy
        # chain (earliest start first) from x to the group's end
        self.next = [n0] * (n0 + 1)
        self.count = [0] * (n0 + c + 1)
        self.last = [-1] * (n0 + c + 1)
        following = n0
        for x in range(plain - 1, -1, -1):
            if arrived[x]:
                following = x
            self.next[x] = following
            if following < plain:
                after = following + c
                self.count[x] = 1 + self.count[after]
                self.last[x] = self.last[after] if self.count[after] else following

    def _inside(self, lo: int, hi: int) -> int:
        """Most arrived plain windows inside positions ``lo .. hi`` (``hi ≥ n0 − c``)."""
        count = self.count[lo]
        if count and self.last[lo] + self.c - 1 > hi:  # at most one chain window ends past hi
            count -= 1
        return count

    def _closed(self) -> tuple[int, int | None]:
        """``(count, wrap start or None)``: the most with no spill in or out."""
        best, wrap = self.count[0], None
        for sigma in self.crossing:
            if sigma >= self.n0 - self.c1:
                value = 1 + self._inside(sigma + self.c - self.n0, sigma - 1)
                if value > best:
                    best, wrap = value, sigma
        return best, wrap

    def table(self, states: int) -> np.ndarray:
        """``M[b_in, b_out]``: the most windows of this group given the spills."""
        n0, c = self.n0, self.c
        rows = [[self.count[b_in]] + [NONE] * (states - 1) for b_in in range(states)]
        rows[0][0] = self._closed()[0]
        for sigma in self.crossing:
            if sigma < n0 - self.c1:  # a spill of b_out positions into the next group
                b_out = sigma + c - n0
                for b_in in range(min(states, sigma + 1)):
                    rows[b_in][b_out] = 1 + self._inside(b_in, sigma - 1)
        return np.array(rows, dtype=np.int64)

    def windows(self, b_in: int, b_out: int) -> list[int]:
        """The starts of the windows that reach ``table[b_in, b_out]``."""
        n0, c = self.n0, self.c
        if b_out:
            end = sigma = b_out + n0 - c
            chosen, lo = [sigma], b_in
        else:
            wrap = self._closed()[1] if b_in == 0 else None
            chosen, lo, end = [], b_in, n0
            if wrap is not None:
                chosen, lo, end = [wrap], wrap + c - n0, wrap
        x = self.next[lo]
        while x + c <= end:  # the greedy chain from lo, up to end (x = n0: none left)
            chosen.append(x)
            x = self.next[x + c]
        return chosen


def isgc_greedy(windows: Windows, arrived: np.ndarray) -> list[tuple[int, ...]]:
    """IS-GC's ``index_max_d`` for every start: sets of arrived workers with disjoint windows.

    Entry ``k`` is the set it returns when its start is ``k``, an index into the arrived
    workers in id order (IS-GC draws it uniformly each round). Candidates: for cyclic
    repetition (``c1 = 0, g = 1``) the arrived workers whose window starts less than
    ``c`` after the start worker's, in order from it; otherwise the arrived workers of the
    start worker's group, in id order. From each candidate it walks once around the ring
    of arrived workers in id order, keeping a worker that does not conflict with the last
    one kept and stopping at the first that conflicts with the candidate from the left;
    the longest walk wins (the first among equals). Its hybrid conflict rule counts any
    two workers of one group as overlapping, which they do only when ``n0 = c``.
    """
    order = [int(w) for w in np.flatnonzero(arrived)]
    count = len(order)
    if count <= 1:
        return [tuple(order)] * count
    walks = []  # the walk from every arrived worker, computed once for every start
    for i in range(count):
        kept, head = [order[i]], order[i]
        for step in range(1, count):
            w = order[(i + step) % count]
            if _left_conflict(windows, w, order[i]):
                break
            if not _left_conflict(windows, head, w):
                kept.append(w)
                head = w
        walks.append(tuple(sorted(kept)))
    cyclic = windows.c1 == 0 and windows.g == 1
    out = []
    for start, first in enumerate(order):
        if cyclic:  # from the start worker on, around the ring
            ring = [(start + k) % count for k in range(count)]
            candidates = [i for i in ring if (order[i] - first) % windows.n < windows.c]
        else:
            candidates = [i for i in range(count) if order[i] // windows.n0 == first // windows.n0]
        out.append(max((walks[i] for i in candidates), key=len))  # max keeps the first
    return out


def _left_conflict(windows: Windows, left: int, right: int) -> bool:
    """IS-GC's test that ``left``'s window overlaps ``right``'s from the left."""
    n, c, n0 = windows.n, windows.c, windows.n0
    if windows.c1 == 0 and windows.g == 1:
        return (right - left) % n < c
    q1, q2 = left // n0, right // n0
    if q1 == q2 and left < right:
        return True
    spills = left % n0 >= n0 - windows.c2 + 1
    if q2 == q1 + 1 and spills and right - left < c:
        return True
    return q2 == 0 and q1 == windows.g - 1 and spills and right + n - left < c
