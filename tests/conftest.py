"""Shared fixtures (one Ray session per test process, tiny data), and how the suite shares
the machine's cores.

``-n auto`` (pyproject.toml's addopts) runs a lane, or the whole suite, on one
pytest-xdist worker per core (:func:`pytest_xdist_auto_num_workers`). Every ``slow`` test
that may start Ray joins one xdist group (``--dist loadgroup``), so the end-to-end tests
run one after another in one worker as they did without xdist: no two private Rays
contend for the cores and the dashboard agent's port, and no two subprocess runs race a
timeout, while the fast tests, and the slow ones marked ``no_ray`` (simulations, brute
force, ``python -m gclab.sim``), share the other workers. Only those in the group may
start Ray: every test process keeps its Rays' session folders in a folder of its own
(``RAY_TMPDIR``, which the subprocesses it starts inherit), and any other test that
leaves a new session there fails, naming the marker.
"""

from __future__ import annotations

import functools
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from threadpoolctl import ThreadpoolController

from helpers.config import SHARED

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

#: Where this process's Rays keep their sessions: short, because Ray's socket paths
#: (``<dir>/ray/session_<date>_<pid>/sockets/plasma_store``) must stay under 108 bytes.
RAY_TMPDIR = Path(tempfile.mkdtemp(prefix="gcray", dir="/tmp"))
os.environ["RAY_TMPDIR"] = str(RAY_TMPDIR)

#: Fixtures that start Ray: a test that uses one must be marked ``slow``.
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
    """Put every ``slow`` test that may start Ray in one xdist group; refuse a user of a
    Ray fixture that is not in it (the fast lane starts no Ray)."""
    misplaced = []
    for item in items:
        if may_start_ray(item):
            item.add_marker(pytest.mark.xdist_group("slow"))
        elif RAY_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            misplaced.append(item.nodeid)
    if misplaced:
        raise pytest.UsageError(
            f"tests that use {' or '.join(sorted(RAY_FIXTURES))} must be marked slow and "
            "not no_ray: " + ", ".join(misplaced)
        )


def may_start_ray(item: pytest.Item) -> bool:
    """Whether ``item`` runs in the slow group, the only tests that may start Ray."""
    marked = item.get_closest_marker
    return marked("slow") is not None and marked("no_ray") is None


def _ray_sessions() -> set[str]:
    try:
        return {p.name for p in (RAY_TMPDIR / "ray").iterdir() if p.name.startswith("session_2")}
    except FileNotFoundError:
        return set()


@pytest.fixture(autouse=True)
def _ray_only_in_the_slow_lane(request: pytest.FixtureRequest) -> Iterator[None]:
    """Fail a test outside the slow group that started Ray, itself or in a subprocess
    (under xdist it would run beside the slow tests' Rays, and it makes the fast lane
    slow)."""
    before = _ray_sessions()
    yield
    started = _ray_sessions() - before
    if started and not may_start_ray(request.node):
        pytest.fail(
            f"{request.node.nodeid} started Ray ({len(started)} session(s) in {RAY_TMPDIR}) "
            "but is not marked @pytest.mark.slow, or is marked no_ray: mark it slow alone, "
            "so that the fast lane starts no Ray and parallel runs start one Ray at a time."
        )


#: xdist workers running at once (``PYTEST_XDIST_WORKER_COUNT``; 1 without xdist).
WORKERS = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))


@functools.cache
def _thread_pools() -> ThreadpoolController:
    """The BLAS and OpenMP pools loaded by now (collection has imported numpy and torch)."""
    return ThreadpoolController()


@pytest.fixture(autouse=True)
def _one_thread_per_worker(request: pytest.FixtureRequest) -> Iterator[None]:
    """Run a test outside the slow group with one BLAS and one OpenMP thread where xdist
    workers share the cores: each pool starts a thread per core, and two workers' spinning
    threads on two cores slowed BLAS-heavy tests by tens of times on the loaded machine.
    The slow group keeps the pools as they are, as its subprocesses and Ray workers do."""
    if WORKERS < 2 or may_start_ray(request.node):
        yield
        return
    with _thread_pools().limit(limits=1):
        yield


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
