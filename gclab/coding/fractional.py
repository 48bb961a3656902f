"""Fractional-repetition placement shared by ``classic_fr`` (m = 1) and ``cce_fr``.

Workers form groups of ``d = s + m`` consecutive ids (block form of docs/design.md, "Classic GC":
group ``⌊w/d⌋``); every member holds the group's ``d`` partitions and sends
``Σ_u G[r, u]·h^u`` of the group sum ``h`` split into ``m`` streams. With every ``m×m``
minor of ``G`` nonsingular, a group decodes from any ``m`` members, so the exact
decodability predicate is "every group has at least ``m`` survivors" (which tolerates
far more than ``s`` erasures when they spread over groups).
"""

from __future__ import annotations

import numpy as np

from gclab.coding.linear import LinearScheme


def cauchy_generator(d: int, m: int) -> np.ndarray:
    """``[I_m; C]`` with ``C`` a Cauchy block scaled to ones in its first row and column.

    Every square submatrix of a Cauchy matrix is nonsingular, hence every ``m×m`` minor of
    the stacked generator is; the identity rows make the no-straggler decode trivial, and
    ``m = 1`` gives all ones (Tandon's FR, 0/1 decoding).
    """
    x = -np.arange(1.0, d - m + 1)
    y = np.arange(float(m))
    block = 1.0 / (x[:, None] - y[None, :])
    if block.size:
        block = block * block[0, 0] / (block[:, :1] * block[:1, :])
    return np.vstack([np.eye(m), block])


class FractionalScheme(LinearScheme):
    """Groups of ``s + m`` workers on shared partitions; per-group ``m×m`` decode."""

    exact_predicate = True

    def _init_groups(self, n: int, s: int, m: int) -> None:
        d = s + m
        self.group_size = d
        self.generator = cauchy_generator(d, m)
        encoding = np.zeros((n, n, m))
        for w in range(n):
            start = w - w % d
            encoding[w, start : start + d, :] = self.generator[w % d]
        self._init_linear(n, s, encoding)

    def tolerates(self, erasures: np.ndarray) -> bool:
        erased = np.asarray(erasures, dtype=bool).reshape(-1, self.n)[0]
        alive = np.count_nonzero(~erased.reshape(-1, self.group_size), axis=1)
        return bool(np.all(alive >= self.m))

    def decoding_weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        """Per group, invert the generator rows of its first ``m`` survivors (by id)."""
        d, m = self.group_size, self.m
        position = {w: i for i, w in enumerate(survivors)}
        weights = np.zeros((m, len(survivors)))
        for start in range(0, self.n, d):
            members = [w for w in range(start, start + d) if w in position][:m]
            if len(members) < m:
                return None
            inverse = np.linalg.inv(self.generator[[w - start for w in members]])
            weights[:, [position[w] for w in members]] = inverse
        return weights

    def partial_cover(self, survivors: tuple[int, ...]) -> tuple[int, ...]:
        """The parts of every group with at least ``m`` survivors (each decodes alone)."""
        alive = np.zeros(self.n // self.group_size, dtype=np.int64)
        np.add.at(alive, np.asarray(survivors, dtype=np.int64) // self.group_size, 1)
        covered = np.flatnonzero(alive >= self.m)
        return tuple(int(p) for q in covered for p in self.placement[q * self.group_size])
