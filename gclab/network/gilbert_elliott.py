"""Bursty loss from a two-state (good/bad) Markov chain per worker, per round or in time.

``gilbert_elliott`` (:class:`GilbertElliott`) steps its chain once per round and once
per retransmission attempt; ``gilbert_elliott_time`` (:class:`TimedGilbertElliott`)
lets it evolve in continuous time, so that bursts last seconds whatever the rounds and
attempts do.

**Per round and attempt.**

Each worker's channel is good or bad; it switches good→bad with ``p_good_bad`` and
bad→good with ``p_bad_good`` once per round, and loses a packet with ``loss_good`` or
``loss_bad``. The chain can be given directly, or as a Gilbert channel (``loss_good=0``,
``loss_bad=1``) by its mean loss rate and mean burst length (mean run of consecutive
losses): ``p_bad_good = 1/burst_length``, ``p_good_bad = loss_rate·p_bad_good/(1−loss_rate)``.
Retransmission attempts continue the worker's chain from its state in the round they
are made, one step per attempt, so a bad channel also delays recovery; they never feed
back into the per-round chain, which keeps first-attempt patterns identical across
schemes (paired comparisons). A burst of ``b`` rounds thus lasts ``b`` rounds for first
transmissions but ``b`` retransmission attempts (``b·rto`` seconds) for a lost packet.

**In time** (the study's choice, docs/simulator.md). A Gilbert channel per worker whose
bad periods last ``burst_seconds`` on average and cover ``loss_rate`` of the time: the
sojourns are exponential (means ``burst_seconds`` bad and
``burst_seconds·(1−loss_rate)/loss_rate`` good) and the first state is drawn from the
stationary law. A transmission is lost when its worker's channel is bad at the moment
it is sent, on the run's clock; first transmissions and retransmissions see the same
burst. The trajectory is drawn from the worker's own seeded stream, extended a block of
sojourns at a time, so every answer is a pure function of (seed, worker, time).
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
                "p_good_bad and p_bad_good, or loss_rate and burst_length: the chain needs "
                "one of these pairs" + (", not both." if chain else "."),
                param="p_good_bad",
            )
        self.loss_good = probability("loss_good", loss_good)
        self.loss_bad = probability("loss_bad", loss_bad)
        #: The loss rate as configured (rate form), else None: the chain's mix gives it.
        self.rate: float | None = None
        if rate:
            self.p_good_bad, self.p_bad_good = self._from_rate(loss_rate, burst_length)
            self.rate = float(loss_rate)
        else:
            if p_good_bad is None or p_bad_good is None:
                missing = "p_good_bad" if p_good_bad is None else "p_bad_good"
                raise ConfigError(
                    f"{missing} is missing: the chain needs both probabilities.", param=missing
                )
            self.p_good_bad = probability("p_good_bad", p_good_bad)
            self.p_bad_good = probability("p_bad_good", p_bad_good, positive=True)
        good_forever = self.p_good_bad == 0  # the stationary law starts every worker good
        if self.loss_good == 1 and (self.loss_bad == 1 or good_forever):
            raise ConfigError(
                f"loss_good=1 with loss_bad={self.loss_bad} and "
                f"p_good_bad={self.p_good_bad} loses every transmission, so no job could ever "
                "decode; lower loss_good (or loss_bad with p_good_bad > 0).",
                param="loss_good",
            )
        self._chains: dict[tuple[int, int], list[np.ndarray]] = {}

    def _from_rate(
        self, loss_rate: float | None, burst_length: float | None
    ) -> tuple[float, float]:
        if loss_rate is None or burst_length is None:
            missing = "loss_rate" if loss_rate is None else "burst_length"
            raise ConfigError(
                f"{missing} is missing: loss_rate and burst_length go together.", param=missing
            )
        if (self.loss_good, self.loss_bad) != (0.0, 1.0):
            raise ConfigError(
                f"loss_good={self.loss_good} and loss_bad={self.loss_bad} do not fit "
                "loss_rate/burst_length, which describe a Gilbert channel "
                "(loss_good=0, loss_bad=1).",
                param="loss_good",
            )
        rate = probability("loss_rate", loss_rate, below_one=True)
        burst = number("burst_length", burst_length)
        if burst < 1:
            raise ConfigError(
                f"burst_length={burst_length!r} is invalid: it must be >= 1 round.",
                param="burst_length",
            )
        p_bad_good = 1.0 / burst
        p_good_bad = rate * p_bad_good / (1.0 - rate)
        if p_good_bad > 1:
            raise ConfigError(
                f"loss_rate={loss_rate!r} is impossible with burst_length={burst_length!r}: "
                f"it must be <= burst_length/(1+burst_length) = {burst / (1 + burst):.4g}.",
                param="loss_rate",
            )
        return p_good_bad, p_bad_good

    @property
    def stationary_bad(self) -> float:
        """Long-run fraction of rounds a worker's channel is bad."""
        total = self.p_good_bad + self.p_bad_good
        return self.p_good_bad / total

    @property
    def loss_rate(self) -> float:
        """Long-run fraction of lost first transmissions: the configured rate in the rate
        form (the chain's mix equals it up to rounding), else the chain's stationary mix."""
        if self.rate is not None:
            return self.rate
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


class TimedGilbertElliott(DelayModel):
    """Per-worker Gilbert channel in continuous time: bursts of ``burst_seconds`` on average."""

    timed = True

    def __init__(self, loss_rate: float = 0.1, burst_seconds: float = 1.0) -> None:
        self.loss_rate = probability("loss_rate", loss_rate, below_one=True)
        burst = number("burst_seconds", burst_seconds)
        if burst <= 0:
            raise ConfigError(
                f"burst_seconds={burst_seconds!r} is invalid: it must be a number of seconds > 0.",
                param="burst_seconds",
            )
        self.burst_seconds = burst
        self.good_seconds = burst * (1 - self.loss_rate) / self.loss_rate if self.loss_rate else 0
        #: (seed, worker) -> (bad at time 0, switching times so far)
        self._paths: dict[tuple[int, int], tuple[bool, np.ndarray]] = {}

    def _path(self, seed: int, worker: int, until: float) -> tuple[bool, np.ndarray]:
        """The worker's first state and its switching times, drawn at least up to ``until``."""
        key = (seed, worker)
        if key not in self._paths:
            bad = bool(draws.generator(seed, draws.SOJOURN, worker).random() < self.loss_rate)
            self._paths[key] = (bad, np.empty(0))
        bad, switches = self._paths[key]
        while switches.size == 0 or switches[-1] <= until:
            block = switches.size // draws.BLOCK
            means = np.full(draws.BLOCK, self.burst_seconds)
            good = np.arange(switches.size, switches.size + draws.BLOCK) % 2 == int(bad)
            means[good] = self.good_seconds  # sojourn i is bad when i is even and bad at 0
            sojourns = draws.exponential_run(seed, draws.SOJOURN, worker, block) * means
            start = switches[-1] if switches.size else 0.0
            switches = np.concatenate([switches, start + np.cumsum(sojourns)])
            self._paths[key] = (bad, switches)
        return bad, switches

    def lost_at(self, workers: np.ndarray, times: np.ndarray, seed: int) -> np.ndarray:
        times = np.asarray(times, dtype=np.float64)
        out = np.zeros(times.shape, dtype=bool)
        if self.loss_rate == 0:
            return out
        for j, worker in enumerate(np.asarray(workers).tolist()):
            t = times[..., j]
            bad, switches = self._path(seed, worker, float(t.max(initial=0.0)))
            flips = np.searchsorted(switches, t, side="right")
            out[..., j] = (flips % 2 == 0) == bad
        return out
