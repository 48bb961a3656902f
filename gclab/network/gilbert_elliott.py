"""``gilbert_elliott``: bursty loss from a two-state (good/bad) Markov chain per worker.

Each worker's channel is good or bad; it switches good→bad with ``p_good_bad`` and
bad→good with ``p_bad_good`` once per round, and loses a packet with ``loss_good`` or
``loss_bad``. The chain can be given directly, or as a Gilbert channel (``loss_good=0``,
``loss_bad=1``) by its mean loss rate and mean burst length (mean run of consecutive
losses): ``p_bad_good = 1/burst_length``, ``p_good_bad = loss_rate·p_bad_good/(1−loss_rate)``.
Retransmission attempts continue the worker's chain from its state in the round they
are made, one step per attempt, so a bad channel also delays recovery; they never feed
back into the per-round chain, which keeps first-attempt patterns identical across
schemes (paired comparisons).
"""

from __future__ import annotations

import numpy as np

from gclab.errors import ConfigError
from gclab.network import draws
from gclab.network.base import DelayModel, number, probability


class GilbertElliott(DelayModel):
    """Per-worker Gilbert–Elliott loss; the initial state is drawn from the stationary law."""

    def __init__(
        self,
        p_good_bad: float | None = None,
        p_bad_good: float | None = None,
        loss_good: float = 0.0,
        loss_bad: float = 1.0,
        loss_rate: float | None = None,
        burst_length: float | None = None,
    ) -> None:
        chain = p_good_bad is not None or p_bad_good is not None
        rate = loss_rate is not None or burst_length is not None
        if chain == rate:
            raise ConfigError(
                "delay=gilbert_elliott needs either delay.p_good_bad and delay.p_bad_good, "
                "or delay.loss_rate and delay.burst_length" + (", not both." if chain else ".")
            )
        self.loss_good = probability("loss_good", loss_good)
        self.loss_bad = probability("loss_bad", loss_bad)
        if rate:
            self.p_good_bad, self.p_bad_good = self._from_rate(loss_rate, burst_length)
        else:
            if p_good_bad is None or p_bad_good is None:
                missing = "p_good_bad" if p_good_bad is None else "p_bad_good"
                raise ConfigError(
                    f"delay.{missing} is missing: the chain needs both probabilities."
                )
            self.p_good_bad = probability("p_good_bad", p_good_bad)
            self.p_bad_good = probability("p_bad_good", p_bad_good, positive=True)
        good_forever = self.p_good_bad == 0  # the stationary law starts every worker good
        if self.loss_good == 1 and (self.loss_bad == 1 or good_forever):
            raise ConfigError(
                f"delay.loss_good=1 with loss_bad={self.loss_bad} and "
                f"p_good_bad={self.p_good_bad} loses every transmission, so no job could ever "
                "decode; lower loss_good (or loss_bad with p_good_bad > 0)."
            )
        self._chains: dict[tuple[int, int], list[np.ndarray]] = {}

    def _from_rate(
        self, loss_rate: float | None, burst_length: float | None
    ) -> tuple[float, float]:
        if loss_rate is None or burst_length is None:
            missing = "loss_rate" if loss_rate is None else "burst_length"
            raise ConfigError(
                f"delay.{missing} is missing: loss_rate and burst_length go together."
            )
        if (self.loss_good, self.loss_bad) != (0.0, 1.0):
            raise ConfigError(
                f"delay.loss_good={self.loss_good} and delay.loss_bad={self.loss_bad} do not fit "
                "loss_rate/burst_length, which describe a Gilbert channel "
                "(loss_good=0, loss_bad=1)."
            )
        rate = probability("loss_rate", loss_rate, below_one=True)
        burst = number("burst_length", burst_length)
        if burst < 1:
            raise ConfigError(
                f"delay.burst_length={burst_length!r} is invalid: it must be >= 1 round."
            )
        p_bad_good = 1.0 / burst
        p_good_bad = rate * p_bad_good / (1.0 - rate)
        if p_good_bad > 1:
            raise ConfigError(
                f"delay.loss_rate={loss_rate!r} is impossible with burst_length={burst_length!r}: "
                f"it must be <= burst_length/(1+burst_length) = {burst / (1 + burst):.4g}."
            )
        return p_good_bad, p_bad_good

    @property
    def stationary_bad(self) -> float:
        """Long-run fraction of rounds a worker's channel is bad."""
        total = self.p_good_bad + self.p_bad_good
        return self.p_good_bad / total

    @property
    def loss_rate(self) -> float:
        """Long-run fraction of lost first transmissions."""
        bad = self.stationary_bad
        return bad * self.loss_bad + (1 - bad) * self.loss_good

    def _step(self, bad: np.ndarray, u: np.ndarray) -> np.ndarray:
        return np.where(bad, u >= self.p_bad_good, u < self.p_good_bad)

    def _loss(self, bad: np.ndarray, u: np.ndarray) -> np.ndarray:
        return u < np.where(bad, self.loss_bad, self.loss_good)

    def bad(self, round: int, n: int, seed: int) -> np.ndarray:
        """Channel state (``True`` = bad) of every worker in ``round``.

        The chain is extended a block of rounds at a time and kept, so asking for
        rounds in any order gives the same states.
        """
        blocks = self._chains.setdefault((seed, n), [])
        while len(blocks) <= round // draws.BLOCK:
            index = len(blocks)
            u = draws.uniform_block(seed, draws.TRANSITION, index, n)
            if blocks:
                state = self._step(blocks[-1][-1], u[0])
            else:
                state = draws.uniform(seed, draws.INITIAL, 0, n) < self.stationary_bad
            block = np.empty((draws.BLOCK, n), dtype=bool)
            block[0] = state
            for row in range(1, draws.BLOCK):
                block[row] = state = self._step(state, u[row])
            blocks.append(block)
        return blocks[round // draws.BLOCK][round % draws.BLOCK]

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        return self._loss(self.bad(round, n, seed), draws.uniform(seed, draws.LOSS, round, n))

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        u = draws.attempts(seed, round, packet_round, (attempts, 2, n))
        state = self.bad(round, n, seed)
        out = np.empty((attempts, n), dtype=bool)
        for a in range(attempts):
            state = self._step(state, u[a, 0])
            out[a] = self._loss(state, u[a, 1])
        return out
