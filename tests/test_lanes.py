"""How the suite shares the cores (tests/conftest.py): every slow test in one xdist group,
Ray fixtures only in the slow lane, workers only for whole lanes, one thread per pool in
a fast test beside another worker."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import conftest
import numpy  # noqa: F401  (loads the BLAS pool that the limit acts on)
import pytest
from threadpoolctl import threadpool_info


@dataclass
class Item:
    """What the collection hook reads of a test: its id, fixtures and markers."""

    nodeid: str
    fixturenames: tuple[str, ...] = ()
    markers: list[pytest.Mark] = field(default_factory=list)

    def add_marker(self, marker: pytest.MarkDecorator) -> None:
        self.markers.append(marker.mark)

    def get_closest_marker(self, name: str) -> pytest.Mark | None:
        return next((m for m in reversed(self.markers) if m.name == name), None)


def groups(item: Item) -> list[Any]:
    return [m.args[0] for m in item.markers if m.name == "xdist_group"]


def test_every_slow_test_joins_one_group_and_fast_ones_none() -> None:
    slow = Item("a.py::end_to_end", markers=[pytest.mark.slow.mark])
    ray = Item("b.py::on_ray", ("ray_session",), [pytest.mark.slow.mark])
    fast = Item("c.py::unit", ("tmp_path",))
    conftest.pytest_collection_modifyitems(None, [slow, ray, fast])
    assert groups(slow) == groups(ray) == ["slow"] and groups(fast) == []


@pytest.mark.parametrize("fixture", sorted(conftest.RAY_FIXTURES))
def test_a_fast_test_on_a_ray_fixture_is_refused_by_name(fixture: str) -> None:
    fast = Item("d.py::on_ray_but_fast", (fixture,))
    with pytest.raises(pytest.UsageError, match=r"must be marked slow: d\.py::on_ray_but_fast"):
        conftest.pytest_collection_modifyitems(None, [fast])


@pytest.mark.parametrize(
    ("args", "capture", "pdb", "workers"),
    [
        (["tests"], "fd", False, None),  # xdist's count: one per core
        (["tests/coding", "tests/sim"], "fd", False, None),
        (["tests/test_cli.py"], "fd", False, 0),
        (["tests/test_cli.py::test_help"], "fd", False, 0),
        (["tests"], "no", False, 0),
        (["tests"], "fd", True, 0),
    ],
)
def test_workers_run_whole_lanes_only(
    args: list[str], capture: str, pdb: bool, workers: int | None, monkeypatch
) -> None:
    monkeypatch.chdir(Path(conftest.__file__).parent.parent)
    options = {"capture": capture, "usepdb": pdb}
    config = SimpleNamespace(args=args, getoption=options.__getitem__)
    assert conftest.pytest_xdist_auto_num_workers(config) == workers


def test_a_fast_test_beside_another_worker_runs_one_thread_per_pool(monkeypatch) -> None:
    """The limit holds for this test when xdist runs two workers, and comes off after it."""
    pools = conftest._thread_pools()
    assert {p["user_api"] for p in threadpool_info()} >= {"blas"}
    before = [p.num_threads for p in pools.lib_controllers]
    fixture = conftest._one_thread_per_worker.__wrapped__
    monkeypatch.setattr(conftest, "WORKERS", 2)
    for markers, limited in (([], True), ([pytest.mark.slow.mark], False)):
        request = SimpleNamespace(node=Item("e.py::t", markers=markers))
        running = fixture(request)
        next(running)
        inside = [c.num_threads for c in conftest.ThreadpoolController().lib_controllers]
        assert inside == ([1] * len(before) if limited else before)
        next(running, None)
        after = [c.num_threads for c in conftest.ThreadpoolController().lib_controllers]
        assert after == before
