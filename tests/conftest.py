"""Shared fixtures: one Ray session per test run, config composition, tiny data."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers.config import SHARED

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")


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
