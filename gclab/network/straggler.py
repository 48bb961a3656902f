"""``straggler``: shifted-exponential extra compute delay per worker per round.

Worker ``w`` is slowed by ``shift + Exp(mean)`` seconds in every round, independently
(the classic straggler model of coded computation), and ``slow_workers`` workers chosen
by the seed (fixed for the run) have that delay multiplied by ``slow_factor``: the
persistent stragglers against which ignoring stragglers is biased. The delay does not
depend on the scheme's load; engines add load-proportional compute time themselves.
"""

from __future__ import annotations

import math

import numpy as np

from gclab.errors import ConfigError
from gclab.network import draws
from gclab.network.base import DelayModel, integer, non_negative, number


class Straggler(DelayModel):
    """Extra delay ``shift + Exp(mean)`` seconds, times ``slow_factor`` on the slow workers."""

    def __init__(
        self, shift: float = 0.0, mean: float = 1.0, slow_workers: int = 0, slow_factor: float = 5.0
    ) -> None:
        self.shift = non_negative("shift", shift)
        self.mean = non_negative("mean", mean)
        self.slow_workers = integer("slow_workers", slow_workers, 0, math.inf, ">= 0")
        self.slow_factor = number("slow_factor", slow_factor)
        if self.slow_factor < 1:
            raise ConfigError(
                f"slow_factor={slow_factor!r} is invalid: it must be >= 1.", param="slow_factor"
            )

    def check(self, n: int, rounds: int) -> None:
        if self.slow_workers > n:
            raise ConfigError(
                f"slow_workers={self.slow_workers} is invalid: the run has only {n} workers.",
                param="slow_workers",
            )

    def slow(self, n: int, seed: int) -> np.ndarray:
        """Which workers are persistently slow, ``bool [n]`` (fixed by the seed)."""
        mask = np.zeros(n, dtype=bool)
        mask[draws.generator(seed, draws.SLOW).permutation(n)[: self.slow_workers]] = True
        return mask

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        extra = self.shift + self.mean * draws.exponential(seed, draws.DELAY, round, n)
        if self.slow_workers:
            extra = np.where(self.slow(n, seed), extra * self.slow_factor, extra)
        return extra

    def delays_by_load(self, rounds: int, n: int, seed: int, loads: np.ndarray) -> np.ndarray:
        """The delay does not depend on the load: one draw per round, seen at every load."""
        rows = np.array([self.delays(r, n, seed, 0.0) for r in range(rounds)]).reshape(rounds, n)
        return np.broadcast_to(rows, (len(loads), rounds, n))
