"""How the suite shares the cores (tests/conftest.py): every slow test that may start Ray
in one xdist group, Ray fixtures and Ray sessions only there, workers only for whole
lanes, one thread per pool in a test outside the group beside another worker."""

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


NO_RAY = [pytest.mark.slow.mark, pytest.mark.no_ray.mark]


def test_every_slow_test_joins_one_group_and_fast_and_no_ray_ones_none() -> None:
    slow = Item("a.py::end_to_end", markers=[pytest.mark.slow.mark])
    ray = Item("b.py::on_ray", ("ray_session",), [pytest.mark.slow.mark])
    fast = Item("c.py::unit", ("tmp_path",))
    rayless = Item("c.py::simulation", ("tmp_path",), list(NO_RAY))
    conftest.pytest_collection_modifyitems(None, [slow, ray, fast, rayless])
    assert groups(slow) == groups(ray) == ["slow"] and groups(fast) == groups(rayless) == []


@pytest.mark.parametrize("fixture", sorted(conftest.RAY_FIXTURES))
@pytest.mark.parametrize("markers", [[], NO_RAY], ids=["fast", "no_ray"])
def test_a_test_on_a_ray_fixture_outside_the_group_is_refused_by_name(
    fixture: str, markers: list[pytest.Mark]
) -> None:
    outside = Item("d.py::on_ray_outside", (fixture,), list(markers))
    with pytest.raises(pytest.UsageError, match=r"not no_ray: d\.py::on_ray_outside$"):
        conftest.pytest_collection_modifyitems(None, [outside])


@pytest.mark.parametrize(
    ("markers", "refused"), [([], True), (NO_RAY, True), ([pytest.mark.slow.mark], False)]
)
def test_a_ray_session_started_outside_the_group_fails_the_test(
    markers: list[pytest.Mark], refused: bool, tmp_path: Path, monkeypatch
) -> None:
    """The check after each test: a new session folder under RAY_TMPDIR (what a Ray this
    process or its subprocesses started leaves there) fails a test outside the group."""
    monkeypatch.setattr(conftest, "RAY_TMPDIR", tmp_path)
    check = conftest._ray_only_in_the_slow_lane.__wrapped__
    running = check(SimpleNamespace(node=Item("f.py::starts_ray", markers=list(markers))))
    next(running)
    (tmp_path / "ray" / "session_2026-12-07_20-00-00_000000_1").mkdir(parents=True)
    if refused:
        with pytest.raises(pytest.fail.Exception, match=r"^f\.py::starts_ray started Ray "):
            next(running, None)
    else:
        assert next(running, None) is None


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
    for markers, limited in (([], True), (NO_RAY, True), ([pytest.mark.slow.mark], False)):
        request = SimpleNamespace(node=Item("e.py::t", markers=markers))
        running = fixture(request)
        next(running)
        inside = [c.num_threads for c in conftest.ThreadpoolController().lib_controllers]
        assert inside == ([1] * len(before) if limited else before)
        next(running, None)
        after = [c.num_threads for c in conftest.ThreadpoolController().lib_controllers]
        assert after == before
