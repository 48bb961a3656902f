"""``is_cr``: IS-GC's cyclic repetition (worker ``w`` sums partitions ``w .. w+c−1``).

The placement and the decoder: :mod:`gclab.coding.repetition` (docs/design.md, "IS-GC's
repetition codes"). It needs ``c | n``: only then can arrived windows tile all ``n``
partitions, so that a job decodes whole.
"""

from __future__ import annotations

from typing import Any

from gclab.coding import params
from gclab.coding.contract import Shape
from gclab.coding.repetition import RepetitionScheme
from gclab.coding.windows import Windows


class IsCR(RepetitionScheme):
    """Cyclic windows of ``c`` partitions; a maximum set of disjoint arrived windows."""

    name = "is_cr"

    def __init__(self, n: int, c: int = 2) -> None:
        self._check_workers(n)
        c = params.divisor("c", c, n, "n", f"n={n}", f"c for n={n}")
        self._init_windows(Windows(n, c, 0, 1))

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        """Every ``c | n``."""
        return [{"c": c} for c in range(1, n + 1) if n % c == 0]

    @classmethod
    def shape(cls, n: int, c: int = 2) -> Shape:
        return Shape(c / n, 0, 1.0, f"{cls.name}(n={n}, c={c})")

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, c={self.windows.c})"
