"""``bernoulli``: every transmission is lost independently with probability ``p``."""

from __future__ import annotations

import numpy as np

from gclab.errors import ConfigError
from gclab.network import draws
from gclab.network.base import DelayModel, probability


class Bernoulli(DelayModel):
    """I.i.d. packet loss: the setting of the pipelined schemes.

    See docs/design.md, "Codes across time".
    """

    def __init__(self, p: float = 0.1) -> None:
        self.p = probability("p", p)
        if self.p == 1:  # the protocol would retry 4096 times per packet, then give up
            raise ConfigError(
                "p=1 is invalid: every transmission would be lost and no job could "
                "ever decode; use a probability in [0, 1).",
                param="p",
            )

    @property
    def loss_rate(self) -> float:
        return self.p

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        return draws.uniform(seed, draws.LOSS, round, n) < self.p

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        return draws.attempts(seed, round, packet_round, (attempts, n)) < self.p
