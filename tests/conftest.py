"""Shared fixtures: one Ray session per test run, config composition, tiny data."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import gclab.config  # noqa: F401  (registers every schema in Hydra's ConfigStore)
from gclab import CONF_DIR

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")

SHARED = Path(__file__).resolve().parents[2] / "shared"

#: Overrides that make a run take seconds: tiny synthetic data, a thin CNN, no tracker.
TINY = [
    "data=synthetic",
    "data.train_size=512",
    "data.test_size=128",
    "model.width=8",
    "train.batch_size=32",
    "train.rounds=4",
    "train.eval_every=0",
    "logger=none",
]


def compose_config(overrides: list[str] | None = None, name: str = "config") -> DictConfig:
    """Compose ``conf/<name>.yaml`` with overrides, exactly as the CLI would."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(name, overrides=overrides or [])


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
def shared_cifar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The shared CIFAR-10 copy as an ImageFolder tree (skips when it is absent)."""
    script = SHARED / "data" / "make_cifar10.py"
    if not script.is_file():
        pytest.skip(f"shared CIFAR-10 not found at {script.parent}")
    import subprocess
    import sys

    dest = tmp_path_factory.mktemp("cifar10")
    subprocess.run([sys.executable, str(script), str(dest)], check=True, capture_output=True)
    return dest
