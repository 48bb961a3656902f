"""A delay model seen from a later round: a segment's round ``r`` is the run's ``offset + r``.

An adaptive run numbers rounds per scheme segment (job ``j`` of a segment starts in its
round ``j``); the delay model must see the run's own round numbers, so that the
delays, losses and retransmission draws are those of one continuous run.
"""

from __future__ import annotations

import numpy as np

from gclab.network import DelayModel
from gclab.network.links import Links


class Shifted(DelayModel):
    """``model`` with every round number moved ``offset`` rounds later."""

    def __init__(self, model: DelayModel, offset: int) -> None:
        self.model = model
        self.offset = offset
        self.timed = model.timed
        self.sized = model.sized

    def check(self, n: int, rounds: int) -> None:
        self.model.check(n, self.offset + rounds)

    def delays(self, round: int, n: int, seed: int, load: float) -> np.ndarray:
        return self.model.delays(self.offset + round, n, seed, load)

    def transfer_delays(
        self, round: int, n: int, seed: int, size: float, links: Links
    ) -> np.ndarray:
        return self.model.transfer_delays(self.offset + round, n, seed, size, links)

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        return self.model.lost(self.offset + round, n, seed)

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        shift = self.offset
        return self.model.relost(shift + round, shift + packet_round, attempts, n, seed)

    def lost_at(self, workers: np.ndarray, times: np.ndarray, seed: int) -> np.ndarray:
        return self.model.lost_at(workers, times, seed)
