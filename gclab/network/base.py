"""The delay/loss model interface; the base class itself is the perfect network (``none``).

A model answers three questions for a run with ``n`` workers and a seed: how much
extra time each worker's packet takes in a round (:meth:`DelayModel.delays`), which
first transmissions are lost (:meth:`DelayModel.lost`), and which retransmission
attempts are lost (:meth:`DelayModel.relost`); a model whose losses evolve in time
(``timed``) answers the last two by sending time instead (:meth:`DelayModel.lost_at`).
Every answer is a pure function of its arguments (draws come from
:mod:`gclab.network.draws`), so both engines see the same pattern for the same seed.
Models are built by Hydra from ``gclab/conf/delay/<name>.yaml`` and validate their
parameters in ``__init__``, raising :class:`ConfigError`.
"""

from __future__ import annotations

import math

import numpy as np

from gclab.errors import ConfigError
from gclab.network.links import Links


class DelayModel:
    """No extra delay and no loss. Subclasses override what they model."""

    #: Whether losses evolve in time rather than per round and attempt: the protocol then
    #: asks :meth:`lost_at` with each transmission's sending time instead of :meth:`lost`
    #: and :meth:`relost`.
    timed: bool = False
    #: Long-run probability that a first transmission is lost: what reports plot against
    #: and runs record in ``summary.json``. A model that loses packets overrides it; one
    #: that never does keeps this 0, whatever its parameters.
    loss_rate: float = 0.0
    #: Whether the delays are the workers' whole compute time, scaled by load (a trace of
    #: measured completion times), not time on top of it: the simulator then adds no
    #: compute time of its own by default (:func:`gclab.sim.engine.unit_time`).
    computes: bool = False
    #: Whether the delays also depend on the bytes a round moves: the protocol then adds
    #: :meth:`transfer_delays`, and engines that compute delays from the load alone (the
    #: fast search) leave the model to it.
    sized: bool = False

    def check(self, n: int, rounds: int) -> None:
        """Raise :class:`ConfigError` if the model cannot serve ``n`` workers for ``rounds``.

        Engines call this before doing any work, so a trace that is too short fails
        in one sentence instead of in the middle of a run.
        """

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        """Extra seconds ``[n]`` each worker's packet of ``round`` takes (``load``: scheme load)."""
        return np.zeros(n)

    def delays_by_load(self, rounds: int, n: int, seed: int, loads: np.ndarray) -> np.ndarray:
        """``[len(loads), rounds, n]``: :meth:`delays` of rounds ``0 .. rounds−1`` at each load.

        The fast parameter search (:mod:`gclab.sim.fast`) asks for every load of a grid at
        once. This asks :meth:`delays` once per load and round; models that can answer
        faster override it with the same values, bit for bit. The caller owns the array
        returned and may write into it, unless it is read-only (e.g. a broadcast view).
        """
        out = np.empty((len(loads), rounds, n))
        for i, load in enumerate(np.asarray(loads, dtype=np.float64).tolist()):
            for r in range(rounds):
                out[i, r] = self.delays(r, n, seed, load)
        return out

    def transfer_delays(
        self, round: int, n: int, seed: int, size: float, links: Links
    ) -> np.ndarray:
        """Extra seconds ``[n]`` that moving ``round``'s bytes costs each worker beyond the
        ``links``' time: the weights' broadcast (``links.payload`` bytes) and a packet of
        ``size`` bytes. None here; models with ``sized = True`` override it."""
        return np.zeros(n)

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        """Which workers' first transmission in ``round`` is lost, ``bool [n]``."""
        return np.zeros(n, dtype=bool)

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        """Loss of retransmission attempts ``1..attempts`` in ``round``, ``bool [attempts, n]``.

        Attempt ``a`` of worker ``w`` resends its packet of ``packet_round``. Prefix-stable
        in ``attempts``: asking for more attempts repeats the earlier answers.
        """
        return np.zeros((attempts, n), dtype=bool)

    def lost_at(self, workers: np.ndarray, times: np.ndarray, seed: int) -> np.ndarray:
        """Loss of transmissions by ``workers`` sent at ``times`` (``[..., len(workers)]``,
        seconds on the run's clock), ``bool`` of the shape of ``times``. Models with
        ``timed = True`` answer it; a pure function of its arguments."""
        return np.zeros(np.shape(times), dtype=bool)


def probability(
    name: str, value: float, *, positive: bool = False, below_one: bool = False
) -> float:
    """``value`` as a float in [0, 1] (optionally excluding 0 or 1), else :class:`ConfigError`."""
    low = "(0" if positive else "[0"
    high = "1)" if below_one else "1]"
    v = number(name, value)
    if v < 0 or v > 1 or (positive and v == 0) or (below_one and v == 1):
        raise ConfigError(
            f"{name}={value!r} is invalid: it must be a probability in {low}, {high}.", param=name
        )
    return v


def non_negative(name: str, value: float) -> float:
    """``value`` as a finite float >= 0, else :class:`ConfigError`."""
    v = number(name, value)
    if v < 0:
        raise ConfigError(f"{name}={value!r} is invalid: it must be >= 0.", param=name)
    return v


def integer(name: str, value: int, low: int, high: float, what: str) -> int:
    """``value`` as an int if it is an integer in ``[low, high]``, else
    :class:`ConfigError` saying it must be an integer ``what``."""
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        valid = False
    else:
        valid = low <= value <= high
    if not valid:
        raise ConfigError(f"{name}={value!r} is invalid: it must be an integer {what}.", param=name)
    return int(value)


def number(name: str, value: float) -> float:
    """``value`` as a finite float, else :class:`ConfigError`."""
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = math.nan
    if isinstance(value, bool) or not math.isfinite(v):
        raise ConfigError(f"{name}={value!r} is invalid: it must be a finite number.", param=name)
    return v
