"""A reservation the Ray cluster could never grant is refused at once, in one sentence.

Where the actors land (pack, spread) needs real nodes: tests/test_cli.py.
"""

import pytest
import ray

from gclab.errors import ConfigError
from gclab.runtime import placement
from gclab.runtime.placement import Placement


def two_nodes(monkeypatch: pytest.MonkeyPatch, cpus: float, gpus: float = 0.0) -> None:
    node = {"Alive": True, "Resources": {"CPU": cpus, "GPU": gpus}}
    monkeypatch.setattr(ray, "nodes", lambda: [node, node, {"Alive": False, "Resources": {}}])


@pytest.mark.parametrize(
    ("actors", "cpus", "gpus", "sentence"),
    [
        (4, 1.0, 0.0,
         "the worker actors can never start: they ask for 4 CPUs (cluster.actors=4 x "
         "cluster.worker_cpus=1) while the Ray cluster has 2 CPUs (at most 1 on one node); "
         "lower cluster.worker_cpus/worker_gpus or cluster.actors, or add nodes."),
        (1, 1.5, 0.0,
         "the worker actors can never start: they ask for 1.5 CPUs (cluster.actors=1 x "
         "cluster.worker_cpus=1.5) while the Ray cluster has 2 CPUs (at most 1 on one node); "
         "lower cluster.worker_cpus/worker_gpus or cluster.actors, or add nodes."),
        (2, 0.5, 1.0,
         "the worker actors can never start: they ask for 2 GPUs (cluster.actors=2 x "
         "cluster.worker_gpus=1) while the Ray cluster has 0 GPUs (at most 0 on one node); "
         "lower cluster.worker_cpus/worker_gpus or cluster.actors, or add nodes."),
    ],
    ids=["too-many", "too-large-for-any-node", "no-gpu"],
)  # fmt: skip
def test_a_reservation_beyond_the_cluster_is_refused_before_any_actor(
    monkeypatch: pytest.MonkeyPatch, actors, cpus, gpus, sentence
) -> None:
    two_nodes(monkeypatch, cpus=1.0)
    monkeypatch.setattr(placement, "placement_group", pytest.fail)  # nothing is reserved
    with pytest.raises(ConfigError) as info:
        Placement(actors, cpus, gpus, "spread")
    assert str(info.value) == sentence


def test_actors_that_reserve_nothing_have_no_group_to_wait_for() -> None:
    nothing = Placement(3, 0.0, 0.0, "spread")
    assert nothing.group is None and nothing.wait(0.0) and nothing.nodes() == []
    assert nothing.options(2)["scheduling_strategy"] == "SPREAD"
    assert Placement(3, 0.0, 0.0, "pack").options(0)["scheduling_strategy"] == "DEFAULT"


def test_pinned_actors_ask_for_their_nodes_resource_in_their_bundles(monkeypatch) -> None:
    two_nodes(monkeypatch, cpus=2.0)
    made = []
    monkeypatch.setattr(placement, "placement_group", lambda b, strategy: made.append(b))
    pins = [{"node:10.0.0.1": 0.001}, {"node:10.0.0.2": 0.001}, {"node:10.0.0.1": 0.001}]
    Placement(3, 1.0, 0.0, "spread", pins)
    Placement(3, 0.0, 0.0, "spread", pins)  # pinned, so a group even without CPUs
    assert made == [[{"CPU": 1.0, **pin} for pin in pins], pins]
