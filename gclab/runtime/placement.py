"""Where a run's worker actors go: one Ray placement group, one bundle per actor.

``cluster.placement=pack`` puts the bundles on as few nodes as possible, ``spread`` on
as many as possible (Ray's ``PACK`` and ``SPREAD``: both best effort, so a run still
starts where the preferred layout does not fit). The group is reserved as a whole or
not at all, so runs that share a cluster (a parallel sweep) queue for it instead of
each grabbing part of what it needs and all of them waiting forever. Actors that
reserve nothing (``worker_cpus=0``, ``worker_gpus=0``) cannot form bundles; they get
Ray's ``SPREAD`` or default scheduling instead.
"""

from __future__ import annotations

import logging
from typing import Any

import ray
from ray.util.placement_group import (
    placement_group,
    placement_group_table,
    remove_placement_group,
)
from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

from gclab.errors import ConfigError

log = logging.getLogger(__name__)

STRATEGIES = ("pack", "spread")

#: Seconds between two log lines while a run waits for its reservation.
WAIT_LOG_SECONDS = 60.0


def check_strategy(strategy: str) -> str:
    if strategy not in STRATEGIES:
        raise ConfigError(
            f"cluster.placement={strategy!r} is invalid: it must be one of {', '.join(STRATEGIES)}."
        )
    return strategy


class Placement:
    """The reservation of ``actors`` actors of ``cpus`` CPUs and ``gpus`` GPUs each."""

    def __init__(self, actors: int, cpus: float, gpus: float, strategy: str) -> None:
        self.strategy = check_strategy(strategy)
        self.bundle = {name: v for name, v in (("CPU", cpus), ("GPU", gpus)) if v > 0}
        self.cpus, self.gpus = cpus, gpus
        self.group = None
        if self.bundle:
            _check_fits(actors, self.bundle)
            self.group = placement_group([self.bundle] * actors, strategy=strategy.upper())

    def wait(self) -> None:
        """Block until the whole reservation is granted (other runs may hold the resources)."""
        if self.group is None:
            return
        while not self.group.wait(timeout_seconds=WAIT_LOG_SECONDS):
            log.info("waiting for the Ray cluster to free %s per actor", self.bundle)

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
    """Refuse a reservation the cluster could never grant (Ray would wait forever)."""
    nodes = [n["Resources"] for n in ray.nodes() if n.get("Alive")]
    for name, per_actor in bundle.items():
        total = sum(n.get(name, 0.0) for n in nodes)
        largest = max((n.get(name, 0.0) for n in nodes), default=0.0)
        key = {"CPU": "worker_cpus", "GPU": "worker_gpus"}[name]
        if actors * per_actor > total or per_actor > largest:
            raise ConfigError(
                f"{actors} actors with cluster.{key}={per_actor} need {actors * per_actor:g} "
                f"{name}s (at most {largest:g} on one node), but the Ray cluster has "
                f"{total:g}; lower cluster.{key} or cluster.actors."
            )
