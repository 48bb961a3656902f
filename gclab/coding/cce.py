"""Communication-computation efficient GC (Ye & Abbe; docs/design.md): ``cce_cr``, ``cce_fr``.

Each worker computes ``s + m`` partial gradients and sends a packet of ``⌈l/m⌉`` scalars:
more computation buys an ``m``-fold smaller packet. ``m = 1`` is classic GC.
"""

from __future__ import annotations

from gclab.coding import params
from gclab.coding.cyclic import CyclicScheme, choose, node_constructions
from gclab.coding.fractional import FractionalScheme


def _check(n: int, s: object, m: object) -> tuple[int, int]:
    """``(s, m)`` with ``0 <= s``, ``m >= 1`` and ``s + m <= n``, else a ConfigError."""
    s = params.integer("s", s)
    m = params.integer("m", m)
    params.require(s >= 0, f"s={s}", "s >= 0", f"n={n}", f"s for n={n}", range(n))
    params.require(m >= 1, f"m={m}", "m >= 1", f"n={n}", f"m for s={s}", range(1, n - s + 1))
    params.require(
        s + m <= n, f"s={s}, m={m}", "s + m <= n", f"n={n}",
        f"m for s={s}, n={n}", range(1, n - s + 1),
    )  # fmt: skip
    return s, m


class CCECR(CyclicScheme):
    """Cyclic CCE-GC: any ``n - s`` packets decode, fewer never do.

    ``construction``: ``rotation`` (roots of unity on float pairs, default) or ``real``
    (real nodes), see :func:`gclab.coding.evaluation.search_nodes`.
    """

    name = "cce_cr"

    def __init__(self, n: int, s: int = 1, m: int = 2, construction: str = "rotation") -> None:
        self._check_workers(n)
        s, m = _check(n, s, m)
        self._init_cyclic(n, s, m, choose(self.name, construction, node_constructions(n, s, m)))

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, s={self.s}, m={self.m}, {self.construction.name})"


class CCEFR(FractionalScheme):
    """Fractional CCE-GC: groups of ``s + m``; decodes when every group keeps ``m`` members.

    ``m = 3`` by default: ``s + m = 4`` divides every ``n`` the README uses (4, 8, 16).
    """

    name = "cce_fr"

    def __init__(self, n: int, s: int = 1, m: int = 3) -> None:
        self._check_workers(n)
        s, m = _check(n, s, m)
        params.require(
            n % (s + m) == 0, f"s={s}, m={m}", "(s+m) | n", f"n={n}",
            f"m for s={s}, n={n}", [v for v in range(1, n - s + 1) if n % (s + v) == 0],
        )  # fmt: skip
        self._init_groups(n, s, m)

    def describe(self) -> str:
        return f"{self.name}(n={self.n}, s={self.s}, m={self.m})"
