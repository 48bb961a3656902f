"""Shared fixtures (one Ray session per test process, tiny data), and how the suite shares
the machine's cores.

``-n auto`` (pyproject.toml's addopts) runs a whole lane on one pytest-xdist worker per
core (:func:`pytest_xdist_auto_num_workers`). Tests that start Ray, in this process or in
a subprocess they run, are marked ``ray`` (using the ``ray_session`` or ``two_nodes``
fixture marks a test by itself): they run one after another in one worker, so that no two
private Rays contend for two cores and the dashboard agent's port. Every test process
keeps its Rays' session folders in a folder of its own (``RAY_TMPDIR``), so a test that
starts Ray unmarked fails, naming the marker, and none joins another user's Ray.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.config import SHARED

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

#: Where this process's Rays keep their sessions: short, because Ray's socket paths
#: (``<dir>/ray/session_<date>_<pid>/sockets/plasma_store``) must stay under 108 bytes.
RAY_TMPDIR = Path(tempfile.mkdtemp(prefix="gcray", dir="/tmp"))
os.environ["RAY_TMPDIR"] = str(RAY_TMPDIR)

#: Fixtures that start Ray: a test that uses one is marked ``ray``.
RAY_FIXTURES = {"ray_session", "two_nodes"}


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """``-n auto``: one worker per core (xdist's count) for a lane or the whole suite; none
    (this process) for named files or tests, and where output is shown (``-s``) or a
    debugger may stop (``--pdb``), which workers would hide."""
    if config.getoption("capture") == "no" or config.getoption("usepdb"):
        return 0
    if any(not Path(arg.split("::")[0]).is_dir() for arg in config.args):
        return 0
    return None


@pytest.hookimpl(tryfirst=True)  # before xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the users of Ray fixtures ``ray`` and put every ``ray`` test in one xdist group;
    a ``ray`` test outside the slow lane is refused (the fast lane starts no Ray)."""
    fast = []
    for item in items:
        if RAY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.ray)
        if item.get_closest_marker("ray") is not None:
            item.add_marker(pytest.mark.xdist_group("ray"))
            if item.get_closest_marker("slow") is None:
                fast.append(item.nodeid)
    if fast:
        raise pytest.UsageError(f"tests marked ray must be marked slow too: {', '.join(fast)}")


def _ray_sessions() -> set[str]:
    try:
        return {p.name for p in (RAY_TMPDIR / "ray").iterdir() if p.name.startswith("session_2")}
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def _ray_only_where_marked(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test that started Ray without the ``ray`` marker (it would run beside
    another Ray under xdist)."""
    before = _ray_sessions()
    yield
    started = _ray_sessions() - before
    if started and request.node.get_closest_marker("ray") is None:
        pytest.fail(
            f"{request.node.nodeid} started Ray ({len(started)} session(s) in {RAY_TMPDIR}) "
            "but is not marked @pytest.mark.ray: mark it, so that parallel runs start one "
            "Ray at a time."
        )


def pytest_unconfigure(config: pytest.Config) -> None:
    shutil.rmtree(RAY_TMPDIR, ignore_errors=True)


@pytest.fixture(scope="session")
def ray_session() -> Iterator[None]:
    """One local Ray for the whole test run (starting Ray costs ~5 s)."""
    import ray

    ray.init(
        num_cpus=4,
        include_dashboard=False,
        ignore_reinit_error=True,
        _node_ip_address="127.0.0.1",
        configure_logging=False,
    )
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def two_nodes() -> Iterator[tuple[str, dict[str, str]]]:
    """A real two-node Ray cluster (2 CPUs each) for the tests that join one by address:
    ``(address, auth environment)``. Starting it costs ~14 s, so the tests share it and
    leave it as they found it (their jobs end before they return)."""
    from helpers.raycluster import ray_cluster

    with ray_cluster(2, 2) as cluster:
        yield cluster


@pytest.fixture(scope="session")
def shared_cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared CIFAR-10 copy as an ImageFolder tree (skips when it is absent).

    Tests on it are marked ``shared``; the same code runs on generated CIFAR-shaped
    trees in tests that need no shared files.
    """
    script = SHARED / "data" / "make_cifar10.py"
    if not script.is_file():
        pytest.skip(f"shared CIFAR-10 not found at {script.parent}")
    import subprocess
    import sys

    dest = tmp_path_factory.mktemp("cifar10")
    subprocess.run([sys.executable, str(script), str(dest)], check=True, capture_output=True)
    return dest
