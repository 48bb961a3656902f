"""Classic gradient coding (Tandon et al.) and the ignore-stragglers baseline.

The math: docs/design.md, "Classic GC".

* ``ignore_stragglers``: sum the first ``n - s`` arrivals, rescaled (approximate).
* ``classic_fr``: fractional repetition, groups of ``s + 1`` (block form), 0/1 decoding.
* ``classic_cr``: cyclic repetition, worker ``w`` holds ``w .. w+s``. The default
  construction is the evaluation-point code of :mod:`gclab.coding.evaluation` (the
  ``m = 1`` case of CCE-GC: closed-form weights, strided roots of unity on float pairs,
  per-row scaling), because Tandon's random ``H`` loses far more accuracy with float32
  payloads as ``n`` and ``s`` grow (docs/coding.md, "Constructions and why", has the
  table). ``construction=real`` uses real
  nodes; ``construction=tandon`` keeps Algorithm 1 with a seeded Gaussian ``H`` and
  least-squares decoding, as the baseline the benchmarks compare with.
"""

from __future__ import annotations

from functools import cached_property, partial
from typing import Any

import numpy as np

from gclab.coding import params
from gclab.coding.contract import Shape
from gclab.coding.cyclic import Construction, CyclicScheme, choose, node_constructions
from gclab.coding.fractional import FractionalScheme
from gclab.coding.linear import LinearScheme
from gclab.coding.numerics import least_squares_weights


class IgnoreStragglers(LinearScheme):
    """Uncoded placement; the gradient is estimated from the first ``n - s`` arrivals.

    Biased when the same workers keep straggling, hence ``exact = False`` (no residual
    check); the estimate depends on which packets came first, hence ``order_matters``.
    """

    name = "ignore_stragglers"
    exact = False
    exact_predicate = True
    order_matters = True

    def __init__(self, n: int, s: int = 1) -> None:
        self._check_workers(n)
        self._init_linear(n, params.stragglers(n, s), np.eye(n))

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        return every_s(n)

    @property
    def decoded_coverage(self) -> float:
        """The first ``n − s`` packets cover ``(n − s)/n`` of the batch."""
        return (self.n - self.s) / self.n

    def decoding_weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        used = self.n - self.s
        if len(survivors) < used:
            return None
        weights = np.zeros((1, len(survivors)))
        weights[0, :used] = self.n / used
        return weights


class ClassicFR(FractionalScheme):
    """Fractional repetition: decodes whenever every group of ``s + 1`` has a survivor."""

    name = "classic_fr"

    def __init__(self, n: int, s: int = 1) -> None:
        self._check_workers(n)
        self._init_groups(n, params.fr_stragglers(n, s), 1)

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        """Every ``s`` in ``1..n−1`` with ``(s+1) | n`` (FR needs it)."""
        return [p for p in every_s(n) if n % (p["s"] + 1) == 0]


class ClassicCR(CyclicScheme):
    """Cyclic repetition: any ``n - s`` packets decode, fewer never do.

    ``construction``: ``rotation`` (default) or ``real`` evaluation nodes
    (:func:`gclab.coding.evaluation.search_nodes`), or ``tandon``
    (:class:`TandonConstruction`, ``seed`` draws its ``H``).
    """

    name = "classic_cr"

    def __init__(self, n: int, s: int = 1, construction: str = "rotation", seed: int = 0) -> None:
        self._check_workers(n)
        s = params.stragglers(n, s)
        options = {
            **node_constructions(n, s, 1),
            "tandon": partial(TandonConstruction, n, s, seed),
        }
        self._init_cyclic(n, s, 1, choose(self.name, construction, options))

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        return every_s(n)

    @classmethod
    def shape(cls, n: int, s: int = 1, construction: str = "rotation", seed: int = 0) -> Shape:
        """Without building the code: ``s + 1`` shards of ``n`` per worker."""
        return Shape((s + 1) / n, 0, 1.0, f"{cls.name}(n={n}, s={s}, {construction})")

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, s={self.s}, {self.construction.name})"


class TandonConstruction(Construction):
    """Algorithm 1 of Tandon et al.: a Gaussian ``H`` drawn from ``seed``, least squares
    over every received packet.

    The predicate "at least ``n - s`` packets" holds in exact arithmetic only: numerically,
    least squares can fall short, so the symbolic decoder solves every survivor set.
    """

    name = "tandon"
    exact_predicate = False
    pairs = False

    def __init__(self, n: int, s: int, seed: int) -> None:
        self.n, self.s, self.seed = n, s, params.integer("seed", seed)

    @cached_property
    def encoding(self) -> np.ndarray:
        return tandon_encoding(random_h(self.n, self.s, self.seed))[:, :, None]

    def weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        return least_squares_weights(self.encoding, survivors)


def every_s(n: int) -> list[dict[str, Any]]:
    """The search grid of the cyclic codes: every ``s`` in ``1..n−1``."""
    return [{"s": s} for s in range(1, n)]


def random_h(n: int, s: int, seed: int) -> np.ndarray:
    """Tandon's ``H``: Gaussian ``s×n`` with the last column making ``H·1 = 0``."""
    h = np.random.default_rng(seed).standard_normal((s, n))
    h[:, -1] = -h[:, :-1].sum(axis=1)
    return h


def tandon_encoding(h: np.ndarray) -> np.ndarray:
    """Algorithm 1 (``getB``): row ``w`` is the vector of ``null(H)`` supported on ``w..w+s``.

    ``B[w, w] = 1`` and ``B[w, S_w∖w] = -H[:, S_w∖w]⁻¹ H[:, w]``.
    """
    s, n = h.shape
    encoding = np.eye(n)
    for w in range(n):
        others = [(w + i) % n for i in range(1, s + 1)]
        if others:
            encoding[w, others] = -np.linalg.solve(h[:, others], h[:, w])
    return encoding
