"""Config composition as the CLI does it, and the overrides that make a run take seconds."""

from __future__ import annotations

import re
from pathlib import Path

from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

import gclab.config  # noqa: F401  (registers every schema in Hydra's ConfigStore)
from gclab import CONF_DIR

SHARED = Path(__file__).resolve().parents[3] / "shared"  # beside the repository

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
    """Compose ``gclab/conf/<name>.yaml`` with overrides, exactly as the CLI would."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose(name, overrides=overrides or [])


def hydra_config(overrides: list[str], run_dir: Path) -> DictConfig:
    """The composed config with its ``hydra`` node, as callbacks receive it."""
    with initialize_config_dir(str(CONF_DIR), version_base="1.3"):
        return compose("config", [*overrides, f"hydra.run.dir={run_dir}"], return_hydra_config=True)


def assert_one_sentence(message: str, pattern: str) -> None:
    """One line, ending like a sentence, matching ``pattern`` (the value and what is valid)."""
    assert "\n" not in message and message.endswith("."), message
    assert re.search(pattern, message), f"{pattern!r} not in {message!r}"
