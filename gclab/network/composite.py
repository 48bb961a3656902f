"""``composite``: two models on one path, e.g. stragglers plus bursty packet loss.

Both parts are ordinary ``gclab/conf/delay`` options (``delay@delay.compute=trace``,
``delay@delay.loss=gilbert_elliott``): their delays add and a transmission is lost if
either part loses it, like two independent stages in series. Each part draws from its
own seed, derived from the run's seed and its slot, so two parts of the same kind are
independent.
"""

from __future__ import annotations

from functools import lru_cache

import numpy as np

from gclab.errors import ConfigError, under
from gclab.network import draws
from gclab.network.base import DelayModel
from gclab.network.links import Links


class Composite(DelayModel):
    """``compute`` and ``loss`` combined: delays add, losses combine by OR.

    The config layer builds each part from its ``gclab/conf/delay`` option first
    (:func:`gclab.schemas.instantiate_checked`), under its slot, so a part's ConfigError
    names the key the user typed, ``delay.<slot>.<key>``; :meth:`check` names the slot
    the same way.
    """

    def __init__(self, compute: DelayModel, loss: DelayModel) -> None:
        for slot, part in (("compute", compute), ("loss", loss)):
            if not isinstance(part, DelayModel):
                raise ConfigError(
                    f"{slot}={part!r} is invalid: "
                    "it must be a delay model (a gclab/conf/delay option).",
                    param=slot,
                )
        self.parts = (compute, loss)
        timed = [part for part in self.parts if part.timed]
        per_round = [part for part in self.parts if type(part).lost is not DelayModel.lost]
        if timed and any(not part.timed for part in per_round):
            raise ConfigError(
                "compute and loss cannot mix a loss model that evolves in time "
                "(gilbert_elliott_time) with one that loses per round; use one kind for both.",
                param="compute",
            )
        #: Whether losses evolve in time (a part's do).
        self.timed = bool(timed)
        #: Whether the delays depend on the bytes moved (a part's do).
        self.sized = any(part.sized for part in self.parts)

    @property
    def computes(self) -> bool:
        """A part's delays are the compute time (``delay@delay.compute=trace``)."""
        return any(part.computes for part in self.parts)

    @property
    def loss_rate(self) -> float:
        """Lost if either part loses it; the parts draw independently."""
        compute, loss = self.parts
        return 1.0 - (1.0 - compute.loss_rate) * (1.0 - loss.loss_rate)

    def check(self, n: int, rounds: int) -> None:
        for slot, part in zip(("compute", "loss"), self.parts):
            with under(slot):
                part.check(n, rounds)

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        compute, loss = self.parts
        return compute.delays(round, n, part_seed(seed, 0), load) + loss.delays(
            round, n, part_seed(seed, 1), load
        )

    def delays_by_load(self, rounds: int, n: int, seed: int, loads: np.ndarray) -> np.ndarray:
        compute, loss = self.parts
        return compute.delays_by_load(rounds, n, part_seed(seed, 0), loads) + loss.delays_by_load(
            rounds, n, part_seed(seed, 1), loads
        )

    def transfer_delays(
        self, round: int, n: int, seed: int, size: float, links: Links
    ) -> np.ndarray:
        compute, loss = self.parts
        return compute.transfer_delays(
            round, n, part_seed(seed, 0), size, links
        ) + loss.transfer_delays(round, n, part_seed(seed, 1), size, links)

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        compute, loss = self.parts
        return compute.lost(round, n, part_seed(seed, 0)) | loss.lost(round, n, part_seed(seed, 1))

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        compute, loss = self.parts
        return compute.relost(round, packet_round, attempts, n, part_seed(seed, 0)) | loss.relost(
            round, packet_round, attempts, n, part_seed(seed, 1)
        )

    def lost_at(self, workers: np.ndarray, times: np.ndarray, seed: int) -> np.ndarray:
        compute, loss = self.parts
        return compute.lost_at(workers, times, part_seed(seed, 0)) | loss.lost_at(
            workers, times, part_seed(seed, 1)
        )


@lru_cache(maxsize=256)
def part_seed(seed: int, slot: int) -> int:
    """The seed of part ``slot``: derived, so that the parts draw independently."""
    return int(draws.generator(seed, slot).integers(2**63))
