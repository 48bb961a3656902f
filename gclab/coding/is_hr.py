"""``is_hr``: IS-GC's hybrid repetition (``c1`` partitions cyclic in a group of ``n/g``
workers, ``c − c1`` from the worker's own id on, across the group's end).

The placement and the decoder: :mod:`gclab.coding.repetition` (docs/design.md, "IS-GC's
repetition codes"). It needs ``g | n`` and ``c | n/g`` (then every group can be tiled on
its own, and arrived windows can tile all ``n`` partitions) and ``0 ≤ c1 ≤ c``.
``c1 = 0`` is ``is_cr``; ``c1 = c`` with ``n/g = c`` is fractional repetition.
"""

from __future__ import annotations

from typing import Any

from gclab.coding import params
from gclab.coding.contract import Shape
from gclab.coding.repetition import RepetitionScheme
from gclab.coding.windows import Windows


class IsHR(RepetitionScheme):
    """Hybrid windows (FR inside groups, CR across them); a maximum disjoint set."""

    name = "is_hr"

    def __init__(self, n: int, c: int = 2, c1: int = 1, g: int = 2) -> None:
        self._check_workers(n)
        g = params.divisor("g", g, n, "n", f"n={n}", f"g for n={n}")
        n0 = n // g
        c = params.divisor("c", c, n0, "n/g", f"n/g={n0} (n={n}, g={g})", f"c for n={n}, g={g}")
        c1 = params.integer("c1", c1)
        params.require(
            0 <= c1 <= c, f"c1={c1}", "0 <= c1 <= c", f"c={c}", f"c1 for c={c}", range(c + 1)
        )
        self._init_windows(Windows(n, c, c1, g))

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        """Groups ``g ≥ 2``, ``c ≥ 2`` with ``c | n/g``, ``c1`` halving from ``c`` down to 1.

        ``c1 = 0`` and ``g = 1`` are left out: both are ``is_cr``'s windows (``g = 1``
        shifted by ``c1``), whose grid has them.
        """
        grid = []
        for g in range(2, n + 1):
            if n % g:
                continue
            for c in range(2, n // g + 1):
                if (n // g) % c == 0:
                    ladder = dict.fromkeys(c >> k for k in range(c.bit_length()))
                    grid += [{"c": c, "c1": c1, "g": g} for c1 in ladder]
        return grid

    @classmethod
    def shape(cls, n: int, c: int = 2, c1: int = 1, g: int = 2) -> Shape:
        return Shape(c / n, 0, 1.0, f"{cls.name}(n={n}, c={c}, c1={c1}, g={g})")

    def describe(self) -> str:
        w = self.windows
        return f"{self.name}(n={self.n}, c={w.c}, c1={w.c1}, g={w.g})"
