"""``uncoded``: every worker computes its own shard; the master waits for all n."""

from __future__ import annotations

from typing import Any

import numpy as np

from gclab.coding.contract import Shape
from gclab.coding.linear import LinearScheme


class Uncoded(LinearScheme):
    """Plain synchronous data parallelism (B = identity): tolerates no erasure."""

    name = "uncoded"
    exact_predicate = True

    def __init__(self, n: int) -> None:
        self._check_workers(n)
        self._init_linear(n, 0, np.eye(n))

    @classmethod
    def search_grid(cls, n: int, recovery: str) -> list[dict[str, Any]]:
        return [{}]  # nothing to choose

    @classmethod
    def shape(cls, n: int) -> Shape:
        return Shape(1 / n, 0, 1.0, f"{cls.name}(n={n}, s=0, T=0)")

    def decoding_weights(self, survivors: tuple[int, ...]) -> np.ndarray | None:
        if len(survivors) < self.n:
            return None
        return np.ones((1, len(survivors)))
