"""Where a run's worker actors go: one Ray placement group, one bundle per actor.

``cluster.placement=pack`` puts the bundles on as few nodes as possible, ``spread`` on
as many as possible (Ray's ``PACK`` and ``SPREAD``: both best effort, so a run still
starts where the preferred layout does not fit). The group is reserved as a whole or
not at all, so runs that share a cluster never each grab part of what they need and
all wait for the rest. A reservation the cluster could never grant is refused at once;
how long a run waits for one it could grant is the caller's start-up deadline
(:mod:`gclab.runtime.pool`). Actors that reserve nothing (``worker_cpus=0``,
``worker_gpus=0``) and are pinned nowhere cannot form bundles; they get Ray's ``SPREAD``
or default scheduling instead.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from enum import StrEnum
from typing import Any

import ray
from ray.util.placement_group import (
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from gclab.errors import ConfigError


class Strategy(StrEnum):
    """How the actors' bundles spread over Ray's nodes (``cluster.placement``)."""

    pack = "pack"
    spread = "spread"


class Placement:
    """The reservation of ``actors`` actors of ``cpus`` CPUs and ``gpus`` GPUs each.

    ``pins`` (one mapping per actor, or none) adds resources to actor ``i``'s bundle that
    only one node has, e.g. Ray's ``node:<ip>``: actor ``i`` then runs there, whatever
    the strategy (``cluster=netns`` lays its workers out so).
    """

    def __init__(
        self,
        actors: int,
        cpus: float,
        gpus: float,
        strategy: Strategy,
        pins: Sequence[Mapping[str, float]] = (),
    ) -> None:
        self.strategy = Strategy(strategy)
        self.bundle = {name: v for name, v in (("CPU", cpus), ("GPU", gpus)) if v > 0}
        self.cpus, self.gpus = cpus, gpus
        self.group = None
        bundles = [{**self.bundle, **pin} for pin in pins] or [self.bundle] * actors
        if self.bundle or pins:
            _check_fits(actors, self.bundle)
            self.group = placement_group(bundles, strategy=strategy.upper())

    def wait(self, timeout: float) -> bool:
        """Whether the whole reservation is granted within ``timeout`` seconds.

        Other runs may hold the resources until then; without a group there is nothing
        to wait for.
        """
        return self.group is None or self.group.wait(timeout_seconds=timeout)

    def options(self, i: int) -> dict[str, Any]:
        """Ray actor options that place actor ``i`` in its bundle."""
        if self.group is None:
            strategy = "SPREAD" if self.strategy == "spread" else "DEFAULT"
        else:
            strategy = PlacementGroupSchedulingStrategy(self.group, placement_group_bundle_index=i)
        return {"num_cpus": self.cpus, "num_gpus": self.gpus, "scheduling_strategy": strategy}

    def nodes(self) -> list[str]:
        """The Ray node of each bundle (empty without a group): where the actors run."""
        if self.group is None:
            return []
        return list(placement_group_table(self.group)["bundles_to_node_id"].values())

    def remove(self) -> None:
        if self.group is not None:
            remove_placement_group(self.group)
            self.group = None


def _check_fits(actors: int, bundle: dict[str, float]) -> None:
    """Refuse a reservation the cluster could never grant (Ray would wait for it forever)."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    for name, per_actor in bundle.items():
        total = sum(n.get(name, 0.0) for n in nodes)
        largest = max((n.get(name, 0.0) for n in nodes), default=0.0)
        if actors * per_actor > total or per_actor > largest:
            raise ConfigError(
                "the worker actors can never start: they ask for "
                f"{demand(actors, name, per_actor)} while the Ray cluster has "
                f"{count(total, name)} (at most {largest:g} on one node); {ADVICE}."
            )


#: What to change when the actors ask for more than the cluster has.
ADVICE = "lower cluster.worker_cpus/worker_gpus or cluster.actors, or add nodes"


def asks(cpus: float, gpus: float) -> list[tuple[str, float]]:
    """``(resource, amount per actor)`` of what an actor asks Ray for."""
    return [("CPU", cpus)] + ([("GPU", gpus)] if gpus else [])


def demand(actors: int, unit: str, each: float) -> str:
    """What ``actors`` actors ask for of ``unit``, and the settings that make it."""
    key = f"worker_{unit.lower()}s"
    return f"{count(actors * each, unit)} (cluster.actors={actors} x cluster.{key}={each:g})"


def count(amount: float, unit: str) -> str:
    """``amount`` of ``unit``, plural unless it is one."""
    return f"{amount:g} {unit}" + ("" if amount == 1 else "s")
