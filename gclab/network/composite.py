"""``composite``: two models on one path, e.g. stragglers plus bursty packet loss.

Both parts are ordinary ``gclab/conf/delay`` options (``delay@delay.compute=trace``,
``delay@delay.loss=gilbert_elliott``): their delays add and a transmission is lost if
either part loses it, like two independent stages in series. Each part draws from its
own seed, derived from the run's seed and its slot, so two parts of the same kind are
independent.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
from omegaconf import DictConfig

from gclab.errors import ConfigError
from gclab.network import draws
from gclab.network.base import DelayModel
from gclab.schemas import instantiate_checked, register


@register("delay", "composite")
@dataclass
class CompositeConfig:
    _target_: str = "gclab.network.composite.Composite"
    _recursive_: bool = False  # the parts are built here, so their errors name their slot
    compute: Any = None
    loss: Any = None


class Composite(DelayModel):
    """``compute`` and ``loss`` combined: delays add, losses combine by OR.

    Each part is a delay model or its config (``gclab/conf/delay`` option). A part's own
    ConfigError says ``delay.<key>``; it is re-raised as ``delay.<slot>.<key>``, the key
    the user actually typed.
    """

    def __init__(self, compute: DelayModel | DictConfig, loss: DelayModel | DictConfig) -> None:
        parts = []
        for slot, part in (("compute", compute), ("loss", loss)):
            if isinstance(part, DictConfig) and "_target_" in part:
                with _slot_errors(slot):
                    part = instantiate_checked(part)
            if not isinstance(part, DelayModel):
                raise ConfigError(
                    f"delay.{slot}={part!r} is invalid: "
                    "it must be a delay model (a gclab/conf/delay option)."
                )
            parts.append(part)
        self.parts = tuple(parts)

    def check(self, n: int, rounds: int) -> None:
        for slot, part in zip(("compute", "loss"), self.parts):
            with _slot_errors(slot):
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

    def lost(self, round: int, n: int, seed: int) -> np.ndarray:
        compute, loss = self.parts
        return compute.lost(round, n, part_seed(seed, 0)) | loss.lost(round, n, part_seed(seed, 1))

    def relost(self, round: int, packet_round: int, attempts: int, n: int, seed: int) -> np.ndarray:
        compute, loss = self.parts
        return compute.relost(round, packet_round, attempts, n, part_seed(seed, 0)) | loss.relost(
            round, packet_round, attempts, n, part_seed(seed, 1)
        )


@contextmanager
def _slot_errors(slot: str) -> Iterator[None]:
    """Re-raise a part's ``delay.<key>`` ConfigError as ``delay.<slot>.<key>``."""
    try:
        yield
    except ConfigError as exc:
        message = str(exc)
        if message.startswith("delay."):
            raise ConfigError(f"delay.{slot}.{message.removeprefix('delay.')}") from None
        raise


@lru_cache(maxsize=256)
def part_seed(seed: int, slot: int) -> int:
    """The seed of part ``slot``: derived, so that the parts draw independently."""
    return int(draws.generator(seed, slot).integers(2**63))
