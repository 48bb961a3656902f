"""Helpers shared by the benchmark scripts: data location and config composition."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from gclab import CONF_DIR

SHARED = Path(__file__).resolve().parents[2] / "shared"
CACHE = Path.home() / ".cache" / "gclab" / "shared-cifar10"


def shared_cifar() -> Path | None:
    """The shared CIFAR-10 as an ImageFolder tree (written once), or None if absent."""
    script = SHARED / "data" / "make_cifar10.py"
    if (CACHE / "test").is_dir():
        return CACHE
    if not script.is_file():
        return None
    subprocess.run([sys.executable, str(script), str(CACHE)], check=True)
    return CACHE


def data_overrides(quick: bool) -> list[str]:
    """Shared CIFAR-10 when present (else synthetic, said loudly); small in quick mode."""
    root = shared_cifar()
    if root is None:
        print(f"# shared CIFAR-10 not found under {SHARED}/data: using data=synthetic")
        return ["data=synthetic", "data.train_size=8192", "data.test_size=2048"]
    return ["data=image_folder", f"data.root={root}"]


def compose_config(overrides: list[str]) -> DictConfig:
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", overrides=overrides)
