"""How logical workers are packed into actors and how their compute is measured (no Ray)."""

import pytest

from gclab.runtime.cluster import Cluster
from gclab.runtime.timing import ComputeTime


@pytest.mark.parametrize(
    ("workers", "threads", "worker_cpus", "cpus", "actors"),
    [(16, 1, 0.5, 2, 2), (16, 2, 0.5, 8, 4), (3, 1, 1, 64, 3), (4, 4, 1, 2, 1),
     (8, 1, 0.5, 0.5, 1), (16, 1, 2, 8, 4)],
)  # fmt: skip
def test_default_actors_never_outnumber_the_cores(
    workers, threads, worker_cpus, cpus, actors
) -> None:
    cluster = Cluster(workers=workers, threads_per_actor=threads, worker_cpus=worker_cpus)
    assert cluster.default_actors(cpus) == actors


def test_wall_clock_default_is_one_actor_per_worker_and_explicit_actors_win() -> None:
    assert Cluster(workers=3).groups(one_per_worker=True) == [[0], [1], [2]]
    assert Cluster(workers=5, actors=2).groups(one_per_worker=True) == [[0, 1, 2], [3, 4]]


@pytest.mark.parametrize(
    ("threads", "setting", "measure"),
    [(1, "auto", ComputeTime.cpu), (2, "auto", ComputeTime.wall), (1, "wall", ComputeTime.wall),
     (1, "cpu", ComputeTime.cpu), (3, "wall", ComputeTime.wall)],
)  # fmt: skip
def test_compute_time_is_thread_cpu_time_only_for_one_thread(threads, setting, measure) -> None:
    assert Cluster(threads_per_actor=threads, compute_time=setting).compute_time is measure
